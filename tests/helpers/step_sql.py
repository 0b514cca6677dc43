"""The step on both clocks, written from the definitions in SQL and plain Python over
the export, sharing no code with nsight_tui. Not a test module.

- an iteration is a `step_N` or `warmup_N` NVTX range (where a copy in another NVTX domain nests
  the same iteration, the innermost);
- its CPU time is its span; its GPU time is from the first start to the last end of the GPU ops
  whose launching runtime call (same correlation ID and process) starts inside it;
- its period runs from its start to the start of the next iteration on its thread; the last
  iteration's ends at the later of its range's end and its GPU work's end."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

_ITERATIONS = """
WITH r AS (
    SELECT e.rowid AS id, e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
    FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
    WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL
)
SELECT t.id, t.tid, t.start, t.end, t.name FROM r t
WHERE (t.name GLOB 'step_[0-9]*' OR t.name GLOB 'warmup_[0-9]*' OR t.name GLOB '*:step_[0-9]*'
       OR t.name GLOB '*:warmup_[0-9]*')
  AND NOT EXISTS (SELECT 1 FROM r q WHERE q.tid = t.tid AND q.id != t.id AND q.start >= t.start AND q.end <= t.end
                  AND (q.name GLOB 'step_[0-9]*' OR q.name GLOB 'warmup_[0-9]*'
                       OR q.name GLOB '*:step_[0-9]*' OR q.name GLOB '*:warmup_[0-9]*'))
ORDER BY t.tid, t.start
"""

# The GPU ops and the runtime calls by (correlation ID, process), in temporary tables indexed for
# the lookups below (made once per connection: the export's own tables have no index there, and
# SQLite built a throw-away one over every op for each iteration asked).
_OPS = "SELECT correlationId AS corr, globalPid >> 24 AS pid, start, end FROM {table}"
_INDEXED = (
    "CREATE TEMP TABLE IF NOT EXISTS step_sql_calls AS "
    "SELECT correlationId AS corr, globalTid >> 24 AS pid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "CREATE INDEX IF NOT EXISTS temp.step_sql_calls_pid ON step_sql_calls(pid, start)",
    "CREATE TEMP TABLE IF NOT EXISTS step_sql_ops AS {ops}",
    "CREATE INDEX IF NOT EXISTS temp.step_sql_ops_corr ON step_sql_ops(corr, pid)",
)
_GPU_SPAN = """
SELECT min(o.start), max(o.end) FROM step_sql_calls c JOIN step_sql_ops o ON o.corr = c.corr AND o.pid = c.pid
WHERE c.pid = :pid AND c.start >= :s AND c.start <= :e
"""


@dataclass
class Iteration:
    name: str
    pid: int
    start: int
    end: int  # NVTX
    gpu_start: int | None
    gpu_end: int | None
    period: int

    @property
    def cpu(self) -> int:
        return self.end - self.start

    @property
    def gpu(self) -> int:
        return 0 if self.gpu_start is None else self.gpu_end - self.gpu_start


def iterations(path: Path) -> list[Iteration]:
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return iterations_of(con)
    finally:
        con.close()


def _gpu_sql(con: sqlite3.Connection) -> str:
    """The query of one range's GPU span, its tables made on `con` first: the ops of the kernel,
    memcpy and memset tables the export has, launched by calls of the thread's process that start
    inside the range (same correlation ID and process)."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = " UNION ALL ".join(_OPS.format(table=t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                             "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables)
    for statement in _INDEXED:  # one by one: executescript would commit a caller's open transaction
        con.execute(statement.format(ops=ops))
    return _GPU_SPAN


def gpu_span(con: sqlite3.Connection, global_tid: int, start: int, end: int) -> tuple[int | None, int | None]:
    """(first start, last end) of the GPU ops launched by calls of the thread's process that start
    inside [start, end]: a range's GPU work on the GPU's clock (None, None without any)."""
    return con.execute(_gpu_sql(con), {"pid": global_tid >> 24, "s": start, "e": end}).fetchone()


