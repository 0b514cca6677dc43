"""GPU metrics as nsys samples them with `--gpu-metrics-devices=all`, read on first use.

- TARGET_INFO_GPU_METRICS: per event type (`typeId`, one per sampled GPU) the metrics it samples,
  `metricId` -> `metricName` with its unit in brackets: `SMs Active [Throughput %]`,
  `Tensor Active [Throughput %]`, `DRAM Read Bandwidth [Throughput %]`, `GPC Clock Frequency [MHz]`
  (the names nsys 2025.3 writes for an H100; other GPUs have other sets, so nothing here assumes one).
- GPU_METRICS: one row per metric per sample: `timestamp` (ns, the trace's clock), `typeId`,
  `metricId`, `value` (an integer: a percentage of the unit's peak, or MHz).

The GPU samples at a fixed rate (`--gpu-metrics-frequency`, 10 kHz by default); each sample is
the GPU's state over its last sampling period, so figures over a range are samples, not a count
of every cycle. Nothing here is read while loading a trace: `Trace.gpu_metrics` calls
`read_gpu_metrics` the first time an analysis asks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.columns import Fetched, Tables

SAMPLES = "GPU_METRICS"
NAMES = "TARGET_INFO_GPU_METRICS"
_UNIT = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]*)\]\s*$")


@dataclass(frozen=True)
class Metric:
    metric_id: int
    full_name: str  # as nsys writes it: `SMs Active [Throughput %]`
    name: str  # `SMs Active`
    unit: str  # `Throughput %`, `MHz`, `Avg` ...


@dataclass
class GpuMetricSeries:
    """One sampled GPU (one `typeId`): sample times and a value per metric and sample."""

    type_id: int
    metrics: list[Metric]
    times_ns: np.ndarray  # (samples,) sorted
    values: np.ndarray  # (samples, metrics) float64; NaN where a sample lacks the metric

    @property
    def rate_hz(self) -> float | None:
        """Samples a second, from the median spacing of the samples."""
        if len(self.times_ns) < 2:
            return None
        step = float(np.median(np.diff(self.times_ns)))
        return 1e9 / step if step > 0 else None

    def column(self, metric: Metric) -> np.ndarray:
        return self.values[:, self.metrics.index(metric)]

    def find(self, name: str) -> Metric | None:
        """The metric whose name (unit aside) is `name`, else the first whose name starts with it."""
        exact = [m for m in self.metrics if m.name == name]
        if exact:
            return exact[0]
        return next((m for m in self.metrics if m.name.startswith(name)), None)


@dataclass
class GpuMetrics:
    present: bool = False  # the export has sampled metrics (nsys --gpu-metrics-devices)
    series: list[GpuMetricSeries] = field(default_factory=list)


def split_name(full: str) -> tuple[str, str]:
    """`SMs Active [Throughput %]` -> (`SMs Active`, `Throughput %`)."""
    m = _UNIT.match(full)
    return (m["name"], m["unit"]) if m else (full, "")


def _ints(f: Fetched, name: str) -> np.ndarray:
    if not f.has(name) or f.n == 0:
        return np.full(f.n, -1, np.int64)
    if not f.is_integer(name):
        return np.array([int(v) if isinstance(v, (int, np.integer)) else -1 for v in f.values[name]], dtype=np.int64)
    return np.where(f.null(name), -1, f.int(name, -1)).astype(np.int64)


def read_gpu_metrics(tables: Tables) -> GpuMetrics:
    schema = tables.schema
    if not (schema.has(SAMPLES) and schema.has(NAMES)):
        return GpuMetrics()
    wanted = ["typeId", "metricId", "metricName"]
    if not all(schema.has(NAMES, c) for c in wanted) or not all(
            schema.has(SAMPLES, c) for c in ("timestamp", "typeId", "metricId", "value")):
        return GpuMetrics()
    f = tables.read(NAMES, wanted)
    names: dict[int, dict[int, str]] = {}
    for t, m, n in zip(_ints(f, "typeId").tolist(), _ints(f, "metricId").tolist(), f.text("metricName")):
        if t >= 0 and m >= 0 and isinstance(n, str):
            names.setdefault(t, {})[m] = n
    s = tables.read(SAMPLES, ["timestamp", "typeId", "metricId", "value"])
    ts, ty, mi = _ints(s, "timestamp"), _ints(s, "typeId"), _ints(s, "metricId")
    # a value that is no number (a damaged export) is a missing sample of that metric, not an error
    val = pd.to_numeric(pd.Series(s.values["value"], dtype=object), errors="coerce").to_numpy(np.float64) \
        if s.n else np.zeros(0)
    out = GpuMetrics(present=bool(s.n))
    for type_id in sorted(names):
        ids = sorted(names[type_id])
        metrics = [Metric(i, names[type_id][i], *split_name(names[type_id][i])) for i in ids]
        mine = (ty == type_id) & (ts >= 0) & np.isin(mi, ids)
        times, row = np.unique(ts[mine], return_inverse=True)
        col = np.searchsorted(np.asarray(ids), mi[mine])
        values = np.full((len(times), len(ids)), np.nan)
        values[row, col] = val[mine]
        if len(times):
            out.series.append(GpuMetricSeries(type_id, metrics, times, values))
    return out
