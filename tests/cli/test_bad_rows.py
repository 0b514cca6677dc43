"""Damaged rows and awkward files: each case is a mutated copy of a committed
sample, made here with sqlite3. Bad rows are left out with a note that says how many and why
(or the file is refused in one line); never an exception name, never a hang."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import SAMPLES, mutated_copy
from helpers.xz_samples import plain
from helpers.export_sql import sql_rows
from helpers import cli_process

SRC = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")
K, RT, NV = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"


def run_cli(*args, timeout=120):
    return cli_process.run(args, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)


def mutate(tmp_path, name, *sql):
    return mutated_copy(tmp_path, name, *sql, drop_not_null=True)


sql = sql_rows


def no_internal_error(proc):
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "Error:" not in proc.stderr, proc.stderr  # no exception class name as the message


# (name, mutation, the note's words, table, rows left out by SQL)
LEFT_OUT = [
    ("kernel_start_null", f"UPDATE {K} SET start = NULL WHERE rowid IN (3, 7)", "start is NULL", K),
    ("kernel_start_text", f"UPDATE {K} SET start = 'abc' WHERE rowid = 3", "start is not an integer", K),
    ("kernel_end_blob", f"UPDATE {K} SET end = x'0102' WHERE rowid = 5", "end is not an integer", K),
    ("runtime_start_null", f"UPDATE {RT} SET start = NULL WHERE rowid = 5", "start is NULL", RT),
    ("runtime_corr_text", f"UPDATE {RT} SET correlationId = 'x1' WHERE rowid = 5", "correlationId is not an integer",
     RT),
    ("nvtx_start_null", f"UPDATE {NV} SET start = NULL WHERE rowid = 10", "start is NULL", NV),
    ("nvtx_start_text", f"UPDATE {NV} SET start = 't' WHERE rowid = 10", "start is not an integer", NV),
    ("nvtx_gtid_null", f"UPDATE {NV} SET globalTid = NULL WHERE rowid = 10", "globalTid is NULL", NV),
    ("nvtx_gtid_text", f"UPDATE {NV} SET globalTid = 'g' WHERE rowid = 10", "globalTid is not an integer", NV),
]


@pytest.mark.parametrize("name,mutation,words,table", LEFT_OUT, ids=[c[0] for c in LEFT_OUT])
def test_bad_rows_are_left_out_with_a_note(tmp_path, name, mutation, words, table):
    path = mutate(tmp_path, name, mutation)
    proc = run_cli("stats", path, "-f", "json", "-r", "cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum")
    no_internal_error(proc)
    assert proc.returncode == 0, proc.stderr
    total = sql(path, f"SELECT count(*) FROM {table}")[0][0]
    good = {K: "typeof(start) = 'integer' AND typeof(end) = 'integer'",
            RT: "typeof(start) = 'integer' AND typeof(correlationId) IN ('integer', 'null')",
            NV: "typeof(start) = 'integer' AND typeof(globalTid) = 'integer'"}[table]
    kept = sql(path, f"SELECT count(*) FROM {table} WHERE {good}")[0][0]
    note = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:") and table in ln]
    what = {K: "kernels", RT: "CUDA API calls", NV: "NVTX events"}[table]
    assert note == [f"note: left out {total - kept:,} of {total:,} {what} ({table}): {words} in {total - kept:,}"]
    reports = json.loads(proc.stdout)["reports"]  # several reports: one document
    by_name = {r["report"]: r for r in reports}
    if table == K:  # the kernels summed are exactly the good rows
        instances = sum(row[2] for row in by_name["cuda_gpu_kern_sum"]["rows"])
        assert instances == kept
        total_ns = sql(path, f"SELECT sum(end - start) FROM {K} WHERE {good}")[0][0]
        assert sum(row[1] for row in by_name["cuda_gpu_kern_sum"]["rows"]) == total_ns
    if table == RT:
        assert sum(row[2] for row in by_name["cuda_api_sum"]["rows"]) == kept


REPAIRED = [
    ("processes_pid_null", "UPDATE PROCESSES SET pid = NULL", "PROCESSES rows have no integer pid"),
    ("processes_pid_text", "UPDATE PROCESSES SET pid = 'p'", "PROCESSES rows have no integer pid"),
    ("thread_gtid_null", "UPDATE ThreadNames SET globalTid = NULL WHERE rowid % 2 = 0", "thread names (ThreadNames)"),
    ("string_null", f"UPDATE StringIds SET value = NULL WHERE id = (SELECT demangledName FROM {K} LIMIT 1)",
     "names in StringIds are NULL"),
    ("analysis_duration_text", "UPDATE ANALYSIS_DETAILS SET duration = 'd'", "duration is not an integer"),
    ("memcpy_enum_id_text", "CREATE TABLE e2 AS SELECT * FROM ENUM_CUDA_MEMCPY_OPER",
     "memcpy kinds (ENUM_CUDA_MEMCPY_OPER): id is not an integer"),
]


@pytest.mark.parametrize("name,mutation,words", REPAIRED, ids=[c[0] for c in REPAIRED])
def test_lookup_tables_are_repaired_with_a_note(tmp_path, name, mutation, words):
    extra = []
    if name == "memcpy_enum_id_text":  # its id is an INTEGER PRIMARY KEY: rebuild it without one
        extra = ["DROP TABLE ENUM_CUDA_MEMCPY_OPER", "ALTER TABLE e2 RENAME TO ENUM_CUDA_MEMCPY_OPER",
                 "UPDATE ENUM_CUDA_MEMCPY_OPER SET id = 'i' WHERE id = 1"]
    path = mutate(tmp_path, name, mutation, *extra)
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum")
    no_internal_error(proc)
    assert proc.returncode == 0, proc.stderr
    assert any(ln.startswith("note:") and words in ln for ln in proc.stderr.splitlines()), proc.stderr
    if name == "string_null":  # the kernel is still counted, under a placeholder name
        sid = sql(path, f"SELECT demangledName FROM {K} LIMIT 1")[0][0]
        n = sql(path, f"SELECT count(*) FROM {K} WHERE demangledName = {sid}")[0][0]
        assert f",{n}," in next(ln for ln in proc.stdout.splitlines() if f"<string {sid}>" in ln)


def test_processes_pid_repaired_from_global_pid(tmp_path):
    from nsight_tui.parsers.read.load import load_trace

    path = mutate(tmp_path, "pid", "UPDATE PROCESSES SET pid = 'p'")
    trace = load_trace(path)
    for gpid, pid in sql(path, "SELECT globalPid, (globalPid >> 24) & 16777215 FROM PROCESSES"):
        assert trace.processes[gpid][0] == pid


def test_a_table_mostly_bad_is_refused_in_one_line(tmp_path):
    path = mutate(tmp_path, "all_null", f"UPDATE {K} SET start = NULL")
    proc = run_cli("stats", path)
    no_internal_error(proc)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    n = sql(path, f"SELECT count(*) FROM {K}")[0][0]
    assert len(lines) == 1 and f"start is NULL in {n:,} of {n:,} rows" in lines[0] and K in lines[0]


def test_null_runtime_correlation_id_is_said_as_such(tmp_path):
    """It used to say "correlation IDs outside 0..2^32"."""
    path = mutate(tmp_path, "corr_null", f"UPDATE {RT} SET correlationId = NULL WHERE rowid = 5")
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_api_sum")
    no_internal_error(proc)
    assert proc.returncode == 0
    assert "note: 1 CUDA API calls have no correlation ID" in proc.stderr
    assert "2^32" not in proc.stderr
    calls = sql(path, f"SELECT count(*) FROM {RT}")[0][0]
    assert sum(int(ln.split(",")[2]) for ln in proc.stdout.splitlines()[1:]) == calls  # the call still counts


def test_table_name_with_a_quote_is_not_damage(tmp_path):
    """It used to say "damaged or truncated SQLite file"."""
    path = mutate(tmp_path, "quote", 'CREATE TABLE "it\'s ""odd""" (x)')
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_api_sum")
    no_internal_error(proc)
    assert proc.returncode == 0, proc.stderr


