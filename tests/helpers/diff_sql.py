"""Expected values for the diff tests, straight from each SQLite file with hand-written SQL
(no nsight_tui code): range times, the GPU ops a range launched under the process-wide rule,
and plain-Python sums and interval unions over those rows. Not a test module."""
from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path

RANGE_TYPES = "(59, 60, 70, 71)"  # NVTX push/pop and start/end ranges

_RANGES = f"""
WITH r AS (
    SELECT e.rowid AS id, e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
    FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
    WHERE e.eventType IN {RANGE_TYPES} AND e.end IS NOT NULL
),
target AS (  -- ranges named like :name inside a range named like :within on the same thread; where
             -- a copy in another NVTX domain nests the same range, only the innermost
    SELECT t.* FROM r t WHERE t.name GLOB :name AND EXISTS (
        SELECT 1 FROM r p WHERE p.tid = t.tid AND p.name GLOB :within AND p.start <= t.start AND p.end >= t.end)
    AND NOT EXISTS (SELECT 1 FROM r q WHERE q.tid = t.tid AND q.name GLOB :name AND q.id != t.id
                    AND q.start >= t.start AND q.end <= t.end)
)
"""

_OPS = _RANGES + """,
calls AS (
    SELECT DISTINCT t.id AS rid, c.correlationId AS corr, c.globalTid >> 24 AS pid
    FROM CUPTI_ACTIVITY_KIND_RUNTIME c JOIN target t ON (
        -- nsys's rule: the call lies inside the range, on the range's own thread
        (c.globalTid = t.tid AND c.start >= t.start AND c.end <= t.end)
        -- process-wide: a call on another thread of the process with no range of its own thread
        -- around it belongs to the range open on the main thread when the call starts
        OR (c.globalTid != t.tid AND (c.globalTid >> 24) = (t.tid >> 24)
            AND t.start <= c.start AND c.start <= t.end
            AND NOT EXISTS (SELECT 1 FROM r o WHERE o.tid = c.globalTid AND o.start <= c.start AND o.end >= c.end)))
),
ops AS (
    SELECT 'kernel' AS kind, k.correlationId AS corr, k.globalPid >> 24 AS pid, k.start, k.end, s.value AS name
    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
    UNION ALL
    SELECT 'memcpy', m.correlationId, m.globalPid >> 24, m.start, m.end, '[CUDA memcpy ' || x.label || ']'
    FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER x ON x.id = m.copyKind
    UNION ALL
    SELECT 'memset', correlationId, globalPid >> 24, start, end, '[CUDA memset]' FROM CUPTI_ACTIVITY_KIND_MEMSET
)
SELECT calls.rid, ops.kind, ops.start, ops.end, ops.name, ops.corr, ops.pid
FROM calls JOIN ops ON ops.corr = calls.corr AND ops.pid = calls.pid
"""


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def ranges(path: Path, name: str, within: str = "step_[0-9]*") -> list[tuple[int, int, int]]:
    """(rowid, start, end) of the ranges named `name` (a GLOB) inside a `within` range."""
    con = connect(path)
    try:
        return con.execute(_RANGES + "SELECT id, start, end FROM target", {"name": name, "within": within}).fetchall()
    finally:
        con.close()


def ops(path: Path, name: str, within: str = "step_[0-9]*") -> list[tuple]:
    """(range rowid, kind, start, end, op name, correlation ID, pid) of every GPU op each such
    range launched."""
    con = connect(path)
    try:
        return con.execute(_OPS, {"name": name, "within": within}).fetchall()
    finally:
        con.close()


def union_length(intervals) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def range_figures(path: Path, name: str, within: str = "step_[0-9]*") -> dict:
    """Totals over every instance: CPU time, GPU busy (union of each instance's ops, summed),
    kernel time, kernel count, op time; and the instance count."""
    inst = ranges(path, name, within)
    rows = ops(path, name, within)
    by_range: dict[int, list] = {}
    for rid, kind, start, end, *_ in rows:
        by_range.setdefault(rid, []).append((kind, start, end))
    return {
        "instances": len(inst),
        "cpu_ns": sum(e - s for _, s, e in inst),
        "busy_ns": sum(union_length([(s, e) for _, s, e in v]) for v in by_range.values()),
        "kernel_ns": sum(e - s for v in by_range.values() for k, s, e in v if k == "kernel"),
        "kernels": sum(1 for v in by_range.values() for k, _, _ in v if k == "kernel"),
        "op_ns": sum(e - s for v in by_range.values() for _, s, e in v),
    }


def unique_ops(path: Path, name: str, within: str = "step_[0-9]*") -> list[tuple[str, int, int, str]]:
    """(kind, start, end, name) of the ops of all such ranges together, each op once."""
    seen = {(k, pid, corr, s): (k, s, e, n) for _, k, s, e, n, corr, pid in ops(path, name, within)}
    return sorted(seen.values())


def per(total: int, n: int) -> float:
    """What the diff reports for a total over n iterations: the float of total / n."""
    return total / n


def exact_delta(total_b: int, n_b: int, total_a: int, n_a: int) -> Fraction:
    return Fraction(total_b, n_b) - Fraction(total_a, n_a)
