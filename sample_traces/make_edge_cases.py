"""Make the `edge_*.sqlite` samples (committed `xz -9`d): small_ctx128_fwd (committed as .sqlite.xz) cut to its last
two iterations (step_1, step_2), with NVTX situations nsys's own reports treat in particular ways
added by SQL. NVIDIA's CSVs for each (sample_traces/oracle/edge_*_REPORT.csv) come from the real
`nsys stats` run on exactly these files.

    python sample_traces/make_edge_cases.py OUT_DIR

edge_overlap       start/end ranges overlapping push/pop ranges without nesting, and one
                   start/end range that encloses a push/pop range exactly
edge_unended       a push/pop range never popped (end NULL), and an existing one made unended
edge_cross_thread  a start/end range ending on another thread of the process, and one whose
                   endGlobalTid names its own thread
edge_duplicate     two identical copies of a range (same start, end, thread): `forward`
                   and one `computing_softmax`
edge_unended_mark  an unended start/end range, and a mark after every range event
edge_deep          300 push/pop ranges nested one in the other around one attention block
"""
from __future__ import annotations

import lzma
import shutil
import sqlite3
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent / "small_ctx128_fwd.sqlite.xz"
PUSHPOP, STARTEND, MARK = 59, 60, 34

# The cut: everything before step_1 goes, except the NVTX domain events and the config mark.
CUT = """
WITH s AS (SELECT n.start AS t FROM NVTX_EVENTS n JOIN StringIds i ON i.id = n.textId WHERE i.value = 'step_1')
DELETE FROM {table} WHERE start < (SELECT t FROM s) {extra}
"""


def _range(con, name: str, nth: int = 0, within: str | None = None) -> tuple[int, int, int]:
    """(start, end, globalTid) of the nth range called `name` (in time order), optionally
    inside the range called `within`."""
    rows = con.execute(
        "SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS n JOIN StringIds i ON i.id = n.textId "
        "WHERE i.value = ? AND n.eventType = ? ORDER BY n.start", (name, PUSHPOP)).fetchall()
    if within is not None:
        w0, w1, _ = _range(con, within)
        rows = [r for r in rows if w0 <= r[0] and r[1] <= w1]
    return rows[nth]


def _add(con, start, end, gtid, text, event_type=STARTEND, end_gtid=None):
    range_id = con.execute("SELECT coalesce(max(rangeId), 0) + 1 FROM NVTX_EVENTS").fetchone()[0]
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, domainId) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                (start, end, event_type, range_id if event_type == STARTEND else None, text, gtid, end_gtid))


def overlap(con):
    s1 = _range(con, "scaled_dot_product_attention", 5, within="step_1")
    s2 = _range(con, "scaled_dot_product_attention", 5, within="step_2")
    _add(con, s1[0], s2[0], s1[2], "overlap_steps")  # from inside step_1 to inside step_2
    soft = _range(con, "computing_softmax", 2, within="step_1")
    mm = _range(con, "final_matmul", 2, within="step_1")
    _add(con, (soft[0] + soft[1]) // 2, (mm[0] + mm[1]) // 2, soft[2], "overlap_inner")
    sdpa = _range(con, "scaled_dot_product_attention", 7, within="step_2")
    _add(con, sdpa[0] - 1, sdpa[1] + 1, sdpa[2], "encloses_sdpa")


def unended(con):
    soft = _range(con, "computing_softmax", 4, within="step_1")
    con.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE start = ? AND globalTid = ? AND eventType = ?",
                (soft[0], soft[2], PUSHPOP))
    sdpa = _range(con, "scaled_dot_product_attention", 9, within="step_2")
    _add(con, sdpa[0] - 5, None, sdpa[2], "pushed_never_popped", event_type=PUSHPOP)


def cross_thread(con):
    fwd = _range(con, "forward", 0, within="step_1")
    other = con.execute(
        "SELECT globalTid FROM ThreadNames WHERE globalTid != ? AND (globalTid >> 24) = (? >> 24) "
        "ORDER BY globalTid LIMIT 1", (fwd[2], fwd[2])).fetchone()[0]
    _add(con, fwd[0] - 10, fwd[1] + 10, fwd[2], "ends_on_other_thread", end_gtid=other)
    fwd2 = _range(con, "forward", 0, within="step_2")
    _add(con, fwd2[0] - 10, fwd2[1] + 10, fwd2[2], "end_tid_is_own_thread", end_gtid=fwd2[2])


def duplicate(con):
    for name, within, nth in (("forward", "step_2", 0), ("computing_softmax", "step_2", 3)):
        r = _range(con, name, nth, within=within)
        con.execute("INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS WHERE start = ? AND end = ? "
                    "AND globalTid = ? AND eventType = ?", (r[0], r[1], r[2], PUSHPOP))


def unended_mark(con):
    sdpa = _range(con, "scaled_dot_product_attention", 3, within="step_2")
    _add(con, sdpa[0] - 5, None, sdpa[2], "started_never_ended")
    last = con.execute("SELECT max(max(start), max(coalesce(end, 0))) FROM NVTX_EVENTS").fetchone()[0]
    con.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid) VALUES (?, ?, ?, ?)",
                (last + 5_000_000, MARK, "late_mark", sdpa[2]))


def deep(con, levels: int = 300):
    sdpa = _range(con, "scaled_dot_product_attention", 1, within="step_2")
    for i in range(levels):
        _add(con, sdpa[0] - levels + i, sdpa[1] + levels - i, sdpa[2], f"deep_{i:03d}", event_type=PUSHPOP)


CASES = {"edge_overlap": overlap, "edge_unended": unended, "edge_cross_thread": cross_thread,
         "edge_duplicate": duplicate, "edge_unended_mark": unended_mark, "edge_deep": deep}


def make(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for name, edit in CASES.items():
        path = out_dir / f"{name}.sqlite"
        tmp = path.with_suffix(".tmp")
        with lzma.open(SRC) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(tmp)
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                      "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
            con.execute(CUT.format(table=table, extra=""))
        con.execute(CUT.format(table="NVTX_EVENTS", extra=f"AND eventType IN ({PUSHPOP}, {MARK}) "
                                                          "AND coalesce(text, '') NOT LIKE 'nsight-tui:config%'"))
        edit(con)
        con.commit()
        con.execute("PRAGMA page_size = 512")  # ~90 near-empty tables: small pages halve the file
        con.execute("VACUUM")
        con.close()
        tmp.replace(path)
        made.append(path)
    return made


if __name__ == "__main__":
    for p in make(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent)):
        print(p, p.stat().st_size)
