"""Ranges inferred from the kernel sequence, for traces with no iteration ranges.

A compiled program or an unannotated script leaves no `step_N`/`forward`/... NVTX ranges, yet a
training loop's GPU work repeats: every iteration launches the same kernels in the same order,
and inside one, every transformer layer does too. This module finds that structure and writes it
as ranges of the NVTX domain `inferred` (shown `inferred:step_3`, `inferred:layer_7`), added to the
trace's ranges for the range model only: the tree, kernel tables, ratios, timeline, idle time,
findings, diff and the report then work on them unchanged and every view shows the `inferred:`
tag. NVIDIA's own reports (parsers.nsys) read the export's ranges and never see them.

How, on the kernels of the process that launched the most, in launch order (name codes only):
1. The iteration's period: the kernel name whose occurrences are most widely and most regularly
   spaced (every gap but the first within PERIOD_TOLERANCE of their median: the first iteration
   may differ, AdamW making its state) marks one point of each iteration.
2. Where an iteration begins: in a training loop, at the first kernel after the optimizer (the
   forward's first: the widest stretch between backward-named kernels holds the optimizer's, and
   its last one closes the step), whatever the host did in between (a `loss.item()` before
   `optimizer.step()` makes the longest host pause the one before the optimizer). Elsewhere
   (inference, an optimizer no name tells) at the point of the cycle where the host paused longest
   before the launch (median over the steady iterations of the gap between consecutive launch
   calls). Every iteration begins with that cycle's first HEAD kernels. Kernels before the first
   iteration (initialisation) belong to none; a last iteration cut short (fewer kernels than the
   steady one) is left out; leading iterations unlike the steady one, or WARMUP_SLOWER times slower
   than it, are warm-ups. The basis says what was left out.
3. Verified: the steady iterations' name sequences must repeat exactly (at least MIN_REPEATS
   equal to the most common one), else nothing is inferred and `reason` says why.
4. Layers: inside the most common iteration, the longest run of one kernel name at a constant
   spacing (the per-layer kernel, e.g. the attention softmax) gives the layer length and count;
   a second run of the same count later on is the backward's mirror. A layer starts as late as
   the repeat allows (what it shares with the embedding before it goes to the embedding).
5. Phases and stages: backward begins at the first kernel after the forward layers whose name
   says backward/grad; the optimizer at the first optimizer kernel after the backward layers;
   one forward layer's kernels are named in order from their kinds (layer norm, QKV GEMM,
   attention scores, softmax or fused attention, attention x V, output projection, residual
   add, MLP up, activation, MLP down; the manual attention's three with the capture's names,
   computing_attention_scores, computing_softmax, final_matmul).

A range's CPU span is from the launch of its first kernel to just before the launch of the
kernel after its last (a part that closes its iteration, and the last iteration: to the end of its
last launch call, so the loop's wait between iterations is the iteration's alone), on the thread
that launched the iteration's first kernel, so the process attribution gives each range
exactly its kernels; the iterations' GPU times (`InferredIteration`) are from their first
kernel's start to the next iteration's first kernel's start, the last to its last kernel's end.

Each step is a module of this package, in the order they run (this module is their front door:
`inference`, `with_inferred_ranges`, `has_iteration_ranges`):

- kernel_sequence: a process's kernels in launch order (name codes, launch and GPU times);
- period: the iteration's period and where each iteration begins;
- kernel_kinds: a kernel's kind from its name (norm, GEMM, softmax, ...) and the phase markers;
- layers: the repeated layer inside an iteration (forward, and the backward's mirror);
- stage_names / backward_stage_names: one layer's stages named from its kinds in order;
- range_rows: forward/backward/optimizer and every part as rows like `Trace.ranges`;
- infer: the above put together, on a trace with no iteration ranges or inside its own;
- result: what was inferred (`Inference`, `InferredIteration`).
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.inferred.infer import bare_iterations, infer, infer_inside, is_iteration_text
from nsight_tui.parsers.model.inferred.result import Inference, InferredIteration

__all__ = ["DOMAIN", "Inference", "InferredIteration", "has_iteration_ranges", "inference", "with_inferred_ranges"]

DOMAIN = conventions.INFERRED_DOMAIN


def has_iteration_ranges(trace: Trace) -> bool:
    return bool(is_iteration_text(trace.range_texts).any()) if len(trace.ranges) else False


def inference(trace: Trace) -> Inference:
    """The trace's inferred structure (computed once, kept with the trace). Nothing is inferred
    where the trace names its iterations itself or its GPU work is not read yet."""
    key = "inferred_ranges"
    if key not in trace.derived:
        if trace.info.gpu_pending:
            return Inference(reason="GPU work not read yet")
        if has_iteration_ranges(trace):
            found = infer_inside(trace) if bare_iterations(trace) else \
                Inference(reason="the trace has its own iteration ranges (step_N/warmup_N)")
        else:
            found = infer(trace)
        trace.derived[key] = found
    return trace.derived[key]


def with_inferred_ranges(trace: Trace) -> Trace:
    """`trace` itself, or (ranges inferred) a copy whose ranges hold the inferred ones after the
    export's; both share what is derived from their GPU work (`derived`)."""
    found = inference(trace)
    if not found.found or found.ranges is None:
        return trace
    key = "with_inferred_ranges"
    if key not in trace.derived:
        ranges = pd.concat([trace.ranges, found.ranges], ignore_index=True) if len(trace.ranges) \
            else found.ranges.reset_index(drop=True)
        trace.derived[key] = replace(trace, ranges=ranges, derived=trace.derived)
    return trace.derived[key]
