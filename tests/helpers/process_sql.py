"""The process view written independently, in SQL over the export, for the tests to compare
against: which thread is main, and which GPU ops each NVTX range holds.

Definitions, written from the words, not from the code:
- a GPU op (kernel, memcpy, memset) is launched by the runtime call with its correlation ID
  in its process;
- the main thread of a process is the thread with NVTX ranges whose ranges hold the start of
  the most launching calls' ops of the process (ties: more ops launched itself, more
  ranges, lower tid);
- a range holds an op when the op's launching call is on the range's thread and inside the
  range (nsys), or, for a range on its process's main thread, when the call is made by
  another thread of the process and starts while the range is open.
"""
from __future__ import annotations

import sqlite3
from collections import defaultdict

OP_TABLES = (("CUPTI_ACTIVITY_KIND_KERNEL", 0), ("CUPTI_ACTIVITY_KIND_MEMCPY", 1), ("CUPTI_ACTIVITY_KIND_MEMSET", 2))
RANGE_TYPES = "(59, 60, 70, 71)"


def connect(path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = " UNION ALL ".join(f"SELECT {kind} AS kind, rowid AS id, correlationId AS corr, globalPid AS gpid FROM {t}"
                             for t, kind in OP_TABLES if t in tables)
    # Temporary tables live outside the (read-only) export.
    con.executescript(f"""
        CREATE TEMP TABLE launch AS
            SELECT o.kind, o.id, r.globalTid AS gtid, r.globalTid >> 24 AS pid, r.start AS cs, r.end AS ce
            FROM ({ops}) o JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
              ON r.correlationId = o.corr AND (r.globalTid >> 24) = (o.gpid >> 24);
        CREATE INDEX temp.launch_pid_cs ON launch(pid, cs);
        CREATE TEMP TABLE rng AS
            SELECT n.rowid AS rid, n.globalTid AS gtid, n.globalTid >> 24 AS pid, n.start AS s,
                   coalesce(n.end, (SELECT max(max(start, coalesce(end, start))) FROM NVTX_EVENTS
                                    WHERE eventType IN {RANGE_TYPES})) AS e,
                   coalesce(sv.value, n.text) AS text
            FROM NVTX_EVENTS n LEFT JOIN StringIds sv ON sv.id = n.textId
            WHERE n.eventType IN {RANGE_TYPES} AND n.endGlobalTid IS NULL;
        CREATE INDEX temp.rng_gtid ON rng(gtid, s);
        -- per thread, the furthest end reached by ranges starting at or before s: some range of
        -- the thread is open at time t iff reach (at the last s <= t) >= t
        CREATE TEMP TABLE reach AS
            SELECT gtid, s, max(e) OVER (PARTITION BY gtid ORDER BY s, rid ROWS UNBOUNDED PRECEDING) AS reach
            FROM rng;
        CREATE INDEX temp.reach_gtid ON reach(gtid, s);
    """)
    return con


def main_threads(con: sqlite3.Connection) -> dict[int, int]:
    """pid -> gtid of the main thread."""
    rows = con.execute("""
        WITH cand AS (SELECT DISTINCT gtid, pid FROM rng),
        framed AS (
            SELECT c.gtid, c.pid, (SELECT count(*) FROM launch l WHERE l.pid = c.pid AND (
                       SELECT reach FROM reach WHERE reach.gtid = c.gtid AND reach.s <= l.cs
                       ORDER BY reach.s DESC LIMIT 1) >= l.cs) AS n,
                   (SELECT count(*) FROM launch l WHERE l.gtid = c.gtid) AS own,
                   (SELECT count(*) FROM rng WHERE rng.gtid = c.gtid) AS nr
            FROM cand c)
        SELECT pid, gtid FROM framed f WHERE NOT EXISTS (
            SELECT 1 FROM framed g WHERE g.pid = f.pid AND g.gtid != f.gtid AND
              (g.n > f.n OR (g.n = f.n AND (g.own > f.own OR (g.own = f.own AND (g.nr > f.nr
               OR (g.nr = f.nr AND (g.gtid & 16777215) < (f.gtid & 16777215))))))))
    """).fetchall()
    return {pid: gtid for pid, gtid in rows}


def held_ops(con: sqlite3.Connection, where: str = "1", params: dict | None = None, process: bool = True,
             main: dict[int, int] | None = None) -> dict[int, set[tuple[int, int]]]:
    """NVTX rowid -> {(op kind, op rowid)} for the ranges selected by `where` (over rng, with
    named `params`)."""
    main = main_threads(con) if main is None else main
    con.execute("DROP TABLE IF EXISTS temp.mainthr")
    con.execute("CREATE TEMP TABLE mainthr(gtid INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO mainthr VALUES (?)", [(g,) for g in main.values()])
    rows = con.execute(f"""
        SELECT rng.rid, l.kind, l.id FROM rng JOIN launch l ON l.pid = rng.pid AND l.cs >= rng.s AND l.cs <= rng.e
        WHERE ({where}) AND (
              (l.gtid = rng.gtid AND l.ce <= rng.e)
           OR (:process AND l.gtid != rng.gtid AND rng.gtid IN (SELECT gtid FROM mainthr)))
    """, {**(params or {}), "process": int(process)}).fetchall()
    out: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for rid, kind, op in rows:
        out[rid].add((kind, op))
    return out


def model_held_ops(trace, model, range_rowids) -> dict[int, set[tuple[int, int]]]:
    """The same map from the model (range rowid -> {(op kind, op rowid)})."""
    pos_of = {int(r): i for i, r in enumerate(trace.ranges["rowid"].to_numpy())}
    kinds = trace.ops["kind"].to_numpy()
    rowids = trace.ops["rowid"].to_numpy()
    out = {}
    for rid in range_rowids:
        ops = model.ops_of([pos_of[int(rid)]])
        out[int(rid)] = set(zip(kinds[ops].tolist(), rowids[ops].tolist()))
    return out
