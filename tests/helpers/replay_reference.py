"""The replay's simulation as plain Python over lists, one item at a time: the reference the
vectorised `parsers.replay.simulate.simulate` must equal exactly (every point and op, their bounds
and the forced count)."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.simulate import NEG, Plan, Timeline


def simulate_reference(g: Graph, plan: Plan) -> Timeline:
    n_pts, n_ops = len(g.pt_time), g.n_ops
    R = [0] * n_pts
    pt_bound = [0] * n_pts
    S, E = [0] * n_ops, [0] * n_ops
    op_bound = [3] * n_ops
    end_done = [False] * n_ops
    started = [False] * n_ops
    pt_time = g.pt_time.tolist()
    delta = plan.delta_ns.tolist()
    pt_thread = g.pt_thread.tolist()
    blocks = {k: ([int(o) for o in b.ops], b.waited_ns, b.after_ns, b.call) for k, b in g.blocks.items()}
    a_start = g.trace.api["start"].to_numpy(np.int64)
    blocking = plan.blocking
    after_override = plan.block_after_ns
    handoffs = plan.handoffs
    launch_pt = plan.op_launch_pt.tolist()
    launch_off = plan.op_launch_off.tolist()
    prev_off = plan.op_prev_off.tolist()
    src = plan.op_src.tolist()
    src_off = plan.op_src_off.tolist()
    dur = plan.op_dur.tolist()
    coll = plan.op_coll.tolist()
    members = g.coll_members
    tail = plan.coll_tail_ns.tolist()
    op_start = g.op_start.tolist()
    op_end = g.op_end.tolist()

    thread_cur = [a for a, _ in g.thread_slices]
    thread_end = [b for _, b in g.thread_slices]
    streams = [s.tolist() for s in g.streams]
    stream_cur = [0] * len(streams)
    stream_phase = [0] * len(streams)
    stream_prev_end = [NEG] * len(streams)
    forced = 0

    def pt_done(k: int) -> bool:
        return k < thread_cur[pt_thread[k]]

    def place_point(k: int, first: int, force: bool) -> bool:
        nonlocal forced
        own = pt_time[k] if k == first else R[k - 1] + delta[k]
        how = 0
        if k in handoffs:
            j, lag = handoffs[k]
            if not pt_done(j):
                if not force:
                    return False
                forced += 1
                other = pt_time[j] + lag
            else:
                other = R[j] + lag
            own = pt_time[k] if k == first else R[k - 1]
            if other > own:
                own, how = other, 2
        b = blocks.get(k)
        if b is not None:
            ops, waited, after, call = b
            if k in blocking:
                if not all(end_done[o] for o in ops):
                    if not force:
                        return False
                    forced += 1
                gpu = max((E[o] if end_done[o] else op_end[o] for o in ops), default=NEG)
                prev_t = pt_time[k - 1] if k > first else pt_time[k]
                prev_r = R[k - 1] if k > first else pt_time[k]
                own = prev_r + max(0, pt_time[k] - max(prev_t, waited))
                if gpu > NEG:
                    wait_end = gpu + after
                    if wait_end > own:
                        own, how = wait_end, 1
            elif k in after_override:  # no longer blocking: only its own cost after the wait
                prev_t = pt_time[k - 1] if k > first else pt_time[k]
                prev_r = R[k - 1] if k > first else pt_time[k]
                own = prev_r + min(after_override[k], max(0, pt_time[k] - prev_t))
        R[k] = own
        pt_bound[k] = how
        return True

    def place_op_start(i: int, prev_end: int, force: bool) -> bool:
        nonlocal forced
        lp = launch_pt[i]
        best, how = NEG, 3
        if lp >= 0:
            if not pt_done(lp):
                if not force:
                    return False
                forced += 1
                best, how = op_start[i], 3
            else:
                best, how = R[lp] + launch_off[i], 0
        if prev_end > NEG and prev_end + prev_off[i] > best:
            best, how = prev_end + prev_off[i], 1
        s = src[i]
        if s >= 0:
            if not end_done[s]:
                if not force:
                    return False
                forced += 1
                v = op_end[s] + src_off[i]
            else:
                v = E[s] + src_off[i]
            if v > best:
                best, how = v, 2
        if best == NEG:
            best, how = op_start[i], 3
        S[i] = best
        op_bound[i] = how
        started[i] = True
        return True

    def place_op_end(i: int, force: bool) -> bool:
        nonlocal forced
        c = coll[i]
        if c >= 0:
            group = members[c]  # every member's start counts, coupled or not
            if not all(started[m] for m in group):
                if not force:
                    return False
                forced += 1
            last = max(S[m] if started[m] else op_start[m] for m in group)
            E[i] = max(S[i], last) + tail[i]
        else:
            E[i] = S[i] + dur[i]
        end_done[i] = True
        return True

    remaining = n_pts + 2 * n_ops
    while remaining > 0:
        progress = 0
        for t in range(len(thread_cur)):
            k, b, first = thread_cur[t], thread_end[t], g.thread_slices[t][0]
            while k < b and place_point(k, first, False):
                k += 1
            progress += k - thread_cur[t]
            thread_cur[t] = k
        for si, ops in enumerate(streams):
            j, phase, prev_end = stream_cur[si], stream_phase[si], stream_prev_end[si]
            n0 = j * 2 + phase
            while j < len(ops):
                i = ops[j]
                if phase == 0:
                    if not place_op_start(i, prev_end, False):
                        break
                    phase = 1
                if not place_op_end(i, False):
                    break
                prev_end = E[i]
                phase = 0
                j += 1
            progress += j * 2 + phase - n0
            stream_cur[si], stream_phase[si], stream_prev_end[si] = j, phase, prev_end
        remaining -= progress
        if progress == 0 and remaining > 0:
            # place the earliest waiting item (by measured time) without what it lacks
            cands = []
            for t in range(len(thread_cur)):
                if thread_cur[t] < thread_end[t]:
                    cands.append((pt_time[thread_cur[t]], 0, t))
            for si, ops in enumerate(streams):
                if stream_cur[si] < len(ops):
                    i = ops[stream_cur[si]]
                    cands.append((op_start[i] if stream_phase[si] == 0 else op_end[i], 1, si))
            _, kind, x = min(cands)
            if kind == 0:
                place_point(thread_cur[x], g.thread_slices[x][0], True)
                thread_cur[x] += 1
            else:
                ops = streams[x]
                i = ops[stream_cur[x]]
                if stream_phase[x] == 0:
                    place_op_start(i, stream_prev_end[x], True)
                    stream_phase[x] = 1
                else:
                    place_op_end(i, True)
                    stream_prev_end[x] = E[i]
                    stream_phase[x] = 0
                    stream_cur[x] += 1
            remaining -= 1
    del a_start
    return Timeline(np.array(R, np.int64), np.array(S, np.int64), np.array(E, np.int64), forced,
                    np.array(op_bound, np.int8), np.array(pt_bound, np.int8))
