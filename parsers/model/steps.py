"""The steps: which iterations of a trace are its steady state, and their time on both clocks.

One `Steps` per range model (`steps_of(model)`, built once and kept with the model, which the
trace keeps): the steady-state iterations (`step_N`) and their warm-ups (`warmup_N`), found by
name wherever they nest (model.iterations), the phases inside them (`forward`, `backward`,
`optimizer`, ...), each iteration's window on both clocks (`StepTimes`: its CPU span, its GPU
work's span, and its period, the pace the loop keeps), the processes they belong to, and the basis
they stand on: the export's NVTX `step_N`, iterations inferred from the kernel sequence
(model.inferred: their CPU span is a launch span), or none (the whole capture).

Where a trace holds several processes (ranks), `Steps` holds every process's iterations and
`of_process(pid)` gives one process's. `process_steps(trace, pid)` is the same notion read off the
trace without a range model (parsers.analyses.ranks maps it over many files).

Every analysis, the report and the TUI ask this module; only this module asks model.iterations
which ranges are steps (a contract in pyproject.toml keeps it so).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from nsight_tui.parsers.model.iterations import iteration_ranges, nesting_note, phase_ranges, process_ranges
from nsight_tui.parsers.model.inferred import with_inferred_ranges
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.gpu_memory import CUDA_ERROR_MEMORY_ALLOCATION
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace

STEP, WARMUP = conventions.STEP_RANGE, conventions.WARMUP_RANGE
PHASES, ATTENTION_PARTS = conventions.PHASES, conventions.ATTENTION_PARTS

# What the steps stand on, as the screen says it.
BASIS_NVTX = "NVTX step_N"
BASIS_INFERRED = "iterations inferred from the kernel sequence"
BASIS_NONE = "no iterations: the whole capture"


# -- time on both clocks -------------------------------------------------------------------------
# The CPU's clock: an NVTX range's span (start to end on its thread). The GPU's clock: the span of
# the GPU work attributed to it, from its first op's start to its last op's end (NVIDIA's
# `nvtx_gpu_proj_sum` "projection"). In a capture that does not synchronise at phase ends the GPU
# runs behind the CPU and the two differ by tens of percent; the step itself is its *period*.
@dataclass(frozen=True)
class StepTimes:
    """Iterations in time order with their times on both clocks, all in ns, one entry each.

    period: from this iteration's start to the next iteration's start on the same thread (the pace
    the loop keeps: in steady state, the pace the GPU sets); the last iteration ends when its GPU
    work ends (or its range, if later). `cpu` is the NVTX span, `gpu` NVIDIA's projection."""

    ids: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray  # the period's end
    cpu_ns: np.ndarray
    gpu_ns: np.ndarray
    # From its start to the end of its own work (its range or its GPU work, the later; an inferred one's
    # range runs to the next iteration's first launch, so its GPU work's end): what a clock around the
    # step's own code with a synchronise at its end reads. The rest of the period is the loop's between
    # steps (the next batch's fetch and copy, a trainer's hooks, logging).
    own_ns: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def between_ns(self) -> np.ndarray:
        """Per iteration: its period less its own time (the loop's time between steps)."""
        own = self.period_ns if self.own_ns is None else self.own_ns
        return np.maximum(self.period_ns - own, 0)

    @property
    def period_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def mean_period_ns(self) -> float | None:
        return float(self.period_ns.mean()) if self.n else None

    def gpu_lags(self) -> bool:
        """The GPU's work on these iterations outlasts their CPU spans (the CPU ran ahead)."""
        return bool(self.n) and gpu_lags(float(self.gpu_ns.sum()), float(self.cpu_ns.sum()))


# A step over this many times the median is a stall, or one kind of a loop's unlike steps (the
# slow_steps analysis's ratio: the same bar for the same steps)
STALL_RATIO = 1.5
# At most this share of the steps that slow (or one) is a stall now and then; more are the loop's own pattern
STALL_SHARE = 0.10


def steps_alike(periods: np.ndarray) -> bool:
    """Whether steady steps' periods are alike: at most one of them, or STALL_SHARE of them, over
    STALL_RATIO x their median (a stall now and then: in a 5-step window one stall is 20%); more that
    slow are the loop's own pattern."""
    p = np.asarray(periods, dtype=np.float64)
    if not len(p):
        return True
    return int(np.count_nonzero(p > STALL_RATIO * float(np.median(p)))) <= max(1.0, STALL_SHARE * len(p))


