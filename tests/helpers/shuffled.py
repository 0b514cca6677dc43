"""A copy of an export with the rows of its big tables in another order (nsys 2025.6+ does not
promise time order): the same data, a deterministic scramble, new rowids."""
from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "ThreadNames", "StringIds")


def shuffled_copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in TABLES:
            if table not in have:
                continue
            rows = con.execute(f"SELECT * FROM {table}").fetchall()
            random.Random(19).shuffle(rows)  # seeded: the same scramble every run
            con.execute(f"DELETE FROM {table}")
            if rows:
                con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
        con.commit()
    finally:
        con.close()
    return dst


def names_shuffled_copy(src: Path, dst: Path) -> Path:
    """A copy whose kernels' names are dealt out again at random over the same kernels (seeded):
    the same times and counts, no repeating sequence (a trace without a period)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        rows = con.execute("SELECT rowid, demangledName, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        names = [(d, s) for _, d, s in rows]
        random.Random(31).shuffle(names)
        con.executemany("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ?, shortName = ? WHERE rowid = ?",
                        [(d, s, r) for (r, _, _), (d, s) in zip(rows, names)])
        con.commit()
    finally:
        con.close()
    return dst
