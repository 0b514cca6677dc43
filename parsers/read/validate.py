"""Rows an nsys export should never hold: NULL where nsys always writes a value, text or
blobs where an integer belongs. One place decides what happens to them.

Policy (the README's "Bad input" paragraph says the same):
- an event row (kernel, memcpy, memset, CUDA API call, NVTX event) with a missing or
  non-integer value in a column the tools need is left out, and a note says how many rows
  of which table were left out and why;
- if bad rows are the majority of a table, that is not a few damaged rows but a file nsys
  did not write: the file is refused in one line;
- small lookup tables are repaired where the value can be recovered: `PROCESSES.pid` from
  its globalPid, a NULL `StringIds.value` shown as `<string ID>`; rows that cannot be
  (a thread name without its thread, an ANALYSIS_DETAILS duration or a memcpy-kind id that
  is not an integer) are skipped, with a note.

Reading stays fast on good files: the loader reads without these filters first, and only
when a reader meets a value it cannot turn into an integer (`BadValues`) does `scan`
count the bad rows with SQL `typeof` and hand the loader one WHERE clause per table. The
check is SQL over the file, so it does not depend on how the columns are then fetched.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.source import Schema


class BadValues(Exception):
    """A reader met a value it cannot read as an integer: time to `scan` the file."""


# Timestamps (ns) beyond +-2^61 are not a clock's (epoch nanoseconds stay under it until 2043):
# within it, end - start and a sum of a few durations fit int64, so nothing downstream overflows.
TIME_LIMIT = 2**61


@dataclass(frozen=True)
class TableRule:
    what: str  # what a row is, for the note ("kernels")
    required: tuple[str, ...]  # integer columns without which a row is useless
    optional: tuple[str, ...] = ()  # integer columns that may be NULL (a default applies), never text
    event_table: bool = True  # a majority of bad rows refuses the file
    timed: bool = False  # start/end columns: end < start or a timestamp past TIME_LIMIT is a bad row


RULES: dict[str, TableRule] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": TableRule(
        "kernels", ("start", "end", "demangledName", "shortName"),
        ("deviceId", "streamId", "correlationId", "globalPid"), timed=True),
    "CUPTI_ACTIVITY_KIND_MEMCPY": TableRule(
        "memcpys", ("start", "end"), ("deviceId", "streamId", "correlationId", "globalPid", "copyKind"), timed=True),
    "CUPTI_ACTIVITY_KIND_MEMSET": TableRule(
        "memsets", ("start", "end"), ("deviceId", "streamId", "correlationId", "globalPid"), timed=True),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": TableRule(
        "CUDA graph launches", ("start", "end"), ("deviceId", "streamId", "correlationId", "globalPid", "graphId"),
        timed=True),
    "CUPTI_ACTIVITY_KIND_RUNTIME": TableRule(
        "CUDA API calls", ("start", "end", "nameId"), ("globalTid", "correlationId"), timed=True),
    "NVTX_EVENTS": TableRule(
        "NVTX events", ("start", "eventType", "globalTid"), ("end", "endGlobalTid", "textId", "domainId"), timed=True),
    "ThreadNames": TableRule("thread names", ("globalTid", "nameId"), event_table=False),
    "PROCESSES": TableRule("processes", ("globalPid",), event_table=False),
    "StringIds": TableRule("strings", ("id",), event_table=False),
    "ANALYSIS_DETAILS": TableRule("analysis details", ("duration",), event_table=False),
    "ENUM_CUDA_MEMCPY_OPER": TableRule("memcpy kinds", ("id",), event_table=False),
}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class TableCheck:
    table: str
    rows: int
    bad: int
    reasons: dict[str, int]  # "start is NULL" -> rows
    where: str  # SQL condition keeping the good rows ("" when all are good)


@dataclass
class Checks:
    """What `scan` found; `Checks()` (nothing scanned) filters nothing."""

    tables: dict[str, TableCheck] = field(default_factory=dict)
    null_strings: int = 0  # StringIds rows whose value is NULL (shown as <string ID>)
    bad_pids: int = 0  # PROCESSES rows whose pid is not an integer (taken from globalPid)

    @property
    def scanned(self) -> bool:
        return bool(self.tables) or self.null_strings > 0 or self.bad_pids > 0

    def where(self, table: str, prefix: str = " WHERE ") -> str:
        """` WHERE <good rows>` for this table, or "" when nothing is to be left out."""
        check = self.tables.get(table)
        return f"{prefix}{check.where}" if check and check.where else ""

    def notes(self) -> list[str]:
        out = []
        for check in self.tables.values():
            rule = RULES[check.table]
            why = "; ".join(f"{reason} in {n:,}" for reason, n in check.reasons.items())
            verb = "left out" if rule.event_table else "skipped"
            out.append(f"{verb} {check.bad:,} of {check.rows:,} {rule.what} ({check.table}): {why}")
        if self.null_strings:
            out.append(f"{self.null_strings:,} names in StringIds are NULL: shown as <string ID>")
        if self.bad_pids:
            out.append(f"{self.bad_pids:,} PROCESSES rows have no integer pid: pid taken from globalPid")
        return out


def _time_conditions(timed: bool, columns: list[str]) -> list[tuple[str, str]]:
    """(reason, condition a good row meets) for the timestamps of a table with start and end:
    never end before start, never a timestamp past +-TIME_LIMIT (an unended NVTX range's end
    is NULL, and stays good)."""
    if not timed or "start" not in columns or "end" not in columns:
        return []
    lim = TIME_LIMIT
    return [("end before start", "(\"end\" IS NULL OR \"end\" >= \"start\")"),
            ("a timestamp beyond ±2^61 ns",
             f"(\"start\" BETWEEN -{lim} AND {lim} AND (\"end\" IS NULL OR \"end\" BETWEEN -{lim} AND {lim}))")]


def _column_problems(con: sqlite3.Connection, table: str, required: list[str],
                     optional: list[str], timed: bool = False) -> tuple[int, int, dict[str, int], str]:
    """(rows, bad rows, reasons, keep condition) for one table, in one pass of SQL."""
    keep = [f"typeof({_ident(c)}) = 'integer'" for c in required]
    keep += [f"typeof({_ident(c)}) IN ('integer', 'null')" for c in optional]
    if not keep:
        return 0, 0, {}, ""
    # the timestamp conditions count among the integer rows only (text compares as larger)
    times = _time_conditions(timed, [*required, *optional])
    cond = " AND ".join(keep + [c for _, c in times])
    counts = [f"sum({_ident(c)} IS NULL), sum(typeof({_ident(c)}) NOT IN ('integer', 'null'))" for c in required]
    counts += [f"0, sum(typeof({_ident(c)}) NOT IN ('integer', 'null'))" for c in optional]
    typed = " AND ".join(keep)
    counts += [f"0, sum(({typed}) AND NOT {c})" for _, c in times]
    row = con.execute(f"SELECT count(*), sum(NOT ({cond})), {', '.join(counts)} FROM {_ident(table)}").fetchone()
    total, bad = int(row[0]), int(row[1] or 0)
    reasons = {}
    for i, c in enumerate([*required, *optional]):
        nulls, others = int(row[2 + 2 * i] or 0), int(row[3 + 2 * i] or 0)
        if nulls:
            reasons[f"{c} is NULL"] = nulls
        if others:
            reasons[f"{c} is not an integer"] = others
    base = 2 + 2 * len([*required, *optional])
    for i, (reason, _) in enumerate(times):
        n = int(row[base + 2 * i + 1] or 0)
        if n:
            reasons[reason] = n
    return total, bad, reasons, cond if bad else ""


def scan(con: sqlite3.Connection, schema: Schema, path: Path) -> Checks:
    """Count the bad rows of every table the loader reads; refuse a file whose event
    tables are mostly bad. Raises TraceError (one line) for a refusal."""
    checks = Checks()
    for table, rule in RULES.items():
        if not schema.has(table):
            continue
        required = [c for c in rule.required if schema.has(table, c)]
        optional = [c for c in rule.optional if schema.has(table, c)]
        if table == "CUPTI_ACTIVITY_KIND_KERNEL" and "demangledName" in required:
            required.remove("shortName")  # the loader names kernels by demangledName when it has it
        total, bad, reasons, cond = _column_problems(con, table, required, optional, rule.timed)
        if not bad:
            continue
        if rule.event_table and 2 * bad > total:
            worst = max(reasons, key=lambda k: reasons[k])
            raise TraceError(f"{path}: {table} is not as nsys writes it: {worst} in {reasons[worst]:,} of "
                             f"{total:,} rows ({bad:,} bad rows in all); refusing rather than guessing")
        checks.tables[table] = TableCheck(table, total, bad, reasons, cond)
    if schema.has("StringIds", "value"):
        checks.null_strings = con.execute("SELECT count(*) FROM StringIds WHERE value IS NULL").fetchone()[0]
    if schema.has("PROCESSES", "pid"):
        checks.bad_pids = con.execute(
            "SELECT count(*) FROM PROCESSES WHERE typeof(pid) != 'integer' AND typeof(globalPid) = 'integer'"
        ).fetchone()[0]
    return checks
