"""What holds the step: its critical path through the replay's dependencies, and the GPU's idle
time split by cause.

The path is walked back from the step's end: at each CPU point, the constraint that set its time
(its thread's own time since the previous point; the GPU work a blocking call waited for; the
other thread it was handed over from); at each op, the launch, the previous op on its stream or
the event it waited for. Each stretch of the step is charged to one holder: a thread's host time
or CUDA calls, a stream's ops, the launch latency, a sync's own cost, a collective's wait.

The GPU's idle time (no op of the step's process running) is split by the op that ends each idle
stretch: launched late by a CPU that had just come back from a blocking sync (blocked by a sync),
launched late otherwise (launch-starved), or held by its stream's order or an event (waiting on a
dependency). The three add up to the idle time by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.ids import api_display_name, pid_of
from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.simulate import Timeline


@dataclass(frozen=True)
class Holder:
    what: str  # "CPU thread python3 (1234): host time", "GPU stream 7: kernels", ...
    kind: str  # cpu-host, cpu-calls, sync, launch, gpu, dependency, collective, rest (the holders past the top)
    ns: int
    share: float  # of the step


@dataclass(frozen=True)
class IdleSplit:
    """GPU idle time per step (mean over steps, ns), split by cause."""

    idle_ns: int
    launch_starved_ns: int
    sync_blocked_ns: int
    dependency_ns: int


class _Walk:
    """A timeline's figures as Python lists, once per timeline: the walk back visits one item at a
    time, where a list's item costs a fraction of an array's."""

    def __init__(self, g: Graph, tl: Timeline):
        self.pt_ns, self.pt_bound = tl.pt_ns.tolist(), tl.pt_bound.tolist()
        self.op_start, self.op_end, self.op_bound = tl.op_start_ns.tolist(), tl.op_end_ns.tolist(), tl.op_bound.tolist()
        self.pt_thread, self.owner = g.pt_thread.tolist(), g.owner.tolist()
        src = g.op_src if tl.op_src is None else tl.op_src
        coll = g.op_coll if tl.op_coll is None else tl.op_coll
        launch_pt = g.op_launch_pt if tl.op_launch_pt is None else tl.op_launch_pt
        self.handoffs = g.handoffs if tl.handoffs is None else tl.handoffs
        self.launch_pt, self.prev, self.src, self.coll = (launch_pt.tolist(), g.op_prev.tolist(),
                                                          src.tolist(), coll.tolist())
        self.first = [a for a, _ in g.thread_slices]
        names = [f"CPU {g.trace.thread_label(gt)}" for gt in g.thread_gtids]
        self.host = [n + ": host time" for n in names]
        self.calls = [n + ": CUDA calls" for n in names]
        self.woken = [n + ": woken by another thread" for n in names]
        api_names, a_name = g.trace.api_names, g.trace.api["name"].to_numpy()
        self.sync = {k: f"sync {api_display_name(api_names[a_name[b.call]])}: its own time after the GPU work"
                     for k, b in g.blocks.items()}
        o_gpid, o_dev, o_stream = (g.trace.ops[c].to_numpy() for c in ("gpid", "device", "stream"))
        several = len({k_[0] for k_ in g.stream_keys}) > 1
        self._stream = (o_gpid, o_dev, o_stream, several)
        self._labels: dict[tuple[int, int, int], str] = {}

    def stream_label(self, i: int) -> str:
        o_gpid, o_dev, o_stream, several = self._stream
        key = (int(o_gpid[i]), int(o_dev[i]), int(o_stream[i]))
        label = self._labels.get(key)
        if label is None:
            label = f"GPU {key[1]} stream {key[2]}" + (f" (pid {pid_of(key[0])})" if several else "")
            self._labels[key] = label
        return label


def critical_paths(g: Graph, tl: Timeline, starts, ends, gtids,
                   origins: list[tuple[str, int]] | None = None) -> dict[tuple[str, str], int]:
    """critical_path of every window, summed: the timeline read into lists once; `origins`, where
    given, the op each window's walk begins at (steps.gpu_step_windows)."""
    walk = _Walk(g, tl)
    out: dict[tuple[str, str], int] = {}
    for i, (s, e, gt) in enumerate(zip(starts, ends, gtids)):
        origin = origins[i] if origins is not None else None
        for k, v in critical_path(g, tl, int(s), int(e), int(gt), walk, origin).items():
            out[k] = out.get(k, 0) + v
    return out


