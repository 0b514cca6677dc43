"""The floors: the least any attribution can cost, reading the columns it needs.

    python bench/floor.py TRACE.sqlite                       # Python's sqlite3, tuples (fetchall)
    python bench/floor.py TRACE.sqlite --native adbc         # into Arrow/numpy, ADBC's SQLite driver
    python bench/floor.py TRACE.sqlite --native connectorx   # into Arrow/numpy, connectorx (2 partitions)

One JSON line: seconds, rows, peak RSS. Run each in its own process: the peak RSS it reports
is then the cost of holding those columns, nothing else.

The Python floor is what any tool reading these rows through Python's sqlite3 pays. The
columnar (native) floor is what a native reader pays to put the same columns in Arrow/numpy
arrays; bench/run.py takes the fastest reader installed as "the columnar floor". connectorx
is measured as a reference only: it opens the file read-write (O_RDWR|O_CREAT) and takes
SQLite's locks, which a profile viewer must not do, so the project does not use it.
"""
from __future__ import annotations

import json
import resource
import sqlite3
import sys
import time
from pathlib import Path

# What attributing GPU work to NVTX ranges needs, table by table; absent columns are skipped
# (older exports lack some), absent tables too (some exports have no NVTX_EVENTS at all).
FLOOR_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "correlationId", "globalPid", "demangledName", "deviceId", "streamId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "correlationId", "nameId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "globalTid", "endGlobalTid", "text", "textId", "domainId"),
    "StringIds": ("id", "value"),
}


def _native(path: Path, reader: str, tables: dict[str, list[str]]) -> dict:
    """Each table's columns as Arrow arrays, then numpy (zero-copy for integer columns)."""
    held, rows = [], {}
    if reader == "adbc":
        import adbc_driver_sqlite.dbapi as adbc

        con = adbc.connect(f"file:{Path(path).resolve()}?mode=ro&immutable=1")
        for table, cols in tables.items():
            cur = con.cursor()
            cur.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"')
            held.append(cur.fetch_arrow_table())
            cur.close()
        con.close()
    elif reader == "connectorx":
        import connectorx as cx

        for table, cols in tables.items():
            sql = f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"'
            big = table.startswith("CUPTI_ACTIVITY_KIND")  # its partitioned, parallel read
            held.append(cx.read_sql(f"sqlite://{Path(path).resolve()}", sql.replace("SELECT ", "SELECT rowid, ", 1)
                                    if big else sql, return_type="arrow",
                                    **({"partition_on": "rowid", "partition_num": 2} if big else {})))
    else:
        raise SystemExit(f"floor: unknown reader {reader!r} (adbc, connectorx)")
    arrays = []
    for tbl, table in zip(held, tables):
        rows[table] = tbl.num_rows
        arrays.append([c.to_numpy() if c.null_count == 0 and str(c.type).startswith("int") else c for c in tbl.columns])
    return {"rows": rows, "held": arrays}


def fetch_floor(path: Path, native: str | None = None) -> dict:
    if native:
        import numpy  # noqa: F401 - imported before the clock starts, as a tool would have
        import pyarrow  # noqa: F401
        if native == "adbc":
            import adbc_driver_sqlite.dbapi  # noqa: F401
        elif native == "connectorx":
            import connectorx  # noqa: F401
    t0, c0 = time.perf_counter(), time.process_time()
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    wanted = {}
    for table, cols in FLOOR_COLUMNS.items():
        if table in tables:
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            wanted[table] = [c for c in cols if c in have]
    if native:
        conn.close()
        got = _native(path, native, wanted)
        rows = got["rows"]
    else:
        held, rows = [], {}
        for table, present in wanted.items():
            data = conn.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in present)} FROM "{table}"').fetchall()
            rows[table] = len(data)
            held.append(data)  # keep everything alive: the floor holds all of it at once
        conn.close()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "cpu_s": cpu,  # user + system, all threads: steadier than wall time on a busy machine
        "reader": native or "sqlite3",
        "rows": rows,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    native = None
    if "--native" in argv:
        i = argv.index("--native")
        native = argv[i + 1] if i + 1 < len(argv) else ""
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 1 or native == "":
        print("usage: python bench/floor.py TRACE.sqlite [--native adbc|connectorx]", file=sys.stderr)
        return 2
    try:
        print(json.dumps(fetch_floor(Path(argv[0]), native)))
    except ImportError as exc:
        print(f"floor: {native} not installed ({exc})", file=sys.stderr)
        return 3
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        print(f"floor: {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
