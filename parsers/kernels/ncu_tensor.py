"""A profiled kernel's tensor-core work, from the counters of ncu's
SpeedOfLight_HierarchicalTensorRooflineChart section, against the GPU's tensor peak.

- Tensor FLOPs (measured): `sm__ops_path_tensor_src_<precision>.sum`, the math operations the
  tensor pipe executed for inputs of that precision (an MMA of M x N x K counts 2·M·N·K: a bf16
  GEMM of 512 x 2304 x 768 counts exactly 1,811,939,328). The per-source counters are disjoint
  (`src_bf16_dst_fp32`, `src_fp16`, `src_tf32_dst_fp32`, `src_fp8_sparsity_off`, ... on Hopper; the
  instruction-level `sm__ops_path_tensor_op_*` subdivide them and are not added). Integer and
  1-bit sources count operations, not FLOPs, and are left out. The plain roofline section's SASS
  counters (FADD/FMUL/FFMA) never see this work.
- Tensor FLOP/s (measured): those FLOPs over ncu's duration of the kernel (its replay, at the
  clocks ncu locks), which is ncu's own `.sum.per_second`.
- Tensor pipe active (measured): `sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed`,
  the share of cycles the SMs' tensor pipes were busy (any precision).
- The peak: the datasheet's dense tensor peak for the kernel's precision (parsers.kernels.peaks; at
  the boost clock, while ncu replays at its locked clock, so the % of it understates the pipe's
  own busy share). ncu's own `.sum.peak_sustained` for these counters is twice the dense rate on
  Hopper (8,192 ops per SM per cycle for bf16: the 2:4-sparse figure), which is why the pipe's
  busy % is twice the ops counter's own `pct_of_peak_sustained_elapsed`; it is not used.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from nsight_tui.parsers.kernels import peaks
from nsight_tui.parsers.read.ncu_rep import NcuKernel

OPS = re.compile(r"^sm__ops_path_tensor_src_([a-z0-9_]+)\.sum$")
PIPE_ACTIVE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"
_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
DEVICE = "device__attribute_display_name"
NOT_FLOPS = ("int",)  # integer and 1-bit sources: operations, not floating-point ones

BASIS = {
    "tensor_flops": "measured: ncu's sm__ops_path_tensor_src_<precision>.sum (2 per multiply-add, tensor pipe)",
    "tensor_flops_per_s": "measured: tensor FLOPs over ncu's duration (its replay at locked clocks)",
    "tensor_pipe_active_pct": "measured: ncu's sm__pipe_tensor_cycles_active, % of elapsed cycles",
    "tensor_peak_flops_per_s": "datasheet: dense tensor peak for the kernel's precision, at boost clock "
                               "(parsers/kernels/peaks.py)",
    "tensor_pct_of_peak": "measured tensor FLOP/s over the datasheet peak (ncu replays at its locked clock, "
                          "so below the pipe's own busy %)",
}


def math_path(source: str) -> str:
    """peaks.py's math path for a counter's source precision (`bf16_dst_fp32` -> bf16)."""
    for prefix, path in (("bf16", "bf16"), ("fp16", "bf16"), ("tf32", "tf32"), ("fp8", "fp8"), ("fp64", "fp64"),
                         ("fp4", "fp4"), ("fp6", "fp4")):
        if source.startswith(prefix):
            return path
    return source


@dataclass(frozen=True)
class TensorFigures:
    tensor_math: str  # the precision most of the kernel's tensor FLOPs had (peaks.py's path), "" if none
    tensor_flops: float | None  # measured (None: the report has no tensor-core counters)
    tensor_flops_per_s: float | None  # measured (ncu's replay)
    tensor_pipe_active_pct: float | None  # measured
    tensor_peak_flops_per_s: float | None  # datasheet, dense, for tensor_math
    tensor_pct_of_peak: float | None


def tensor_figures(k: NcuKernel) -> TensorFigures | None:
    """None when the report has neither the tensor-core counters (the section) nor the pipe's busy %."""
    flops: dict[str, float] = {}
    for name, value in k.metrics.items():
        m = OPS.match(name)
        if m and not m.group(1).startswith(NOT_FLOPS):
            path = math_path(m.group(1))
            flops[path] = flops.get(path, 0.0) + value
    pipe = k.metric(PIPE_ACTIVE)
    if not flops:
        return None if pipe is None else TensorFigures("", None, None, pipe, None, None)
    total = sum(flops.values())
    math = max(flops, key=lambda p: flops[p]) if total else ""
    duration = k.metric(DURATION)
    duration_ns = None if duration is None else duration * _NS.get(k.units.get(DURATION, ""), 1.0)
    rate = total / (duration_ns * 1e-9) if duration_ns else None
    row = peaks.lookup(k.strings.get(DEVICE, ""))
    peak = row.flops_per_s(math) if row is not None and math else None
    return TensorFigures(math, total, rate, pipe, peak,
                         100.0 * rate / peak if rate is not None and peak else None)
