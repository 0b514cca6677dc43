"""Make a bigger, valid Nsight Systems SQLite export by replicating a real one in time.

    python bench/scale_trace.py IN.sqlite OUT.sqlite --times N [--gap-ns NS] [--force]

Copy k (0 <= k < N) of every time-bearing table is shifted by k * (span + gap), so the copies
follow each other like more iterations of the same program on the same processes, threads,
devices and streams. Each copy gets fresh correlation IDs (the same offset in every table that
carries one, so kernel -> runtime joins still hold and stay unique per process), fresh NVTX
rangeIds, gridIds and row ids. StringIds, threads, processes, devices, enums and metadata are
copied once: names repeat, so the string ids stay valid as they are.

All the copying happens inside SQLite (INSERT ... SELECT from the input ATTACHed read-only), so
600k kernels are written in seconds. The output is written under a temporary name and moved into
place atomically; an existing output is never replaced without --force.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Columns holding nanosecond timestamps. `timestamp` 0 means "not collected" (CUDA events).
SHIFTED_COLUMNS = ("start", "end", "timestamp")
# Per-copy identifiers. The offset is k * (max over every table holding the column + 1).
FRESH_ID_COLUMNS = ("correlationId", "rangeId", "gridId")

# Session messages ("Profiling has started.") describe the capture, not an iteration.
COPY_ONCE_TABLES = {"DIAGNOSTIC_EVENT"}
# NVTX definitions happen once per run: categories and domain creation in the first copy,
# domain destruction in the last, so domains do not appear to be created N times.
NVTX_FIRST_COPY_TYPES = (33, 75)  # NvtxCategory, NvtxDomainCreate
NVTX_LAST_COPY_TYPES = (76,)  # NvtxDomainDestroy
# A time-bearing table keyed by `id`, and the table whose rows belong to those ids.
ID_KEYED = {"COMPOSITE_EVENTS": "SAMPLING_CALLCHAINS"}


class ScaleError(Exception):
    """Bad input or refused output; the message is the one line the user sees."""


@dataclass
class ScaleResult:
    out: Path
    times: int
    shift_ns: int
    kernels_in: int
    kernels_out: int
    seconds: float


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({_q(table)})")]


def _is_time_table(name: str, cols: list[str]) -> bool:
    if name in COPY_ONCE_TABLES or name.startswith(("ENUM_", "META_DATA_", "TARGET_INFO_")):
        return False
    # CUDA_EVENT in 2025.x has no timestamp at all, only the correlationId of its record call:
    # it is per-launch activity all the same.
    return "start" in cols or "timestamp" in cols or "correlationId" in cols


def _count(conn: sqlite3.Connection, schema: str, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {schema}.{_q(table)}").fetchone()[0]


def _open_source(src: Path) -> None:
    if not src.is_file():
        raise ScaleError(f"{src}: no such file")
    with open(src, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise ScaleError(f"{src}: not a SQLite file (export it with `nsys export --type sqlite`)")


def scale_trace(src: Path, dst: Path, times: int, gap_ns: int = 1_000_000, force: bool = False) -> ScaleResult:
    if times < 1:
        raise ScaleError("--times must be at least 1")
    src, dst = Path(src), Path(dst)
    _open_source(src)
    if dst.exists() and not force:
        raise ScaleError(f"{dst} exists; pass --force to replace it")
    if dst.resolve() == src.resolve():
        raise ScaleError("output and input are the same file")
    t0 = time.perf_counter()
    tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        shift = _build(conn, src, times, gap_ns)
        kernels_in = kernels_out = 0
        tables = {r[0] for r in conn.execute("SELECT name FROM src.sqlite_master WHERE type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            kernels_in = _count(conn, "src", "CUPTI_ACTIVITY_KIND_KERNEL")
            kernels_out = _count(conn, "main", "CUPTI_ACTIVITY_KIND_KERNEL")
            if kernels_out != times * kernels_in:
                raise ScaleError(f"internal check failed: {kernels_out} kernels, expected {times} x {kernels_in}")
        conn.execute("DETACH src")
        conn.close()
        os.replace(tmp, dst)
    except BaseException:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    return ScaleResult(dst, times, shift, kernels_in, kernels_out, time.perf_counter() - t0)


def _build(conn: sqlite3.Connection, src: Path, times: int, gap_ns: int) -> int:
    """Fill `conn` with `times` copies of `src`; returns the shift between copies (ns)."""
    # The output is scratch until os.replace: no journal, no fsync.
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    conn.execute("PRAGMA temp_store=MEMORY")
    uri = src.resolve().as_uri() + "?mode=ro"
    try:
        conn.execute("ATTACH DATABASE ? AS src", (uri,))
        page_size = conn.execute("PRAGMA src.page_size").fetchone()[0]
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM src.sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise ScaleError(f"{src}: cannot read it as SQLite ({exc})") from None
    conn.execute(f"PRAGMA main.page_size={int(page_size)}")
    tables = [(name, sql) for typ, name, _, sql in objects if typ == "table" and sql]
    if not any(name == "StringIds" or name.startswith("CUPTI_ACTIVITY_KIND_") for name, _ in tables):
        raise ScaleError(f"{src}: not an Nsight Systems export (no StringIds or CUPTI tables)")

    cols = {name: _columns(conn, "src", name) for name, _ in tables}
    time_tables = [n for n, _ in tables if _is_time_table(n, cols[n])]
    replicated = set(time_tables) | {ID_KEYED[n] for n in time_tables if n in ID_KEYED and ID_KEYED[n] in cols}

    shift = _shift(conn, time_tables, cols, gap_ns)
    steps = {c: _max_plus_one(conn, time_tables, cols, c) for c in FRESH_ID_COLUMNS}
    id_steps = {n: _max_plus_one(conn, [n], cols, "id") for n in ID_KEYED if n in replicated}

    conn.execute("BEGIN")
    for _name, sql in tables:
        conn.execute(sql)
    for name, _ in tables:
        if name in replicated:
            _insert_copies(conn, name, cols[name], times, shift, steps, id_steps)
        else:
            collist = ", ".join(_q(c) for c in cols[name])
            conn.execute(f"INSERT INTO main.{_q(name)} ({collist}) SELECT {collist} FROM src.{_q(name)}")
    if "ANALYSIS_DETAILS" in cols and {"stopTime", "duration"} <= set(cols["ANALYSIS_DETAILS"]):
        grow = (times - 1) * shift
        conn.execute(f"UPDATE main.ANALYSIS_DETAILS SET stopTime = stopTime + {grow}, duration = duration + {grow}")
    # Indexes after the data: building them once is far cheaper than maintaining them per row.
    for typ, _name, _, sql in objects:
        if typ in ("index", "view", "trigger") and sql:
            conn.execute(sql)
    conn.execute("COMMIT")
    return shift


def _shift(conn: sqlite3.Connection, tables: list[str], cols: dict, gap_ns: int) -> int:
    lo, hi = None, None
    for name in tables:
        present = [c for c in SHIFTED_COLUMNS if c in cols[name]]
        if not present:
            continue
        # Zero timestamps mean "not collected"; they must not stretch the span.
        exprs = [f"min(NULLIF({_q(c)}, 0)), max({_q(c)})" for c in present]
        row = conn.execute(f"SELECT {', '.join(exprs)} FROM src.{_q(name)}").fetchone()
        for v in row[0::2]:
            if v is not None:
                lo = v if lo is None else min(lo, v)
        for v in row[1::2]:
            if v is not None:
                hi = v if hi is None else max(hi, v)
    if lo is None:
        return gap_ns
    return int(hi - lo + gap_ns)


def _max_plus_one(conn: sqlite3.Connection, tables: list[str], cols: dict, column: str) -> int:
    best = -1
    for name in tables:
        if column in cols[name]:
            v = conn.execute(f"SELECT max({_q(column)}) FROM src.{_q(name)}").fetchone()[0]
            if v is not None:
                best = max(best, int(v))
    return best + 1


def _insert_copies(conn, name, cols, times, shift, steps, id_steps) -> None:
    exprs = []
    for c in cols:
        qc = "t." + _q(c)
        if c == "timestamp":
            exprs.append(f"CASE WHEN {qc} = 0 THEN 0 ELSE {qc} + ks.k * {shift} END")
        elif c in SHIFTED_COLUMNS:
            exprs.append(f"{qc} + ks.k * {shift}")
        elif c in steps and steps[c] > 0:
            # 0 is "no id" where a column is optional; NULL stays NULL through the arithmetic.
            exprs.append(f"{qc} + ({qc} != 0) * ks.k * {steps[c]}")
        elif c == "id" and (name in id_steps or name in ID_KEYED.values()):
            owner = name if name in id_steps else next(o for o, d in ID_KEYED.items() if d == name)
            exprs.append(f"{qc} + ks.k * {id_steps[owner]}")
        else:
            exprs.append(qc)
    where = ""
    if name == "NVTX_EVENTS" and "eventType" in cols:
        first = ", ".join(map(str, NVTX_FIRST_COPY_TYPES))
        last = ", ".join(map(str, NVTX_LAST_COPY_TYPES))
        where = (
            f" WHERE (t.eventType NOT IN ({first}, {last}))"
            f" OR (t.eventType IN ({first}) AND ks.k = 0)"
            f" OR (t.eventType IN ({last}) AND ks.k = {times - 1})"
        )
    collist = ", ".join(_q(c) for c in cols)
    # CROSS JOIN keeps the copy number as the outer loop: rows land copy by copy, each copy in
    # the input's row order, so row ids grow with time the way nsys writes them.
    conn.execute(
        f"WITH RECURSIVE ks(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM ks WHERE k + 1 < {int(times)}) "
        f"INSERT INTO main.{_q(name)} ({collist}) "
        f"SELECT {', '.join(exprs)} FROM ks CROSS JOIN src.{_q(name)} AS t{where}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input", type=Path, help="an nsys SQLite export (opened read-only)")
    p.add_argument("output", type=Path, help="where to write the scaled export")
    p.add_argument("--times", type=int, required=True, help="number of copies (N x the input's rows)")
    p.add_argument("--gap-ns", type=int, default=1_000_000, help="idle time between copies (default 1 ms)")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    args = p.parse_args(argv)
    try:
        r = scale_trace(args.input, args.output, args.times, args.gap_ns, args.force)
    except ScaleError as exc:
        print(f"scale_trace: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as exc:
        print(f"scale_trace: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    size_mb = r.out.stat().st_size / 1e6
    print(
        f"wrote {r.out}: {r.times} copies, kernels {r.kernels_in:,} -> {r.kernels_out:,}, "
        f"{size_mb:,.1f} MB, shift {r.shift_ns / 1e9:.3f} s per copy, in {r.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
