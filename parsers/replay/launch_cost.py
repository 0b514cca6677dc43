"""Launches whose queue the edit empties or fills, and what that may cost the CPU beside the prediction.

A launch onto a stream with nothing queued costs the CPU more than one behind queued work. Measured
on the committed every-other-step TF32 captures (devruns/empty_queue_stretches.py and .log, docs/
whatif.md): the same framework work between two same-named launches, in the fp32 steps behind queued
GEMMs and in the TF32 steps beside them, at launch positions whose queue was empty in every TF32 step,
took a median 0.53 to 3.82 µs longer per thread (1.46 the median of the threads); the workload alone
agrees in size (devruns/gpu_lag.py: 1.8 µs a launch). The replay keeps each launch's measured host
time: replayed with that cost, to a fixed point, two rows of the twins table moved into tolerance and
one out, the errors summed 1% smaller, so it is not in the prediction. What is said instead: how many
launches a step the edit leaves onto an empty queue that were queued (and the other way), and the CPU
time that may add (or take) at those figures."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.simulate import Plan, Timeline

EMPTY_QUEUE_LAUNCH_NS = (530, 1_460, 3_820)
# Below this the shift is not said: less than a hundredth of a millisecond a step at the high figure
SAID_FROM_NS = 10_000


@dataclass(frozen=True)
class QueueShift:
    """Per step (mean over the steps): launches the edit leaves onto an empty queue that were queued
    behind work (`emptied`), and the other way (`filled`); the CPU time the difference may add at the
    low, central and high cost of a launch onto an empty queue (ns, negative: taken away)."""

    emptied_per_step: float
    filled_per_step: float
    extra_cpu_ns: tuple[int, int, int]
    cost_ns: tuple[int, int, int] = EMPTY_QUEUE_LAUNCH_NS  # a launch onto an empty queue: the extra CPU time

    @property
    def said(self) -> bool:
        return max(abs(x) for x in self.extra_cpu_ns) >= SAID_FROM_NS


def empty_launches(g: Graph, launch_pt: np.ndarray, tl: Timeline) -> np.ndarray:
    """Per CPU point: a launch call's start (`launch_pt` per op, -1: none) whose op found its stream
    with nothing queued (the stream's previous op had ended before the call began) on this timeline."""
    out = np.zeros(len(g.pt_time), bool)
    launched = np.flatnonzero(launch_pt >= 0)
    if len(launched) == 0:
        return out
    prev = g.op_prev[launched]
    at = tl.pt_ns[launch_pt[launched]]
    empty = (prev < 0) | (tl.op_end_ns[np.maximum(prev, 0)] <= at)
    out[launch_pt[launched[empty]]] = True
    return out


def queue_shift(g: Graph, before: Timeline, after: tuple[Plan, Timeline], inside: np.ndarray,
                n_steps: int) -> QueueShift:
    """The launches (call starts inside the steps: `inside` per point) whose queue state differs
    between the unchanged replay (`before`, the graph's own launches) and the edited one (`after`:
    its plan and timeline), per step."""
    plan, tl = after
    was, now = empty_launches(g, g.op_launch_pt, before), empty_launches(g, plan.op_launch_pt, tl)
    launched_after = np.zeros(len(g.pt_time), bool)
    launched_after[plan.op_launch_pt[plan.op_launch_pt >= 0]] = True
    steps = max(n_steps, 1)
    emptied = float((now & ~was & inside).sum()) / steps
    filled = float((was & ~now & launched_after & inside).sum()) / steps
    net = emptied - filled
    extra = tuple(int(round(net * c)) for c in EMPTY_QUEUE_LAUNCH_NS)
    return QueueShift(emptied, filled, extra)  # type: ignore[arg-type]
