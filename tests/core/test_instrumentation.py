"""analyses.instrumentation: the CPU time the profiler's per-op NVTX ranges cost (emit_nvtx,
--pytorch=autograd-nvtx), measured in the trace: op ranges x the median duration of an op range that
encloses nothing recorded. Checked against SQL over the committed captures, and against the truth of
the committed twins: the same workload captured bare (small_ctx128) and instrumented, whose steps
differ by what the instrumentation cost (the estimate is a lower bound of that difference)."""
from __future__ import annotations

import bisect
import sqlite3
import statistics

import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from nsight_tui.parsers.analyses.instrumentation import instrumentation_cost
from nsight_tui.parsers.read.load import load_trace

BARE = SAMPLES / "small_ctx128.sqlite"
STEPS = """SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' ORDER BY e.start"""


def rows(path, query, *args):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def expected(path):
    """(op ranges, empty ones, their median duration), from SQL and a walk per thread."""
    ranges = rows(path, """SELECT e.start, e.end, e.globalTid, coalesce(e.text, s.value) FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL
        ORDER BY e.globalTid, e.start""")
    calls: dict[int, list[int]] = {}
    for start, tid in rows(path, "SELECT start, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start"):
        calls.setdefault(tid, []).append(start)
    ops = empty = 0
    durations = []
    for i, (start, end, tid, text) in enumerate(ranges):
        if ", op_id = " not in (text or "") or "::" not in text.split(",")[0]:
            continue
        ops += 1
        nxt = ranges[i + 1] if i + 1 < len(ranges) else None
        if nxt is not None and nxt[2] == tid and nxt[0] < end:
            continue  # a child range
        mine = calls.get(tid, [])
        j = bisect.bisect_left(mine, start)
        if j < len(mine) and mine[j] < end:
            continue  # a CUDA call inside
        if end > start:
            empty += 1
            durations.append(end - start)
    return ops, empty, statistics.median(durations)


@pytest.mark.parametrize("name", ["small_ctx128_emitnvtx", "small_ctx128_agnvtx"])
def test_the_instrumentation_cost_is_measured_and_a_lower_bound(name):
    path = plain(SAMPLES / f"{name}.sqlite.xz")
    steps = rows(path, STEPS)
    got = instrumentation_cost(load_trace(path), [a for a, _ in steps], [b for _, b in steps])
    ops, empty, median = expected(path)
    assert (got.op_ranges, got.empty_op_ranges, got.per_range_ns) == (ops, empty, median)
    assert got.total_cost_ns == ops * median
    assert got.cost_per_step_ns == pytest.approx(got.op_ranges_per_step * median)
    # the twins: the instrumented step is slower than the bare one by at least the estimate, and the
    # estimate is a fair part of that difference (not a token figure)
    bare = statistics.median(b - a for a, b in rows(BARE, STEPS))
    instrumented = statistics.median(b - a for a, b in steps)
    assert 0.3 * (instrumented - bare) <= got.cost_per_step_ns <= instrumented - bare
    assert "lower bound" in got.basis and f"{ops:,} per-op NVTX ranges" in got.basis


def test_a_capture_without_per_op_ranges_has_no_estimate():
    assert instrumentation_cost(load_trace(BARE)) is None
