"""Process-wide attribution and the main-thread choice, checked against the rules written
independently in SQL (tests/helpers/process_sql.py) on the real exports, and against NVIDIA's numbers
where both rules agree."""
from __future__ import annotations

import csv
import sqlite3

import numpy as np
from helpers import process_sql
import pytest
from conftest import SHARED, sample_traces, shared_trace
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model

RANGE_EVENTS = "eventType IN (59, 60, 70, 71) AND endGlobalTid IS NULL"

# Every trace with NVTX ranges and GPU work: the committed samples, and the shared ones
# (emit_nvtx ranges on 2 processes; a loader thread with ranges; CUDA graphs; a large model).
SHARED_WITH_RANGES = ["small_ctx128_threads", "xl_ctx256", "small_ctx128_graphs", "medium_ctx1024_fwd_flash",
                      "h100_2gpu_1s", "mfu_2gpu_before"]


def _all_traces():
    return [*sample_traces(), *[SHARED / f"{n}.sqlite" for n in SHARED_WITH_RANGES]]


def _open(path):
    if not path.exists():
        pytest.skip(f"{path} not present")
    return load_trace(path), process_sql.connect(path)


@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: p.stem)
def test_main_thread_is_the_one_whose_ranges_frame_the_most_launches(path):
    trace, con = _open(path)
    expected = process_sql.main_threads(con)
    for mode in ("process", "nsys"):
        got = {gpid >> 24: gtid for gpid, gtid in range_model(trace, mode).main_threads.items()}
        assert got == expected, mode


@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: p.stem)
def test_every_range_holds_exactly_the_ops_launched_during_it(path):
    """Under `process`, each range on the main thread holds the ops launched while it was open
    by any thread; every other range, and every range under `nsys`, keeps nsys's rule."""
    trace, con = _open(path)
    rowids = trace.ranges["rowid"].to_numpy()[~trace.ranges["cross"].to_numpy(dtype=bool)]
    for mode in ("process", "nsys"):
        expected = process_sql.held_ops(con, process=mode == "process")
        got = process_sql.model_held_ops(trace, range_model(trace, mode), rowids)
        wrong = [r for r in rowids.tolist() if got[r] != expected.get(r, set())]
        assert not wrong, (mode, len(wrong), wrong[:5])


def test_iterations_hold_every_op_launched_during_them():
    """forward / backward / optimizer / every step_N: exactly the ops whose launching call
    started inside the range, whichever thread made it (committed training samples)."""
    checked = 0
    for path in sample_traces():
        trace, con = _open(path)
        m = range_model(trace, "process")
        where = "text IN ('forward', 'backward', 'optimizer') OR text GLOB 'step_[0-9]*' OR text GLOB 'warmup_[0-9]*'"
        expected = process_sql.held_ops(con, where)
        ids = con.execute(f"SELECT rid FROM rng WHERE {where}").fetchall()
        got = process_sql.model_held_ops(trace, m, [r for (r,) in ids])
        assert got == {r: expected.get(r, set()) for r in got}
        checked += len(got)
    assert checked > 20


def test_backward_is_empty_under_nsys_and_full_under_process():
    path = shared_trace("small_ctx128_threads")
    trace = load_trace(path)
    # NVIDIA's own numbers for :backward (nvtx_kern_sum, launching-thread rule).
    with open(SHARED / "oracle" / "small_ctx128_threads_nvtx_kern_sum.csv") as fh:
        nvidia = sum(int(r["Kern Inst"]) for r in csv.DictReader(fh) if r["NVTX Range"] == ":backward")
    assert model_kernels(trace, "nsys", "backward") == nvidia
    assert nvidia < 10
    assert model_kernels(trace, "process", "backward") > 1000
    # The autograd thread launched the backward work (more than the Python thread launched
    # in all); the Python thread is still the main thread: its ranges frame the iteration.
    m = range_model(trace, "process")
    (main,) = m.main_info.values()
    assert trace.threads[main.gtid] == "python3"
    launched = trace.api["gtid"].to_numpy()[trace.ops["api"].to_numpy()[trace.ops["api"].to_numpy() >= 0]]
    gtids, counts = np.unique(launched, return_counts=True)
    assert gtids[np.argmax(counts)] != main.gtid
    # Forward and optimizer kernels are launched by the main thread: both modes agree.
    for name in ("forward", "optimizer"):
        assert model_kernels(trace, "nsys", name) == model_kernels(trace, "process", name)


def test_main_thread_can_be_named_by_tid_or_name():
    path = shared_trace("small_ctx128_threads")
    trace = load_trace(path)
    auto = range_model(trace, "process")
    (main,) = auto.main_info.values()
    assert main.picked_by == "auto" and main.candidates == 2
    other = next(g for g in np.unique(trace.ranges["gtid"]) if g != main.gtid)
    tid = int(other) & 0xFFFFFF
    by_tid = range_model(trace, "process", str(tid))
    assert list(by_tid.main_threads.values()) == [other]
    assert by_tid.main_info[main.gpid].picked_by == str(tid)
    # ...and the named thread's ranges now hold the work launched while they were open.
    con = process_sql.connect(path)
    expected = process_sql.held_ops(con, main={main.gpid >> 24: int(other)})
    rowids = trace.ranges["rowid"].to_numpy()[trace.ranges["gtid"].to_numpy() == other]
    got = process_sql.model_held_ops(trace, by_tid, rowids)
    assert got == {r: expected.get(r, set()) for r in got}
    assert sum(map(len, got.values())) > 0
    by_name = range_model(trace, "process", trace.threads[main.gtid].upper())
    assert by_name.main_threads == auto.main_threads
    with pytest.raises(TraceError, match="no thread with NVTX ranges"):
        range_model(trace, "process", "no-such-thread")


def model_kernels(trace, mode: str, name: str) -> int:
    m = range_model(trace, mode)
    ids = m.ranges_named(name)
    return int(m.kernel_count[ids].sum())


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


@pytest.mark.parametrize("start_order", ["in start order", "shuffled", "ties"])
def test_calls_by_thread_then_start_are_lexsorts(start_order):
    """enclosing_pairs orders the calls by (thread, start) with a counting sort of the threads when
    the table is in start order (the usual export): the order np.lexsort gives, ties included,
    and np.lexsort's own where the table is not."""
    from nsight_tui.parsers.model.attribution import _by_group_then_start

    rng = np.random.default_rng(3)
    n = 50_000
    group = rng.integers(0, 12, size=n)
    start = np.sort(rng.integers(0, 10**9, size=n))
    if start_order == "shuffled":
        start = rng.permutation(start)
    elif start_order == "ties":
        start = start // 10**6  # many equal starts, in and across threads
    want = np.lexsort((start, group))
    for n_groups in (12, 100, 70_000):  # each group in turn; a counting sort; np.lexsort
        order, g, s = _by_group_then_start(group, start, n_groups)
        assert np.array_equal(order, want) and np.array_equal(g, group[want]) and np.array_equal(s, start[want])
    one = np.zeros(n, dtype=group.dtype)  # one process: its calls in the table's order where it is by start
    want = np.lexsort((start, one))
    order, g, s = _by_group_then_start(one, start, 1)
    assert np.array_equal(order, want) and np.array_equal(g, one[want]) and np.array_equal(s, start[want])
