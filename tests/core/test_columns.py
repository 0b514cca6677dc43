"""The native reader (ADBC) gives exactly what Python's sqlite3 gives, on every trace the
loader reads; it never writes, locks or adds anything beside the profile; and any failure
of it (not installed, a table it refuses) falls back to sqlite3 with the same result."""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.xz_samples import plain
from conftest import SAMPLES, SHARED, mutated_copy, sample_traces
from nsight_tui.parsers.read import columns
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import TraceLoader, load_trace

needs_adbc = pytest.mark.skipif(not columns._has_adbc(), reason="adbc-driver-sqlite / pyarrow not installed")


def _all_traces() -> list[Path]:
    found = sample_traces()
    for folder in (SHARED, SHARED / "older"):
        found += sorted(folder.glob("*.sqlite")) if folder.is_dir() else []
    return found


def _loadable(path: Path):
    try:
        return load_trace(path, native=False)
    except TraceError:
        return None  # e.g. an export with neither CUDA nor NVTX data: both readers refuse it alike


def assert_same_trace(a, b) -> None:
    for name in ("ops", "api", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_dtype=True, obj=name)
    assert a.op_names == b.op_names and a.api_names == b.api_names
    assert a.threads == b.threads and a.processes == b.processes
    assert a.memcpy_labels_from_export == b.memcpy_labels_from_export
    info_a, info_b = vars(a.info).copy(), vars(b.info).copy()
    for volatile in ("path", "reader", "export_kind"):
        info_a.pop(volatile), info_b.pop(volatile)
    assert info_a == info_b
    assert a.op_short == b.op_short
    if len(a.ops):
        pick = np.unique(np.linspace(0, len(a.ops) - 1, 40).astype(np.int64))
        pd.testing.assert_frame_equal(a.op_details(pick), b.op_details(pick))


@needs_adbc
@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: p.stem)
def test_adbc_equals_sqlite3(path):
    serial = _loadable(path)
    if serial is None:
        with pytest.raises(TraceError):
            load_trace(path)
        return
    native = load_trace(path)
    assert native.info.reader == "adbc-driver-sqlite"
    assert serial.info.reader == "sqlite3"
    assert_same_trace(native, serial)


def _fds_on(path: Path) -> list[int]:
    """This process's open file descriptors on `path`, with their open flags."""
    flags = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.path.realpath(f"/proc/self/fd/{fd}") == str(path.resolve()):
                info = Path(f"/proc/self/fdinfo/{fd}").read_text()
                flags.append(int(info.split("flags:")[1].split()[0], 8))
        except (OSError, IndexError):
            continue
    return flags


def _fingerprint(folder: Path) -> dict:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in folder.iterdir()}


@needs_adbc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_profile_opened_read_only_never_locked_nothing_beside(tmp_path):
    path = tmp_path / "profile.sqlite"
    shutil.copy(SAMPLES / "small_ctx128.sqlite", path)
    before = _fingerprint(tmp_path)
    # Another process holds an exclusive lock: a reader that takes SQLite's locks would fail
    # with "database is locked"; an immutable one does not take any.
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        loader = TraceLoader(path)
        loader.ranges_only()  # both connections are open now: sqlite3 and the ADBC driver's
        flags = _fds_on(path)
        trace = loader.finish()
        trace.op_short, trace.op_details([0, 1])  # the lazy reads too
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert trace.info.reader == "adbc-driver-sqlite"
    assert len(flags) >= 2, flags  # our two opens (the holder's is in this process too, O_RDWR)
    assert sum(1 for f in flags if f & os.O_ACCMODE == os.O_RDONLY) >= 2, [oct(f) for f in flags]
    assert not any(f & os.O_CREAT for f in flags if f & os.O_ACCMODE == os.O_RDONLY)
    assert _fingerprint(tmp_path) == before  # same bytes, same mtime, no -wal/-shm/-journal


@needs_adbc
def test_without_adbc_sqlite3_reads(monkeypatch):
    path = SAMPLES / "small_ctx128.sqlite"
    native = load_trace(path)
    monkeypatch.setattr(columns, "_has_adbc", lambda: False)
    fallback = load_trace(path)
    assert fallback.info.reader == "sqlite3"
    assert_same_trace(native, fallback)


@needs_adbc
def test_table_the_driver_fails_on_is_read_by_sqlite3(monkeypatch):
    path = SAMPLES / "small_ctx128.sqlite"
    native = load_trace(path)
    real = columns._arrow

    def failing(con, sql):  # the driver's read, in the foreground or read ahead
        if "CUPTI_ACTIVITY_KIND_KERNEL" in sql:
            raise OSError("[SQLite] simulated driver failure")
        return real(con, sql)

    monkeypatch.setattr(columns, "_arrow", failing)
    mixed = load_trace(path)
    assert mixed.info.reader == "adbc-driver-sqlite (sqlite3 for CUPTI_ACTIVITY_KIND_KERNEL)"
    assert_same_trace(native, mixed)


