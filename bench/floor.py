"""The floor: the least any attribution can cost, Python's sqlite3 fetching the columns it needs.

    python bench/floor.py TRACE.sqlite [--columnar]   # one JSON line: seconds, rows, peak RSS

No tool that reads these rows through Python's sqlite3 can be faster than this, so the
benchmark reports every other figure as a ratio to it. Run it in its own process: the peak RSS
it reports is then the cost of holding those rows as Python tuples, nothing else.

`--columnar` is a second reference, for memory: the same rows fetched in chunks and kept as
numpy columns, the way a tool holds them if it must stay under a few times the file size
(tuples alone cost about 4.5x the file).
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


CHUNK = 65536


def _columns_chunked(cursor, ncols: int) -> list:
    import numpy as np

    parts: list[list] = [[] for _ in range(ncols)]
    while rows := cursor.fetchmany(CHUNK):
        try:  # all integers: one C-level conversion of the whole chunk
            block = np.array(rows, dtype=np.int64)
            for i in range(ncols):
                parts[i].append(block[:, i].copy())
            continue
        except (TypeError, ValueError, OverflowError):  # NULLs or text: column by column
            pass
        for i in range(ncols):
            values = [r[i] for r in rows]
            try:
                parts[i].append(np.array(values, dtype=np.int64))
            except (TypeError, ValueError, OverflowError):
                parts[i].append(np.array(values, dtype=object))
    return [np.concatenate(p) if p else None for p in parts]


def fetch_floor(path: Path, columnar: bool = False) -> dict:
    if columnar:
        import numpy  # noqa: F401 - imported before the clock starts, as a tool would have
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    held, rows = [], {}
    for table, wanted in FLOOR_COLUMNS.items():
        if table not in tables:
            continue
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        present = [c for c in wanted if c in have]
        cursor = conn.execute(f'SELECT {", ".join(f"{chr(34)}{c}{chr(34)}" for c in present)} FROM "{table}"')
        if columnar:
            data = _columns_chunked(cursor, len(present))
            rows[table] = len(data[0]) if data and data[0] is not None else 0
        else:
            data = cursor.fetchall()
            rows[table] = len(data)
        held.append(data)  # keep everything alive: the floor holds all of it at once
    seconds = time.perf_counter() - t0
    conn.close()
    return {
        "seconds": seconds,
        "rows": rows,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    columnar = "--columnar" in argv
    argv = [a for a in argv if a != "--columnar"]
    if len(argv) != 1:
        print("usage: python bench/floor.py TRACE.sqlite [--columnar]", file=sys.stderr)
        return 2
    try:
        print(json.dumps(fetch_floor(Path(argv[0]), columnar)))
    except sqlite3.Error as exc:
        print(f"floor: {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
