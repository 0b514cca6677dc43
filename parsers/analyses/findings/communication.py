"""Collective communication the step waited on (per rank), and the rule on it."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.idle import API_SYNC, idle_analysis
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.model.steps import process_steps
from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK
from nsight_tui.parsers.read.load import Trace


def waited_communication(trace: Trace, rank) -> dict:
    """One rank's communication over its steady-state steps: `comm_ns` (its collective kernels'
    union), `exposed_ns` (of that, the time no compute kernel ran) and `waited_ns` (of the
    exposed time, the part during which the step was held up by it: compute work already issued
    and queued behind it, or a CPU thread of the rank blocked in a synchronising call). Exposed
    communication while the CPU is still issuing work sits in launch gaps that overlap would not
    shorten. Per the rank's `step_N` ranges; `steps` is their count."""
    from nsight_tui.parsers.analyses.ranks import COMMUNICATION

    ops, api = trace.ops, trace.api
    mine = (ops["gpid"].to_numpy(np.int64) == rank.gpid) & (ops["device"].to_numpy(np.int64) == rank.device)
    start, end = ops["start"].to_numpy(np.int64)[mine], ops["end"].to_numpy(np.int64)[mine]
    kernel = ops["kind"].to_numpy()[mine] == KERNEL
    comm_op = kernel & (name_families(trace)[ops["name"].to_numpy()[mine]] == COMMUNICATION)
    comm = intervals.union(start[comm_op], end[comm_op])
    compute = intervals.union(start[kernel & ~comm_op], end[kernel & ~comm_op])
    exposed = intervals.difference(comm, compute)
    # compute ops issued and not started: from their launching call's return to their start
    call = ops["api"].to_numpy()[mine]
    issued = ~comm_op & (call >= 0)
    a_end = api["end"].to_numpy(np.int64) if len(api) else np.zeros(0, np.int64)
    queued_s, queued_e = a_end[call[issued]], start[issued]
    pid_rows = np.flatnonzero((api["gtid"].to_numpy() & PID_MASK) == (rank.gpid & PID_MASK)) if len(api) else \
        np.zeros(0, np.int64)
    sync = pid_rows[idle_analysis(trace).api_kind[pid_rows] == API_SYNC]
    held = intervals.union(np.concatenate((queued_s, api["start"].to_numpy(np.int64)[sync] if len(sync) else [])),
                           np.concatenate((queued_e, a_end[sync] if len(sync) else [])))
    waited = intervals.intersect(exposed, held)
    own = process_steps(trace, rank.pid, infer=False)
    s0, s1 = own.start_ns, own.end_ns
    steps = intervals.union(s0, s1)
    return {"steps": len(s0), "step_ns": float((s1 - s0).mean()) if len(s0) else 0.0,
            "comm_ns": intervals.overlap(comm, steps), "exposed_ns": intervals.overlap(exposed, steps),
            "waited_ns": intervals.overlap(waited, steps)}


def exposed_communication(c: StepContext) -> Finding | None:
    from nsight_tui.parsers.analyses.ranks import find_ranks

    ranks = find_ranks(c.trace)
    rows = []
    for r in ranks:
        w = waited_communication(c.trace, r)
        if w["steps"] and w["comm_ns"]:
            rows.append({"rank": r.rank, "steps": w["steps"], "step_ns": w["step_ns"],
                         "comm_ns_per_step": w["comm_ns"] / w["steps"],
                         "exposed_comm_ns_per_step": w["exposed_ns"] / w["steps"],
                         "waited_comm_ns_per_step": w["waited_ns"] / w["steps"]})
    if not rows:
        return None
    # Data-parallel ranks move in lockstep: a rank that reaches a collective early waits inside it
    # for the slowest rank, and that wait (the straggler's gap) is no overlap problem. The rank that
    # waits least sets the pace; what its step waits on communication is what overlap can save.
    pace = min(rows, key=lambda x: x["waited_comm_ns_per_step"])
    alone = " (only this rank is in the export: part of its wait may be for a slower rank)" if len(rows) == 1 else ""
    if c.rank is not None:  # a rank filter: that rank's own exposed communication
        pace = next((x for x in rows if x["rank"] == c.rank.rank), pace)
        alone = (f" (rank {c.rank.rank} alone, under the rank filter: part of its wait may be for a slower rank)"
                 if pace["waited_comm_ns_per_step"] > min(x["waited_comm_ns_per_step"] for x in rows) else "")
    per = pace["waited_comm_ns_per_step"]
    if per < threshold("comm_min_share") * pace["step_ns"]:
        return None
    return Finding(
        "exposed-communication", "collective communication not hidden behind compute",
        ["step_N/backward"], to_ms(per),
        "per step of the rank that waits least (the others also wait for it): collective time with no compute "
        "kernel running while the step waited on it (compute work queued behind it, or the CPU blocked in a "
        "synchronise)" + alone,
        "overlap it: DDP(bucket_cap_mb=..., gradient_as_bucket_view=True), no_sync() for accumulation, "
        "FSDP prefetch; check the interconnect (NCCL_DEBUG=INFO)",
        {"waited_comm_ns_per_step": per, "exposed_comm_ns_per_step": pace["exposed_comm_ns_per_step"],
         "comm_ns_per_step": pace["comm_ns_per_step"], "rank": pace["rank"], "ranks": len(ranks)}, rows)