K = "CUPTI_ACTIVITY_KIND_KERNEL"
BAD_ROWS = [  # (mutation, table, SQL condition of the rows kept)
    (f"UPDATE {K} SET correlationId = 'oops' WHERE rowid = 7", K,
     "typeof(correlationId) IN ('integer', 'null')"),
    (f"UPDATE {K} SET start = NULL WHERE rowid IN (3, 9)", K, "typeof(start) = 'integer'"),
    ("UPDATE NVTX_EVENTS SET globalTid = 'g' WHERE rowid = 10", "NVTX_EVENTS", "typeof(globalTid) = 'integer'"),
    ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = x'01' WHERE rowid = 4", "CUPTI_ACTIVITY_KIND_RUNTIME",
     "typeof(end) = 'integer'"),
]


@needs_adbc
@pytest.mark.parametrize("mutation,table,good", BAD_ROWS, ids=["text_corr", "null_start", "nvtx_gtid", "api_blob"])
def test_bad_rows_left_out_alike_by_both_readers(tmp_path, mutation, table, good):
    """Text or NULL where nsys writes integers: the ADBC driver refuses or types the column
    otherwise, sqlite3 reads the values as stored; both end with the same rows left out (the
    same SQL condition from validate.scan), the same note, and the same trace."""
    path = mutated_copy(tmp_path, "bad", mutation, src=SAMPLES / "small_ctx128.sqlite", drop_not_null=True)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    total, kept = con.execute(f"SELECT count(*), sum({good}) FROM {table}").fetchone()
    con.close()
    native, serial = load_trace(path), load_trace(path, native=False)
    assert native.info.reader.startswith("adbc-driver-sqlite") and serial.info.reader == "sqlite3"
    assert_same_trace(native, serial)
    assert kept < total
    assert any(n.startswith(f"left out {total - kept:,} of {total:,} ") and f"({table})" in n
               for n in native.info.notes), native.info.notes
    if table == K:
        assert native.info.kernels == kept


