"""Rules on the GPU waiting for the CPU: host-bound gaps (Python/data work), sync stalls,
launch-bound stretches."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.idle import API_LAUNCH, API_SYNC
from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.analyses.findings.context import StepContext, process_api, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold


# -- rules ---------------------------------------------------------------------------------------
def host_bound_gap(c: StepContext) -> Finding | None:
    gs, ge, host = c.host_gaps
    if len(gs) == 0:
        return None
    total = float(host.sum())
    top = np.argsort(-host, kind="stable")[:10]
    # gap_ns: the whole gap, the one figure the timeline's idle lane and its detail give for it
    rows = [{"start_ns": int(gs[i]), "end_ns": int(ge[i]), "gap_ns": int(ge[i] - gs[i]), "host_bound_ns": int(host[i]),
             "after_range": c.range_of(int(gs[i]) - 1), "before_range": c.range_of(int(ge[i]))}
            for i in top.tolist()]
    where = sorted({f"{r['after_range']} → {r['before_range']}" for r in rows})
    claim = intervals.difference(intervals.union(gs, ge), c.launch_or_sync)
    return Finding(
        "host-bound-gap", "GPU idle while the CPU runs Python/data work with no CUDA call",
        where, to_ms(total / c.n),
        f"host-bound idle in gaps ≥ {threshold('host_gap_min_ns') / 1e6:.0f} ms, per step (the idle time it explains)",
        "move the work off the step: DataLoader(num_workers>0, pin_memory=True, prefetch; `whatif "
        "fix:host-bound-gap` says how many workers keep up), precompute, or overlap it with GPU work",
        {"gaps": len(gs), "host_bound_ns_per_step": total / c.n, "step_ns": c.step_ns},
        rows, int(gs[top[0]]), int(ge[top[0]]), claim=claim)


def _first_ns(starts: np.ndarray, ends: np.ndarray, amount: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `amount` ns of sorted disjoint intervals."""
    before = np.concatenate(([0], np.cumsum(ends - starts)))[:-1]
    keep = before < amount
    s, e = starts[keep], ends[keep].copy()
    e = np.minimum(e, s + (amount - before[keep]))
    return s, e


def sync_stall(c: StepContext) -> Finding | None:
    t = c.trace
    api = t.api
    rows_ = process_api(c)
    if len(rows_) == 0:
        return None
    kind = c.idle().api_kind[rows_]
    a_start, a_end = api["start"].to_numpy()[rows_], api["end"].to_numpy()[rows_]
    # blocking calls inside a step (their own process's), in time order
    blocking = np.flatnonzero(kind == API_SYNC)
    blocking = blocking[np.argsort(a_start[blocking], kind="stable")]
    k = np.searchsorted(c.t0, a_start[blocking], side="right") - 1
    inside = (k >= 0) & (a_end[blocking] <= c.t1[np.clip(k, 0, None)])
    blocking, k = blocking[inside], k[inside]
    if len(blocking) == 0:
        return None
    s0, s1 = a_start[blocking], a_end[blocking]
    # Where each one's effect ends: the next blocking call in the same step, or the step's end
    # (the step-end synchronise drains the GPU whatever came before).
    nxt = np.append(s0[1:], np.iinfo(np.int64).max)
    same = np.append(k[1:] == k[:-1], False)
    until = np.where(same, np.minimum(nxt, c.t1[k]), c.t1[k])
    # A stall needs GPU work issued after the call in its window (the step's last synchronise stalls nothing)
    launches = np.sort(a_start[kind == API_LAUNCH])
    stalls = np.searchsorted(launches, s1, side="left") < np.searchsorted(launches, until, side="left")
    blocking, k, s0, s1, until = blocking[stalls], k[stalls], s0[stalls], s1[stalls], until[stalls]
    if len(blocking) == 0:
        return None
    # The saving: the call throws away the CPU's lead over the GPU (the time it waited in the
    # call, `lead`); without it the CPU would stay that far ahead and fill that much of the GPU
    # idle that follows until the next blocking point, whatever the CPU was doing meanwhile
    # (launching, framework dispatch, Python work: host-bound-gap may name the same idle; its
    # fix is another way to save it). So min(lead, that idle). The idle is counted from the call's
    # end: while the CPU waits in it the GPU runs work issued before the call, and gaps there (a
    # GPU-bound backward's own) are in the twin without the sync too; the queue drains as it returns.
    dev = c.idle().device(c.device)
    s_from = np.minimum(s1, until)
    busy_ns = dev.split(s_from, until)[0]
    idle_ns = (until - s_from) - busy_ns
    lead_ns = s1 - s0
    saved = np.minimum(lead_ns, idle_ns)
    names = [t.api_names[int(x)] for x in api["name"].to_numpy()[rows_[blocking]]]
    rows = [{"call": names[i], "start_ns": int(s0[i]), "end_ns": int(s1[i]), "call_ns": int(lead_ns[i]),
             "gpu_idle_until_next_block_ns": int(idle_ns[i]), "saving_ns": int(saved[i]),
             "range": c.range_of(int(s0[i]))}
            for i in np.argsort(-saved, kind="stable")[:10].tolist()]
    total = float(saved.sum())
    # what it claims is what it saves: the first `saved` ns of idle after each call (the lead it
    # keeps would fill the earliest idle), not the whole window
    pieces = [_first_ns(gs, ge, int(n)) for (gs, ge), n in
              zip((dev.gaps_in(int(a), int(b)) for a, b in zip(s_from, until)), saved)]
    claim = intervals.union(np.concatenate([q[0] for q in pieces]), np.concatenate([q[1] for q in pieces]))
    return Finding(
        "sync-stall", "blocking synchronisation inside the step",
        sorted({str(r["range"]) for r in rows}), to_ms(total / c.n),
        "per blocking call, min(time the CPU waited in it = the lead it throws away, GPU idle from its end "
        "to the next blocking call or the step's end), per step",
        "drop .item()/.cpu()/print(tensor) and torch.cuda.synchronize() from the step; log losses every N "
        "steps or accumulate them on the GPU; use non_blocking copies and events",
        {"calls_per_step": len(blocking) / c.n, "call_ns_per_step": float(lead_ns.sum()) / c.n,
         "gpu_idle_ns_per_step": float(idle_ns.sum()) / c.n},
        rows, int(rows[0]["start_ns"]), int(rows[0]["end_ns"]), claim=claim)