def typical_period_ns(periods: np.ndarray) -> int:
    """The pace a longer run keeps, from its steady steps' periods (ns): the median where the steps
    are alike (steps_alike), so that a stall now and then, which neither of two captures one change
    apart owns, does not move it; the mean where they are not: steps that alternate (a data loader
    with too few workers, a sync every other step) are the loop's own pace, and their median would
    be one kind of step, not the pace (2 loader workers on a ResNet-18 at batch 64: steps of ~25 and
    ~300 ms alternating, median 49.84, mean 156.27 ms; docs/whatif.md, "Held out: a real input
    pipeline")."""
    p = np.asarray(periods, dtype=np.float64)
    if not len(p):
        return 0
    return int(np.median(p)) if steps_alike(p) else int(p.mean())


# The GPU "lags" a range when its GPU work spans this much more than the range's CPU span: below
# it the two clocks agree within launch latency and jitter.
LAG_RATIO = 1.05


def gpu_lags(gpu_ns: float, cpu_ns: float) -> bool:
    return cpu_ns > 0 and gpu_ns > LAG_RATIO * cpu_ns


def period_ends(start: np.ndarray, last_end: np.ndarray, loop_starts: np.ndarray) -> np.ndarray:
    """Where each iteration's period ends: at the next start in `loop_starts` (every iteration of
    that loop, warm-ups too), else at `last_end` (the later of its range's and its GPU work's end)."""
    loop = np.sort(np.asarray(loop_starts, dtype=np.int64))
    after = np.searchsorted(loop, start, side="right")
    has_next = after < len(loop)
    return np.where(has_next, loop[np.minimum(after, max(len(loop) - 1, 0))] if len(loop) else 0, last_end)


def _parts_end(model: RangeModel, ids: np.ndarray) -> np.ndarray:
    """Per iteration: its parts' GPU work's end (the latest; its own where it has none). An inferred
    iteration's range runs to the next one's first launch, so what the loop launched between them (the
    next batch's copy) is attributed to it; its parts (forward, backward, optimizer) end with their own
    last launch, so their work is the step's."""
    out = model.gpu_end[ids].astype(np.int64).copy()
    if not len(ids) or model.parent is None:
        return out
    parent = np.asarray(model.parent, dtype=np.int64)
    child = np.flatnonzero(np.isin(parent, ids) & (model.proj_ns > 0))
    if len(child):
        at = {int(r): k for k, r in enumerate(ids.tolist())}
        latest: dict[int, int] = {}
        for c, p in zip(child.tolist(), parent[child].tolist()):
            latest[p] = max(latest.get(p, 0), int(model.gpu_end[c]))
        for p, e in latest.items():
            out[at[p]] = e
    return out


def _last_launch_position(api_start: np.ndarray, launch_t: np.ndarray, launch_pid: np.ndarray,
                          pids: np.ndarray) -> int:
    """The first position of the API table from which a failed call may have ended an iteration
    of `pids`: one that dies fails at or after its process's last launch (none comes after it),
    so no call starting before the earliest of those last launches can (in a table in start
    order: all but its tail). 0 (the whole table) where one of them launched nothing."""
    earliest = None
    for pid in pids.tolist():
        mine = launch_t[launch_pid == pid]
        if not len(mine):
            return 0
        earliest = int(mine.max()) if earliest is None else min(earliest, int(mine.max()))
    if earliest is None:
        return 0
    late = api_start >= earliest
    first = int(np.argmax(late))
    return first if late[first] else 0


