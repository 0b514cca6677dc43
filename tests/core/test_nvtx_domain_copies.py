"""nsys's NVTX reports join each range to its domain's create events one row per creating thread
(their `domains` table is grouped by domain and thread, joined by process): a domain created on two
threads of a process has each of its ranges counted twice in NVIDIA's nvtx_sum. `stats --attribution
nsys` counted them once, so its CSV differed from NVIDIA's on such exports; now it matches, and a
note says so. The committed DDP sample (domain NCCL, created once per process) with a second create
of NCCL on another thread of the first process; the expected rows from NVIDIA's own join, in SQL."""
from __future__ import annotations

import pytest

from helpers.xz_samples import plain
from conftest import SAMPLES, mutated_copy
from helpers.export_sql import sql_rows
from nsight_tui.parsers.nsys.reports import build_report
from nsight_tui.parsers.read.load import load_trace

SRC = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")

# NVIDIA's nvtx_sum join, as its report's SQL does it: one domain row per (domainId, thread)
NSYS_ROWS = """
WITH domains AS (SELECT min(start), domainId AS id, globalTid, text AS name FROM NVTX_EVENTS
                 WHERE eventType = 75 GROUP BY 2, 3),
     maxts AS (SELECT max(max(start), max(end)) AS m FROM NVTX_EVENTS),
     nvtx AS (SELECT coalesce(ne.end, (SELECT m FROM maxts)) - ne.start AS duration,
                     CASE WHEN d.name NOT NULL AND sid.value IS NOT NULL THEN d.name || ':' || sid.value
                          WHEN d.name NOT NULL AND sid.value IS NULL THEN d.name || ':' || ne.text
                          WHEN d.name IS NULL AND sid.value NOT NULL THEN sid.value
                          ELSE ne.text END AS tag
              FROM NVTX_EVENTS AS ne
              LEFT JOIN domains AS d ON ne.domainId = d.id
                   AND (ne.globalTid & 0x0000FFFFFF000000) = (d.globalTid & 0x0000FFFFFF000000)
              LEFT JOIN StringIds AS sid ON ne.textId = sid.id
              WHERE ne.eventType IN (59, 60, 70, 71))
SELECT tag, sum(duration), count(*) FROM nvtx GROUP BY tag
"""


@pytest.fixture(scope="module")
def doubled(tmp_path_factory):
    (gtid,) = sql_rows(SRC, """SELECT DISTINCT n.globalTid FROM NVTX_EVENTS n WHERE (n.globalTid >> 24) =
        (SELECT globalTid >> 24 FROM NVTX_EVENTS WHERE eventType = 75 ORDER BY start LIMIT 1)
        AND n.globalTid NOT IN (SELECT globalTid FROM NVTX_EVENTS WHERE eventType = 75) LIMIT 1""")[0]
    return mutated_copy(tmp_path_factory.mktemp("domains"), "nccl_twice",
                        "INSERT INTO NVTX_EVENTS (start, eventType, globalTid, domainId, text) "
                        f"SELECT start + 1, 75, {gtid}, domainId, text FROM NVTX_EVENTS WHERE eventType = 75 "
                        "ORDER BY start LIMIT 1", src=SRC)


def rows(report):
    i_total, i_n, i_range = (report.headers.index(h) for h in ("Total Time (ns)", "Instances", "Range"))
    # a default-domain range is named ":text" in the model; nsys prints the text alone (as render.nsys does)
    return {r[i_range].removeprefix(":"): (r[i_total], r[i_n]) for r in report.rows}


def test_nsys_counts_a_twice_created_domains_ranges_twice(doubled):
    want = {tag: (total, n) for tag, total, n in sql_rows(doubled, NSYS_ROWS)}
    once = {tag: (total, n) for tag, total, n in sql_rows(SRC, NSYS_ROWS)}
    assert want["NCCL:ncclAllReduce"][1] > once["NCCL:ncclAllReduce"][1]  # the mutation doubles half of them
    trace = load_trace(doubled)
    assert rows(build_report(trace, "nvtx_sum", "nsys")) == want
    # every other figure counts a range once: the process attribution's nvtx_sum is the unmutated file's
    assert rows(build_report(trace, "nvtx_sum", "process")) == once
    assert any("NVTX domain NCCL is created on 2 threads of one process" in n for n in trace.info.notes)


def test_a_domain_created_once_per_process_is_unchanged():
    want = {tag: (total, n) for tag, total, n in sql_rows(SRC, NSYS_ROWS)}
    trace = load_trace(SRC)
    assert rows(build_report(trace, "nvtx_sum", "nsys")) == want
    assert not any("NVTX domain" in n for n in trace.info.notes)
