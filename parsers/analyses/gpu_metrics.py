"""Sampled GPU metrics per range: SM active, tensor active, DRAM bandwidth, ... averaged
over the samples nsys took inside each range, and whether tensor activity confirms the GEMM math
path the kernel names suggest.

What a figure is: nsys samples the GPU at a fixed rate (read.gpu_metrics); a sample at time t
holds the GPU's state over [t, t + 1/rate) (on the H100 exports, SMs Active follows the kernels'
busy share of the period after t with correlation 0.998, of the period before with 0.94). A range's
average is the mean of the samples whose timestamp lies in its window on the GPU's clock: a step's
period (its start to the next iteration's start: the pace the GPU sets, its idle time included), any
other range's GPU work (the first start to the last end of the GPU ops attributed to it), or its
NVTX span where it has none. Not the NVTX span throughout: without phase syncs the GPU runs behind
the CPU, and a phase's NVTX span then holds the previous phase's kernels. Per range name,
the mean of the samples of all its instances pooled. Samples, not every cycle: a range shorter than a
few sampling periods gets few samples (each row says how many).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.analyses.roofline import gemm_math_path
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.model.steps import PHASES, steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read.gpu_metrics import GpuMetricSeries
from nsight_tui.parsers.read.ids import KERNEL

# The metrics the report shows first, by name as nsys writes them (unit aside); the rest follow.
KEY_METRICS = ("SMs Active", "Tensor Active", "SM Issue", "DRAM Read Bandwidth", "DRAM Write Bandwidth",
               "GR Active", "Compute Warps in Flight")
SM_ACTIVE, TENSOR_ACTIVE, DRAM_READ, DRAM_WRITE = KEY_METRICS[:2] + KEY_METRICS[3:5]
# GEMM check: samples whose period is mostly GEMM kernels, and the tensor activity that says which
# math units ran them.
GEMM_SHARE = 0.5
TENSOR_IDLE_PCT = 1.0  # tensor-core GEMMs below this: the tensor cores sat idle
TENSOR_BUSY_PCT = 5.0  # CUDA-core GEMMs above this: something used the tensor cores
TENSOR_PATHS = ("tf32", "bf16", "fp8")


@dataclass
class RangeMetrics:
    """The samples of one range name (all its instances pooled), or of one instance."""

    name: str
    instances: int
    span_ns: int  # summed windows of the instances (see gpu_windows)
    samples: int
    means: dict[str, float | None]  # metric (full name, unit in brackets) -> mean of the samples
    per_instance: list[dict] = field(default_factory=list)  # {start_ns, end_ns, samples, means} by start


@dataclass
class GemmCheck:
    """Does tensor activity confirm the math path the GEMM kernels' names suggest?"""

    named_path: str  # fp32 (CUDA cores) | tf32 | bf16 | fp8 (tensor cores), by GEMM kernel time
    gemm_samples: int  # samples whose period is at least GEMM_SHARE GEMM kernels
    tensor_active_pct: float | None  # their mean Tensor Active
    verdict: str  # confirmed | refuted | unknown
    text: str


@dataclass
class GpuMetricsReport:
    present: bool
    gpu_type_id: int | None = None
    rate_hz: float | None = None
    total_samples: int = 0
    metrics: list[dict] = field(default_factory=list)  # {name, unit, full_name}
    ranges: list[RangeMetrics] = field(default_factory=list)
    gemm: GemmCheck | None = None
    definition: str = ""


DEFINITION = ("nsys --gpu-metrics-devices samples the GPU at a fixed rate; a sample at t holds the GPU's "
              "state over [t, t + 1/rate); a range's figure is the mean of the samples whose timestamp lies in "
              "its window on the GPU's clock [start, end]: a step's period, another range's GPU work (first start to last "
              "end), its NVTX span where it has no GPU work (all instances of the name pooled); units as nsys names them "
              "(Throughput % = percent of the unit's peak)")