def test_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "trace.sqlite"
    os.mkfifo(fifo)
    proc = run_cli("stats", fifo, timeout=60)  # a blocked open would never return
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"nsight-tui: {fifo}: not a regular file (a pipe, device or socket); "
                                                "give the .sqlite export itself"]


@pytest.mark.parametrize("name", ["run#1", "what?", "a%41", "with space", "ünïcødé 名", "50%"])
def test_awkward_path_names_open_the_named_file(tmp_path, name):
    path = tmp_path / f"{name}.sqlite"
    shutil.copyfile(SRC, path)
    decoy = tmp_path / "aA.sqlite"  # what an unescaped a%41 would open
    decoy.write_text("not this one")
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_api_sum")
    no_internal_error(proc)
    assert proc.returncode == 0, proc.stderr
    calls = sql(SRC, f"SELECT count(*) FROM {RT}")[0][0]
    assert sum(int(ln.split(",")[2]) for ln in proc.stdout.splitlines()[1:]) == calls


def test_wal_beside_the_profile_is_said_to_be_ignored(tmp_path):
    path = tmp_path / "t.sqlite"
    shutil.copyfile(SRC, path)
    (tmp_path / "t.sqlite-wal").write_bytes(b"\x37\x7f\x06\x82" + b"\x00" * 28)
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_api_sum")
    assert proc.returncode == 0
    assert "note: t.sqlite-wal beside the profile is ignored" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.sqlite", "t.sqlite-wal"]  # no -shm made