def critical_path(g: Graph, tl: Timeline, start: int, end: int, gtid: int,
                  walk: _Walk | None = None, origin: tuple[str, int] | None = None) -> dict[tuple[str, str], int]:
    """ns of [start, end] (replayed) charged to each (holder, kind), walking back from `end` on
    thread `gtid`, or from `origin`, an op's ("start", i) or ("end", i) at `end`: where the GPU's
    clock sets the step (the CPU ran ahead), its end is an op's, not a CPU point's."""
    out: dict[tuple[str, str], int] = {}
    if gtid not in g.thread_gtids or (origin is not None and origin[1] < 0):
        return out
    w = walk if walk is not None else _Walk(g, tl)
    pt_ns, pt_bound, op_start, op_end, op_bound = w.pt_ns, w.pt_bound, w.op_start, w.op_end, w.op_bound

    def charge(key, lo, hi):
        lo, hi = max(lo, start), min(hi, end)
        if hi > lo:
            out[key] = out.get(key, 0) + (hi - lo)

    if origin is not None:
        node: tuple[str, int] = origin
    else:
        ti = g.thread_gtids.index(gtid)
        a, b = g.thread_slices[ti]
        k = a + int(np.searchsorted(tl.pt_ns[a:b], end, side="right")) - 1
        if k < a:
            return out
        charge((w.host[ti], "cpu-host"), pt_ns[k], end)
        node = ("pt", k)
    steps = 0
    while steps < 10_000_000:
        steps += 1
        if node[0] == "pt":
            k = node[1]
            t = pt_ns[k]
            if t <= start:
                break
            ti = w.pt_thread[k]
            how = pt_bound[k]
            if how == 1:  # waited for the GPU
                ops = [o for o in g.blocks[k].ops if o >= 0]
                o = max(ops, key=lambda x: op_end[x])
                charge((w.sync[k], "sync"), op_end[o], t)
                node = ("end", o)
            elif how == 2:
                j, _lag = w.handoffs[k]
                charge((w.woken[ti], "cpu-host"), pt_ns[j], t)
                node = ("pt", j)
            else:
                if k == w.first[ti]:
                    break
                if w.owner[k] >= 0:
                    charge((w.calls[ti], "cpu-calls"), pt_ns[k - 1], t)
                else:
                    charge((w.host[ti], "cpu-host"), pt_ns[k - 1], t)
                node = ("pt", k - 1)
        elif node[0] == "end":
            i = node[1]
            s, e = op_start[i], op_end[i]
            si = w.coll[i]
            label = w.stream_label(i)
            if si >= 0:
                last = max(g.coll_members[si], key=lambda m: op_start[m])
                if last != i and op_start[last] > s:
                    # its wait for the last peer is that peer's path, walked from its start (charging
                    # the wait here too counted that time twice)
                    charge((f"{label}: collective after its last peer arrived", "collective"), op_start[last], e)
                    node = ("start", last)
                    continue
            charge((f"{label}: ops", "gpu"), s, e)
            node = ("start", i)
        else:
            i = node[1]
            s = op_start[i]
            if s <= start:
                break
            how = op_bound[i]
            if how == 0:
                lp = w.launch_pt[i]
                if lp < 0:
                    break
                charge(("launch latency (call to GPU start)", "launch"), pt_ns[lp], s)
                node = ("pt", lp)
            elif how == 1:
                p = w.prev[i]
                charge(("GPU stream order (gap after the previous op)", "dependency"), op_end[p], s)
                node = ("end", p)
            elif how == 2:
                p = w.src[i]
                charge(("an event from another stream", "dependency"), op_end[p], s)
                node = ("end", p)
            else:
                break
    return out


