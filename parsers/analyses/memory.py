"""GPU memory: where it goes, and why a run runs out of it.

Two sources, each saying what it measures:

- nsys's memory events (`--cuda-memory-usage=true`, read.gpu_memory): the device memory the
  process holds from the driver (cudaMalloc'd, by memory kind), over time. PyTorch's caching
  allocator shows here as its *segments* (torch's "reserved"), plus what libraries cudaMalloc
  themselves (cuBLAS's workspaces) and modules' static globals ("Device Static"). The peak, when,
  and the NVTX path open on the main thread then; per range instance what was allocated, freed,
  the net and the peak inside.
- torch's own figures, recorded by the capture in each step mark (conventions.STEP_MEMORY):
  bytes in live tensors ("allocated") and in the allocator's segments ("reserved") at each phase's
  end, with the phase's peaks. Per phase over the steady-state steps: what forward keeps for
  backward, what backward frees, what the optimizer step leaves.

An out-of-memory run: the failed allocation (a cudaMalloc whose return value is
cudaErrorMemoryAllocation), the NVTX path open then, the bytes in use and the GPU's total.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.analyses.memory_owners import ALLOCATOR, OwnerGroup, calls_of, owner_groups, owners_of
from nsight_tui.parsers.model.steps import STEP, WARMUP, steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.gpu_memory import ALLOCATION, CUDA_ERROR_MEMORY_ALLOCATION, DEVICE_STATIC_KIND

DEFINITIONS = {
    "in_use_bytes": "device memory the process holds from the driver (nsys memory events: cudaMalloc'd, "
                    "all kinds): PyTorch's caching allocator's segments (torch's reserved) plus libraries' own "
                    "allocations and static globals",
    "reserved_bytes": "torch.cuda.memory_reserved(): the caching allocator's segments (its step mark)",
    "allocator_peak_bytes": "nsys memory events: the most held in PyTorch's caching allocator's segments alone "
                            "(each segment's cudaMalloc comes right after the allocator's cudaStreamIsCapturing "
                            "check on its thread); torch's max_memory_reserved from the events",
    "beside_allocator_bytes": "nsys memory events: held at the in-use peak outside torch's allocator (libraries' own "
                              "cudaMalloc, static globals): peak_bytes minus the allocator's segments then",
    "owners": "nsys memory events by owner (memory_owners.OWNER_HELP): allocations, their bytes, sizes, the CUDA "
              "call before each on its thread",
    "allocated_bytes": "torch.cuda.memory_allocated(): bytes in live tensors (its step mark)",
    "kept_bytes": "allocated at the phase's end minus at its start (forward: what it keeps for backward)",
}


@dataclass
class RangeMemory:
    """Device memory inside one range instance, from nsys's events."""

    path: str
    start_ns: int
    end_ns: int
    allocated_bytes: int  # sum of allocations inside
    freed_bytes: int  # sum of frees inside
    net_bytes: int  # allocated - freed
    in_use_start_bytes: int  # held when the range began
    peak_bytes: int  # the most held inside


@dataclass
class PhaseMemory:
    """One phase over the steady-state steps: torch's figures (medians over the steps' marks) and
    the segments nsys saw the allocator take inside the phase (summed over the steps)."""

    phase: str
    steps: int
    allocated_start_bytes: int | None = None
    allocated_end_bytes: int | None = None
    kept_bytes: int | None = None  # allocated_end - allocated_start
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    reserved_end_bytes: int | None = None
    segments_grown_bytes: int | None = None  # nsys: allocations inside the phase's instances, all steps
    in_use_end_bytes: int | None = None  # nsys: held at the phase's end (last step)


@dataclass
class OutOfMemory:
    t_ns: int
    call: str  # the CUDA runtime call that failed (cudaMalloc…)
    return_value: int
    corr: int
    thread: str
    path: str  # NVTX path open on the calling thread (else the main thread) at the failure
    in_use_bytes: int | None  # nsys: held when the call failed
    total_memory_bytes: int | None  # TARGET_INFO_GPU.totalMemory
    failed_calls: int  # failed allocations in the run (PyTorch retries after freeing its cache)
    workload_path: str | None = None  # the path the workload recorded (nsight-tui:oom mark)
    message: str = ""