def iterations_of(con: sqlite3.Connection) -> list[Iteration]:
    gpu_sql = _gpu_sql(con)
    rows = con.execute(_ITERATIONS).fetchall()
    out: list[Iteration] = []
    for i, (_, tid, s, e, name) in enumerate(rows):
        g0, g1 = con.execute(gpu_sql, {"pid": tid >> 24, "s": s, "e": e}).fetchone()
        nxt = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][1] == tid else None
        period = nxt[2] - s if nxt else max(e, g1 if g1 is not None else e) - s
        out.append(Iteration(name.split(":", 1)[-1], (tid >> 24) & 0xFFFFFF, s, e, g0, g1, period))
    return out


def steps(path: Path, pid: int | None = None) -> list[Iteration]:
    """The steady-state iterations (`step_N`), of one process when given, in time order."""
    return steps_of(iterations(path), pid)


def steps_of(its: list[Iteration], pid: int | None = None) -> list[Iteration]:
    return sorted((it for it in its if it.name.startswith("step_") and (pid is None or it.pid == pid)),
                  key=lambda it: it.start)


def python_steps(path: Path) -> list[float]:
    """The workload's own step times (ns) from its `nsight-tui:step` marks, steady state."""
    return list(python_step_marks(path).values())


def sidecar_steps(export: Path) -> list[float]:
    """A third-party run's step times (ns) from STEM.steps.json beside its committed export (`capture
    -- CMD` writes them there where the run emitted no NVTX marks), steady state."""
    import json

    stem = Path(export).name.split(".sqlite")[0]
    side = Path(export).with_name(f"{stem}.steps.json")
    if not side.is_file():
        return []
    steps = json.loads(side.read_text())["steps"]
    return [s["seconds"] * 1e9 for s in steps if str(s.get("name", "")).startswith("step_")]


def python_step_marks(path: Path) -> dict[str, float]:
    """The same, by step name (`step_3` -> ns), in the marks' order."""
    import json

    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
        con.close()
        return {}  # no NVTX at all (a third-party run: its step times went to STEM.steps.json)
    texts = [t for (t,) in con.execute("""SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:step %'""")]
    con.close()
    marks = [json.loads(t.split(" ", 1)[1]) for t in texts]
    return {m["name"]: m["seconds"] * 1e9 for m in marks if str(m.get("name", "")).startswith("step_")}


# Per CUDA call inside a step's range named {phase} (the innermost NVTX range of that name inside a
# `step_N`): its thread, its step and its host time since the previous call of that thread in that
# step (ns), in call order.
PHASE_CALL_GAPS = """
WITH r0 AS (SELECT e.start, e.end, coalesce(e.text, s.value) AS name FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL),
st AS (SELECT * FROM r0 WHERE name GLOB 'step_[0-9]*'),
ph AS (SELECT st.name AS step, r0.start, r0.end FROM r0 JOIN st ON r0.start >= st.start AND r0.end <= st.end
       WHERE r0.name = '{phase}'),
c AS (SELECT r.globalTid AS tid, ph.step, r.start,
             lag(r.end) OVER (PARTITION BY r.globalTid, ph.step ORDER BY r.start) AS prev_end
      FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN ph ON r.start BETWEEN ph.start AND ph.end)
SELECT tid, step, start - prev_end FROM c WHERE prev_end IS NOT NULL ORDER BY tid, step, start"""


def phase_call_gaps(path: Path, phase: str) -> dict[tuple, list[int]]:
    """PHASE_CALL_GAPS over the export: (thread, step) -> the host time before each call, in order."""
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        by: dict[tuple, list[int]] = {}
        for tid, step, gap in con.execute(PHASE_CALL_GAPS.format(phase=phase)):
            by.setdefault((tid, step), []).append(gap)
        return by
    finally:
        con.close()
