"""Why the straggler (analyses.ranks) arrives late at the collectives: its CPU issued them late, or
its GPU reached them late (more compute before them, or compute slowed by communication running
beside it), from one export holding every rank (one clock).

A rank's lateness at collective k is when its communication kernel started minus the earliest
rank's (ranks.arrival_lateness). Split by when the kernel's launching call began: the issue
lateness (CPU clock) is the part the host caused; the rest built up on the GPU, behind that rank's
own work. Compute per step and the compute that overlapped communication come from the ranks'
summaries (ranks.RankSummary).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.analyses.ranks import COMMUNICATION
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.ids import KERNEL

CPU_SHARE = 0.5  # the CPU's issue lateness at least this share of the lateness: the host made it late
COMPUTE_MARGIN = 0.05  # compute per step this much above the others' median: more (or slower) GPU work


@dataclass(frozen=True)
class StragglerWhy:
    rank: int | None  # the straggler's rank number (None where the export does not say)
    process: int  # its pid
    collectives: int  # collectives lined up across the ranks
    lateness_ns: float  # mean lateness of its communication kernels' starts behind the earliest rank's
    issue_lateness_ns: float  # of it: its launching calls' lateness (CPU clock)
    gpu_lateness_ns: float  # the rest: built up on its GPU (lateness - issue lateness)
    compute_per_step_ns: float | None  # its median compute per step
    others_compute_per_step_ns: float | None  # the other ranks' median of theirs
    overlap_per_step_ns: float | None  # its compute that ran beside its communication kernels, per step
    others_overlap_per_step_ns: float | None
    verdict: str

    @property
    def why(self) -> str:
        return self.verdict


def _comm_times(trace, gpid: int, device: int) -> tuple[np.ndarray, np.ndarray]:
    """(kernel start, launching call start) of the rank's communication kernels, in start order."""
    ops = trace.ops
    fam = name_families(trace)[ops["name"].to_numpy()]
    sel = ((ops["gpid"].to_numpy(np.int64) == gpid) & (ops["device"].to_numpy(np.int64) == device)
           & (ops["kind"].to_numpy() == KERNEL) & (fam == COMMUNICATION))
    start = ops["start"].to_numpy(np.int64)[sel]
    call = ops["api"].to_numpy()[sel]
    api_start = trace.api["start"].to_numpy(np.int64)
    launched = np.where(call >= 0, api_start[np.clip(call, 0, max(len(api_start) - 1, 0))] if len(api_start) else 0,
                        start)
    order = np.argsort(start, kind="stable")
    return start[order], launched[order]


def _per_step(summary, value_ns: float) -> float | None:
    n = len(summary.steps_ns)
    return value_ns / n if n else None


def straggler_why(trace, summaries, straggler) -> StragglerWhy | None:
    """The straggler's why, or None: fewer than two ranks with the same number of collectives in this
    one export (per-rank files: each file's clock; this needs the launches on one clock)."""
    if straggler is None:
        return None
    times = [_comm_times(trace, s.rank.gpid, s.rank.device) for s in summaries]
    counts = {len(t[0]) for t in times}
    if len(summaries) < 2 or len(counts) != 1 or 0 in counts:
        return None
    starts = np.array([t[0] for t in times])
    launches = np.array([t[1] for t in times])
    late = (starts - starts.min(axis=0)).mean(axis=1)
    issue = (launches - launches.min(axis=0)).mean(axis=1)
    me = next(i for i, s in enumerate(summaries) if s.rank.gpid == straggler.rank.gpid
              and s.rank.device == straggler.rank.device)
    s = summaries[me]
    others = [o for i, o in enumerate(summaries) if i != me]
    compute = s.median_compute_per_step_ns
    others_compute = [o.median_compute_per_step_ns for o in others if o.median_compute_per_step_ns is not None]
    others_med = float(np.median(others_compute)) if others_compute else None
    overlap = _per_step(s, float(s.comm_ns - s.exposed_comm_ns))
    others_overlap = [v for o in others if (v := _per_step(o, float(o.comm_ns - o.exposed_comm_ns))) is not None]
    others_overlap_med = float(np.median(others_overlap)) if others_overlap else None
    lateness, issued = float(late[me]), float(issue[me])
    gpu = lateness - issued
    ms = lambda v: f"{v / 1e6:.2f} ms"  # noqa: E731
    if lateness > 0 and issued >= CPU_SHARE * lateness:
        verdict = (f"its CPU issued the collectives late: its launching calls began {ms(issued)} after the first "
                   f"rank's on average, its communication kernels started {ms(lateness)} after (the host side: data "
                   "loading, Python, launches)")
    elif compute is not None and others_med is not None and compute > (1 + COMPUTE_MARGIN) * others_med:
        verdict = (f"its GPU reached the collectives late ({ms(gpu)} of {ms(lateness)} after the launches): more "
                   f"compute per step than the other ranks ({ms(compute)} vs {ms(others_med)})")
        if overlap is not None and others_overlap_med is not None and overlap > (1 + COMPUTE_MARGIN) * others_overlap_med:
            verdict += (f", {ms(overlap)} of it beside its communication kernels (vs {ms(others_overlap_med)}): "
                        "compute slowed by NCCL running at the same time")
    else:
        verdict = (f"its GPU reached the collectives late ({ms(gpu)} of {ms(lateness)} after the launches) with the "
                   "same compute per step as the others: its kernels queued behind its own earlier GPU work")
    return StragglerWhy(s.rank.rank, s.rank.pid, int(counts.pop()), lateness, issued, gpu, compute, others_med,
                        overlap, others_overlap_med, verdict)


def with_why(trace, run):
    """`run` (analyses.ranks.RunRanks of this one export) with its straggler's why said, where it can be."""
    why = straggler_why(trace, run.ranks, run.straggler)
    run.straggler_why = why.verdict if why is not None else ""
    return run