@dataclass
class MemoryReport:
    has_events: bool
    gpu_total_bytes: int | None = None
    device: int | None = None  # the GPU these figures are of (with several, the one that held the most)
    device_peaks: dict[int, int] = field(default_factory=dict)  # GPU -> its peak in use
    peak_bytes: int | None = None
    peak_t_ns: int | None = None
    peak_path: str = ""
    peak_by_kind: dict[str, int] = field(default_factory=dict)  # kind label -> the most held of that kind
    static_bytes: int = 0  # "Device Static": modules' __device__ globals
    allocator_peak_bytes: int | None = None  # torch's caching allocator's segments at their most (nsys)
    beside_allocator_bytes: int | None = None  # held outside torch's allocator at the in-use peak (nsys)
    owners: dict[str, OwnerGroup] = field(default_factory=dict)  # memory_owners: allocator / library / static
    final_bytes: int | None = None
    allocations: int = 0
    frees: int = 0
    torch_peak_reserved_bytes: int | None = None  # max over the step marks' phases
    # where torch's figures were read (the marks, or STEM.steps.json beside the export); None: nowhere
    torch_source: str | None = "step marks"
    torch_peak_allocated_bytes: int | None = None
    optimizer_state_bytes: int | None = None  # allocated at the first steady step's start minus before any
    phases: list[PhaseMemory] = field(default_factory=list)
    steps: list[RangeMemory] = field(default_factory=list)  # every iteration and phase instance
    out_of_memory: OutOfMemory | None = None
    times_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    in_use: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # after each event

    def in_use_at(self, t_ns: int) -> int:
        """Held at time t (after every event at or before t)."""
        i = int(np.searchsorted(self.times_ns, t_ns, side="right")) - 1
        return int(self.in_use[i]) if i >= 0 else 0


def signed_bytes(events) -> np.ndarray:
    """+bytes per allocation, -bytes per free (a free with no byte count takes its address's allocation's)."""
    nbytes = events["bytes"].to_numpy(np.int64)
    op = events["op"].to_numpy(np.int64)
    address = events["address"].to_numpy(np.int64)
    signed = np.where(op == ALLOCATION, nbytes, -nbytes)
    if ((op != ALLOCATION) & (nbytes == 0)).any():
        held: dict[int, int] = {}
        for i in range(len(op)):
            if op[i] == ALLOCATION:
                held[int(address[i])] = int(nbytes[i])
            elif nbytes[i] == 0:
                signed[i] = -held.pop(int(address[i]), 0)
    return signed


def _path(model: RangeModel, ids: list[int]) -> str:
    texts = model.trace.range_texts.objects
    return "/".join(str(texts[i]) for i in ids)


def _main_gtid(model: RangeModel, gpid: int | None = None) -> int | None:
    if gpid is not None and gpid in model.main_threads:
        return int(model.main_threads[gpid])
    return int(next(iter(model.main_threads.values()))) if model.main_threads else None


def range_memory(report: MemoryReport, model: RangeModel, ids) -> list[RangeMemory]:
    """Allocated, freed, net and peak inside each of these range instances."""
    out = []
    t = report.times_ns
    delta = np.diff(np.concatenate(([0], report.in_use))) if len(t) else np.zeros(0, np.int64)
    for i in np.atleast_1d(ids).tolist():
        start, end = int(model.r_start[i]), int(model.r_end[i])
        lo, hi = int(np.searchsorted(t, start, side="left")), int(np.searchsorted(t, end, side="right"))
        inside = delta[lo:hi]
        at_start = int(report.in_use[lo - 1]) if lo > 0 else 0
        peak = max(at_start, int(report.in_use[lo:hi].max())) if hi > lo else at_start
        out.append(RangeMemory(path=_path(model, model.stack_at(int(model.r_gtid[i]), start, end)),
                               start_ns=start, end_ns=end, allocated_bytes=int(inside[inside > 0].sum()),
                               freed_bytes=int(-inside[inside < 0].sum()), net_bytes=int(inside.sum()),
                               in_use_start_bytes=at_start, peak_bytes=peak))
    return out


def _median(values: list[int]) -> int | None:
    return int(statistics.median(values)) if values else None


