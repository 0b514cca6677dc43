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
    kind: str  # cpu-host, cpu-calls, sync, launch, gpu, dependency, collective
    ns: int
    share: float  # of the step


@dataclass(frozen=True)
class IdleSplit:
    """GPU idle time per step (mean over steps, ns), split by cause."""

    idle_ns: int
    launch_starved_ns: int
    sync_blocked_ns: int
    dependency_ns: int


def _thread_label(g: Graph, ti: int) -> str:
    return f"CPU {g.trace.thread_label(g.thread_gtids[ti])}"


def critical_path(g: Graph, tl: Timeline, start: int, end: int, gtid: int) -> dict[tuple[str, str], int]:
    """ns of [start, end] (replayed) charged to each (holder, kind), walking back from `end` on
    thread `gtid`."""
    out: dict[tuple[str, str], int] = {}
    if gtid not in g.thread_gtids:
        return out
    ti = g.thread_gtids.index(gtid)
    a, b = g.thread_slices[ti]
    k = a + int(np.searchsorted(tl.pt_ns[a:b], end, side="right")) - 1
    if k < a:
        return out
    api_names = g.trace.api_names
    a_name = g.trace.api["name"].to_numpy()
    o_gpid, o_dev, o_stream = (g.trace.ops[c].to_numpy() for c in ("gpid", "device", "stream"))
    several = len({k_[0] for k_ in g.stream_keys}) > 1

    def charge(key, lo, hi):
        lo, hi = max(lo, start), min(hi, end)
        if hi > lo:
            out[key] = out.get(key, 0) + int(hi - lo)

    charge((_thread_label(g, ti) + ": host time", "cpu-host"), int(tl.pt_ns[k]), end)
    node = ("pt", k)
    steps = 0
    while steps < 10_000_000:
        steps += 1
        if node[0] == "pt":
            k = node[1]
            t = int(tl.pt_ns[k])
            if t <= start:
                break
            ti = int(g.pt_thread[k])
            first = g.thread_slices[ti][0]
            how = int(tl.pt_bound[k])
            if how == 1:  # waited for the GPU
                blk = g.blocks[k]
                ops = [o for o in blk.ops if o >= 0]
                o = max(ops, key=lambda x: tl.op_end_ns[x])
                call = api_display_name(api_names[a_name[blk.call]])
                charge((f"sync {call}: its own time after the GPU work", "sync"), int(tl.op_end_ns[o]), t)
                node = ("end", o)
            elif how == 2:
                j, _lag = g.handoffs[k]
                charge((_thread_label(g, ti) + ": woken by another thread", "cpu-host"), int(tl.pt_ns[j]), t)
                node = ("pt", j)
            else:
                if k == first:
                    break
                owner = int(g.owner[k])
                if owner >= 0:
                    label = f"{_thread_label(g, ti)}: CUDA calls"
                    charge((label, "cpu-calls"), int(tl.pt_ns[k - 1]), t)
                else:
                    charge((_thread_label(g, ti) + ": host time", "cpu-host"), int(tl.pt_ns[k - 1]), t)
                node = ("pt", k - 1)
        elif node[0] == "end":
            i = node[1]
            s, e = int(tl.op_start_ns[i]), int(tl.op_end_ns[i])
            si = g.op_coll[i]
            label = f"GPU {o_dev[i]} stream {o_stream[i]}" + (f" (pid {pid_of(int(o_gpid[i]))})" if several else "")
            if si >= 0:
                last = max(g.coll_members[si], key=lambda m: tl.op_start_ns[m])
                if last != i and tl.op_start_ns[last] > s:
                    charge((f"{label}: collective waiting for its peers", "collective"), s, int(tl.op_start_ns[last]))
                    charge((f"{label}: ops", "gpu"), int(tl.op_start_ns[last]), e)
                    node = ("start", last)
                    continue
            charge((f"{label}: ops", "gpu"), s, e)
            node = ("start", i)
        else:
            i = node[1]
            s = int(tl.op_start_ns[i])
            if s <= start:
                break
            how = int(tl.op_bound[i])
            if how == 0:
                lp = int(g.op_launch_pt[i]) if g.op_launch_pt[i] >= 0 else -1
                if lp < 0:
                    break
                charge(("launch latency (call to GPU start)", "launch"), int(tl.pt_ns[lp]), s)
                node = ("pt", lp)
            elif how == 1:
                p = int(g.op_prev[i])
                charge(("GPU stream order (gap after the previous op)", "dependency"), int(tl.op_end_ns[p]), s)
                node = ("end", p)
            elif how == 2:
                p = int(g.op_src[i])
                charge(("an event from another stream", "dependency"), int(tl.op_end_ns[p]), s)
                node = ("end", p)
            else:
                break
    return out


def holders(charged: dict[tuple[str, str], int], period_ns: int, top: int = 8) -> list[Holder]:
    items = sorted(charged.items(), key=lambda kv: -kv[1])[:top]
    return [Holder(what, kind, ns, ns / period_ns if period_ns > 0 else 0.0) for (what, kind), ns in items]


def idle_split(g: Graph, tl: Timeline, start: int, end: int, pid: int) -> tuple[int, int, int, int]:
    """(idle, launch-starved, sync-blocked, dependency) ns of the GPU of process `pid` in [start, end]."""
    o_pid = pid_of(g.trace.ops["gpid"].to_numpy(np.int64))
    sel = np.flatnonzero(o_pid == pid)
    if len(sel) == 0 or end <= start:
        return (0, 0, 0, 0)
    s, e = tl.op_start_ns[sel], tl.op_end_ns[sel]
    order = np.argsort(s, kind="stable")
    s, e, sel = s[order], e[order], sel[order]
    reach = np.maximum.accumulate(e)
    # idle stretches: before op j, after everything earlier ended
    prev_reach = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    gap_lo = np.maximum(prev_reach, start)
    gap_hi = np.minimum(s, end)
    idle_at = np.flatnonzero(gap_hi > gap_lo)
    total = launch = sync = dep = 0
    pt_bound = tl.pt_bound
    for j in idle_at.tolist():
        n = int(gap_hi[j] - gap_lo[j])
        total += n
        i = int(sel[j])
        how = int(tl.op_bound[i])
        if how == 0 and g.op_launch_pt[i] >= 0:
            lp = int(g.op_launch_pt[i])
            ti = int(g.pt_thread[lp])
            a = g.thread_slices[ti][0]
            # the latest point of the launching thread that waited for the GPU, before the launch
            waited = np.flatnonzero(pt_bound[a:lp + 1] == 1)
            if len(waited) and tl.pt_ns[a + waited[-1]] >= gap_lo[j]:
                sync += n
            else:
                launch += n
        else:
            dep += n
    # the last period's tail: nothing running after its last op, and no later op to blame
    if not (s >= end).any() and (s < end).any() and end > max(int(reach[-1]), start):
        n = end - max(int(reach[-1]), start)
        total += n
        launch += n
    return (total, launch, sync, dep)
