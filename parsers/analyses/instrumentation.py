"""What the profiler's own per-op instrumentation costs the CPU: a capture under
`torch.autograd.profiler.emit_nvtx()` or `nsys --pytorch=autograd-nvtx` pushes and pops an NVTX range
around every aten op (named `aten::op, seq = N, op_id = M`), thousands per step, and each costs CPU
time the uninstrumented workload does not pay (the small GPT-2 step: 28 ms bare, 40 ms with them).
Findings that read CPU time (launch-bound, host-bound gaps) would blame the workload for it.

The estimate is measured in the trace itself: the op ranges' count times the median duration of an
op range that did nothing the export records (no child range, no CUDA call inside): the floor of one
instrumented op, its push and pop included. It is a lower bound (the op's own dispatch is in it, the
push before the range's start timestamp is not), stated as such.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.text_codes import Coded

OP_RANGE = re.compile(r"^\S+::\S+.*, op_id = \d+")  # emit_nvtx's `aten::mm, seq = 12, op_id = 345` (sizes optional)
MIN_OP_RANGES = 100  # fewer op-named ranges is a workload's own annotation, not the profiler's per-op ranges


@dataclass(frozen=True)
class InstrumentationCost:
    op_ranges: int  # the profiler's per-op ranges in the export
    empty_op_ranges: int  # of them, those that did nothing recorded (the sample the cost is measured on)
    per_range_ns: float  # the median duration of those: one instrumented op's floor
    steps: int  # the steps given (0: none)
    op_ranges_per_step: float | None
    cost_per_step_ns: float | None  # op ranges per step x per_range_ns: CPU time per step, at least
    total_cost_ns: float  # every op range x per_range_ns

    @property
    def basis(self) -> str:
        return (f"{self.op_ranges:,} per-op NVTX ranges (emit_nvtx / --pytorch=autograd-nvtx) x "
                f"{self.per_range_ns / 1e3:.2f} µs, the median duration of the {self.empty_op_ranges:,} that enclose no "
                "CUDA call and no other range (one instrumented op's floor): a lower bound of the CPU time the "
                "profiler's instrumentation added")


def _op_ranges(texts: Coded) -> np.ndarray:
    return texts.per_value(lambda t: bool(OP_RANGE.match(t)) if isinstance(t, str) else False, key="op_range")


def instrumentation_cost(trace, t0=None, t1=None) -> InstrumentationCost | None:
    """The estimate, or None where the export has no (or few) per-op ranges. `t0`/`t1`: the steps'
    windows (CPU clock), for the per-step figure."""
    r = trace.ranges
    if not len(r):
        return None
    is_op = _op_ranges(trace.range_texts)
    if int(is_op.sum()) < MIN_OP_RANGES:
        return None
    start, end, gtid = (r[c].to_numpy().astype(np.int64) for c in ("start", "end", "gtid"))
    # a range with a child: the next range of its thread (by start) starts before it ends
    order = np.lexsort((start, gtid))
    s, e, g = start[order], end[order], gtid[order]
    child = np.zeros(len(order), dtype=bool)
    child[:-1] = (g[1:] == g[:-1]) & (s[1:] < e[:-1])
    has_child = np.empty_like(child)
    has_child[order] = child
    # a CUDA call inside it, on its thread
    calls = np.zeros(len(r), dtype=bool)
    api = trace.api
    if len(api):
        a_g, a_s = api["gtid"].to_numpy().astype(np.int64), api["start"].to_numpy().astype(np.int64)
        by = np.lexsort((a_s, a_g))
        a_g, a_s = a_g[by], a_s[by]
        # per thread: the first call at or after the range's start, and whether it starts before its end
        for thread in np.unique(gtid[is_op]).tolist():
            lo, hi = np.searchsorted(a_g, [thread, thread + 1])
            mine = np.flatnonzero(is_op & (gtid == thread))
            if hi > lo and len(mine):
                first = np.searchsorted(a_s[lo:hi], start[mine])
                inside = first < hi - lo
                inside[inside] = a_s[lo:hi][first[inside]] < end[mine][inside]
                calls[mine] = inside
    empty = is_op & ~has_child & ~calls & (end > start)
    if not empty.any():
        return None
    per_range = float(np.median(end[empty] - start[empty]))
    n_ops = int(is_op.sum())
    steps = 0 if t0 is None else len(t0)
    per_step = None
    if steps:
        t0, t1 = np.asarray(t0, dtype=np.int64), np.asarray(t1, dtype=np.int64)
        op_starts = np.sort(start[is_op])
        within = int(sum(np.searchsorted(op_starts, b) - np.searchsorted(op_starts, a) for a, b in zip(t0, t1)))
        per_step = within / steps
    return InstrumentationCost(n_ops, int(empty.sum()), per_range, steps, per_step,
                               None if per_step is None else per_step * per_range, n_ops * per_range)