def _phases_from_marks(steps: list[dict]) -> tuple[list[PhaseMemory], dict]:
    """Per phase over the steady steps' marks; also torch's peaks over every mark and the optimizer state."""
    extra: dict = {}
    marked = [s for s in steps if isinstance(s.get(conventions.STEP_MEMORY), dict)]
    if not marked:
        return [], extra
    every = [m for s in marked for name, m in s[conventions.STEP_MEMORY].items() if isinstance(m, dict)]
    peaks_r = [m[conventions.PEAK_RESERVED] for m in every if conventions.PEAK_RESERVED in m]
    peaks_a = [m[conventions.PEAK_ALLOCATED] for m in every if conventions.PEAK_ALLOCATED in m]
    extra["torch_peak_reserved_bytes"] = max(peaks_r) if peaks_r else None
    extra["torch_peak_allocated_bytes"] = max(peaks_a) if peaks_a else None
    steady = [s for s in marked if STEP.match(str(s.get("name", "")))]
    first = marked[0][conventions.STEP_MEMORY].get(conventions.MEMORY_START, {})
    if steady and WARMUP.match(str(marked[0].get("name", ""))) and conventions.ALLOCATED in first:
        steady_start = steady[0][conventions.STEP_MEMORY].get(conventions.MEMORY_START, {})
        if conventions.ALLOCATED in steady_start:
            # AdamW's state (and anything else the first steps leave for good): the weights alone before
            extra["optimizer_state_bytes"] = int(steady_start[conventions.ALLOCATED] - first[conventions.ALLOCATED])
    phases = []
    for phase in conventions.PHASES:
        rows = []
        for s in steady:
            memory = s[conventions.STEP_MEMORY]
            if phase not in memory:
                continue
            order = [conventions.MEMORY_START, *[p for p in conventions.PHASES if p in memory]]
            before = memory.get(order[order.index(phase) - 1], {})
            rows.append((before.get(conventions.ALLOCATED), memory[phase]))
        if not rows:
            continue
        starts = [b for b, _ in rows if b is not None]
        ends = [m.get(conventions.ALLOCATED) for _, m in rows if m.get(conventions.ALLOCATED) is not None]
        kept = [m[conventions.ALLOCATED] - b for b, m in rows if b is not None and conventions.ALLOCATED in m]
        phases.append(PhaseMemory(
            phase=phase, steps=len(rows), allocated_start_bytes=_median(starts), allocated_end_bytes=_median(ends),
            kept_bytes=_median(kept),
            peak_allocated_bytes=_median([m[conventions.PEAK_ALLOCATED] for _, m in rows if conventions.PEAK_ALLOCATED in m]),
            peak_reserved_bytes=_median([m[conventions.PEAK_RESERVED] for _, m in rows if conventions.PEAK_RESERVED in m]),
            reserved_end_bytes=_median([m[conventions.RESERVED] for _, m in rows if conventions.RESERVED in m])))
    return phases, extra


def _oom_mark(trace) -> dict | None:
    marks = trace.marks
    for text in marks["text"] if len(marks) else []:
        mark = conventions.parse_mark(text)
        if mark is not None and mark[0] == conventions.OOM and isinstance(mark[1], dict):
            return mark[1]
    return None


def _out_of_memory(trace, model: RangeModel, report: MemoryReport, failed, total: dict[int, int]) -> OutOfMemory | None:
    api = trace.api
    if len(failed) == 0:
        return None
    names = np.asarray(trace.api_names, dtype=object)
    by_corr = {}
    if len(api):
        for corr, gtid, name in zip(api["corr"].to_numpy(), api["gtid"].to_numpy(), api["name"].to_numpy()):
            by_corr[(int(corr), int(gtid))] = str(names[int(name)])
    rows = []
    for row in failed.itertuples(index=False):
        call = by_corr.get((int(row.corr), int(row.gtid)), "")
        if call.startswith("cudaMalloc") and int(row.return_value) == CUDA_ERROR_MEMORY_ALLOCATION:
            rows.append((int(row.start), call, row))
    if not rows:
        return None
    rows.sort(key=lambda r: r[0])
    start, call, row = rows[0]
    gtid = int(row.gtid)
    stack = model.stack_at(gtid, start)
    if not stack:  # a thread with no ranges of its own (the autograd thread): the main thread's
        main = _main_gtid(model, gtid >> 24 << 24 if gtid > 0 else None)
        stack = model.stack_at(main, start) if main is not None else []
    mark = _oom_mark(trace) or {}
    return OutOfMemory(t_ns=start, call=call, return_value=int(row.return_value), corr=int(row.corr),
                       thread=trace.thread_label(gtid), path=_path(model, stack),
                       in_use_bytes=report.in_use_at(start) if report.has_events else None,
                       total_memory_bytes=max(total.values()) if total else None, failed_calls=len(rows),
                       workload_path=mark.get("path"), message=str(mark.get("message") or ""))


