"""Process-wide attribution, checked against the rule written independently in SQL on the
real exports, and against NVIDIA's numbers where both rules agree."""
from __future__ import annotations

import csv
import sqlite3

import numpy as np
import pytest

from conftest import SHARED, sample_traces, shared_trace
from nsight_tui.parsers.load import load_trace
from nsight_tui.parsers.model import range_model

RANGE_EVENTS = "eventType IN (59, 60, 70, 71) AND endGlobalTid IS NULL"

# Per process, the thread with NVTX ranges whose API calls launch the most kernels.
MAIN_THREADS_SQL = f"""
WITH launches AS (
    SELECT r.globalTid AS gtid, count(*) AS n
    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
      ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
    WHERE r.globalTid IN (SELECT globalTid FROM NVTX_EVENTS WHERE {RANGE_EVENTS})
    GROUP BY 1)
SELECT gtid FROM launches l
WHERE n = (SELECT max(n) FROM launches l2 WHERE (l2.gtid >> 24) = (l.gtid >> 24))
"""

# Kernel/range pairs for ranges named :name under the process rule, written from its definition:
# the launching call is enclosed by the range on its own thread, or, when no range on its own
# thread encloses it and the range is on the main thread, the range is open at the call's start.
PAIRS_SQL = f"""
WITH kr AS (
    SELECT k.rowid AS kid, r.start AS rs, r.end AS re, r.globalTid AS gtid
    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
      ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)),
rng AS (
    SELECT n.start AS s, n.end AS e, n.globalTid AS gtid, coalesce(s.value, n.text) AS text
    FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE {RANGE_EVENTS}),
own AS (
    SELECT DISTINCT kr.kid FROM kr JOIN rng ON rng.gtid = kr.gtid AND rng.s <= kr.rs AND rng.e >= kr.re)
SELECT count(*) FROM kr JOIN rng ON rng.text = :name AND (
       (rng.gtid = kr.gtid AND rng.s <= kr.rs AND rng.e >= kr.re)
    OR (:process AND kr.kid NOT IN (SELECT kid FROM own) AND kr.gtid NOT IN ({MAIN_THREADS_SQL})
        AND rng.gtid IN ({MAIN_THREADS_SQL}) AND (rng.gtid >> 24) = (kr.gtid >> 24)
        AND rng.s <= kr.rs AND rng.e >= kr.rs))
"""


def sql_pairs(path, name: str, process: bool) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(PAIRS_SQL, {"name": name, "process": int(process)}).fetchone()[0]
    finally:
        con.close()


def model_kernels(trace, mode: str, name: str) -> int:
    m = range_model(trace, mode)
    ids = m.ranges_named(name)
    return int(m.kernel_count[ids].sum())


GPT_TRACES = ["small_ctx128_threads", "xl_ctx256", "small_ctx128_graphs", "medium_ctx1024_fwd_flash"]


@pytest.mark.parametrize("name", GPT_TRACES)
@pytest.mark.parametrize("range_name", ["forward", "backward", "optimizer"])
def test_process_rule_matches_sql(name, range_name):
    path = shared_trace(name)
    trace = load_trace(path)
    for mode in ("nsys", "process"):
        assert model_kernels(trace, mode, range_name) == sql_pairs(path, range_name, mode == "process"), mode


def _samples_with(range_name):
    out = []
    for path in sample_traces():
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        n = con.execute("SELECT count(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                        "WHERE coalesce(s.value, n.text) = ?", (range_name,)).fetchone()[0]
        con.close()
        if n:
            out.append(path)
    return out


def test_committed_training_samples_follow_the_process_rule():
    paths = _samples_with("backward")
    if not paths:
        pytest.skip("no committed training sample yet")
    for path in paths:
        trace = load_trace(path)
        for range_name in ("forward", "backward", "optimizer"):
            assert model_kernels(trace, "process", range_name) == sql_pairs(path, range_name, True), (path, range_name)
        # the point of the mode: backward has its GEMMs, not the odd kernel nsys keeps
        assert model_kernels(trace, "process", "backward") > 10 * max(1, model_kernels(trace, "nsys", "backward"))


def test_backward_is_empty_under_nsys_and_full_under_process():
    trace = load_trace(shared_trace("small_ctx128_threads"))
    # NVIDIA's own numbers for :backward (nvtx_kern_sum, launching-thread rule).
    with open(SHARED / "oracle" / "small_ctx128_threads_nvtx_kern_sum.csv") as fh:
        nvidia = sum(int(r["Kern Inst"]) for r in csv.DictReader(fh) if r["NVTX Range"] == ":backward")
    assert model_kernels(trace, "nsys", "backward") == nvidia
    assert nvidia < 10
    assert model_kernels(trace, "process", "backward") > 1000
    # The autograd thread launched the backward work; it is not the main thread.
    m = range_model(trace, "process")
    (main,) = m.main_threads.values()
    assert trace.threads[main] == "python3"
    # Forward and optimizer kernels are launched by the main thread: both modes agree.
    for name in ("forward", "optimizer"):
        assert model_kernels(trace, "nsys", name) == model_kernels(trace, "process", name)


def test_loader_thread_keeps_its_own_ranges():
    trace = load_trace(shared_trace("small_ctx128_threads"))
    m = range_model(trace, "process")
    groups = {g.label.split(" / ")[1]: g for g in m.thread_groups}
    loader = [g for label, g in groups.items() if not g.is_main]
    assert loader and all(r.label.startswith("load_batch_") for g in loader for r in g.roots)


def test_graph_launch_kernels_follow_their_launch():
    """CUDA graphs: one cudaGraphLaunch, many kernels under one correlation ID; each kernel
    belongs to the ranges around its launch."""
    path = shared_trace("small_ctx128_graphs")
    trace = load_trace(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    expected = con.execute(f"""
        SELECT count(DISTINCT k.rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start AND n.end >= r.end
        WHERE k.graphNodeId IS NOT NULL AND n.{RANGE_EVENTS}""").fetchone()[0]
    per_launch = con.execute(
        "SELECT max(c) FROM (SELECT count(*) AS c FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE graphNodeId IS NOT NULL GROUP BY correlationId)").fetchone()[0]
    con.close()
    assert per_launch > 10 and expected > 1000
    m = range_model(trace, "nsys")
    in_graph = np.zeros(len(trace.ops), dtype=bool)
    kernels = np.flatnonzero(trace.ops["kind"].to_numpy() == 0)
    in_graph[kernels] = trace.op_details(kernels)["graph_node"].to_numpy() >= 0
    attributed = np.zeros(len(trace.ops), dtype=bool)
    attributed[m.pair_op] = True
    assert int(attributed[in_graph].sum()) == expected


def test_correlation_ids_repeat_across_processes_and_are_joined_per_process():
    path = shared_trace("mfu_2gpu_before")
    trace = load_trace(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    repeated = con.execute(
        "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "GROUP BY 1 HAVING count(DISTINCT globalTid >> 24) > 1)").fetchone()[0]
    joined = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)").fetchone()[0]
    con.close()
    assert repeated > 10
    ops = trace.kernels
    api = trace.api
    linked = ops[ops["api"] >= 0]
    assert len(linked) == joined
    api_pid = api["gtid"].to_numpy()[linked["api"].to_numpy()] >> 24
    assert (api_pid == linked["gpid"].to_numpy() >> 24).all()
    m = range_model(trace, "process")
    assert len(m.main_threads) == 2  # one main thread per process
