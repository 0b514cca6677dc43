"""What the findings tests share: the planted/fixed twins (sample_traces/findings, made by
devruns/gpu_findings.sh, committed xz'd: `sample` gives the plain export) and the step time a fix
saved, measured with SQL over the two exports' step_N ranges, written here without the code under
test."""
from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path

import pytest

import step_sql
from conftest import FINDINGS
from idle_reference import gaps, union
from nsight_tui.parsers.analyses.findings import findings
from nsight_tui.parsers.read.load import load_trace
from xz_samples import XZ_TRACE, plain


def sample(stem: str) -> Path:
    """sample_traces/findings/STEM.sqlite.xz as a plain export (tests/xz_samples.py)."""
    return plain(FINDINGS / f"{stem}{XZ_TRACE}")


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def twin(stem: str) -> Path:
    """A twin's export, or a skip naming the device session that makes it."""
    path = FINDINGS / f"{stem}{XZ_TRACE}"
    if not path.exists():
        pytest.skip(f"{path.name} not captured yet: `bash devruns/gpu_findings.sh syncstep graph` on one GPU, "
                    "`... ddp` on two (see the script)")
    return plain(path)


def step_mean_ns(path: Path) -> float:
    """Mean steady-state step period (every step_N of every process: data-parallel ranks move in
    lockstep), tests/step_sql.py's definition."""
    periods = [it.period for it in step_sql.steps(path)]
    return sum(periods) / len(periods)


def measured_saving_ms(planted: Path, fixed: Path) -> float:
    return (step_mean_ns(planted) - step_mean_ns(fixed)) / 1e6


def steps(con: sqlite3.Connection) -> list[tuple[int, int, int]]:
    """(start, end of its period, pid) of every step_N, in time order: the windows the per-step
    rules look at (tests/step_sql.py's definition of the period)."""
    return [(it.start, it.start + it.period, it.pid) for it in step_sql.steps_of(step_sql.iterations_of(con))]


def busy_union(con: sqlite3.Connection, device: int, pid: int | None = None) -> list[tuple[int, int]]:
    """The device's GPU op intervals (kernels, copies, sets), merged."""
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        try:
            rows += con.execute(f"SELECT start, end, globalPid >> 24 FROM {table} WHERE deviceId = ?", (device,)).fetchall()
        except sqlite3.OperationalError:  # no such table
            pass
    return merge((s, e) for s, e, p in rows if pid is None or p == pid)


def merge(intervals) -> list[tuple[int, int]]:
    starts, ends = union(list(intervals))
    return list(zip(starts, ends))


def length(intervals) -> int:
    return sum(b - a for a, b in intervals)


def intersect(x: list[tuple[int, int]], y: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Of two merged lists: their intersection (a plain two-pointer walk)."""
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x: list[tuple[int, int]], y: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """x without y (both merged): y's gaps inside each piece of x."""
    return [g for a, b in x for g in gaps(y, a, b)]


def assert_pair(rule: str, planted_stem: str, fixed_stem: str) -> None:
    """The rule fires on the planted twin, stays silent on the fixed one, and estimates the step
    time the fix saved within 0.5x-2x."""
    planted, fixed = twin(planted_stem), twin(fixed_stem)
    got = {f.id: f for f in findings(load_trace(planted))}
    silent = {f.id for f in findings(load_trace(fixed))}
    assert rule in got and rule not in silent
    measured = measured_saving_ms(planted, fixed)
    assert measured > 0
    assert 0.5 <= got[rule].saving_ms_per_step / measured <= 2.0, (got[rule].saving_ms_per_step, measured)


def assert_below_the_jitter(rule: str, planted: Path, fixed: Path) -> None:
    """Twins whose saving two short runs cannot measure: the rule fires on the planted one and not
    on the fixed one, and both its estimate and the step difference are under the planted run's
    step-to-step spread (so the difference is noise, and the estimate says the saving is small)."""
    got = {f.id: f for f in findings(load_trace(planted))}
    assert rule in got and rule not in {f.id for f in findings(load_trace(fixed))}
    con = ro(planted)
    spread = statistics.stdev([(e - s) / 1e6 for s, e, _ in steps(con)])
    con.close()
    assert got[rule].saving_ms_per_step < spread
    assert abs(measured_saving_ms(planted, fixed)) < 2 * spread
