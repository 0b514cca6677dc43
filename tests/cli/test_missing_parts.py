"""Exports missing a table or column an analysis needs, and values the analyses could not take
`report` (and the TUI's `F`) ran into `internal error: OperationalError: no such
column`, an empty kernel table stopped `stats` with an IndexError, zero-length or backwards NVTX
ranges divided by zero, text in a few API calls' start stopped the memcpy findings, and a FLOPs
file nested deep hit Python's recursion limit. Now: run without the part, saying in a note what
is missing and which figures go with it, or refuse in one line. Each case is a mutated copy of a
committed sample; what the note must count comes from SQL over that copy."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import SAMPLES, mutated_copy
from helpers.cli import run_main
from helpers.export_sql import sql_rows
from helpers import cli_process

TRAIN = SAMPLES / "small_ctx128.sqlite"  # has memcpys, which the findings' copy rules read
RT, MC = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY"


def run_cli(*args, timeout=300):
    """A real process: for the refusals, whose exit and single stderr line are the process's."""
    return cli_process.run(args, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)


sql = sql_rows


def clean(proc):
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]


# (id, mutation, what the note on stderr / in the report must name)
MISSING = [
    ("runtime_dropped", f"DROP TABLE {RT}", f"lacks {RT}"),
    *[(f"runtime_{col}", f"ALTER TABLE {RT} RENAME COLUMN {col} TO {col}_gone", f"{RT} has no {col} column")
      for col in ("start", "end", "correlationId", "globalTid", "nameId")],
    ("memcpy_bytes", f"ALTER TABLE {MC} RENAME COLUMN bytes TO bytes_gone", f"lacks {MC}.bytes"),
    ("memcpy_copyKind", f"ALTER TABLE {MC} RENAME COLUMN copyKind TO copyKind_gone", f"lacks {MC}.copyKind"),
    ("stringids_id", "ALTER TABLE StringIds RENAME COLUMN id TO id_gone", "StringIds has no id column"),
]


@pytest.mark.parametrize("name,mutation,words", MISSING, ids=[m[0] for m in MISSING])
def test_report_runs_without_a_missing_part_and_says_so(tmp_path, name, mutation, words):
    path = mutated_copy(tmp_path, name, mutation, src=TRAIN)
    proc = run_main("report", path)
    clean(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert words in proc.stdout or words in proc.stderr, (proc.stderr[-2000:], proc.stdout[:3000])
    data = run_main("report", path, "-f", "json")
    clean(data)
    doc = json.loads(data.stdout)
    said = " ".join(doc.get("notes") or []) + " ".join(doc["findings"].get("not_checked") or [])
    assert words in said
    if name.startswith("runtime"):  # no API calls: stats says so too, and shows none
        stats = run_main("stats", path, "-r", "cuda_api_sum", "-f", "json")
        clean(stats)
        assert stats.returncode == 0 and json.loads(stats.stdout)["rows"] == []


def test_empty_kernel_table(tmp_path):
    path = mutated_copy(tmp_path, "no_kernels", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    proc = run_main("stats", path, "-f", "json")
    clean(proc)
    assert proc.returncode == 0, proc.stderr
    reports = {r["report"]: r for r in json.loads(proc.stdout)["reports"]}
    assert reports["cuda_gpu_kern_sum"]["rows"] == [] and reports["nvtx_kern_sum"]["rows"] == []
    # the memcpys are still there, counted as SQL counts them
    mem = sum(row[2] for row in reports["cuda_gpu_mem_time_sum"]["rows"])
    assert mem == sql(path, f"SELECT count(*) FROM {MC}")[0][0]
    report = run_main("report", path)
    clean(report)
    assert report.returncode == 0


def test_zero_length_ranges_report(tmp_path):
    path = mutated_copy(tmp_path, "zero", "UPDATE NVTX_EVENTS SET end = start WHERE end IS NOT NULL")
    for fmt in ("markdown", "json"):
        proc = run_main("report", path, "-f", fmt)
        clean(proc)
        assert proc.returncode == 0, proc.stderr


def test_backwards_ranges_refused_in_one_line(tmp_path):
    path = mutated_copy(tmp_path, "backwards", "UPDATE NVTX_EVENTS SET end = start - 10 WHERE end IS NOT NULL")
    bad, total = sql(path, "SELECT sum(end < start), count(*) FROM NVTX_EVENTS")[0]
    assert 2 * bad > total  # most rows bad: refused, as the NULL/text rows are
    for command in ("stats", "report", "ranks"):
        proc = run_cli(command, path)
        clean(proc)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "end before start" in proc.stderr


def test_text_in_a_few_api_starts_report(tmp_path):
    """Text in the start of API calls that launched memcpys: left out with a note, as stats does."""
    path = mutated_copy(tmp_path, "text_start", (
        f"UPDATE {RT} SET start = 't0' WHERE rowid IN (SELECT r.rowid FROM {RT} r JOIN {MC} m "
        "ON m.correlationId = r.correlationId LIMIT 3)"), src=TRAIN, drop_not_null=True)
    total = sql(path, f"SELECT count(*) FROM {RT}")[0][0]
    note = f"note: left out 3 of {total:,} CUDA API calls ({RT}): start is not an integer in 3"
    for command in ("stats", "report"):
        proc = run_main(command, path)
        clean(proc)
        assert proc.returncode == 0, proc.stderr
        assert note in proc.stderr.splitlines()


def test_flops_file_nested_deep(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"ranges": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = run_cli("report", SAMPLES / "small_ctx128_fwd.sqlite.xz", "--flops", deep)
    clean(proc)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "nested too deep" in proc.stderr
