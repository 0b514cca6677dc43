"""The step `whatif` and the findings' savings stand on (model.steps.typical_period_ns): the median
period where the steady steps are alike, their mean where they alternate. Checked against the
periods read off the export in SQL (helpers/step_sql.py) and the workload's own Python clock, on
a real loop whose steps alternate (a DataLoader with 2 workers, too few: ~20 and ~150 ms steps)
and on one whose steps are alike."""
from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from nsight_tui.parsers.model.steps import steps_alike, typical_period_ns
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.predict import predict

from conftest import SAMPLES
from helpers.cli import run_main
from helpers.step_sql import python_steps, steps
from helpers.xz_samples import plain

LOADER = SAMPLES / "loader" / "torchvision_resnet18_w2_b32.sqlite.xz"


def test_a_stall_now_and_then_leaves_the_median_and_alternating_steps_give_their_mean():
    alike = [30.0] * 9 + [90.0]  # one stall in ten steps: neither side of a change owns it
    assert steps_alike(np.array(alike)) and typical_period_ns(np.array(alike)) == 30
    alternating = [20.0, 150.0] * 6  # half the steps over 1.5x the median
    assert not steps_alike(np.array(alternating))
    assert typical_period_ns(np.array(alternating)) == int(sum(alternating) / len(alternating)) == 85
    two_stalls = [30.0] * 8 + [90.0, 95.0]  # two in ten: more than a stall now and then
    assert typical_period_ns(np.array(two_stalls)) == int(sum(two_stalls) / 10)
    short = [30.0, 31.0, 90.0, 30.0, 29.0]  # one stall in a 5-step window: still a stall, not a pattern
    assert steps_alike(np.array(short)) and typical_period_ns(np.array(short)) == 30


def test_a_loader_with_too_few_workers_steps_at_its_mean_period_as_sql_and_the_python_clock_read_it(tmp_path):
    path = plain(LOADER)
    periods = [it.period for it in steps(path)]
    sql_mean, sql_median = statistics.fmean(periods), statistics.median(periods)
    assert sql_mean > 2 * sql_median  # the median is one kind of step here, the fast one
    python = python_steps(path)
    assert len(python) == len(periods) == 12
    assert statistics.fmean(python) == pytest.approx(sql_mean, rel=0.01)  # the loop's own clock agrees

    p = predict(load_trace(LOADER), [])
    assert p.measured_step_ns == pytest.approx(sql_mean, abs=1)
    assert p.unlike_median_ns == pytest.approx(sql_median, abs=1)
    assert p.replayed_step_ns == pytest.approx(sql_mean, rel=0.03)  # the identity holds on the mean too

    out = tmp_path / "w.json"
    done = run_main("whatif", LOADER, "-f", "json", "-o", out)
    assert done.returncode == 0, done.stderr
    base = json.loads(out.read_text())["baseline"]
    assert base["measured_step_ns"] == p.measured_step_ns and base["unlike_median_ns"] == p.unlike_median_ns
    md = run_main("whatif", LOADER)
    assert "Step period, mean of 12 steady-state steps, which are not alike" in md.stdout
    assert f"median of {sql_median / 1e6:.2f} ms" in md.stdout


def test_steps_alike_keep_the_median(tmp_path):
    path = SAMPLES / "small_ctx128.sqlite"
    periods = [it.period for it in steps(path)]
    p = predict(load_trace(path), [])
    assert p.unlike_median_ns is None
    assert p.measured_step_ns == int(statistics.median(periods))
    assert "Step period, median of" in run_main("whatif", path).stdout


def test_an_edit_on_steps_that_alternate_saves_from_the_mean_step_not_the_fast_one():
    """Every edit replays the typical step (each host stretch at its median over the steps): where the
    steps alternate, the median stretch is the fast step's, and the long waits of every other step
    (here the main thread waiting ~130 ms for the 2 workers' next batch) were in no edit's reach:
    `fix:host-bound-gap` saved 5 ms of a 70 ms step. Now each stretch at its mean there. Oracle (SQL):
    per steady step the main thread's longest pause between CUDA calls, its mean over the steps."""
    import sqlite3

    path = plain(LOADER)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    longest = []
    for it in steps(path):
        tid = con.execute("SELECT globalTid FROM NVTX_EVENTS WHERE start = ? LIMIT 1", (it.start,)).fetchone()[0]
        calls = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ? AND start >= ? "
                            "AND start < ? ORDER BY start", (tid, it.start, it.start + it.period)).fetchall()
        longest.append(max([calls[0][0] - it.start] + [b[0] - a[1] for a, b in zip(calls, calls[1:])]))
    con.close()
    wait = statistics.fmean(longest)
    assert wait > 0.5 * statistics.fmean(it.period for it in steps(path))  # the steps' main cost
    p = predict(load_trace(LOADER), ["nohost:1ms"])
    assert p.moved_host_ns == pytest.approx(wait, rel=0.1)
    assert p.saving_ns >= 0.8 * wait
