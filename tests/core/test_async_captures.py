"""The captures without phase syncs (sample_traces/async, devruns/gpu_async.sh), committed
xz'd: each loads, its kernel count is the export's, NVIDIA's six CSVs are there and wired into the
byte-for-byte oracle test (test_nsys_oracle.py), and the step_N GPU projection in NVIDIA's
nvtx_gpu_proj_sum is what SQL over the export gives by nsys's definition (so later tests can
trust either)."""
from __future__ import annotations

import csv
import io
import re
import sqlite3

import pytest

from conftest import ASYNC, REPORTS, async_names, oracle_cases, oracle_csv, read_oracle, trace_stem
from nsight_tui.parsers.read.load import load_trace

NAMES = async_names()
# what devruns/gpu_async.sh made (2026-11-25, H100s): a missing one is a packaging mistake
EXPECTED = {
    "small_ctx512_b8_async", "small_ctx512_tf32_b8_async", "small_ctx512_b8_async_foreach-off",
    "small_ctx512_b8_async_fused-optim", "small_ctx512_bf16_b8_async", "small_ctx128_b1_async",
    "large_ctx512_async", "large_ctx512_tf32_async",
    "small_ctx512_b8_ddp2_async", "small_ctx512_b8_ddp2_async_ddp-one-bucket",
}


def ro(path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def test_every_capture_is_committed_with_nvidias_csvs():
    assert set(NAMES) == EXPECTED
    for name in NAMES:
        for report in REPORTS:
            path = oracle_csv(ASYNC, name, report)
            assert path is not None and path.name.endswith(".csv.xz"), (name, report)
    wired = {(trace_stem(t), r) for t, _, r in oracle_cases() if t.parent == ASYNC}
    assert wired == {(n, r) for n in NAMES for r in REPORTS}


@pytest.mark.parametrize("name", NAMES)
def test_loads_with_every_kernel(name, async_trace):
    path = async_trace(name)
    assert not (ASYNC / f"{name}.sqlite").exists()  # decompressed elsewhere, never beside the sample
    with ro(path) as db:
        (expected,) = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    assert expected > 4000
    assert len(load_trace(path).kernels) == expected


# nsys's projection of a push/pop range: the GPU ops (kernels, copies, sets) whose CUDA runtime
# call was made on the range's thread while the range was open; from the first op's start to the
# last op's end.
PROJECTION = """
WITH r AS (SELECT e.globalTid AS tid, e.start AS s, e.end AS e FROM NVTX_EVENTS e
           LEFT JOIN StringIds n ON n.id = e.textId WHERE e.eventType = 59 AND coalesce(e.text, n.value) = ?),
calls AS (SELECT c.correlationId, c.globalTid & ~0xFFFFFF AS pid FROM CUPTI_ACTIVITY_KIND_RUNTIME c, r
          WHERE c.globalTid = r.tid AND c.start BETWEEN r.s AND r.e),
ops AS (SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL
        UNION ALL SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY
        UNION ALL SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET)
SELECT calls.pid, max(ops.end) - min(ops.start) FROM ops JOIN calls
ON ops.correlationId = calls.correlationId AND ops.globalPid = calls.pid GROUP BY calls.pid"""


def _indexed(path) -> sqlite3.Connection:
    """An in-memory copy of the export with the indexes PROJECTION's joins look up by (nsys writes none
    there): SQLite otherwise builds a throw-away index over every runtime call for each step, ~1 s each."""
    db = sqlite3.connect(":memory:")
    source = ro(path)
    try:
        source.backup(db)
    finally:
        source.close()
    db.execute("CREATE INDEX runtime_thread_start ON CUPTI_ACTIVITY_KIND_RUNTIME(globalTid, start)")
    return db


@pytest.mark.parametrize("name", NAMES)
def test_step_projection_equals_nvidias(name, async_trace):
    rows = csv.DictReader(io.StringIO(read_oracle(oracle_csv(ASYNC, name, "nvtx_gpu_proj_sum"))))
    steps = {r["Range"].lstrip(":"): r for r in rows if re.fullmatch(r":step_\d+", r["Range"])}
    assert len(steps) in (3, 4)
    db = _indexed(async_trace(name))
    try:
        for step, row in steps.items():
            per_rank = [span for _, span in db.execute(PROJECTION, (step,))]
            assert len(per_rank) == int(row["Range Instances"])  # one per rank
            assert sum(per_rank) == int(row["Total Proj Time (ns)"]), step
            assert (min(per_rank), max(per_rank)) == (int(row["Proj Min (ns)"]), int(row["Proj Max (ns)"]))
    finally:
        db.close()
