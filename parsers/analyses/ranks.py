"""Ranks: per-GPU, per-process figures, communication against compute, and the straggler.

A *rank* is one GPU as used by one process: an export made around `torchrun` holds several
(one per process), a per-rank export (`--output report_%q{RANK}`) holds one, and a process that
drives two GPUs counts as two. Totals that sum all GPUs mislead; everything here is per rank.

Definitions (all in ns, on one rank's GPU):
- *busy*: the union of all its GPU ops (kernels, copies, sets).
- *communication*: the union of its collective/peer kernels (family `communication`: NCCL,
  NVSHMEM, ...); *compute*: the union of its other kernels.
- *exposed communication*: communication time during which no compute kernel ran on that GPU,
  i.e. `communication - |communication ∩ compute|`: the part that a perfect overlap would hide.
  *overlap* = 1 - exposed / communication.
- *steps*: the rank's process's `step_N` ranges (steady state); per phase (forward, backward,
  optimizer inside them) the same figures restricted to the phase's *GPU windows*: each phase
  instance's GPU time, the first start to the last end of the ops its process launched while the
  range was open (the tree's GPU column). Not the range's CPU span: without a sync at phase ends
  the GPU runs behind the CPU, and the CPU span holds the previous phase's kernels.
- *straggler*: in data-parallel training the collectives make every rank wait for the slowest,
  so step times agree and the slow rank shows as the one with the most compute per step and the
  least exposed communication (it waits least). We name the rank with the largest compute per
  step and how far it is above the median rank.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.target_info import session_start_utc_ns
from nsight_tui.parsers.read.load import Trace
# which rank each process is (the file name, the capture's config mark), read off the export: read's, so
# the replay names ranks as this module does; the names kept here for the analyses and the TUI
from nsight_tui.parsers.read.process_ranks import Rank as Rank, find_ranks as find_ranks
from nsight_tui.parsers.read.process_ranks import rank_from_name as rank_from_name
from nsight_tui.parsers.read.rank_merge import MergedRanks, clock_fix_ns
from nsight_tui.parsers.model.steps import process_phase, process_steps
from nsight_tui.parsers.model.ranges import RangeModel, range_model

# kernels.families.COMMUNICATION, not imported at the top: the TUI's first screen finds ranks without the families
COMMUNICATION = "communication"


@dataclass
class PhaseComm:
    """One phase summed over the steady-state steps of one rank."""

    instances: int = 0
    cpu_ns: int = 0  # the phase ranges' own CPU time (NVTX span)
    gpu_ns: int = 0  # its GPU time: per instance, first start to last end of the GPU work launched inside it
    busy_ns: int = 0  # busy, comm, exposed: inside those GPU windows
    comm_ns: int = 0
    exposed_comm_ns: int = 0
    domain: str = ""  # "inferred": the phase ranges were inferred from the kernel sequence (no NVTX ones)

    @property
    def prefix(self) -> str:
        """`inferred:` before the phase's name where it was inferred (the tree's name), else nothing."""
        return f"{self.domain}:" if self.domain else ""


@dataclass
class RankSummary:
    rank: Rank
    kernels: int
    kernel_ns: int  # sum of kernel durations
    busy_ns: int
    span_ns: int  # first op start to last op end
    comm_kernels: int
    comm_ns: int
    compute_ns: int
    exposed_comm_ns: int
    steps_ns: list[int] = field(default_factory=list)  # step_N periods (start to the next's start), time order
    compute_per_step_ns: list[int] = field(default_factory=list)
    phases: dict[str, PhaseComm] = field(default_factory=dict)
    # "inferred": no NVTX step_N on this rank, its iterations inferred from the kernel sequence
    # (model.inferred, shown `inferred:step_N` as in the tree)
    step_domain: str = ""
    session_start_utc_ns: int | None = None  # the export's own clock origin (per-rank files differ)
    # the starts of its communication kernels, in order (its own clock): when it reached each collective
    collective_starts_ns: list[int] = field(default_factory=list, repr=False)
    collective_ends_ns: list[int] = field(default_factory=list, repr=False)  # and when each ended, alike
    # its GPU's kernels while a collective ran beside them, over the same kernels alone (name, grid and
    # block, run both ways in this capture: replay.contention, which the what-if re-times by); None
    # where too few kernels ran both ways to say; and how many did
    compute_beside_comm: float | None = None
    compute_beside_comm_kernels: int = 0

    @property
    def overlap(self) -> float | None:
        return 1 - self.exposed_comm_ns / self.comm_ns if self.comm_ns else None

    @property
    def step_label(self) -> str:
        """What its steps are: `step_N`, or `inferred:step_N` (the tree's name for them)."""
        return f"{self.step_domain}:step_N" if self.step_domain else "step_N"

    @property
    def median_step_ns(self) -> float | None:
        return float(np.median(self.steps_ns)) if self.steps_ns else None

    @property
    def median_compute_per_step_ns(self) -> float | None:
        return float(np.median(self.compute_per_step_ns)) if self.compute_per_step_ns else None


@dataclass
class Straggler:
    rank: Rank
    basis: str  # what was compared
    value_ns: float
    median_ns: float  # the median rank's value

    @property
    def excess_ns(self) -> float:
        return self.value_ns - self.median_ns


@dataclass
class RunRanks:
    """Every rank of a run, from one export or a folder of per-rank exports."""

    ranks: list[RankSummary]
    assumption: str  # how the ranks were found, in words
    straggler: Straggler | None
    notes: list[str] = field(default_factory=list)
    straggler_why: str = ""  # why the straggler is late, in words (analyses.straggler_why; "" where it cannot tell)

    def step_stats(self) -> dict[str, float] | None:
        """min / median / max over ranks of each rank's median step time."""
        meds = [r.median_step_ns for r in self.ranks if r.median_step_ns is not None]
        if not meds:
            return None
        return {"min_ns": float(np.min(meds)), "median_ns": float(np.median(meds)), "max_ns": float(np.max(meds))}


# -- per-rank figures ---------------------------------------------------------------------------
def summarise_rank(trace: Trace, rank: Rank, session_start_utc_ns: int | None = None) -> RankSummary:
    from nsight_tui.parsers.kernels.families import name_families  # (the TUI's first screen finds ranks only)

    ops = trace.ops
    mine = (ops["gpid"].to_numpy(np.int64) == rank.gpid) & (ops["device"].to_numpy(np.int64) == rank.device)
    start = ops["start"].to_numpy(np.int64)[mine]
    end = ops["end"].to_numpy(np.int64)[mine]
    is_kernel = ops["kind"].to_numpy()[mine] == KERNEL
    fam = name_families(trace)[ops["name"].to_numpy()[mine]]
    is_comm = is_kernel & (fam == COMMUNICATION)
    busy = intervals.union(start, end)
    comm = intervals.union(start[is_comm], end[is_comm])
    compute = intervals.union(start[is_kernel & ~is_comm], end[is_kernel & ~is_comm])
    hidden = intervals.overlap(comm, compute)
    summary = RankSummary(
        rank=rank, kernels=int(is_kernel.sum()), kernel_ns=int((end - start)[is_kernel].sum()),
        busy_ns=intervals.length(busy), span_ns=int(end.max() - start.min()) if len(start) else 0,
        comm_kernels=int(is_comm.sum()), comm_ns=intervals.length(comm), compute_ns=intervals.length(compute),
        exposed_comm_ns=intervals.length(comm) - hidden, session_start_utc_ns=session_start_utc_ns,
    )
    # The model's iterations: the export's NVTX step_N, else those inferred from the kernel
    # sequence (an unannotated capture: the tree, pace and findings have them too), labelled so.
    own = process_steps(trace, rank.pid)
    summary.step_domain = own.domain
    s_start, s_end = own.start_ns, own.end_ns
    # Each step is its period (model.steps): to the next iteration's start; the last ends
    # with the GPU work launched inside it (the GPU runs behind the CPU without phase syncs).
    last_end = s_end.copy()
    call = ops["api"].to_numpy()[mine]
    launched = call >= 0
    # when each op's launching call began (any thread of the process: process-wide attribution)
    call_start = trace.api["start"].to_numpy(np.int64)[call[launched]] if launched.any() else np.zeros(0, np.int64)
    if len(s_start):
        k = np.searchsorted(s_start, call_start, side="right") - 1
        inside = (k >= 0) & (call_start <= s_end[np.clip(k, 0, None)])
        np.maximum.at(last_end, k[inside], end[launched][inside])
    s_end = own.periods(last_end)
    summary.steps_ns = (s_end - s_start).tolist()
    summary.compute_per_step_ns = [intervals.length(intervals.clip(compute, a, b)) for a, b in zip(s_start, s_end)]
    if is_comm.any():
        from nsight_tui.parsers.replay.contention import MIN_KERNELS, of_trace

        c = of_trace(trace)
        summary.compute_beside_comm_kernels = c.kernels.get(rank.device, 0)
        if summary.compute_beside_comm_kernels >= MIN_KERNELS:
            summary.compute_beside_comm = c.factor[rank.device]
    summary.collective_starts_ns = start[is_comm].tolist()
    summary.collective_ends_ns = end[is_comm].tolist()
    if len(s_start):
        steps = intervals.union(s_start, s_end)
        exposed = intervals.difference(comm, compute)
        for phase in conventions.PHASES:
            p_start, p_end, domain = process_phase(trace, rank.pid, phase)
            inside = intervals.covered_before(steps, p_end) - intervals.covered_before(steps, p_start) == p_end - p_start
            p_start, p_end = p_start[inside], p_end[inside]
            if not len(p_start):
                continue
            g_start, g_end = _gpu_windows(p_start, p_end, call_start, start[launched], end[launched])
            window = intervals.union(g_start, g_end)
            summary.phases[phase] = PhaseComm(
                instances=len(p_start), cpu_ns=int((p_end - p_start).sum()), gpu_ns=int((g_end - g_start).sum()),
                busy_ns=intervals.overlap(busy, window), comm_ns=intervals.overlap(comm, window),
                exposed_comm_ns=intervals.overlap(exposed, window), domain=domain)
    return summary


def _gpu_windows(r_start: np.ndarray, r_end: np.ndarray, call_start: np.ndarray, op_start: np.ndarray,
                 op_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per range (sorted, not overlapping each other) the span of the ops whose launching call
    began inside it: first start to last end; ranges that launched nothing are left out."""
    k = np.searchsorted(r_start, call_start, side="right") - 1
    inside = (k >= 0) & (call_start <= r_end[np.clip(k, 0, None)])
    first = np.full(len(r_start), np.iinfo(np.int64).max, np.int64)
    last = np.full(len(r_start), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, k[inside], op_start[inside])
    np.maximum.at(last, k[inside], op_end[inside])
    some = last > first
    return first[some], last[some]


def straggler(summaries: list[RankSummary]) -> Straggler | None:
    """The rank the others wait for. First by arrival at the collectives: a rank that reaches the
    k-th collective (its communication kernel starts) later than the others keeps them waiting
    inside theirs; its mean lateness behind the earliest rank is the figure. Where the collectives
    cannot be lined up on one clock, by compute per step (supporting evidence, not the wait)."""
    late = arrival_lateness(summaries)
    if late is not None:
        values = np.array([late[id(s)] for s in summaries], dtype=float)
        top = int(np.argmax(values))
        return Straggler(summaries[top].rank, "arrival at the collectives (mean lateness of its communication "
                         "kernels' starts behind the first rank's: the others wait inside theirs)",
                         float(values[top]), float(np.median(values)))
    per_step = [(s.median_compute_per_step_ns, s) for s in summaries if s.median_compute_per_step_ns is not None]
    basis = "median compute (non-communication kernel time) per step"
    if len(per_step) < 2:
        per_step = [(float(s.compute_ns), s) for s in summaries]
        basis = "compute (non-communication kernel time) over the capture"
    if len(per_step) < 2:
        return None
    values = np.array([v for v, _ in per_step], dtype=float)
    top = int(np.argmax(values))
    return Straggler(per_step[top][1].rank, basis, float(values[top]), float(np.median(values)))


def arrival_lateness(summaries: list[RankSummary]) -> dict[int, float] | None:
    """Per rank (keyed by id of its summary): the mean over collectives of how much later its
    communication kernel started than the earliest rank's. None when there are fewer than two
    ranks with collectives, when they ran a different number of them, or when their exports'
    clocks cannot be aligned (per-rank files without a session start time)."""
    ranks = [s for s in summaries if s.collective_starts_ns]
    if len(ranks) < 2 or len(ranks) != len(summaries):
        return None
    if len({len(s.collective_starts_ns) for s in ranks}) != 1:
        return None
    files = {s.rank.file for s in ranks}
    if len(files) > 1 and any(s.session_start_utc_ns is None for s in ranks):
        return None
    origin = np.array(file_clocks(ranks)) if len(files) > 1 else np.zeros(len(ranks), np.int64)
    starts = np.array([np.asarray(s.collective_starts_ns, dtype=np.int64) for s in ranks]) + origin[:, None]
    lateness = (starts - starts.min(axis=0)).mean(axis=1)
    return {id(s): float(v) for s, v in zip(ranks, lateness)}


def file_clocks(ranks: list[RankSummary]) -> list[int]:
    """Per rank of per-rank files (each with its session start, as many collectives each): where its
    file's clock starts on one clock (ns), its session start (UTC), then moved so that its collectives
    end when the first rank's do (read.rank_merge.clock_fix_ns, the merged trace's rule; here the
    collectives matched by their order, as the arrivals are compared)."""
    origin = [int(s.session_start_utc_ns or 0) for s in ranks]
    ends = [np.asarray(s.collective_ends_ns, dtype=np.int64) + o for s, o in zip(ranks, origin)]
    return [o + clock_fix_ns(ends[0], e) for e, o in zip(ends, origin)]


def summarise_trace(trace: Trace, file_rank: int | None = None) -> list[RankSummary]:
    origin = session_start_utc_ns(trace.path)
    return [summarise_rank(trace, r, origin) for r in find_ranks(trace, file_rank)]


def run_ranks(summaries: list[RankSummary], assumption: str, notes: list[str] | None = None) -> RunRanks:
    return RunRanks(summaries, assumption, straggler(summaries), list(notes or []))


def ranks_of_trace(trace: Trace) -> RunRanks:
    summaries = summarise_trace(trace)
    sources = sorted({s.rank.rank_source for s in summaries})
    where = (f"{len(trace.members)} per-rank exports on one clock (read.rank_merge)" if isinstance(trace, MergedRanks)
             else "one export")
    assumption = (f"{len(summaries)} rank(s) in {where}: one per process and GPU with GPU work; "
                  f"rank numbers from {', '.join(sources) or 'nothing'}")
    return run_ranks(summaries, assumption)


# -- one rank's view of the range model -------------------------------------------------------
def rank_model(model: RangeModel, rank: Rank) -> RangeModel:
    """`model` seen from one rank: the ranges of its process, and every GPU figure (kernels,
    kernel time, busy, projection, the kernel tables) over its GPU's ops only. Kept with the
    trace, once per attribution, main thread and rank."""
    key = ("rank_model", model.mode, model.main_thread_spec, rank.gpid, rank.device)
    derived = model.trace.derived
    if key not in derived:
        ops = model.trace.ops
        mine = (ops["gpid"].to_numpy(np.int64) == rank.gpid) & (ops["device"].to_numpy(np.int64) == rank.device)
        derived[key] = model.restricted(mine, {rank.gpid}, rank.label)
    return derived[key]


def scoped_model(trace: Trace, attribution: str, main_thread: str | None, rank: Rank | None) -> RangeModel:
    """The range model of every rank (`rank` None) or of one."""
    model = range_model(trace, attribution, main_thread)
    return model if rank is None else rank_model(model, rank)


@dataclass
class PhaseSpread:
    """One phase across ranks: its time per steady-state step on each rank, and the slowest."""

    phase: str
    per_rank_ns: list[tuple[Rank, float]]  # (rank, the phase's GPU time per step, mean over its steps)
    min_ns: float
    median_ns: float
    max_ns: float
    slowest: Rank

    @property
    def excess_ns(self) -> float:
        """How far the slowest rank is above the median rank."""
        return self.max_ns - self.median_ns


def phase_spread(run: RunRanks) -> list[PhaseSpread]:
    """Per phase (forward, backward, optimizer) found on at least two ranks: min / median / max
    over ranks of the phase's GPU time per step (what the GPU ran, not when the CPU issued it),
    and the slowest rank."""
    out = []
    for phase in conventions.PHASES:
        per_rank = [(s.rank, s.phases[phase].gpu_ns / s.phases[phase].instances) for s in run.ranks
                    if phase in s.phases and s.phases[phase].instances]
        if len(per_rank) < 2:
            continue
        values = np.array([v for _, v in per_rank], dtype=float)
        top = int(np.argmax(values))
        out.append(PhaseSpread(phase, per_rank, float(values.min()), float(np.median(values)), float(values.max()),
                               per_rank[top][0]))
    return out
