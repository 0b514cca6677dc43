"""The rule on a straggler: one rank runs what the others do not (a pause of its own, slower kernels),
arrives last at the collectives, and every other rank waits for it there."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.exception import NsightError
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.process_ranks import rank_of
from nsight_tui.parsers.replay import contention, straggler as replay_straggler
from nsight_tui.parsers.replay.predict import graph_of


def straggler(c: StepContext) -> Finding | None:
    """Where several ranks share collectives: the one whose collectives start latest (on average, behind
    the first rank's), paired step by step with the others (replay.straggler), and what it runs longer
    than they do at the same place: its pauses (host time at least host_gap_min_ns longer than the
    others' before the same call), other kernels (ops over OP_OUTLIER x the others') and blocking calls of
    its own (the time spent in them: what the fix takes away at most). Its estimate:
    that excess per step (the replay's saving stands beside it: the others stop waiting for it only as
    far as it then holds no step of its own)."""
    if c.rank is not None:  # under a rank filter the rules read one rank's steps: no other to pair with
        return None
    collective = contention.of_trace(c.trace).collective  # the replay's own, read once per trace
    if len(np.unique(pid_of(c.trace.ops["gpid"].to_numpy(np.int64)[collective]))) < 2:
        return None  # no collective of two processes: one rank (the replay's graph not built for nothing)
    try:
        g, sr = graph_of(c.trace)
    except NsightError:  # no CUDA calls to pair (an export without its runtime table)
        return None
    ev = replay_straggler.even_out(g, sr, int(threshold("host_gap_min_ns")))
    if ev is None:
        return None
    host, ops = g.delta_ns - ev.delta_ns, g.op_dur - ev.op_dur
    # a blocking call of its own: the time its thread spent in it (the wait the fix takes away, at most)
    waited = sum(int(g.delta_ns[k]) for k in ev.unblocked)
    excess = replay_straggler.excess_ns_per_step(g, ev)  # the edit's measure too, against the same share
    if excess < threshold("comm_min_share") * c.step_ns:
        return None
    me = rank_of(c.trace, ev.pid)
    who = f"rank {me.rank}" if me is not None and me.rank is not None else f"pid {ev.pid}"
    top = np.argsort(-host, kind="stable")[:10]
    top = top[host[top] > 0]
    rows = [{"start_ns": int(g.pt_time[k] - g.delta_ns[k]), "end_ns": int(g.pt_time[k]), "longer_ns": int(host[k]),
             "thread": c.trace.thread_label(g.thread_gtids[int(g.pt_thread[k])])} for k in top.tolist()]
    first = (int(g.pt_time[top[0]] - g.delta_ns[top[0]]), int(g.pt_time[top[0]])) if len(top) else (None, None)
    kernels = np.flatnonzero(ops > 0)
    return Finding(
        "straggler", f"the other ranks wait for {who} in their collectives",
        ["step_N"], to_ms(excess),
        f"per step of {who} (its collectives start {ev.lateness_ns / 1e6:,.2f} ms behind the first rank's, mean): "
        f"what it runs longer than the other {len(ev.others)} rank{'s' if len(ev.others) > 1 else ''} at the same "
        f"place, its pauses (host time at least {threshold('host_gap_min_ns') / 1e6:g} ms longer before the same "
        f"CUDA call), other kernels (over {replay_straggler.OP_OUTLIER:g}x the same kernel's time there) and blocking "
        "calls of its own (the others make none there: the time it spent in them)",
        f"find what {who} runs that the others do not: a pause of its own (data loading, logging, a sync or a "
        "checkpoint on that rank), kernels of another precision or on a slower GPU; `nsight-tui ranks` says why it "
        "is late",
        {"straggler_rank": me.rank if me is not None else None, "pid": ev.pid, "lateness_ns": ev.lateness_ns,
         "pause_ns_per_step": int(host.sum()) / ev.steps, "pauses": int((host > 0).sum()),
         "slower_op_ns_per_step": int(ops.sum()) / ev.steps, "slower_ops": len(kernels),
         "own_sync_ns_per_step": waited / ev.steps, "own_syncs": len(ev.unblocked),
         "ranks": len(ev.others) + 1, "step_ns": c.step_ns},
        rows, *first)