# -- the steps of a range model ------------------------------------------------------------------
class Steps:
    """The iterations of one range model (every process's), in time order. Build with `steps_of`."""

    def __init__(self, model: RangeModel):
        self.model = model
        self.steady = iteration_ranges(model, STEP)  # step_N, time order
        self.warmup = iteration_ranges(model, WARMUP)  # warmup_N, time order
        for kept in (self.steady, self.warmup):  # shared by every analysis: none may change them
            kept.setflags(write=False)

    @property
    def n(self) -> int:
        return len(self.steady)

    @property
    def found(self) -> bool:
        return bool(len(self.steady))

    @cached_property
    def iterations(self) -> np.ndarray:
        """Every iteration, steps then warm-ups (the loop's: a period ends at the next of these)."""
        return np.concatenate([self.steady, self.warmup])

    @cached_property
    def died(self) -> np.ndarray:
        """The iterations (steps or warm-ups) the run died in (range positions, time order): a CUDA
        allocation of its process failed (cudaErrorMemoryAllocation) inside it and the process
        launched no GPU work after the last such failure (PyTorch's allocator retries a failed
        cudaMalloc after freeing its cache: a retry that succeeds goes on launching). Such an
        iteration never finished: its span is the time to the failure, no step's time. `steady`
        and `warmup` keep it (the report's out-of-memory section reads the run as it is);
        `finished` leaves it out."""
        trace = self.model.trace
        if not len(self.iterations):
            return self.steady[:0]
        model = self.model
        api = trace.api
        at = trace.ops["api"].to_numpy(np.int64) if len(trace.ops) else np.zeros(0, np.int64)
        at = at[at >= 0]
        launch_t = api["start"].to_numpy(np.int64)[at] if len(at) else np.zeros(0, np.int64)
        launch_pid = pid_of(api["gtid"].to_numpy(np.int64)[at]) if len(at) else np.zeros(0, np.int64)
        pids = np.unique(pid_of(model.r_gtid[self.iterations].astype(np.int64)))
        failed = trace.failed_calls_from(_last_launch_position(api["start"].to_numpy(np.int64), launch_t,
                                                               launch_pid, pids))
        if not len(failed):
            return self.steady[:0]
        failed = failed[failed["return_value"].to_numpy() == CUDA_ERROR_MEMORY_ALLOCATION]
        if not len(failed):
            return self.steady[:0]
        fail_t = failed["start"].to_numpy(np.int64)
        fail_pid = pid_of(failed["gtid"].to_numpy(np.int64))
        out = []
        for r in np.sort(self.iterations).tolist():
            pid = int(pid_of(np.array([int(model.r_gtid[r])], dtype=np.int64))[0])
            inside = (fail_pid == pid) & (fail_t >= model.r_start[r]) & (fail_t <= model.r_end[r])
            if not inside.any():
                continue
            last = int(fail_t[inside].max())
            if not ((launch_pid == pid) & (launch_t > last)).any():
                out.append(r)
        return np.asarray(out, dtype=self.steady.dtype)

    @cached_property
    def finished(self) -> np.ndarray:
        """The steady-state steps that ran to their end (`steady` less `died`)."""
        died = self.died
        return self.steady[~np.isin(self.steady, died)] if len(died) else self.steady

    @cached_property
    def basis(self) -> str:
        """What the steady-state steps stand on (BASIS_*)."""
        if not self.found:
            return BASIS_NONE
        domains = self.model.trace.range_domains.objects[self.steady]
        return BASIS_INFERRED if (domains == conventions.INFERRED_DOMAIN).all() else BASIS_NVTX

    @cached_property
    def pids(self) -> np.ndarray:
        """The processes the steady-state steps belong to."""
        return np.unique(pid_of(self.model.r_gtid[self.steady].astype(np.int64)))

    def of_process(self, pid: int) -> np.ndarray:
        """One process's steady-state steps, in time order."""
        return self.steady[pid_of(self.model.r_gtid[self.steady].astype(np.int64)) == pid]

    # -- windows on both clocks
    @cached_property
    def steady_times(self) -> StepTimes:
        return self.times(self.steady)

    def times(self, ids: np.ndarray) -> StepTimes:
        """The given iteration ranges' times (see StepTimes). The next iteration of one is the next
        `step_N` or `warmup_N` on its thread, so the last warm-up's period ends where step_0 starts."""
        model = self.model
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[np.lexsort((model.r_start[ids], model.r_gtid[ids]))] if len(ids) else ids
        start = model.r_start[ids].astype(np.int64)
        cpu_end = model.r_end[ids].astype(np.int64)
        gpu = model.proj_ns[ids].astype(np.int64)
        end = np.maximum(cpu_end, np.where(gpu > 0, model.gpu_end[ids], cpu_end))
        inferred = model.trace.range_domains.objects[ids] == conventions.INFERRED_DOMAIN if len(ids) else \
            np.zeros(0, dtype=bool)
        own = end.copy()
        if inferred.any():  # NVTX steps: their own end is their range's or their work's
            at = np.flatnonzero(inferred & (gpu > 0))
            own[at] = _parts_end(model, ids[at])
        own -= start
        every = self.iterations
        for g in np.unique(model.r_gtid[ids]):
            mine = np.flatnonzero(model.r_gtid[ids] == g)
            end[mine] = period_ends(start[mine], end[mine], model.r_start[every[model.r_gtid[every] == g]])
        order = np.argsort(start, kind="stable")
        return StepTimes(ids[order], start[order], end[order], (cpu_end - start)[order], gpu[order],
                         np.minimum(own, end - start)[order])

    def gpu_windows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each range's window on the GPU's clock, in the order of `ids`: an iteration its period
        (StepTimes), any other range the span of its GPU work, a range without GPU work its NVTX span."""
        model = self.model
        starts = model.r_start[ids].astype(np.int64)
        ends = model.r_end[ids].astype(np.int64)
        work = model.proj_ns[ids] > 0
        starts = np.where(work, model.gpu_end[ids] - model.proj_ns[ids], starts)
        ends = np.where(work, model.gpu_end[ids], ends)
        at = np.flatnonzero(np.isin(ids, self.iterations))
        if len(at):
            times = self.times(ids[at])
            where = {int(r): k for k, r in enumerate(times.ids.tolist())}
            k = np.array([where[int(r)] for r in ids[at]], dtype=np.int64)
            starts[at], ends[at] = times.start_ns[k], times.end_ns[k]
        return starts, ends

    def is_iteration(self, ids: np.ndarray) -> bool:
        """Whether these ranges are iterations (one name path: the first says what they all are)."""
        texts = self.model.trace.range_texts.objects if self.model.n else np.array([])
        first = str(texts[ids[0]]) if len(ids) else ""
        return bool(STEP.match(first) or WARMUP.match(first))

    # -- phases
    def phase(self, name: str, within: np.ndarray | None = None) -> np.ndarray:
        """Ranges named `name` inside the steady-state steps (or the iterations `within`), at any
        depth but not inside another iteration nested in them; by range position."""
        return phase_ranges(self.model, self.steady if within is None else within, name)

    def warmup_phase(self, name: str) -> np.ndarray:
        return self.phase(name, self.warmup)

    def named(self, name: str) -> np.ndarray:
        """Every range named `name`, wherever it is: what a trace without iterations has for a phase."""
        texts = self.model.trace.range_texts.objects if self.model.n else np.array([])
        return np.flatnonzero(texts == name)

    def nesting_note(self) -> str:
        """One line saying which iterations nest in which ("" when none)."""
        return nesting_note(self.model)


def steps_of(model: RangeModel) -> Steps:
    """The model's steps, built once and kept with it (the trace keeps the model)."""
    kept = model.__dict__.get("_steps")
    if kept is None:
        kept = model.__dict__["_steps"] = Steps(model)
    return kept


