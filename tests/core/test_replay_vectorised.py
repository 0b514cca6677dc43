"""The replay's vectorised hot loops against their plain-Python references: the simulation
(`simulate` against tests/helpers/replay_reference.py, one item at a time) on every edit kind, and
the idle split of many windows at once (`idle_splits`) against the per-window split written out
in plain Python below."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.replay_reference import simulate_reference
from helpers.xz_samples import plain

from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.critical import idle_splits
from nsight_tui.parsers.replay.predict import graph_of, replay
from nsight_tui.parsers.replay.simulate import Plan, simulate

CASES = [SAMPLES / "small_ctx128.sqlite", plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"),
         SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz",
         SAMPLES / "findings" / "small_ctx128_b1_nosync_cuda-graph.sqlite.xz"]
EDITS = ["speed:gemm=2", "nosync", "nohost", "nohost:1ms", "graph", "speed:*=0.5"]
FIELDS = ("pt_ns", "op_start_ns", "op_end_ns", "op_bound", "pt_bound")


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_the_vectorised_simulation_equals_the_one_item_at_a_time_reference(path):
    g, sr = graph_of(load_trace(plain(path)))
    plans = [Plan.of(g), Plan.typical(g)]
    for text in EDITS:
        try:
            plans += list(edit_mod.apply(g, sr, [edit_mod.parse(text)]).plans)
        except edit_mod.EditError:  # an edit with nothing to change in this capture
            continue
    assert len(plans) > 6
    for plan in plans:
        got, want = simulate(g, plan), simulate_reference(g, plan)
        for f in FIELDS:
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
        assert got.forced == want.forced



def test_the_collectives_re_timed_from_a_twin_replay_alike_in_both_simulations():
    """`kernels-from:` a twin with other DDP buckets changes which op each stream waits for and which
    collectives couple the ranks: the vectorised run takes those from the plan as the reference does."""
    base = plain(SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz")
    twin = plain(SAMPLES / "async" / "small_ctx512_b8_ddp2_async_ddp-one-bucket.sqlite.xz")
    g, sr = graph_of(load_trace(base))
    plan = edit_mod.apply(g, sr, [edit_mod.parse(f"kernels-from:{twin}")], load_trace).mid
    assert (plan.op_src != g.op_src).any() and (plan.op_coll != g.op_coll).any()
    got, want = simulate(g, plan), simulate_reference(g, plan)
    for f in FIELDS:
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    assert got.forced == want.forced

def _split_by_hand(g, tl, start, end, pid):
    """The idle split of one window, one op at a time: idle stretches before each op (sorted by
    start) once everything earlier ended; each charged by the op ending it."""
    o_pid = pid_of(g.trace.ops["gpid"].to_numpy())
    ops = sorted((int(tl.op_start_ns[i]), int(tl.op_end_ns[i]), i) for i in np.flatnonzero(o_pid == pid))
    total = launch = sync = dep = 0
    reach = None
    for s, e, i in ops:
        lo, hi = max(reach if reach is not None else start, start), min(s, end)
        if hi > lo:
            total += hi - lo
            lp = int(g.op_launch_pt[i])
            if int(tl.op_bound[i]) == 0 and lp >= 0:
                a = g.thread_slices[int(g.pt_thread[lp])][0]
                waited = [k for k in range(a, lp + 1) if tl.pt_bound[k] == 1]
                if waited and tl.pt_ns[waited[-1]] >= lo:
                    sync += hi - lo
                else:
                    launch += hi - lo
            else:
                dep += hi - lo
        reach = e if reach is None else max(reach, e)
    if ops and ops[-1][0] < end and end > max(reach, start):
        total += end - max(reach, start)
        launch += end - max(reach, start)
    return (total, launch, sync, dep)


def test_the_idle_split_of_all_steps_at_once_equals_each_step_by_hand():
    g, sr = graph_of(load_trace(plain(SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz")))
    r = replay(g, sr, Plan.of(g))
    pids = pid_of(sr.gtid[sr.is_step])
    got = idle_splits(g, r.timeline, r.starts_ns, r.ends_ns, pids)
    for row, s, e, pid in zip(got.tolist(), r.starts_ns.tolist(), r.ends_ns.tolist(), pids.tolist()):
        want = _split_by_hand(g, r.timeline, s, e, pid)
        assert tuple(row) == want
        assert want[0] > 0  # a window that tests something


@pytest.mark.parametrize("path", [SAMPLES / "small_ctx128.sqlite", SAMPLES / "edge_overlap.sqlite.xz",
                                  plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")], ids=lambda p: p.name)
def test_each_points_owner_is_the_innermost_open_call(path):
    """The graph's owner per CPU point (the call open over the interval before it) against a stack
    walked one point at a time (an end out of nesting order dropped where it is)."""
    g, _ = graph_of(load_trace(plain(path)))
    want = np.full(len(g.pt_time), -1, np.int64)
    for a, b in g.thread_slices:
        stack: list[int] = []
        for k in range(a, b):
            want[k] = stack[-1] if stack else -1
            call = int(g.pt_call[k])
            if not g.pt_is_end[k]:
                stack.append(call)
            elif call in stack:
                stack.remove(call)
    assert np.array_equal(g.owner, want)
    assert (want >= 0).any()
