"""Re-time the graph: every CPU point and GPU op at the earliest time its dependencies allow.

An event-driven pass: each thread and each stream advances as far as
its dependencies are known, and the passes repeat until everything is placed (one pass per
hand-over between the CPU and the GPU, a few hundred per capture). Dependencies only point back
in measured time, so a pass that places nothing means a clock's skew put a dependency after its
dependant: the earliest item waiting is then placed with the measured time of what it lacks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.read.ids import GRAPH
from nsight_tui.parsers.kernels.families import device_work_ops
from nsight_tui.parsers.replay.cudagraph import graph_launch_ops, graph_timing, segment_ends
from nsight_tui.parsers.replay.graph import Graph

NEG = -(1 << 62)


@dataclass
class Plan:
    """The graph's numbers as the replay uses them: the measured ones (`Plan.of(graph)`), or an
    edit's changes to them."""

    delta_ns: np.ndarray  # per CPU point: time since the thread's previous point
    op_dur: np.ndarray
    op_launch_off: np.ndarray
    op_prev_off: np.ndarray
    op_launch_pt: np.ndarray
    blocking: set[int]  # end points (graph.blocks) that still wait for their GPU work
    handoffs: dict[int, tuple[int, int]]
    # end points whose own cost after the wait is replaced (no longer blocking: the part after it)
    block_after_ns: dict[int, int] = field(default_factory=dict)
    # per op: the op its stream waits for through an event (-1) and the offset after its end; the
    # collective group it ends with (-1: alone) and its time after the group's last member starts
    op_src: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    op_src_off: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    op_coll: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    coll_tail_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the shortest period a longer run can keep, ns, and the CPU thread (index) whose pace it goes
    # with: host work moved off the step to workers beside it (edits `workers:N`); 0: none
    period_floor_ns: int = 0
    floor_thread: int = -1

    @classmethod
    def of(cls, g: Graph) -> "Plan":
        return cls(g.delta_ns.copy(), g.op_dur.copy(), g.op_launch_off.copy(), g.op_prev_off.copy(),
                   g.op_launch_pt.copy(), set(g.blocks), dict(g.handoffs), {}, g.op_src.copy(),
                   g.op_src_off.copy(), g.op_coll.copy(), g.coll_tail_ns.copy())

    def take_away(self, ops: np.ndarray, points: np.ndarray, blocks) -> None:
        """`ops` (positions or a mask) gone: no GPU time, no launch, nothing after them waits on
        their stream; the time of CPU `points` gone with them: a blocking call among them no longer
        waits (`blocks`: the graph's), a hand-over to one of them no longer followed."""
        self.op_dur[ops] = 0
        self.op_launch_pt[ops] = -1
        self.op_launch_off[ops] = 0
        self.op_prev_off[ops] = 0
        self.delta_ns[points] = 0
        for k in points.tolist():
            if k in blocks:
                self.blocking.discard(k)
                self.block_after_ns[k] = 0
            self.handoffs.pop(k, None)

    @classmethod
    def typical(cls, g: Graph) -> "Plan":
        """Every op at the trace's two typical offsets (launch latency, queue gap) instead of its
        own: the model without the per-op calibration, the identity check that can fail. A graph
        launch's nodes at the graph's typical figures instead, as the `graph` edit places them
        (replay.cudagraph: each node no earlier than its segment's submission and the lead, and
        the mean gap between its nodes; central values); a graph traced whole at this capture's
        median start of such graphs after their launch calls start."""
        plan = cls.of(g)
        plan.op_launch_off[:] = np.where(g.op_launch_pt >= 0, g.launch_latency_ns, 0)
        plan.op_prev_off[:] = np.where(g.op_prev >= 0, g.queue_gap_ns, 0)
        launches = graph_launch_ops(g.trace)
        if launches:
            timing = graph_timing(g.trace)
            chain, stream = device_work_ops(g.trace), g.trace.ops["stream"].to_numpy(np.int64)
            whole = g.trace.ops["kind"].to_numpy() == GRAPH
            for nodes in launches:
                plan.op_launch_off[nodes] = timing.node_offsets_ns(1, segment_ends(chain[nodes], stream[nodes]))
                plan.op_prev_off[nodes[1:]] = timing.node_gap_ns[1]
            # a graph traced whole (one op, its nodes unknown): this capture's typical start after the call
            traced_whole = np.concatenate([n for n in launches if whole[n].all()] or [np.zeros(0, np.int64)])
            if len(traced_whole):
                offsets = g.trace.ops["start"].to_numpy()[traced_whole] - g.trace.api["start"].to_numpy()[
                    g.trace.ops["api"].to_numpy()[traced_whole]]
                plan.op_launch_off[traced_whole] = int(np.median(offsets))
        return plan