def holders(charged: dict[tuple[str, str], int], period_ns: int, top: int = 8) -> list[Holder]:
    """The `top` largest holders; where there are more, the largest top - 1 and one row of the rest
    (kind "rest"), so the shares still add up to the path."""
    items = sorted(charged.items(), key=lambda kv: -kv[1])
    if len(items) > top:
        rest = items[top - 1:]
        items = [*items[:top - 1], ((f"the rest: {len(rest)} more holders", "rest"), sum(ns for _, ns in rest))]
    return [Holder(what, kind, ns, ns / period_ns if period_ns > 0 else 0.0) for (what, kind), ns in items]


def idle_split(g: Graph, tl: Timeline, start: int, end: int, pid: int) -> tuple[int, int, int, int]:
    """(idle, launch-starved, sync-blocked, dependency) ns of the GPU of process `pid` in [start, end]."""
    idle, launch, sync, dep = idle_splits(g, tl, np.array([start]), np.array([end]), np.array([pid]))[0].tolist()
    return (idle, launch, sync, dep)


def idle_splits(g: Graph, tl: Timeline, starts: np.ndarray, ends: np.ndarray, pids: np.ndarray) -> np.ndarray:
    """idle_split of each window [starts[i], ends[i]] of process pids[i]: an array (n, 4) of (idle,
    launch-starved, sync-blocked, dependency) ns; the ops sorted once per process."""
    out = np.zeros((len(starts), 4), np.int64)
    o_pid = pid_of(g.trace.ops["gpid"].to_numpy(np.int64))
    # per CPU point: the latest point of its thread at or before it that waited for the GPU (-1)
    idx = np.where(tl.pt_bound == 1, np.arange(len(tl.pt_bound)), -1)
    last_wait = np.maximum.accumulate(idx) if len(idx) else idx
    thread_first = np.array([a for a, _ in g.thread_slices], np.int64)[g.pt_thread] if len(idx) else idx
    last_wait = np.where(last_wait >= thread_first, last_wait, -1)
    for pid in np.unique(pids):
        sel = np.flatnonzero(o_pid == pid)
        rows = np.flatnonzero(pids == pid)
        if len(sel) == 0:
            continue
        s, e = tl.op_start_ns[sel], tl.op_end_ns[sel]
        order = np.argsort(s, kind="stable")
        s, e, sel = s[order], e[order], sel[order]
        reach = np.maximum.accumulate(e)
        prev_reach = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
        # per op: what would end the idle stretch before it, were it idle
        how = tl.op_bound[sel]
        lp = (g.op_launch_pt if tl.op_launch_pt is None else tl.op_launch_pt)[sel]
        launched = (how == 0) & (lp >= 0)
        lw = np.where(launched, last_wait[np.maximum(lp, 0)], -1)
        wait_t = np.where(lw >= 0, tl.pt_ns[np.maximum(lw, 0)], np.iinfo(np.int64).min)
        last_s, last_reach = int(s[-1]), int(reach[-1])
        for r in rows.tolist():
            start, end = int(starts[r]), int(ends[r])
            if end <= start:
                continue
            lo = int(np.searchsorted(s, start, side="right"))
            hi = int(np.searchsorted(prev_reach, end, side="left"))
            if hi > lo:
                gap_lo = np.maximum(prev_reach[lo:hi], start)
                gap_hi = np.minimum(s[lo:hi], end)
                n = np.maximum(gap_hi - gap_lo, 0)
                is_launch = launched[lo:hi]
                is_sync = is_launch & (wait_t[lo:hi] >= gap_lo)
                out[r, 0] = n.sum()
                out[r, 2] = n[is_sync].sum()
                out[r, 1] = n[is_launch & ~is_sync].sum()
                out[r, 3] = n[~is_launch].sum()
            # the last period's tail: nothing running after its last op, and no later op to blame
            if last_s < end and end > max(last_reach, start) and (s < end).any():
                tail = end - max(last_reach, start)
                out[r, 0] += tail
                out[r, 1] += tail
    return out
