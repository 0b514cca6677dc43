"""sync-stall (parsers/analyses/findings.py) against its twins and against a computation from its
definition written here with SQL and plain loops: per blocking call (tests/helpers/idle_reference.py's
`is_sync`) inside a step with GPU work issued after it, min(time the CPU waited in it, GPU idle
from its end to the next blocking call or the step's end), summed, per step."""
from __future__ import annotations


import pytest

from conftest import FINDINGS
from helpers.findings_twins import assert_below_the_jitter, assert_pair, busy_union, gaps, length, ro, sample, steps
from helpers.idle_reference import is_sync
from nsight_tui.parsers.analyses.findings import RULES, context, findings
from nsight_tui.parsers.read.load import load_trace
from helpers.xz_samples import plain

RULE = "sync-stall"


def _ids(path):
    return {f.id: f for f in findings(load_trace(path))}


def test_fires_on_item_before_the_optimizer_silent_without_and_estimates_the_saving():
    assert_pair(RULE, "small_ctx512_b8_nosync_item-before-step", "small_ctx512_b8_nosync")


def test_item_after_a_host_bound_forward_costs_less_than_the_step_jitter():
    """The first twins (.item() after the forward at ctx 128, where the CPU is the bottleneck)
    fire and stay silent as they should, but the stall is tenths of a millisecond: below the
    step-to-step spread, so their step difference measures noise, not the saving."""
    assert_below_the_jitter(RULE, sample("small_ctx128_nosync_item"), sample("small_ctx128_nosync"))


def _reference_saving_ns(path) -> tuple[float, int]:
    con = ro(path)
    windows = [(s, e) for s, e, _ in steps(con)]
    calls = con.execute("""SELECT r.start, r.end, s.value, r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN StringIds s ON s.id = r.nameId ORDER BY r.start""").fetchall()
    launched = set()
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        launched |= {c for (c,) in con.execute(f"SELECT correlationId FROM {table}")}
    device = con.execute("SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    busy = busy_union(con, device)
    con.close()
    launches = [s for s, e, name, corr in calls if corr in launched and not is_sync(name)]
    total, n_calls = 0.0, 0
    for t0, t1 in windows:
        blocking = [(s, e) for s, e, name, _ in calls if is_sync(name) and t0 <= s and e <= t1]
        for i, (s, e) in enumerate(blocking):
            until = blocking[i + 1][0] if i + 1 < len(blocking) else t1
            if not any(e <= x < until for x in launches):
                continue  # nothing issued after it before the next blocking point: no stall
            total += min(e - s, length(gaps(busy, min(e, until), until)))
            n_calls += 1
    return total / len(windows), n_calls


@pytest.mark.parametrize("path", [FINDINGS / "small_ctx512.sqlite.xz", FINDINGS / "small_ctx128_host-sleep.sqlite.xz"])
def test_estimate_equals_the_definition_computed_independently(path):
    """The rule's own estimate (before findings() takes out what larger findings claimed: on the
    host-sleep run the host-bound gap names the same idle, tests/core/test_findings_partition.py)."""
    path = plain(path)
    expected_ns, n_calls = _reference_saving_ns(path)
    f = RULES[RULE](context(load_trace(path)))
    assert n_calls > 0
    assert f.evidence["calls_per_step"] * 4 == n_calls  # 4 steps, the phase syncs after forward and backward
    assert f.saving_ms_per_step * 1e6 == pytest.approx(expected_ns, rel=1e-9)