def memory_analysis(model: RangeModel) -> MemoryReport:
    trace = model.trace
    gm = trace.gpu_memory
    report = MemoryReport(has_events=gm.present, gpu_total_bytes=max(gm.total_memory.values()) if gm.total_memory else None)
    events = gm.events
    if gm.present and len(events):
        devices = events["device"].to_numpy(np.int64)
        for d in np.unique(devices).tolist():
            report.device_peaks[int(d)] = int(np.cumsum(signed_bytes(events[devices == d])).max())
        report.device = max(report.device_peaks, key=lambda d: report.device_peaks[d])
        if len(report.device_peaks) > 1:  # one GPU's memory: the one that held the most
            events = events[devices == report.device].reset_index(drop=True)
            report.gpu_total_bytes = gm.total_memory.get(report.device, report.gpu_total_bytes)
        signed = signed_bytes(events)
        report.times_ns = events["start"].to_numpy(np.int64)
        report.in_use = np.cumsum(signed)
        report.allocations = int((signed > 0).sum())
        report.frees = int((signed < 0).sum())
        top = int(np.argmax(report.in_use))
        report.peak_bytes, report.peak_t_ns = int(report.in_use[top]), int(report.times_ns[top])
        report.final_bytes = int(report.in_use[-1])
        kinds = events["kind"].to_numpy(np.int64)
        for kind in np.unique(kinds).tolist():
            held = np.cumsum(np.where(kinds == kind, signed, 0))
            report.peak_by_kind[gm.kinds.get(kind, str(kind))] = int(held.max())
        report.static_bytes = report.peak_by_kind.get(gm.kinds.get(DEVICE_STATIC_KIND, "Device Static"), 0)
        previous, thread = calls_of(events, trace.api, trace.api_names)
        owner = owners_of(events, previous)
        report.owners = owner_groups(events, signed, owner, previous, thread)
        if ALLOCATOR in report.owners:  # told apart only where the allocator's cudaStreamIsCapturing is seen
            allocator = np.cumsum(np.where(owner == ALLOCATOR, signed, 0))
            report.allocator_peak_bytes = int(allocator.max())
            report.beside_allocator_bytes = report.peak_bytes - int(allocator[top])
        main = _main_gtid(model, int(events["gpid"].iloc[top]))
        if main is not None:
            report.peak_path = _path(model, model.stack_at(main, report.peak_t_ns))
    meta = trace.meta()
    phases, extra = _phases_from_marks(meta.steps)
    report.torch_source = meta.source or None
    for key, value in extra.items():
        setattr(report, key, value)
    steps = steps_of(model)
    iterations = np.concatenate([steps.warmup, steps.steady])
    if report.has_events and len(iterations):
        ids = sorted([*iterations.tolist(), *[int(i) for p in conventions.PHASES
                                              for i in steps.phase(p, iterations)]],
                     key=lambda i: (int(model.r_start[i]), int(model.depth[i])))
        report.steps = range_memory(report, model, ids)
        for phase in phases:
            inst = steps.phase(phase.phase)
            if len(inst):
                rows = range_memory(report, model, inst)
                phase.segments_grown_bytes = sum(r.allocated_bytes for r in rows)
                phase.in_use_end_bytes = report.in_use_at(int(model.r_end[inst[-1]]))
    report.phases = phases
    report.out_of_memory = _out_of_memory(trace, model, report, gm.failed_calls, gm.total_memory)
    return report
