"""The replay's edges as an edit moves them: what a faster GPU does to the step (never longer), which
threads can hand work to another (never a thread that only polls), and the critical path walked along
the edges the edited timeline was placed by (each window covered once)."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
from helpers.export_sql import sql_rows
from helpers.step_sql import steps
from helpers.xz_samples import plain

from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits
from nsight_tui.parsers.replay.critical import critical_paths
from nsight_tui.parsers.replay.predict import graph_of, predict, replay
from nsight_tui.parsers.replay.steps import clock_periods, gpu_step_windows

RANK1 = SAMPLES / "ranks_small_ctx128_ddp2" / "small_ctx128_ddp2_rank1.sqlite.xz"  # one rank's own export
TWO_RANKS = SAMPLES / "small_ctx128_ddp2.sqlite.xz"  # both ranks in one export: collectives coupled
GRAPHED_DECODE = SAMPLES / "thirdparty" / "hf_generate_llama_static.sqlite.xz"
SYNCED = SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz"
THREE_ASYNC_STEPS = SAMPLES / "async" / "large_ctx512_tf32_async.sqlite.xz"  # GPT-2 large, no phase syncs

# Calls that only ask where the GPU stands, as the SQL below spells them (nsys's versioned names).
POLLS = ("cudaEventQuery%", "cudaStreamQuery%", "cudaThreadExchangeStreamCaptureMode%")


def test_a_thread_that_only_polls_hands_over_to_no_one():
    """PyTorch's NCCL watchdog polls its work's events on a timer of its own. A pause of the main
    thread that ends soon after one of its polls is no hand-over: taken for one, it tied the main
    thread to the watchdog's timer, and every kernel twice as fast made this rank's step 23% longer."""
    path = plain(RANK1)
    polls = " OR ".join("s.value LIKE ?" for _ in POLLS)
    pollers = {gt for (gt,) in sql_rows(path, f"""
        SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        GROUP BY r.globalTid HAVING SUM(CASE WHEN {polls} THEN 1 ELSE 0 END) = COUNT(*)""", *POLLS)}
    assert pollers, "the export has its watchdog thread"
    g, _ = graph_of(load_trace(path))
    assert g.handoffs, "other threads do hand over"
    sources = {g.thread_gtids[int(g.pt_thread[j])] for j, _lag in g.handoffs.values()}
    assert not sources & pollers


@pytest.mark.parametrize("path", [RANK1, TWO_RANKS, SYNCED, SAMPLES / "small_ctx128.sqlite"], ids=lambda p: p.name)
def test_a_faster_gpu_never_makes_the_step_longer(path):
    """Every kernel, copy and set twice as fast can only move each replayed time earlier, and half
    as fast only later; the steady step follows (0.2% for the median of a few steps' periods)."""
    trace = load_trace(plain(path))
    faster, slower = predict(trace, ["speed:*=2"]), predict(trace, ["speed:*=0.5"])
    assert faster.step_ns <= faster.replayed_step_ns * 1.002
    assert slower.step_ns >= slower.replayed_step_ns * 0.998


@pytest.mark.parametrize("path, edit", [(TWO_RANKS, "speed:*=2"), (TWO_RANKS, "graph"), (GRAPHED_DECODE, "graph"),
                                        (SYNCED, "nosync")], ids=lambda x: getattr(x, "name", x))
def test_the_critical_path_of_an_edited_step_covers_each_window_once(path, edit):
    """Walked back along the edges the edited timeline was placed by (a `graph` edit launches every
    node from one call; a collective waits for its last peer, whose own path is that wait), the
    path charges each nanosecond of each window once: their sum is the window, on whichever clock
    sets the step."""
    trace = load_trace(plain(path))
    g, sr = graph_of(trace)
    r = replay(g, sr, edits.apply(g, sr, [edits.parse(edit)], load_trace).plans[1])
    gtids = sr.gtid[sr.is_step].tolist()
    if r.on_gpu_clock:
        starts, ends, origins = gpu_step_windows(g, sr, r.timeline)
    else:
        starts, ends, origins = r.starts_ns, r.ends_ns, [None] * len(gtids)
    for s, e, gt, o in zip(starts.tolist(), ends.tolist(), gtids, origins):
        charged = critical_paths(g, r.timeline, [s], [e], [gt], None if o is None else [o])
        assert sum(charged.values()) == e - s


def test_taking_host_time_away_beside_another_edit_never_makes_the_step_longer():
    """r1's fp32 capture ran two of its four steps on a slow CPU. TF32's faster GEMMs hand the step to
    the CPU, and the prediction replays the typical step (each stretch of host time at its median over
    the steps); `nohost:1ms` beside it must act on that same step: on the steps as they ran, the pair
    came out 15 ms longer than the GEMMs alone, and every finding's fix together longer than one."""
    trace = load_trace(plain(SAMPLES / "async" / "h100_repeats" / "small_ctx512_b8_async_r1.sqlite.xz"))
    alone, beside = predict(trace, ["speed:gemm=4.657"]), predict(trace, ["speed:gemm=4.657", "nohost:1ms"])
    assert beside.step_ns <= alone.step_ns
    assert beside.low_ns <= alone.low_ns and beside.high_ns <= alone.high_ns


@pytest.mark.parametrize("edits", [["nohost", "nohost:1ms"], ["graph", "nohost:1ms"], ["nohost", "nohost:-1ms"]],
                         ids=" + ".join)
def test_an_edit_beside_another_keeps_what_the_other_took_away(edits):
    """Each edit acts on the plan the edits before it left: `nohost:1ms` keeps an ordinary pause's host
    work in each long pause, but never gives back host time an edit beside it took away (it set each
    pause from the capture's own length: `nohost nohost:1ms` came out 0.3 ms a step longer than `nohost`).
    So the pair, in either order, is no longer than the first edit alone."""
    trace = load_trace(plain(SAMPLES / "replay" / "pin_repeats" / "r1_small_ctx128_pinned-input.sqlite.xz"))
    alone = predict(trace, edits[:1])
    for pair in (edits, edits[::-1]):
        assert predict(trace, pair).step_ns <= alone.step_ns


def test_the_cpus_clock_ends_the_last_step_with_its_range():
    """On the CPU's clock a step runs from its range's start to the next iteration's start, the last
    to its own range's end (SQL over the NVTX ranges): never to its GPU work's end, the backlog a CPU
    that ran ahead leaves to the last step of a window and no step of a longer run waits for."""
    path = plain(THREE_ASYNC_STEPS)
    ref = steps(path)
    g, sr = graph_of(load_trace(path))
    cpu, _gpu = clock_periods(g, sr, None)
    want = [b.start - a.start for a, b in zip(ref, ref[1:])] + [ref[-1].end - ref[-1].start]
    assert cpu.tolist() == want
    assert ref[-1].period > ref[-1].end - ref[-1].start  # the measured period does wait for the GPU


def test_taking_the_syncs_away_beside_the_host_pauses_never_makes_the_step_longer():
    """A 3-step capture with its host pauses taken away, then its syncs too: the CPU runs ahead of the
    GPU, and the last step's period on the CPU's clock (to its GPU work's end) waited 40 ms for the
    backlog. The median of three such periods made `nohost nosync` 3.5 ms a step longer than `nohost`;
    the pace a longer run keeps is the slower clock's without the drain, which no edit that only
    removes work can lengthen."""
    trace = load_trace(plain(THREE_ASYNC_STEPS))
    alone = predict(trace, ["nohost"])
    for pair in (["nohost", "nosync"], ["nosync", "nohost"]):
        assert predict(trace, pair).step_ns <= alone.step_ns
