"""Whether the steps taken as steady state hold slow ones, and what the export shows differs in
them (analyses.slow_steps): only slow first steps are called warm-up."""
from __future__ import annotations

from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.analyses.slow_steps import LEADING, slow_steps

WARMUP_FIX = ("run more warm-up iterations before the profiled ones (torch.compile, cuDNN/cuBLAS autotuning, the "
              "caching allocator), or start the capture later (nsys --capture-range=nvtx / cudaProfilerStart)")
STALL_FIX = ("find what the loop does every so often in these steps (what differs is below): garbage collection "
             "(gc.freeze() after start-up, or gc.collect() at a chosen step), logging or a .item() every N "
             "steps, checkpointing, the data loader refilling; it is the loop's own cost, not the capture's")


def warmup_in_window(c: StepContext) -> Finding | None:
    if len(c.t0) < 3:
        return None
    r = slow_steps(c.trace, c.t0, c.t1, c.device, pid=c.rank.pid if c.rank is not None else None,
                   ratio=threshold("warmup_slow_ratio"))
    if r is None or not r.slow:
        return None
    first = r.slow[0]
    return Finding(
        "warmup-in-window", r.title, ["step_N"], to_ms(r.excess_ns / c.n),
        f"the slow steps' time above the median step, spread over the steps; {r.evidence}",
        WARMUP_FIX if r.pattern == LEADING else STALL_FIX,
        {"slow_steps": len(r.slow), "median_step_ns": r.median_step_ns, "pattern": r.pattern,
         "period_steps": r.period_steps,
         # the slow steps differ in nothing the export records: their extra time is the host's, outside CUDA
         "host_only": not r.differs},
        [{"step": int(i), "step_ns": int(d)} for i, d in zip(r.slow, r.slow_ns)], int(c.t0[first]), int(c.t1[first]))
