"""Idle time by cause for the report's phases: forward, backward, optimizer and the step
itself, over the steady-state iterations (`step_N`), as plain JSON-ready data."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.iterations import PHASES, STEP, iteration_ranges, phase_ranges
from nsight_tui.parsers.analyses.idle import DEFINITIONS, idle_analysis
from nsight_tui.parsers.model.ranges import RangeModel

def phase_ids(model: RangeModel) -> dict[str, np.ndarray]:
    """Range positions per phase: steady-state steps and their forward/backward/optimizer;
    without step ranges, every range named forward/backward/optimizer."""
    iters = iteration_ranges(model, STEP)
    if len(iters) == 0:
        texts = model.trace.ranges["text"].to_numpy() if model.n else np.array([])
        return {p: np.flatnonzero(texts == p) for p in PHASES if (texts == p).any()}
    out = {p: ids for p in PHASES if len(ids := phase_ranges(model, iters, p))}
    out["step"] = iters
    return out


def phase_idle(model: RangeModel, top_gaps: int = 10) -> dict:
    """{"burst_gap_ns", "definitions", "phases": {phase: WindowIdle.to_json()}}."""
    idle = idle_analysis(model.trace)
    phases = {name: idle.ranges(model, ids, top_gaps).to_json() for name, ids in phase_ids(model).items()}
    return {"burst_gap_ns": idle.burst_gap_ns, "definitions": DEFINITIONS, "phases": phases}