@dataclass
class Timeline:
    """Replayed times (ns, on the capture's clock): per CPU point, per op start and end."""

    pt_ns: np.ndarray
    op_start_ns: np.ndarray
    op_end_ns: np.ndarray
    forced: int  # items placed without one of their dependencies (clock skew)
    # per op: which constraint set its start (0 launch, 1 previous op, 2 event, 3 measured)
    op_bound: np.ndarray
    # per CPU point: 0 own time, 1 waited for the GPU (a blocking end), 2 followed another thread
    pt_bound: np.ndarray
    # the plan's event waits, collective groups, launches and hand-overs (an edit may move them;
    # None: the graph's): what holds the step is walked back along the edges this timeline was placed by
    op_src: np.ndarray | None = None
    op_coll: np.ndarray | None = None
    op_launch_pt: np.ndarray | None = None
    handoffs: dict[int, tuple[int, int]] | None = None


def simulate(g: Graph, plan: Plan) -> Timeline:
    n_pts, n_ops = len(g.pt_time), g.n_ops
    R = np.zeros(n_pts, np.int64)
    pt_bound = np.zeros(n_pts, np.int8)
    S, E = np.zeros(n_ops, np.int64), np.zeros(n_ops, np.int64)
    op_bound = np.full(n_ops, 3, np.int8)
    end_done = np.zeros(n_ops, bool)
    started = np.zeros(n_ops, bool)
    pt_time = g.pt_time
    delta = plan.delta_ns
    pt_thread = g.pt_thread
    blocks = {k: ([int(o) for o in b.ops], b.waited_ns, b.after_ns, b.call) for k, b in g.blocks.items()}
    blocking = plan.blocking
    after_override = plan.block_after_ns
    handoffs = plan.handoffs
    launch_pt, launch_off, prev_off = plan.op_launch_pt, plan.op_launch_off, plan.op_prev_off
    src, src_off = plan.op_src, plan.op_src_off
    dur = plan.op_dur
    coll = plan.op_coll
    members = g.coll_members
    tail = plan.coll_tail_ns
    op_start, op_end = g.op_start, g.op_end
    # the points that are more than their own time since the previous point: the rest of a thread
    # is placed a run at a time (a cumulative sum)
    special = np.array(sorted(set(handoffs) | (blocking & set(blocks)) | set(after_override)), np.int64)

    launched = launch_pt >= 0
    lp_at = np.maximum(launch_pt, 0)
    lp_thread = pt_thread[lp_at] if n_pts else np.zeros(n_ops, np.int64)
    src_at = np.maximum(src, 0)
    solo = coll < 0
    plain = (src < 0) & solo

    thread_first = [a for a, _ in g.thread_slices]
    thread_cur = np.array(thread_first, np.int64)
    thread_end = [b for _, b in g.thread_slices]
    streams = g.streams
    stream_cur = [0] * len(streams)
    stream_phase = [0] * len(streams)
    stream_prev_end = [NEG] * len(streams)
    stream_window = [64] * len(streams)
    forced = 0

    def pt_done(k: int) -> bool:
        return k < thread_cur[pt_thread[k]]

    def place_point(k: int, first: int, force: bool) -> bool:
        nonlocal forced
        own = int(pt_time[k]) if k == first else int(R[k - 1] + delta[k])
        how = 0
        if k in handoffs:
            j, lag = handoffs[k]
            if not pt_done(j):
                if not force:
                    return False
                forced += 1
                other = int(pt_time[j]) + lag
            else:
                other = int(R[j]) + lag
            own = int(pt_time[k]) if k == first else int(R[k - 1])
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
                gpu = max((int(E[o]) if end_done[o] else int(op_end[o]) for o in ops), default=NEG)
                prev_t = int(pt_time[k - 1]) if k > first else int(pt_time[k])
                prev_r = int(R[k - 1]) if k > first else int(pt_time[k])
                own = prev_r + max(0, int(pt_time[k]) - max(prev_t, waited))
                if gpu > NEG:
                    wait_end = gpu + after
                    if wait_end > own:
                        own, how = wait_end, 1
            elif k in after_override:  # no longer blocking: only its own cost after the wait
                prev_t = int(pt_time[k - 1]) if k > first else int(pt_time[k])
                prev_r = int(R[k - 1]) if k > first else int(pt_time[k])
                own = prev_r + min(after_override[k], max(0, int(pt_time[k]) - prev_t))
        R[k] = own
        pt_bound[k] = how
        return True

    def place_op_start(i: int, prev_end: int, force: bool) -> bool:
        nonlocal forced
        lp = int(launch_pt[i])
        best, how = NEG, 3
        if lp >= 0:
            if not pt_done(lp):
                if not force:
                    return False
                forced += 1
                best, how = int(op_start[i]), 3
            else:
                best, how = int(R[lp] + launch_off[i]), 0
        if prev_end > NEG and prev_end + int(prev_off[i]) > best:
            best, how = prev_end + int(prev_off[i]), 1
        s = int(src[i])
        if s >= 0:
            if not end_done[s]:
                if not force:
                    return False
                forced += 1
                v = int(op_end[s] + src_off[i])
            else:
                v = int(E[s] + src_off[i])
            if v > best:
                best, how = v, 2
        if best == NEG:
            best, how = int(op_start[i]), 3
        S[i] = best
        op_bound[i] = how
        started[i] = True
        return True

    def place_op_end(i: int, force: bool) -> bool:
        nonlocal forced
        c = int(coll[i])
        if c >= 0:
            group = members[c]  # every member's start counts, coupled or not
            if not all(started[m] for m in group):
                if not force:
                    return False
                forced += 1
            last = max(int(S[m]) if started[m] else int(op_start[m]) for m in group)
            E[i] = max(int(S[i]), last) + int(tail[i])
        else:
            E[i] = S[i] + dur[i]
        end_done[i] = True
        return True

    def advance_thread(t: int) -> int:
        """Place thread t's points as far as their dependencies are known; how many were placed."""
        k0 = k = int(thread_cur[t])
        b, first = thread_end[t], thread_first[t]
        while k < b:
            at = int(np.searchsorted(special, k))
            nxt = min(int(special[at]) if at < len(special) else b, b)
            if nxt > k:  # a run of points that are only their own time after the previous one
                lo = k
                if k == first:
                    R[k] = pt_time[k]
                    lo = k + 1
                if nxt > lo:
                    R[lo:nxt] = R[lo - 1] + np.cumsum(delta[lo:nxt])
                k = nxt
                continue
            if not place_point(k, first, False):
                break
            k += 1
        thread_cur[t] = k
        return k - k0

    def place_run(seg: np.ndarray, prev_end: int) -> None:
        """Start and end the ops `seg` (consecutive on one stream, every dependency known, none a
        collective): each starts at the latest of its launch, its event and the previous op's end
        plus its offset, a max-plus recurrence solved with a running maximum."""
        has_lp = launched[seg]
        a_launch = R[lp_at[seg]] + launch_off[seg]
        if not has_lp.all():
            a_launch = np.where(has_lp, a_launch, NEG)
        s_ = src[seg]
        has_s = s_ >= 0
        any_src = bool(has_s.any())
        if any_src:
            a_src = np.where(has_s, E[np.maximum(s_, 0)] + src_off[seg], NEG)
            a = np.maximum(a_launch, a_src)
        else:
            a = a_launch.copy()  # its first item may become the measured start below
        d, po = dur[seg], prev_off[seg]
        measured0 = prev_end == NEG and a[0] == NEG  # the stream's first op, with nothing before it
        if measured0:
            a[0] = op_start[seg[0]]
        c = np.cumsum(po + d)
        x = a + d - c
        x[0] = max(int(x[0]), prev_end)
        end = np.maximum.accumulate(x) + c
        prev = np.empty(len(seg), np.int64)
        prev[0] = prev_end + int(po[0]) if prev_end > NEG else NEG
        prev[1:] = end[:-1] + po[1:]
        how = np.where(has_lp, 0, 3).astype(np.int8)
        by_prev = prev > a_launch
        if prev_end == NEG:
            by_prev[0] = False
        how[by_prev] = 1
        if any_src:
            best = np.where(by_prev, prev, a_launch)
            how[has_s & (a_src > best)] = 2
        if measured0:
            how[0] = 3
        E[seg] = end
        S[seg] = end - d
        op_bound[seg] = how
        started[seg] = True
        end_done[seg] = True

    def advance_stream(si: int) -> int:
        ops = streams[si]
        j, phase, prev_end = stream_cur[si], stream_phase[si], stream_prev_end[si]
        n0 = j * 2 + phase
        while j < len(ops):
            if phase == 0:
                w = stream_window[si]
                seg = ops[j:j + w]
                # launched already (an op without a launch: -1, below every cursor), its event's op
                # ended, no collective
                ok = launch_pt[seg] < thread_cur[lp_thread[seg]]
                ok &= plain[seg] | (end_done[src_at[seg]] & solo[seg])
                f = len(seg) if ok.all() else int(np.argmin(ok))
                if f > 0:
                    place_run(seg[:f], prev_end)
                    prev_end = int(E[seg[f - 1]])
                    j += f
                    stream_window[si] = min(w * 2, 1 << 16) if f == len(seg) else max(64, w // 2)
                    continue
            i = int(ops[j])
            if phase == 0:
                if not place_op_start(i, prev_end, False):
                    break
                phase = 1
            if not place_op_end(i, False):
                break
            prev_end = int(E[i])
            phase = 0
            j += 1
        stream_cur[si], stream_phase[si], stream_prev_end[si] = j, phase, prev_end
        return j * 2 + phase - n0

    remaining = n_pts + 2 * n_ops
    while remaining > 0:
        progress = 0
        for t in range(len(thread_first)):
            progress += advance_thread(t)
        for si in range(len(streams)):
            progress += advance_stream(si)
        remaining -= progress
        if progress == 0 and remaining > 0:
            # place the earliest waiting item (by measured time) without what it lacks
            cands = []
            for t in range(len(thread_first)):
                if thread_cur[t] < thread_end[t]:
                    cands.append((int(pt_time[thread_cur[t]]), 0, t))
            for si, ops in enumerate(streams):
                if stream_cur[si] < len(ops):
                    i = int(ops[stream_cur[si]])
                    cands.append((int(op_start[i]) if stream_phase[si] == 0 else int(op_end[i]), 1, si))
            _, kind, x = min(cands)
            if kind == 0:
                place_point(int(thread_cur[x]), thread_first[x], True)
                thread_cur[x] += 1
            else:
                ops = streams[x]
                i = int(ops[stream_cur[x]])
                if stream_phase[x] == 0:
                    place_op_start(i, stream_prev_end[x], True)
                    stream_phase[x] = 1
                else:
                    place_op_end(i, True)
                    stream_prev_end[x] = int(E[i])
                    stream_phase[x] = 0
                    stream_cur[x] += 1
            remaining -= 1
    return Timeline(R, S, E, forced, op_bound, pt_bound, src, coll, launch_pt, handoffs)