def test_hot_journal_refuses_in_one_line(tmp_path):
    path = tmp_path / "t.sqlite"
    shutil.copyfile(SRC, path)
    (tmp_path / "t.sqlite-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 100)
    proc = run_cli("stats", path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "t.sqlite-journal" in lines[0] and "interrupted" in lines[0]


def test_sweep_keeps_going_past_bad_members(tmp_path):
    folder = tmp_path / "sweep"
    folder.mkdir()
    shutil.copyfile(SRC, folder / "small_ctx128_fwd.sqlite")
    mutate(tmp_path, "bad_row", f"UPDATE {K} SET start = 'x' WHERE rowid = 4")
    shutil.copyfile(tmp_path / "bad_row.sqlite", folder / "small_ctx256_fwd.sqlite")
    mutate(tmp_path, "all_bad", f"UPDATE {K} SET start = NULL")
    shutil.copyfile(tmp_path / "all_bad.sqlite", folder / "medium_ctx128_fwd.sqlite")
    (folder / "small_ctx512_fwd.oom.json").write_text("[1, 2]")
    (folder / "medium_ctx256_fwd.oom.json").write_bytes(b"\xff\xfe{")
    os.mkfifo(folder / "small_ctx1024_fwd.sqlite")
    proc = run_cli("report", folder, timeout=300)
    no_internal_error(proc)
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    errors = md.split("### Runs not analysed", 1)[1]
    assert "| small_ctx512_fwd.oom.json | OOM record is a JSON list, expected an object |" in errors
    assert "| medium_ctx256_fwd.oom.json | OOM record is not UTF-8 text |" in errors
    assert "medium_ctx128_fwd.sqlite" in errors and "start is NULL" in errors
    assert "small_ctx256_fwd.sqlite" not in errors  # one bad row: analysed without it
    assert "Skipped: small_ctx1024_fwd.sqlite: not a regular file, skipped" in md
    first = md.split("\n## ", 2)[1] if "\n## " in md else md
    row = next(ln for ln in md.splitlines() if ln.startswith("| small "))  # "small" or "small [fwd]" (variants are rows)
    assert row.count("error") == 1 and "OOM" not in row  # ctx 512's record is broken: error, not OOM
    assert first
