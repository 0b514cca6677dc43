"""Whether the steps taken as steady state hold warm-up (compilation, autotuning)."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold


def warmup_in_window(c: StepContext) -> Finding | None:
    d = (c.t1 - c.t0).astype(np.float64)
    if len(d) < 3:
        return None
    med = float(np.median(d))
    slow = np.flatnonzero(d > threshold("warmup_slow_ratio") * med)
    if len(slow) == 0:
        return None
    extra = float((d[slow] - med).sum())
    return Finding(
        "warmup-in-window", "compilation/autotuning inside what is taken as steady state",
        ["step_N"], to_ms(extra / c.n), "the slow steps' time above the median step, spread over the steps",
        "run more warm-up iterations before the profiled ones (torch.compile, cuDNN/cuBLAS autotuning, the "
        "caching allocator), or start the capture later (nsys --capture-range=nvtx / cudaProfilerStart)",
        {"slow_steps": len(slow), "median_step_ns": med},
        [{"step": int(i), "step_ns": int(d[i])} for i in slow], int(c.t0[slow[0]]), int(c.t1[slow[0]]))