# -- one process's steps, read off the trace ------------------------------------------------------
@dataclass(frozen=True)
class ProcessSteps:
    """One process's steady-state steps without a range model (NVTX spans, time order): its own
    NVTX `step_N`, else (with `infer`) those inferred from the kernel sequence."""

    trace: Trace  # where they were found: the trace, or its copy with the inferred ranges
    pid: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    loop_start_ns: np.ndarray  # every iteration's start, warm-ups too: where a period ends
    domain: str  # "" (the export's NVTX) or the inferred ranges' domain

    @property
    def n(self) -> int:
        return len(self.start_ns)

    def periods(self, last_end: np.ndarray) -> np.ndarray:
        """Each step's period end (see period_ends), given the later of its range's and its GPU work's end."""
        return period_ends(self.start_ns, last_end, self.loop_start_ns)


def _ranges_source(trace: Trace, pid: int, pattern: Callable[[str], object], key=None) -> Trace:
    """`trace` where its NVTX has ranges matching `pattern` in this process; else the trace with
    the ranges inferred from its kernel sequence (the model's: model.inferred), where
    those have some; else `trace`."""
    if len(process_ranges(trace, pid, pattern, key)[0]):
        return trace
    inferred = with_inferred_ranges(trace)
    return inferred if inferred is not trace and len(process_ranges(inferred, pid, pattern, key)[0]) else trace


def _domain(trace: Trace, source: Trace) -> str:
    return "" if source is trace else conventions.INFERRED_DOMAIN


def _is_iteration_text(text: str) -> bool:
    return bool(STEP.match(text) or WARMUP.match(text))


def process_steps(trace: Trace, pid: int, infer: bool = True) -> ProcessSteps:
    """One process's steps read off the trace (see ProcessSteps); `infer=False`: the export's only."""
    source = _ranges_source(trace, pid, STEP.match, "step") if infer else trace
    start, end = process_ranges(source, pid, STEP.match, "step")
    loop = process_ranges(source, pid, _is_iteration_text, "iteration")[0] if infer else start
    return ProcessSteps(source, pid, start, end, loop, _domain(trace, source))


def process_phase(trace: Trace, pid: int, phase: str) -> tuple[np.ndarray, np.ndarray, str]:
    """One process's ranges named `phase` (NVTX spans, time order) and their domain: the export's,
    else those inferred from the kernel sequence."""
    def is_phase(text: str) -> bool:
        return text == phase

    source = _ranges_source(trace, pid, is_phase, ("phase", phase))
    start, end = process_ranges(source, pid, is_phase, ("phase", phase))
    return start, end, _domain(trace, source)