def window(series: GpuMetricSeries, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of the samples whose timestamp lies in any [start, end] (sorted, each once)."""
    t = series.times_ns
    lo = np.searchsorted(t, np.asarray(starts, dtype=np.int64), side="left")
    hi = np.searchsorted(t, np.asarray(ends, dtype=np.int64), side="right")
    if not len(lo):
        return np.zeros(0, dtype=np.int64)
    parts = [np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def means(series: GpuMetricSeries, positions: np.ndarray) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for i, metric in enumerate(series.metrics):
        col = series.values[positions, i]
        col = col[~np.isnan(col)]
        out[metric.full_name] = float(col.mean()) if len(col) else None
    return out


def gpu_windows(model: RangeModel, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each range's window on the GPU's clock, in the order of `ids` (model.steps.Steps.gpu_windows):
    an iteration (`step_N`, `warmup_N`) its period, any other range the span of its GPU work, a range
    without GPU work its NVTX span."""
    return steps_of(model).gpu_windows(ids)


def range_metrics(model: RangeModel, series: GpuMetricSeries, ids: np.ndarray, name: str,
                  instances: bool = True) -> RangeMetrics:
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    ids = ids[np.argsort(model.r_start[ids], kind="stable")]
    starts, ends = gpu_windows(model, ids)
    pos = window(series, starts, ends)
    each = []
    if instances:
        for s, e in zip(starts.tolist(), ends.tolist()):
            mine = window(series, np.array([s]), np.array([e]))
            each.append({"start_ns": s, "end_ns": e, "samples": len(mine), "means": means(series, mine)})
    return RangeMetrics(name, len(ids), int((ends - starts).sum()), len(pos), means(series, pos), each)


def instance_metrics(model: RangeModel, series: GpuMetricSeries, range_id: int) -> RangeMetrics:
    """One range instance (for the TUI's detail)."""
    return range_metrics(model, series, np.array([range_id]), str(model.range_key[range_id]))


def _targets(model: RangeModel) -> list[tuple[str, np.ndarray]]:
    """Steady-state steps and their phases; without `step_N`, the main thread's top two levels."""
    steps = steps_of(model)
    if steps.found:
        out = [("step", steps.steady)]
        out += [(p, ids) for p in PHASES if len(ids := steps.phase(p))]
        return out
    out = []
    for group in model.aggregated_groups:
        if group.is_main:
            for node in group.roots:
                out.append((node.label, node.ids))
                out += [(f"{node.label}/{c.label}", c.ids) for c in node.children if not c.is_ops]
    return out


def gemm_coverage(model: RangeModel, series: GpuMetricSeries) -> np.ndarray:
    """Per sample: the share of its period [t, t + 1/rate) that GEMM kernels ran (their union)."""
    trace = model.trace
    ops = trace.ops
    kern = np.flatnonzero(ops["kind"].to_numpy() == KERNEL)
    fam = name_families(trace)[ops["name"].to_numpy()[kern]] if len(kern) else np.zeros(0, dtype=object)
    gemm = kern[fam == "gemm"]
    if not len(gemm) or series.rate_hz is None:
        return np.zeros(len(series.times_ns))
    s, e = ops["start"].to_numpy()[gemm], ops["end"].to_numpy()[gemm]
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new = np.concatenate([[True], s[1:] > e[:-1]])  # a kernel starting after all before it ended
    group = np.cumsum(new) - 1
    us, ue = s[new], np.zeros(int(new.sum()), dtype=np.int64)
    np.maximum.at(ue, group, e)
    covered = np.concatenate([[0], np.cumsum(ue - us)])

    def before(x: np.ndarray) -> np.ndarray:  # GEMM time before x
        i = np.searchsorted(us, x, side="right") - 1
        j = np.maximum(i, 0)
        return np.where(i >= 0, covered[j] + np.clip(np.minimum(x, ue[j]) - us[j], 0, None), 0)

    period = 1e9 / series.rate_hz
    t = series.times_ns
    return (before((t + period).astype(np.int64)) - before(t)) / period


def gemm_check(model: RangeModel, series: GpuMetricSeries, config: dict) -> GemmCheck | None:
    tensor = series.find(TENSOR_ACTIVE)
    trace = model.trace
    if tensor is None or not len(trace.ops):
        return None
    kern = np.flatnonzero(trace.ops["kind"].to_numpy() == KERNEL)
    fam = name_families(trace)[trace.ops["name"].to_numpy()[kern]] if len(kern) else np.zeros(0, dtype=object)
    if not (fam == "gemm").any():
        return None
    path = gemm_math_path(trace, kern, config)
    mostly = np.flatnonzero(gemm_coverage(model, series) >= GEMM_SHARE)
    col = series.column(tensor)[mostly]
    col = col[~np.isnan(col)]
    units = "tensor cores" if path in TENSOR_PATHS else "CUDA cores"
    if not len(col):
        return GemmCheck(path, 0, None, "unknown",
                         f"GEMM kernels named {path} ({units}), but no sample's period is ≥ {GEMM_SHARE:.0%} GEMM "
                         "kernels (too few samples: raise --gpu-metrics-frequency)")
    active = float(col.mean())
    where = f"mean Tensor Active {active:.1f}% over the {len(col)} samples whose period is ≥ {GEMM_SHARE:.0%} GEMM kernels"
    if path in TENSOR_PATHS and active < TENSOR_IDLE_PCT:
        return GemmCheck(path, len(col), active, "refuted",
                         f"GEMMs named as {path} tensor-core kernels but tensor cores idle: {where}")
    if path not in TENSOR_PATHS and active >= TENSOR_BUSY_PCT:
        return GemmCheck(path, len(col), active, "refuted",
                         f"GEMMs named as fp32 CUDA-core kernels but tensor cores busy: {where}")
    return GemmCheck(path, len(col), active, "confirmed",
                     f"GEMMs named as {path} ({units}); {where} agrees")


def gpu_metrics_analysis(model: RangeModel, config: dict | None = None) -> GpuMetricsReport:
    gm = model.trace.gpu_metrics
    if not gm.present or not gm.series:
        return GpuMetricsReport(False, definition=DEFINITION)
    series = max(gm.series, key=lambda s: len(s.times_ns))  # the GPU sampled most (one per run here)
    order = sorted(series.metrics, key=lambda m: (KEY_METRICS.index(m.name) if m.name in KEY_METRICS
                                                  else len(KEY_METRICS), series.metrics.index(m)))
    ranges = [range_metrics(model, series, ids, name) for name, ids in _targets(model)]
    return GpuMetricsReport(
        True, series.type_id, series.rate_hz, len(series.times_ns),
        [{"name": m.name, "unit": m.unit, "full_name": m.full_name} for m in order],
        ranges, gemm_check(model, series, config or {}), DEFINITION)
