"""What every rule needs once (`StepContext`): the steady-state steps of one process (model.steps),
their windows, the idle analysis on their GPU, the CPU's wait for the GPU."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.analyses.idle import API_LAUNCH, API_SYNC, idle_analysis
from nsight_tui.parsers.model.ranges import RangeModel, range_model
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK, pid_of
from nsight_tui.parsers.read.load import Trace

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.gpu_metrics import GemmCheck
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis
    from nsight_tui.parsers.analyses.ranks import Rank


# A launch call returns in a few µs; one that returns this much later waited for room in the
# launch queue (the CPU ran as far ahead as the driver allows): that excess is waiting for the GPU.
BLOCKED_LAUNCH_NS = 50_000


@dataclass
class StepContext:
    """What every rule needs once: the steady-state steps and the idle analysis."""

    trace: Trace
    model: RangeModel
    steps: np.ndarray  # range positions of step_N
    t0: np.ndarray
    t1: np.ndarray
    device: int
    rank: Rank | None = None  # a rank filter: that rank's steps and GPU, not rank 0's
    ncu: NcuAnalysis | None = None  # an Nsight Compute report joined to the trace (report --ncu), its results

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def step_ns(self) -> float:
        """The mean step period (model.steps.StepTimes): the basis of every per-step saving."""
        return float((self.t1 - self.t0).mean())

    def phase(self, name: str) -> np.ndarray:
        """The phase's ranges inside the steady-state steps, in time order (whatever the export's row order)."""
        ids = steps_of(self.model).phase(name, self.steps)
        return ids[np.argsort(self.model.r_start[ids], kind="stable")]

    def idle(self):
        return idle_analysis(self.trace)

    @cached_property
    def step_kernels(self) -> np.ndarray:
        """Op positions of the kernels inside the steps on the steps' GPU, in time order."""
        ops = self.trace.ops
        pos = self.model.ops_of(self.steps)
        pos = np.unique(pos[(ops["kind"].to_numpy()[pos] == KERNEL) & (ops["device"].to_numpy()[pos] == self.device)])
        return pos[np.argsort(ops["start"].to_numpy()[pos], kind="stable")]

    @cached_property
    def gemm_check(self) -> GemmCheck | None:
        """Sampled GPU metrics' verdict on the GEMMs' math units (analyses.gpu_metrics), None
        where nsys sampled no GPU metrics."""
        if not self.trace.gpu_metrics.present:
            return None
        from nsight_tui.parsers.analyses.gpu_metrics import gpu_metrics_analysis

        return gpu_metrics_analysis(self.model, dict(self.trace.meta().config)).gemm

    @cached_property
    def cpu_wait_ns(self) -> float:
        """Per step: the time the steps' process waited for the GPU in CUDA calls: synchronising
        calls (and blocking copies), and launch calls held longer than BLOCKED_LAUNCH_NS (the launch
        queue full: the CPU is as far ahead as the driver lets it be)."""
        api = self.trace.api
        rows = process_api(self)
        if len(rows) == 0:
            return 0.0
        kind = self.idle().api_kind[rows]
        start = api["start"].to_numpy()[rows].astype(np.int64)
        end = api["end"].to_numpy()[rows].astype(np.int64)
        k = np.searchsorted(self.t0, start, side="right") - 1
        inside = (k >= 0) & (start < self.t1[np.clip(k, 0, None)])
        end = np.minimum(end, self.t1[np.clip(k, 0, None)])
        dur = np.where(inside, end - start, 0)
        waited = np.where(kind == API_SYNC, dur, np.where(kind == API_LAUNCH, np.maximum(dur - BLOCKED_LAUNCH_NS, 0), 0))
        return float(waited.sum()) / self.n

    @cached_property
    def launch_or_sync(self) -> tuple[np.ndarray, np.ndarray]:
        """The device's launch- and sync-bound idle (the rest of idle is host-bound)."""
        from nsight_tui.parsers.model import intervals

        dev = self.idle().device(self.device)
        return intervals.union(np.concatenate([dev.launch.start, dev.sync.start]),
                               np.concatenate([dev.launch.end, dev.sync.end]))

    def split(self):
        return self.idle().windows(self.t0, self.t1, [self.device], top_gaps=0).devices[0].split

    @cached_property
    def host_gaps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The idle stretches inside the steps whose host-bound part is at least host_gap_min_ns:
        (start, end, host-bound ns), in time order: host-bound-gap's; shorter host-bound stretches are
        framework dispatch between launch bursts (launch-bound counts them)."""
        dev = self.idle().device(self.device)
        parts = [dev.gaps_in(int(a), int(b)) for a, b in zip(self.t0, self.t1)]  # a loop over steps, not ops
        gs = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        ge = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        host = dev.split(gs, ge)[3] if len(gs) else np.zeros(0, np.int64)
        keep = host >= threshold("host_gap_min_ns")
        return gs[keep], ge[keep], host[keep]

    def range_of(self, t: int) -> str:
        """The innermost range on the main thread open at t (or the step)."""
        m = self.model
        g = m.r_gtid[self.steps[0]]
        mask = (m.r_gtid == g) & (m.r_start <= t) & (m.r_end > t)
        ids = np.flatnonzero(mask)
        if len(ids) == 0:
            return "step_N"
        inner = ids[np.argmax(m.r_start[ids])]
        return range_path(m, int(inner))


def range_path(m: RangeModel, i: int) -> str:
    texts = m.trace.range_texts.objects
    parts = []
    while i >= 0:
        parts.append(re.sub(r"\d+$", "N", str(texts[i])))
        i = int(m.parent[i]) if hasattr(m, "parent") else -1
    return "/".join(reversed(parts))


def to_ms(ns: float) -> float:
    return float(ns) / 1e6


def process_api(c: StepContext) -> np.ndarray:
    """Rows of trace.api made by the steps' process (a multi-rank export holds every rank's calls)."""
    api = c.trace.api
    if len(api) == 0:
        return np.zeros(0, dtype=np.int64)
    pid = int(c.model.r_gtid[c.steps[0]]) & PID_MASK
    return np.flatnonzero((api["gtid"].to_numpy() & PID_MASK) == pid)


def context(trace: Trace, attribution: str = "process", rank: Rank | None = None,
            ncu: NcuAnalysis | None = None) -> StepContext | None:
    """The steady-state steps the rules read: rank 0's (the lowest rank's) in an export of several,
    or `rank`'s (a rank filter), on that rank's GPU."""
    model = range_model(trace, attribution)
    every = steps_of(model)
    if not every.found:
        return None
    # One process's steps: an export around torchrun holds every rank's, and each rank is a run
    # of its own (per-step figures over two ranks' overlapping windows would count time twice).
    # The lowest rank's (rank 0's) where the ranks are known; exposed-communication looks at all.
    from nsight_tui.parsers.analyses.ranks import find_ranks

    first = rank.pid if rank is not None else next((r.pid for r in find_ranks(trace) if r.pid in every.pids),
                                                   int(pid_of(model.r_gtid[every.steady[:1]])[0]))
    steps = every.of_process(first)
    if len(steps) == 0:
        return None
    devices = [rank.device] if rank is not None else idle_analysis(trace).devices_of_process(int(model.r_gtid[steps[0]]))
    if not devices:
        return None
    # Each step's window is its period (this step's start to the next's), not its NVTX span: on a
    # capture without phase syncs the GPU works on a step long after the CPU closed its range.
    times = every.times(steps)
    return StepContext(trace, model, times.ids, times.start_ns, times.end_ns, devices[0], rank, ncu)
