"""Findings partition time: an idle nanosecond is claimed by one finding at most, so the
idle findings (host-bound-gap, sync-stall, launch-bound) together never claim more per step than
the step's GPU idle time, computed here in SQL over the export (the steps' periods minus the union
of the device's GPU ops); the page's combined saving adds each nanosecond once and says by how
much the findings alone overlapped; findings with nothing to gain stand apart."""
from __future__ import annotations

import pytest

from conftest import ASYNC, FINDINGS, async_names
from helpers.findings_twins import busy_union, gaps, length, ro, sample, steps
from nsight_tui.parsers.analyses.findings import NOTHING_TO_GAIN_MS, answers, context, findings
from nsight_tui.render.findings import findings_json
from nsight_tui.parsers.read.load import load_trace

IDLE_RULES = ("host-bound-gap", "sync-stall", "launch-bound")
# with the fp32 / TF32 twins captured after the rules (sample_traces/async/h200_twins)
CASES = (sorted(FINDINGS.glob("*.sqlite.xz")) + [ASYNC / f"{n}.sqlite.xz" for n in async_names()]
         + sorted((ASYNC / "h200_twins").glob("*.sqlite.xz")))


def _idle_per_step_ns(path, pid: int, device: int) -> float:
    con = ro(path)
    try:
        windows = [(s, e) for s, e, p in steps(con) if p == pid]
        busy = busy_union(con, device)
    finally:
        con.close()
    return sum(length(gaps(busy, s, e)) for s, e in windows) / len(windows)


@pytest.mark.parametrize("path", CASES, ids=lambda p: (f"{p.parent.name}/" if p.parent.name == "h200_twins" else "") + p.name.split(".")[0])
def test_idle_findings_never_claim_more_than_the_idle(path, async_trace):
    path = async_trace(path)
    trace = load_trace(path)
    c = context(trace)
    found = {f.id: f for f in findings(trace, replay=False)}  # the rules' estimates, partitioned
    claimed = sum(found[r].saving_ms_per_step for r in IDLE_RULES if r in found) * 1e6
    pid = int(c.model.r_gtid[c.steps[0]]) >> 24 & 0xFFFFFF
    idle = _idle_per_step_ns(path, pid, c.device)
    assert claimed <= idle * (1 + 1e-9) + 1, (claimed, idle, {r: found[r].saving_ms_per_step for r in found})


@pytest.mark.parametrize("path", CASES, ids=lambda p: (f"{p.parent.name}/" if p.parent.name == "h200_twins" else "") + p.name.split(".")[0])
def test_the_page_adds_each_nanosecond_once(path, async_trace):
    a = findings_json(answers(load_trace(async_trace(path))))
    shown = a["findings"]
    if a["combined_basis"].startswith("one replay"):  # the replay with every fix: tests/core/test_findings_replay.py
        assert a["combined_saving_ms_per_step"] >= sum(f["saving_ms_per_step"] for f in shown if not f["replayed"])
    else:
        assert a["combined_saving_ms_per_step"] == pytest.approx(sum(f["saving_ms_per_step"] for f in shown))
    alone = sum(f["saving_alone_ms_per_step"] for f in shown)
    assert a["overlap_ms_per_step"] == pytest.approx(alone - a["combined_saving_ms_per_step"])
    assert all(f["saving_ms_per_step"] >= NOTHING_TO_GAIN_MS for f in shown)
    assert all(f["saving_ms_per_step"] <= f["saving_alone_ms_per_step"] + 1e-9 for f in shown)
    assert all(p["id"] not in {f["id"] for f in shown} for p in a["present_no_saving"])


def test_a_sync_stall_and_the_host_gap_after_it_are_one_saving():
    """The host-sleep run with phase syncs: sync-stall's and host-bound-gap's gaps are the same idle;
    alone they add up to more than the step's idle can give, partitioned they do not."""
    path = sample("small_ctx128_host-sleep")
    found = {f.id: f for f in findings(load_trace(path), replay=False)}
    stall, gap = found.get("sync-stall"), found["host-bound-gap"]
    overlap_seen = stall is None or stall.overlaps or gap.overlaps
    assert overlap_seen
    alone = (gap.saving_alone_ms_per_step or 0) + (stall.saving_alone_ms_per_step if stall else 0)
    now = gap.saving_ms_per_step + (stall.saving_ms_per_step if stall else 0)
    assert now < alone
