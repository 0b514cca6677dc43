"""The replay's dependency graph, built once from a Trace.

CPU side: per thread that makes CUDA calls, its calls' starts and ends as one ordered list of
points; the time between two points is kept as measured (`delta_ns`), and each interval knows
whether it lies inside a call (`owner`: the innermost open call) or is host time between calls.
A blocking call's end waits for the GPU work it waits on (`Block`). Where one thread resumes
after a pause in which another thread of its process was the last to act (the autograd thread
hands backward back to the main thread, the main thread starts it), the resume is a `Handoff`:
it follows the other thread's point, no longer a fixed pause.

GPU side: per stream (process, device, stream) its ops in start order. An op starts no earlier
than its launch call's start plus an offset, the previous op's end on its stream plus an offset,
and the end of the op recorded by the event it waits on (cudaStreamWaitEvent) plus an offset. The
typical offsets are measured in the trace (`launch_latency_ns`, `queue_gap_ns`); per op, the
constraint that bound it in the capture takes the op's own measured offset, the others the
typical one (never more than the op's own), so the unchanged replay meets the capture op by op.
Collectives of several ranks in one export end together: after the last member starts, plus
each member's measured time after that start (`coll_tail_ns`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.read.ids import MEMCPY, MEMSET, api_display_name, pid_of
from nsight_tui.parsers.read.load import Trace

STREAM_SYNCS = {"cudaStreamSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz",
                "cudaStreamSynchronize_ptsz"}
DEVICE_SYNCS = {"cudaDeviceSynchronize", "cuCtxSynchronize", "cudaThreadSynchronize"}
EVENT_SYNCS = {"cudaEventSynchronize", "cuEventSynchronize"}
STREAM_WAITS = {"cudaStreamWaitEvent", "cuStreamWaitEvent", "cudaStreamWaitEvent_ptsz", "cuStreamWaitEvent_ptsz"}
GRAPH_LAUNCHES = {"cudaGraphLaunch", "cuGraphLaunch", "cudaGraphLaunch_ptsz", "cuGraphLaunch_ptsz"}
# A pause on one thread that another thread's last point ends within this much of, the other then
# staying quiet at least as long: a hand-over (a thread woken by another), not its own CPU work.
HANDOFF_WITHIN_NS = 5_000_000
HANDOFF_MIN_PAUSE_NS = 20_000
# Calls that only ask where the GPU or the driver stands. A thread making nothing else (PyTorch's NCCL
# watchdog polling its work's events, a progress monitor) wakes no one: its points keep its own timer,
# so a pause of another thread that happens to end after one of them is no hand-over. Taken for one, it
# tied the main thread to that timer: an edit that made the program faster made its steps slower.
OBSERVER_CALLS = {"cudaEventQuery", "cuEventQuery", "cudaStreamQuery", "cuStreamQuery", "cudaStreamQuery_ptsz",
                  "cuStreamQuery_ptsz", "cudaThreadExchangeStreamCaptureMode", "cudaStreamIsCapturing",
                  "cudaStreamGetCaptureInfo", "cudaGetDevice", "cudaSetDevice", "cudaGetLastError",
                  "cudaPeekAtLastError", "cuCtxGetCurrent", "cuCtxSetCurrent", "cudaGetDeviceCount",
                  "cudaDeviceGetAttribute", "cudaEventElapsedTime", "cuGetProcAddress"}
# A call this many times its kind's median (and at least QUEUE_WAIT_MIN_NS) that outlasted GPU work
# of its process waited for that work (a launch queue that was full).
QUEUE_WAIT_FACTOR = 10
QUEUE_WAIT_MIN_NS = 20_000


@dataclass
class Block:
    """A blocking call's end: it waits for `ops` (their replayed ends), then takes `after_ns`
    (its measured time after the GPU work ended, or after it started if the work was done)."""

    call: int  # position in trace.api
    kind: str  # "stream", "device", "event", "copy" (a synchronous or pageable memcpy/memset), "queue"
    ops: list[int]
    waited_ns: int  # the measured end of that work (-1: none)
    after_ns: int


@dataclass
class Graph:
    trace: Trace
    # -- CPU: points of every thread, thread by thread, each thread's in time order
    thread_gtids: list[int]
    thread_slices: list[tuple[int, int]]
    pt_time: np.ndarray  # measured ns
    pt_call: np.ndarray  # the call (trace.api position) this point starts or ends
    pt_is_end: np.ndarray
    pt_thread: np.ndarray
    owner: np.ndarray  # per point: the innermost call open over the interval before it (-1: host time)
    delta_ns: np.ndarray  # per point: measured time since the thread's previous point (0 at the first)
    call_start_pt: np.ndarray  # per trace.api position: its start point (-1: not replayed)
    call_end_pt: np.ndarray
    blocks: dict[int, Block]  # end point -> what it waits for
    handoffs: dict[int, tuple[int, int]]  # point -> (point of another thread it follows, measured lag ns)
    # -- GPU: ops of every stream, stream by stream, each in start order
    streams: list[np.ndarray]  # op positions (trace.ops)
    stream_keys: list[tuple[int, int, int]]  # (gpid, device, stream)
    op_start: np.ndarray
    op_end: np.ndarray
    op_launch_pt: np.ndarray  # the launch call's start point (-1: none)
    op_prev: np.ndarray  # previous op on its stream (-1)
    op_src: np.ndarray  # the op its stream waits for through an event (-1)
    op_launch_off: np.ndarray  # ns after the launch call's start
    op_prev_off: np.ndarray  # ns after the previous op's end
    op_src_off: np.ndarray  # ns after the event's op's end
    op_dur: np.ndarray
    op_coll: np.ndarray  # collective group (-1)
    coll_members: list[list[int]]
    coll_tail_ns: np.ndarray  # per op: measured end - the group's last start (coupled members only)
    launch_latency_ns: int
    queue_gap_ns: int
    notes: list[str] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return len(self.op_start)


def host_points(g: Graph) -> np.ndarray:
    """Per CPU point: host time of its own between CUDA calls (not a thread's first point, not a
    thread waiting for another)."""
    host = (g.owner < 0) & (g.delta_ns > 0)
    host[[a for a, _ in g.thread_slices]] = False
    host[list(g.handoffs)] = False  # a thread waiting for another: no host work of its own
    return host


def _keys(gpid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    return (pid_of(gpid.astype(np.int64)) << 32) | (corr.astype(np.int64) & 0xFFFFFFFF)


def _lookup(sorted_keys: np.ndarray, order: np.ndarray, keys: np.ndarray) -> np.ndarray:
    if len(sorted_keys) == 0:
        return np.full(len(keys), -1, np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return np.where(sorted_keys[at] == keys, order[at], -1)


def build(trace: Trace) -> Graph:
    api, ops = trace.api, trace.ops
    names = [api_display_name(n) for n in trace.api_names]
    a_start, a_end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    a_gtid, a_name = api["gtid"].to_numpy(np.int64), api["name"].to_numpy(np.int64)
    a_corr = api["corr"].to_numpy(np.int64)
    name_of_call = np.array(names, dtype=object)[a_name] if len(api) else np.zeros(0, object)

    # -- CPU points --------------------------------------------------------------------------
    order = np.lexsort((a_start, a_gtid))
    gt = a_gtid[order]
    cuts = np.flatnonzero(np.diff(gt)) + 1
    groups = np.split(order, cuts) if len(order) else []
    pt_time_l: list[np.ndarray] = []
    pt_call_l: list[np.ndarray] = []
    pt_is_end_l: list[np.ndarray] = []
    pt_thread_l: list[np.ndarray] = []
    thread_gtids: list[int] = []
    thread_slices: list[tuple[int, int]] = []
    at = 0
    for ti, calls in enumerate(groups):
        s, e = a_start[calls], a_end[calls]
        t = np.concatenate([s, e])
        c = np.concatenate([calls, calls])
        is_end = np.concatenate([np.zeros(len(calls), bool), np.ones(len(calls), bool)])
        # ties: an end before a start at the same time, except a call's own end after its start
        rank = np.where(is_end, np.where(np.concatenate([s, e]) == np.concatenate([e, s]), 2, 0), 1)
        srt = np.lexsort((rank, t))
        pt_time_l.append(t[srt])
        pt_call_l.append(c[srt])
        pt_is_end_l.append(is_end[srt])
        pt_thread_l.append(np.full(len(srt), ti))
        thread_gtids.append(int(gt[cuts[ti - 1]] if ti else gt[0]))
        thread_slices.append((at, at + len(srt)))
        at += len(srt)

    def cat(xs: list[np.ndarray], d) -> np.ndarray:
        return np.concatenate(xs).astype(d) if xs else np.zeros(0, d)

    pt_time, pt_call = cat(pt_time_l, np.int64), cat(pt_call_l, np.int64)
    pt_is_end, pt_thread = cat(pt_is_end_l, bool), cat(pt_thread_l, np.int64)
    n_pts = len(pt_time)
    delta = np.zeros(n_pts, np.int64)
    owner = np.full(n_pts, -1, np.int64)
    for a, b in thread_slices:
        delta[a + 1:b] = np.diff(pt_time[a:b])
        ends_, calls_ = pt_is_end[a:b], pt_call[a:b]
        if (b - a) % 2 == 0 and not ends_[0::2].any() and ends_[1::2].all() and (calls_[0::2] == calls_[1::2]).all():
            # no call overlaps another (the common case): each call's end is owned by its start
            owner[a + 1:b:2] = calls_[0::2]
            continue
        stack: list[int] = []
        calls_l, ends_l = pt_call[a:b].tolist(), pt_is_end[a:b].tolist()
        own = owner[a:b]
        for k in range(b - a):
            own[k] = stack[-1] if stack else -1
            if ends_l[k]:
                closing = calls_l[k]
                if stack and stack[-1] == closing:
                    stack.pop()
                elif closing in stack:  # an end out of nesting order (overlapping calls): drop it where it is
                    stack.remove(closing)
            else:
                stack.append(calls_l[k])
    call_start_pt = np.full(len(api), -1, np.int64)
    call_end_pt = np.full(len(api), -1, np.int64)
    call_start_pt[pt_call[~pt_is_end]] = np.flatnonzero(~pt_is_end)
    call_end_pt[pt_call[pt_is_end]] = np.flatnonzero(pt_is_end)

    # -- GPU ops by stream ------------------------------------------------------------------
    o_start, o_end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    o_api = ops["api"].to_numpy(np.int64)
    o_gpid = ops["gpid"].to_numpy(np.int64)
    o_dev, o_stream = ops["device"].to_numpy(np.int64), ops["stream"].to_numpy(np.int64)
    o_kind = ops["kind"].to_numpy(np.int64)
    n_ops = len(ops)
    launch_start = np.where(o_api >= 0, a_start[np.maximum(o_api, 0)] if len(api) else 0, -1)
    op_launch_pt = np.where(o_api >= 0, call_start_pt[np.maximum(o_api, 0)] if len(api) else -1, -1)
    sorder = np.lexsort((o_end, o_start, o_stream, o_dev, o_gpid))
    skey = np.stack([o_gpid[sorder], o_dev[sorder], o_stream[sorder]], 1) if n_ops else np.zeros((0, 3), np.int64)
    scuts = np.flatnonzero(np.any(np.diff(skey, axis=0) != 0, axis=1)) + 1 if n_ops else np.zeros(0, np.int64)
    streams = np.split(sorder, scuts) if n_ops else []
    stream_keys = [(int(skey[s0][0]), int(skey[s0][1]), int(skey[s0][2]))
                   for s0 in ([0, *scuts.tolist()] if n_ops else [])]
    op_prev = np.full(n_ops, -1, np.int64)
    # per stream: launch starts made monotone, to find "the last op launched before time x"
    stream_launch = []
    for s in streams:
        op_prev[s[1:]] = s[:-1]
        ls = launch_start[s].astype(np.int64)
        ls = np.where(ls < 0, o_start[s], ls)
        stream_launch.append(np.maximum.accumulate(ls))
    by_pid_stream: dict[tuple[int, int], list[int]] = {}
    for si, (gp, _dev, st) in enumerate(stream_keys):
        by_pid_stream.setdefault((pid_of(gp), st), []).append(si)

    def last_before(si: int, x: int) -> int:
        j = int(np.searchsorted(stream_launch[si], x, side="left")) - 1
        return int(streams[si][j]) if j >= 0 else -1

    def first_after(si: int, x: int) -> int:
        j = int(np.searchsorted(stream_launch[si], x, side="right"))
        return int(streams[si][j]) if j < len(streams[si]) else -1

    # -- syncs and events ----------------------------------------------------------------------
    api_keys = _keys(a_gtid, a_corr)
    ak_order = np.argsort(api_keys, kind="stable")
    ak_sorted = api_keys[ak_order]
    ev = trace.sync_events
    sy = ev.syncs
    sync_call = _lookup(ak_sorted, ak_order, _keys(sy["gpid"].to_numpy(), sy["corr"].to_numpy()))
    rec = ev.records
    rec_call = _lookup(ak_sorted, ak_order, _keys(rec["gpid"].to_numpy(), rec["corr"].to_numpy()))
    rec_ok = rec_call >= 0
    rec_pid = pid_of(rec["gpid"].to_numpy())[rec_ok]
    rec_event = rec["event"].to_numpy()[rec_ok]
    rec_stream = rec["stream"].to_numpy()[rec_ok]
    rec_t = a_start[rec_call[rec_ok]] if len(api) else np.zeros(0, np.int64)
    r_order = np.lexsort((rec_t, rec_event, rec_pid))
    rec_pid, rec_event, rec_stream, rec_t = rec_pid[r_order], rec_event[r_order], rec_stream[r_order], rec_t[r_order]

    def recorded_op(pid: int, event: int, before: int) -> int:
        """The op the latest record of `event` before `before` stands for (-1: none)."""
        lo = np.searchsorted(rec_pid, pid, "left"), np.searchsorted(rec_pid, pid, "right")
        sel = slice(*lo)
        e_lo = lo[0] + np.searchsorted(rec_event[sel], event, "left")
        e_hi = lo[0] + np.searchsorted(rec_event[sel], event, "right")
        j = e_lo + int(np.searchsorted(rec_t[e_lo:e_hi], before, "left")) - 1
        if j < e_lo:
            return -1
        best = -1
        for si in by_pid_stream.get((pid, int(rec_stream[j])), []):
            o = last_before(si, int(rec_t[j]))
            if o >= 0 and (best < 0 or o_end[o] > o_end[best]):
                best = o
        return best

    sync_stream = {int(c): int(s) for c, s in zip(sync_call, sy["stream"].to_numpy()) if c >= 0}
    sync_event = {int(c): int(e) for c, e in zip(sync_call, sy["event"].to_numpy()) if c >= 0}

    blocks: dict[int, Block] = {}
    op_src = np.full(n_ops, -1, np.int64)
    notes: list[str] = []

    def block(call: int, kind: str, waits: list[int]) -> None:
        ep = int(call_end_pt[call])
        if ep < 0:
            return
        waits = [w for w in waits if w >= 0]
        s, e = int(a_start[call]), int(a_end[call])
        w = max((int(o_end[x]) for x in waits), default=-1)
        w = min(w, e)  # a clock's skew never makes the call end before its work
        blocks[ep] = Block(call, kind, waits, w, e - max(s, w))

    for call in np.flatnonzero(np.isin(name_of_call, list(STREAM_SYNCS | DEVICE_SYNCS | EVENT_SYNCS | STREAM_WAITS))).tolist():
        nm, pid, s = name_of_call[call], pid_of(int(a_gtid[call])), int(a_start[call])
        if nm in STREAM_WAITS:
            if call not in sync_event or call not in sync_stream:
                continue
            src = recorded_op(pid, sync_event[call], s)
            if src < 0:
                continue
            for si in by_pid_stream.get((pid, sync_stream[call]), []):
                dst = first_after(si, s)
                if dst >= 0 and (op_src[dst] < 0 or o_end[src] > o_end[op_src[dst]]):
                    op_src[dst] = src
        elif nm in EVENT_SYNCS:
            if call in sync_event:
                block(call, "event", [recorded_op(pid, sync_event[call], s)])
        elif nm in STREAM_SYNCS and call in sync_stream:
            block(call, "stream", [last_before(si, s) for si in by_pid_stream.get((pid, sync_stream[call]), [])])
        else:  # a device sync (or a stream sync without its record): every stream of the process
            block(call, "device", [last_before(si, s) for si, k in enumerate(stream_keys) if pid_of(k[0]) == pid])
    # a copy or set whose call returned only after its op ended: the call waited for it
    # (cudaMemcpy, a pageable cudaMemcpyAsync, `.item()`)
    copy = np.flatnonzero(((o_kind == MEMCPY) | (o_kind == MEMSET)) & (o_api >= 0))
    if len(copy):
        ends_in_call = o_end[copy] <= a_end[o_api[copy]]
        for o in copy[ends_in_call].tolist():
            cc = int(o_api[o])
            ep = int(call_end_pt[cc])
            if ep >= 0 and ep not in blocks:
                block(cc, "copy", [o])

    # a call far slower than its kind's median, during which GPU work of its process ended: it
    # waited for the GPU (a launch onto a full queue, a pageable copy behind the stream's work),
    # and returned when that work ended; its time before then is not CPU cost
    if len(api) and n_ops:
        dur = a_end - a_start
        slow = np.zeros(len(api), bool)
        for code in np.unique(a_name):
            m = a_name == code
            slow[m] = dur[m] > max(QUEUE_WAIT_FACTOR * float(np.median(dur[m])), QUEUE_WAIT_MIN_NS)
        o_pid_all = pid_of(o_gpid)
        for pid in np.unique(o_pid_all):
            sel = np.flatnonzero(o_pid_all == pid)
            by_end = sel[np.argsort(o_end[sel], kind="stable")]
            ends = o_end[by_end]
            cand = np.flatnonzero(slow & (pid_of(a_gtid) == pid))
            j = np.searchsorted(ends, a_end[cand], side="right") - 1
            ok = (j >= 0) & (ends[np.maximum(j, 0)] >= a_start[cand])
            for cq, jj in zip(cand[ok].tolist(), j[ok].tolist()):
                ep = int(call_end_pt[cq])
                if ep >= 0 and ep not in blocks:
                    block(cq, "queue", [int(by_end[jj])])

    # -- cross-thread hand-overs -----------------------------------------------------------------
    handoffs: dict[int, tuple[int, int]] = {}
    by_pid_threads: dict[int, list[int]] = {}
    observer_codes = np.array([i for i, n in enumerate(trace.api_names) if re.sub(r"_v\d+$", "", n) in OBSERVER_CALLS],
                              np.int64)
    for ti, g in enumerate(thread_gtids):
        by_pid_threads.setdefault(pid_of(g), []).append(ti)
    for tis in by_pid_threads.values():
        if len(tis) < 2:
            continue
        wakers = [tj for tj in tis if not np.isin(a_name[pt_call[slice(*thread_slices[tj])]], observer_codes).all()]
        for ti in tis:
            a, b = thread_slices[ti]
            # pauses of host time long enough to be a wait
            ks = a + 1 + np.flatnonzero((owner[a + 1:b] < 0) & (delta[a + 1:b] >= HANDOFF_MIN_PAUSE_NS))
            if len(ks) == 0:
                continue
            best_pt = np.full(len(ks), -1, np.int64)
            best_t = np.full(len(ks), -1, np.int64)
            best_next = np.full(len(ks), np.iinfo(np.int64).max, np.int64)
            for tj in wakers:
                if tj == ti:
                    continue
                c0, d0 = thread_slices[tj]
                j = c0 + np.searchsorted(pt_time[c0:d0], pt_time[ks], side="left") - 1  # its last point before
                ok = j >= c0
                jt = np.where(ok, pt_time[np.maximum(j, 0)], -1)
                nxt = np.where(j + 1 < d0, pt_time[np.minimum(j + 1, d0 - 1)], np.iinfo(np.int64).max)
                better = ok & (jt > best_t)
                best_pt[better], best_t[better], best_next[better] = j[better], jt[better], nxt[better]
            resume, pause_start = pt_time[ks], pt_time[ks - 1]
            lag = resume - best_t
            # the other thread acted last inside the pause, soon before the resume, and then stayed quiet
            # at least as long: one thread active at a time, a hand-over
            hit = ((best_pt >= 0) & (best_t > pause_start) & (lag <= HANDOFF_WITHIN_NS)
                   & (best_next - resume >= lag))
            for k, j, lg in zip(ks[hit].tolist(), best_pt[hit].tolist(), lag[hit].tolist()):
                handoffs[k] = (j, lg)

    # -- op offsets --------------------------------------------------------------------------
    has_launch = op_launch_pt >= 0
    prev_end = np.where(op_prev >= 0, o_end[np.maximum(op_prev, 0)], np.iinfo(np.int64).min // 4)
    idle = has_launch & (prev_end < launch_start)
    lat = o_start - launch_start
    launch_latency = int(np.median(lat[idle])) if idle.any() else 0
    queued = has_launch & (op_prev >= 0) & (launch_start + launch_latency < prev_end)
    gap = o_start - prev_end
    queue_gap = int(np.median(gap[queued])) if queued.any() else 0
    neg = np.iinfo(np.int64).min // 4
    src_end = np.where(op_src >= 0, o_end[np.maximum(op_src, 0)], neg)
    b_launch = np.where(has_launch, launch_start + launch_latency, neg)
    b_prev = np.where(op_prev >= 0, prev_end + queue_gap, neg)
    b_src = np.where(op_src >= 0, src_end + queue_gap, neg)
    bound = np.argmax(np.stack([b_launch, b_prev, b_src]), axis=0)
    launch_off = np.where(bound == 0, o_start - launch_start, np.minimum(launch_latency, o_start - launch_start))
    prev_off = np.where(bound == 1, o_start - prev_end, np.minimum(queue_gap, o_start - prev_end))
    src_off = np.where(bound == 2, o_start - src_end, np.minimum(queue_gap, o_start - src_end))
    launch_off = np.where(has_launch, launch_off, 0)
    prev_off = np.where(op_prev >= 0, prev_off, 0)
    src_off = np.where(op_src >= 0, src_off, 0)

    # -- collectives across ranks ----------------------------------------------------------------
    op_coll = np.full(n_ops, -1, np.int64)
    coll_members: list[list[int]] = []
    coll_tail = np.zeros(n_ops, np.int64)
    o_pid = pid_of(o_gpid)
    if len(np.unique(o_pid)) > 1:
        o_name = ops["name"].to_numpy(np.int64)
        is_comm = np.array(["nccl" in n.lower() for n in trace.op_names], dtype=bool)
        comm = np.flatnonzero(is_comm[o_name]) if len(trace.op_names) else np.zeros(0, np.int64)
        if len(comm):
            comm = comm[np.lexsort((o_start[comm], o_name[comm], o_pid[comm]))]
            members: dict[tuple[int, int], list[int]] = {}
            seen: dict[tuple[int, int], int] = {}
            for o in comm.tolist():
                key = (int(o_pid[o]), int(o_name[o]))
                n = seen.get(key, 0)
                seen[key] = n + 1
                members.setdefault((int(o_name[o]), n), []).append(o)
            for group in members.values():
                if len({int(o_pid[o]) for o in group}) < 2:
                    continue
                gi = len(coll_members)
                coll_members.append(group)
                last_start = max(int(o_start[o]) for o in group)
                for o in group:
                    # a member that ended before the last arrived did not wait for it (a broadcast's
                    # root, a small message sent eagerly): it keeps its own duration
                    if int(o_end[o]) >= last_start:
                        op_coll[o] = gi
                        coll_tail[o] = int(o_end[o]) - last_start
    return Graph(trace, thread_gtids, thread_slices, pt_time, pt_call, pt_is_end, pt_thread, owner, delta,
                 call_start_pt, call_end_pt, blocks, handoffs, streams, stream_keys, o_start, o_end, op_launch_pt,
                 op_prev, op_src, launch_off.astype(np.int64), prev_off.astype(np.int64), src_off.astype(np.int64),
                 (o_end - o_start).astype(np.int64), op_coll, coll_members, coll_tail, launch_latency, queue_gap,
                 notes)


def calls_launching_only(g: Graph, ops: np.ndarray) -> np.ndarray:
    """The CUDA calls (rows of trace.api) that launched ops, every one of them in `ops` (a mask per
    op), and whose start and end are points of the graph: the calls an edit that takes those ops
    away takes away with them."""
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    launched = o_api >= 0
    n_api = len(g.trace.api)
    per_call = np.bincount(o_api[launched], minlength=n_api)
    of_ops = np.bincount(o_api[ops & launched], minlength=n_api)
    calls = np.flatnonzero((of_ops > 0) & (of_ops == per_call))
    return calls[(g.call_start_pt[calls] >= 0) & (g.call_end_pt[calls] >= 0)]


def inside_calls(g: Graph, calls: np.ndarray) -> np.ndarray:
    """The CPU points whose time since the point before lies inside one of `calls` (each call's
    (start, end]), in order."""
    mark = np.zeros(len(g.pt_time) + 1, np.int64)
    np.add.at(mark, g.call_start_pt[calls] + 1, 1)
    np.add.at(mark, g.call_end_pt[calls] + 1, -1)
    return np.flatnonzero(np.cumsum(mark)[:-1] > 0)
