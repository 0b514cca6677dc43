"""What the findings say beyond their rules' own figures: the profiler's instrumentation under the CPU
findings, whose rank they read in an export of several, and what slow steps are (warm-up only when
they come first)."""
from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from helpers.xz_samples import plain
from conftest import SAMPLES
from nsight_tui.parsers.analyses.findings import context, findings
from nsight_tui.parsers.analyses.findings.rules import CPU_PACE_RULES
from nsight_tui.parsers.analyses.findings.window import STALL_FIX, WARMUP_FIX, warmup_in_window
from nsight_tui.parsers.analyses.instrumentation import instrumentation_cost
from nsight_tui.parsers.read.load import load_trace


def test_cpu_findings_under_emit_nvtx_say_the_profilers_share():
    trace = load_trace(plain(SAMPLES / "small_ctx128_emitnvtx.sqlite.xz"))
    c = context(trace)
    cost = instrumentation_cost(trace, c.t0, c.t1)
    assert cost is not None and cost.cost_per_step_ns > 0
    paced = [f for f in findings(trace) if f.id in CPU_PACE_RULES]
    assert paced  # this capture is CPU-bound: a CPU finding fires, and says what the profiler costs
    for f in paced:
        assert f.evidence["instrumentation_ms_per_step"] == pytest.approx(cost.cost_per_step_ns / 1e6)
        assert "profiler's own instrumentation" in f.basis


def test_a_capture_without_per_op_ranges_says_nothing_of_them():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    assert all("instrumentation_ms_per_step" not in f.evidence for f in findings(trace))


def test_findings_of_a_two_rank_export_name_the_rank_they_read():
    path = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        pids = {row[0] for row in con.execute(
            "SELECT DISTINCT e.globalTid >> 24 & 16777215 FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*'")}
    assert len(pids) == 2
    found = findings(load_trace(path))
    assert found
    for f in found:
        who = f.evidence["rank"]
        assert any(who.startswith(f"pid {p} ") for p in pids), who
        assert f.basis.startswith(who) and "one of 2 processes with steps" in f.basis


def test_one_process_findings_name_no_rank():
    assert all("rank" not in f.evidence for f in findings(load_trace(SAMPLES / "small_ctx128.sqlite")))


def _slowed(c, which: list[int]):
    """The context with the steps `which` taking 3x the median step (their end moved later)."""
    d = (c.t1 - c.t0).astype(np.int64)
    t1 = c.t1.astype(np.int64).copy()
    for i in which:
        t1[i] = c.t0[i] + 3 * int(np.median(d))
    return replace(c, t1=t1)


def test_slow_first_steps_are_warm_up():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    c = context(trace)
    assert c.n >= 3
    f = warmup_in_window(_slowed(c, [0]))
    assert f is not None and "warm-up" in f.title and f.fix == WARMUP_FIX
    assert f.evidence["pattern"] == "leading" and f.rows[0]["step"] == 0


def test_a_slow_last_step_is_not_called_warm_up():
    c = context(load_trace(SAMPLES / "small_ctx128.sqlite"))
    f = warmup_in_window(_slowed(c, [c.n - 1]))
    assert f is not None and "warm-up" not in f.title and f.fix == STALL_FIX
    assert f.evidence["pattern"] == "trailing"
