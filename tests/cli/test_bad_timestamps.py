"""Timestamps no clock writes: kernels, memcpys and NVTX ranges that end before they
start gave negative durations (`cuda_gpu_kern_sum` Total -3266 ns, nvtx_sum Min -10); values near
int64's limits overflowed (`Total Proj Time -9223372023801649335`, and numpy's RuntimeWarning on
stderr from the ranks analysis). Now they are bad rows like NULL or text ones: left out and
counted in a note (or the file refused when most rows are bad). Every count here is SQL's."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import SAMPLES, mutated_copy
from helpers.export_sql import sql_rows
from helpers import cli_process

SRC = SAMPLES / "small_ctx128.sqlite"
K, M, N = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"
BIG = 9_223_372_036_854_775_000  # within int64, past any clock
RANGE_ROWS = f"SELECT rowid FROM {N} WHERE end IS NOT NULL AND eventType = 59"

# (id, table, mutation, the note's reason)
CASES = [
    ("kernel_backwards", K, f"UPDATE {K} SET end = start - 1000 WHERE rowid IN (SELECT rowid FROM {K} LIMIT 5)",
     "end before start"),
    ("memcpy_backwards", M, f"UPDATE {M} SET end = start - 1000 WHERE rowid IN (SELECT rowid FROM {M} LIMIT 3)",
     "end before start"),
    ("range_backwards", N, f"UPDATE {N} SET end = start - 10 WHERE rowid IN ({RANGE_ROWS} LIMIT 3)",
     "end before start"),
    ("kernel_end_max", K, f"UPDATE {K} SET end = {BIG} WHERE rowid IN (SELECT rowid FROM {K} LIMIT 2)",
     "a timestamp beyond ±2^61 ns"),
    ("kernel_start_min", K, f"UPDATE {K} SET start = -{BIG} WHERE rowid IN (SELECT rowid FROM {K} LIMIT 2)",
     "a timestamp beyond ±2^61 ns"),
    ("range_end_max", N, f"UPDATE {N} SET end = {BIG} WHERE rowid IN ({RANGE_ROWS} LIMIT 2)",
     "a timestamp beyond ±2^61 ns"),
]
WHAT = {K: "kernels", M: "memcpys", N: "NVTX events"}
GOOD = "(end IS NULL OR (end >= start AND end <= 2305843009213693952)) AND start BETWEEN -2305843009213693952 AND 2305843009213693952"


def run_cli(*args):
    return cli_process.run(args, text=True,
                           timeout=300, stdin=subprocess.DEVNULL)


sql = sql_rows


def _numbers(value):
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)


@pytest.mark.parametrize("name,table,mutation,reason", CASES, ids=[c[0] for c in CASES])
def test_bad_timestamps_left_out_with_a_note(tmp_path, name, table, mutation, reason):
    path = mutated_copy(tmp_path, name, mutation, src=SRC)
    total, good = sql(path, f"SELECT count(*), sum({GOOD}) FROM {table}")[0]
    assert 0 < total - good < total / 2
    proc = run_cli("stats", path, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    bad = total - good
    note = f"note: left out {bad:,} of {total:,} {WHAT[table]} ({table}): {reason} in {bad:,}"
    assert note in proc.stderr.splitlines(), proc.stderr
    reports = {r["report"]: r for r in json.loads(proc.stdout)["reports"]}
    for rep in reports.values():  # no negative duration, no overflow, anywhere
        assert all(x >= 0 for x in _numbers(rep["rows"])), rep["report"]
    if table == K:  # exactly the good kernels, summed as SQL sums them
        rows = reports["cuda_gpu_kern_sum"]["rows"]
        assert sum(r[2] for r in rows) == good
        assert sum(r[1] for r in rows) == sql(path, f"SELECT sum(end - start) FROM {K} WHERE {GOOD}")[0][0]
    if table == M:
        rows = reports["cuda_gpu_mem_time_sum"]["rows"]  # memsets have rows of their own there
        assert sum(r[2] for r in rows if r[-1].startswith("[CUDA memcpy")) == good
    for command in ("report", "ranks"):  # numpy's overflow warnings went to stderr here
        other = run_cli(command, path, "-f", "json")
        assert other.returncode == 0, other.stderr
        assert "Warning" not in other.stderr and "Traceback" not in other.stderr, other.stderr
        assert note in other.stderr.splitlines() or command == "ranks"


def test_most_kernels_backwards_refused(tmp_path):
    path = mutated_copy(tmp_path, "all_backwards", f"UPDATE {K} SET end = start - 1", src=SRC)
    n = sql(path, f"SELECT count(*) FROM {K}")[0][0]
    for command in ("stats", "report", "ranks"):
        proc = run_cli(command, path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{K} is not as nsys writes it: end before start in {n:,} of {n:,} rows" in proc.stderr