def _graph_replays(c: StepContext) -> tuple[np.ndarray, np.ndarray]:
    """The steps' CUDA graph replays on the device: from each cudaGraphLaunch call's start to the
    end of the last op it launched, merged, clipped to the steps."""

    t = c.trace
    ops, api = t.ops, t.api
    call = ops["api"].to_numpy()
    on = np.flatnonzero((ops["device"].to_numpy() == c.device) & (call >= 0))
    if len(on) == 0:
        return intervals.EMPTY
    graph_name = np.array([n.startswith(("cudaGraphLaunch", "cuGraphLaunch")) for n in t.api_names] + [False])
    on = on[graph_name[api["name"].to_numpy()[call[on]]]]
    if len(on) == 0:
        return intervals.EMPTY
    calls, first = np.unique(call[on], return_inverse=True)
    last_end = np.zeros(len(calls), dtype=np.int64)
    np.maximum.at(last_end, first, ops["end"].to_numpy()[on])
    replays = intervals.union(api["start"].to_numpy()[calls], last_end)
    return intervals.intersect(replays, intervals.union(c.t0, c.t1))


def launch_bound(c: StepContext) -> Finding | None:
    s = c.split()
    # What a replayed CUDA graph removes: the GPU idle while the CPU issues launches, and the
    # short host-bound stretches between launch bursts (framework dispatch; stretches of at least
    # host_gap_min_ns are one piece of Python/data work, host-bound-gap's). Idle inside a graph
    # replay (the GPU's own gaps between the graph's kernels) is what a graph leaves: not counted.
    dispatch = s.host_bound_ns - float(c.host_gaps[2].sum())
    rs, re_ = _graph_replays(c)
    in_graphs = float(c.idle().device(c.device).launch.measure(rs, re_).sum()) if len(rs) else 0.0
    per = (s.launch_bound_ns - in_graphs + dispatch) / c.n
    if per < threshold("launch_min_share") * c.step_ns:
        return None
    kernels = int(c.model.kernel_count[c.steps].sum()) / c.n
    return Finding(
        "launch-bound", "GPU waits on kernel launches: many short kernels issued one by one",
        ["step_N"], to_ms(per),
        f"launch-bound GPU idle outside CUDA graph replays + host-bound idle in stretches under "
        f"{threshold('host_gap_min_ns') / 1e6:.0f} ms (dispatch between launch bursts), per step: what replaying the step "
        "as a CUDA graph removes",
        "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), "
        "fuse elementwise ops (torch.compile), or raise the batch size so each kernel does more",
        {"launch_bound_ns_per_step": (s.launch_bound_ns - in_graphs) / c.n, "dispatch_host_ns_per_step": dispatch / c.n,
         "launch_bound_in_graph_replays_ns_per_step": in_graphs / c.n,
         "kernels_per_step": kernels, "busy_ns_per_step": s.busy_ns / c.n, "step_ns": c.step_ns},
        [], int(c.t0[0]), int(c.t1[0]), claim=_launch_claim(c, rs, re_))


def _launch_claim(c: StepContext, rs: np.ndarray, re_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """launch-bound's time: launch-bound idle in the steps outside graph replays, and host-bound
    idle in the steps outside the long stretches host-bound-gap names."""

    dev = c.idle().device(c.device)
    steps = intervals.union(c.t0, c.t1)
    launch = intervals.difference(intervals.intersect((dev.launch.start, dev.launch.end), steps),
                                  intervals.union(rs, re_))
    gaps = [dev.gaps_in(int(a), int(b)) for a, b in zip(c.t0, c.t1)]
    idle = intervals.union(np.concatenate([g[0] for g in gaps]), np.concatenate([g[1] for g in gaps]))
    host = intervals.difference(idle, c.launch_or_sync)
    gs, ge, _ = c.host_gaps
    short_host = intervals.difference(host, intervals.union(gs, ge))
    return intervals.union(np.concatenate([launch[0], short_host[0]]), np.concatenate([launch[1], short_host[1]]))