@pytest.mark.parametrize("native", [True, False], ids=["adbc", "sqlite3"])
def test_nulls_read_as_before(tmp_path, native):
    """A NULL kernel globalPid (cut-down exports) and a NULL NVTX end (a range never closed)
    read as the loader has always read them: the launch found by correlation ID alone; the
    range unended, closed at the last range timestamp (the last NVTX timestamp for nvtx_sum)."""
    path = tmp_path / "nulls.sqlite"
    shutil.copy(SAMPLES / "small_ctx128.sqlite", path)
    con = sqlite3.connect(path)
    first = con.execute("SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid = ?", (first,))
    open_row = con.execute("SELECT max(rowid) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()[0]
    con.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE rowid = ?", (open_row,))
    con.commit()
    range_max = con.execute("SELECT max(max(start, coalesce(end, start))) FROM NVTX_EVENTS "
                            "WHERE eventType IN (59, 60, 70, 71)").fetchone()[0]
    all_max = con.execute("SELECT max(max(start, coalesce(end, start))) FROM NVTX_EVENTS").fetchone()[0]
    launch_gtid = con.execute("SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                              "ON r.correlationId = k.correlationId WHERE k.rowid = ?", (first,)).fetchone()[0]
    con.close()
    trace = load_trace(path, native=native)
    k = trace.ops[trace.ops["rowid"] == first].iloc[0]
    assert k["api"] >= 0 and int(trace.api["gtid"].iat[int(k["api"])]) == launch_gtid
    assert k["gpid"] == launch_gtid & ~0xFFFFFF
    r = trace.ranges[trace.ranges["rowid"] == open_row].iloc[0]
    assert r["unended"] and r["end"] == range_max and r["end_sum"] == all_max


def test_staged_loader_gives_the_tree_first():
    path = SAMPLES / "small_ctx128.sqlite"
    loader = TraceLoader(path)
    early = loader.ranges_only()
    assert early.info.gpu_pending and early.ops.empty and early.api.empty
    full = loader.finish()
    assert not full.info.gpu_pending
    assert early.ranges is full.ranges  # the same frame: positions in the tree do not move
    assert len(full.ops) == full.info.kernels + full.info.memcpys + full.info.memsets > 0


@needs_adbc
def test_gpu_tables_are_read_ahead_once(monkeypatch):
    """The API and GPU tables are read on the read-ahead thread (while the ranges load), each
    once: the loader takes the read-ahead result instead of reading the table again."""
    seen: list[tuple[str, str]] = []
    real = columns._arrow

    def spy(con, sql):
        seen.append((threading.current_thread().name, sql))
        return real(con, sql)

    monkeypatch.setattr(columns, "_arrow", spy)
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    assert trace.info.reader == "adbc-driver-sqlite"
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"):
        reads = [thread for thread, sql in seen if f'FROM "{table}"' in sql]
        assert len(reads) == 1 and reads[0].startswith("nsight-read-ahead"), (table, seen)
    assert any('FROM "NVTX_EVENTS"' in sql and not thread.startswith("nsight-read-ahead") for thread, sql in seen)


@needs_adbc
def test_closing_before_the_gpu_stage_stops_the_read_ahead():
    loader = TraceLoader(SAMPLES / "small_ctx128.sqlite")
    assert loader.ranges_only().info.gpu_pending
    loader.tables.close()
    assert not any(t.name.startswith("nsight-read-ahead") for t in threading.enumerate())


@needs_adbc
@pytest.mark.parametrize("path", _all_traces()[:3] + [plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")], ids=lambda p: p.stem)
def test_tables_read_in_parts_equal_sqlite3(path, monkeypatch):
    """The big tables read ahead in parts of rowids, on several threads, each part written into
    the table's arrays in place: the trace sqlite3 reads, with parts of 97 rows."""
    serial = _loadable(path)
    if serial is None:
        pytest.skip("both readers refuse it")
    monkeypatch.setattr(columns, "PART_ROWS", 97)
    monkeypatch.setattr(columns, "READ_AHEAD_THREADS", 3)
    seen: list[str] = []
    real = columns._arrow

    def spy(con, sql):
        seen.append(sql)
        return real(con, sql)

    monkeypatch.setattr(columns, "_arrow", spy)
    assert_same_trace(load_trace(path), serial)
    kernels = [sql for sql in seen if 'FROM "CUPTI_ACTIVITY_KIND_KERNEL"' in sql and '"start"' in sql]
    assert len([sql for sql in kernels if "rowid >" in sql]) > 2
    assert not [sql for sql in kernels if "rowid >" not in sql and "rowid IN" not in sql]  # no whole read


@needs_adbc
def test_parts_over_deleted_rows_and_nulls(tmp_path, monkeypatch):
    """Rowids that skip (rows deleted) and NULLs in a part: the parts are moved up over the gaps
    and the NULL masks kept, as the one-query read and sqlite3 give them."""
    path = mutated_copy(tmp_path, "gaps",
                        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 97 IN (3, 4, 5) AND rowid > 1000",
                        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid BETWEEN 1500 AND 2400",
                        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid % 501 = 0",
                        src=SAMPLES / "small_ctx128.sqlite")
    cols = ["rowid", "start", "end", "globalPid", "correlationId"]
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    want = columns.fetch_sqlite(columns.connect_readonly(path), table, cols)
    monkeypatch.setattr(columns, "PART_ROWS", 500)
    with columns.open_tables(path) as tables:
        tables.prefetch([(table, cols)])
        got = tables.read(table, cols)
    assert got.n == want.n and set(got.nulls) == set(want.nulls) == {"globalPid"}
    for c in cols:
        assert np.array_equal(got.values[c], want.values[c]), c
    assert np.array_equal(got.nulls["globalPid"], want.nulls["globalPid"])
    serial = load_trace(path, native=False)
    assert_same_trace(load_trace(path), serial)


def test_rowid_span_reads_the_btree_ends_not_every_row(tmp_path):
    """A table's (min, max) rowid, which the read ahead waits for before its first part, comes
    from the B-tree's two ends (SQLite's plan: SEARCH, never a SCAN of the table), and equals
    the rows' own min and max where rows at both ends were deleted."""
    path = mutated_copy(tmp_path, "ends",
                        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid < 7",
                        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > (SELECT max(rowid) - 5 "
                        "FROM CUPTI_ACTIVITY_KIND_KERNEL)",
                        src=SAMPLES / "small_ctx128.sqlite")
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        plan = [row[-1] for row in con.execute("EXPLAIN QUERY PLAN " + columns.rowid_span_sql(table))]
        rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table}")]
    finally:
        con.close()
    assert not [step for step in plan if step.startswith(f"SCAN {table}")], plan
    assert columns._rowid_span(path, table) == (min(rowids), max(rowids))


@needs_adbc
def test_the_read_uses_the_driver_manager_not_its_db_api(tmp_path):
    """A whole load through ADBC (read ahead in parts, rowid spans, row bounds) never imports
    ADBC's DB-API module, which imports pyarrow.dataset (and pandas with it) before a read can
    begin; what it reads is sqlite3's (test_adbc_equals_sqlite3)."""
    import subprocess

    code = ("import sys; from pathlib import Path; from nsight_tui.parsers.read.load import load_trace; "
            f"t = load_trace(Path({str(SAMPLES / 'small_ctx128.sqlite')!r})); "
            "assert t.info.reader == 'adbc-driver-sqlite', t.info.reader; "
            "print(sorted(m for m in sys.modules if m.startswith('adbc_driver_manager.dbapi')))")
    env = {**os.environ, "NSIGHT_TUI_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
