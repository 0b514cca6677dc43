"""nsys's host<->device copies with the CUDA calls that issued them, read on first use.

One row per copy on a device: the copy's start, end and bytes, its direction (`copyKind`: 1 HtoD,
2 DtoH, ...) and memory kinds (`srcKind`/`dstKind`: 0 pageable, 1 pinned, ...), then the issuing
runtime call's start, end and name (None where the copy has no call in the export). Read when an
analysis first asks (`Trace.memcpy_calls`), so loading a trace never reads them: from the SQLite
export with one query, from nsys's Parquet/Arrow folders (no SQL there) with the same joins in
pandas.
"""
from __future__ import annotations

from pathlib import Path

MEMCPY, RUNTIME, STRINGS = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"

# Only rows whose values are what nsys writes (integers, end >= start) count, as the loader
# leaves the others out: a text `start` in one API call must not stop the whole report.
_SQL = """
SELECT m.start, m.end, m.bytes, m.copyKind, m.srcKind, m.dstKind, r.start, r.end, s.value
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
  AND (r.globalTid >> 24) = (m.globalPid >> 24)
  AND typeof(r.start) = 'integer' AND typeof(r.end) = 'integer' AND r.end >= r.start
LEFT JOIN StringIds s ON s.id = r.nameId
WHERE m.deviceId = ? AND typeof(m.start) = 'integer' AND typeof(m.end) = 'integer' AND m.end >= m.start
  AND typeof(m.bytes) = 'integer' AND typeof(m.copyKind) = 'integer'
  AND typeof(m.srcKind) = 'integer' AND typeof(m.dstKind) = 'integer'
ORDER BY m.start"""
# Every column the rows need, by table: an export without one of them has no rows to give (the
# findings that read them say so in their `not_checked`), rather than stopping the report.
COLUMNS = {
    MEMCPY: ("start", "end", "bytes", "copyKind", "srcKind", "dstKind", "correlationId", "globalPid", "deviceId"),
    RUNTIME: ("start", "end", "correlationId", "globalTid", "nameId"),
    STRINGS: ("id", "value"),
}


def missing_columns(schema, needed: dict[str, tuple[str, ...]] = COLUMNS) -> list[str]:
    """`TABLE` or `TABLE.column` for each of `needed` the export lacks."""
    out = []
    for table, columns in needed.items():
        if not schema.has(table):
            out.append(table)
        else:
            out += [f"{table}.{col}" for col in columns if not schema.has(table, col)]
    return out


def read_memcpy_calls(path: Path, export_kind: str, schema, device: int) -> list[tuple] | None:
    """The copies on `device` by start, each (start, end, bytes, copyKind, srcKind, dstKind,
    call start, call end, call name); None where the export has no copies or lacks a column."""
    if not schema.has(MEMCPY) or missing_columns(schema):
        return None
    if export_kind == "sqlite":
        from nsight_tui.parsers.read.source import connect_readonly

        con = connect_readonly(path)
        try:
            return con.execute(_SQL, (device,)).fetchall()
        finally:
            con.close()
    return _columnar_rows(path, device)


def _columnar_rows(path: Path, device: int) -> list[tuple]:
    """_SQL's rows from nsys's Parquet/Arrow folders: the same LEFT JOINs in pandas, ordered by
    the copy's start."""
    import pandas as pd

    from nsight_tui.parsers.read.columns import open_tables

    m_cols = list(COLUMNS[MEMCPY])
    with open_tables(path, probe=False) as tables:
        m = tables.read(MEMCPY, m_cols)
        r = tables.read(RUNTIME, ["start", "end", "correlationId", "globalTid", "nameId"])
        s = tables.read(STRINGS, ["id", "value"])
    mf = pd.DataFrame({k: m.text(k) for k in m_cols})
    mf = mf[mf["deviceId"] == device]
    mf["pid"] = [None if g is None else g >> 24 for g in mf["globalPid"]]
    rf = pd.DataFrame({"r_start": r.text("start"), "r_end": r.text("end"), "correlationId": r.text("correlationId"),
                       "pid": [None if g is None else g >> 24 for g in r.text("globalTid")], "nameId": r.text("nameId")})
    sf = pd.DataFrame({"nameId": s.text("id"), "value": s.text("value")})
    j = mf.merge(rf, on=["correlationId", "pid"], how="left").merge(sf, on="nameId", how="left")
    j = j.sort_values("start", kind="stable")
    cols = ["start", "end", "bytes", "copyKind", "srcKind", "dstKind", "r_start", "r_end", "value"]
    return [tuple(None if pd.isna(v) else v for v in row) for row in j[cols].itertuples(index=False)]
