"""Idle time by cause for the report's phases: forward, backward, optimizer and the step
itself, over the steady-state iterations (`step_N`), as plain JSON-ready data."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.steps import PHASES, steps_of
from nsight_tui.parsers.analyses.idle import DEFINITIONS, idle_analysis
from nsight_tui.parsers.model.ranges import RangeModel

def phase_ids(model: RangeModel) -> dict[str, np.ndarray]:
    """Range positions per phase: steady-state steps and their forward/backward/optimizer;
    without step ranges, every range named forward/backward/optimizer."""
    steps = steps_of(model)
    if not steps.found:
        return {p: ids for p in PHASES if len(ids := steps.named(p))}
    out = {p: ids for p in PHASES if len(ids := steps.phase(p))}
    out["step"] = steps.steady
    return out


def range_idle(model: RangeModel, ids: np.ndarray, top_gaps: int = 10):
    """Idle by cause over range instances: an iteration's (`step_N`, `warmup_N`) window is its
    period (they tile the loop), any other range's its NVTX span."""
    idle = idle_analysis(model.trace)
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    steps = steps_of(model)
    if steps.is_iteration(ids):  # one name path: the first says what they all are
        times = steps.times(ids)
        devices = sorted({d for g in np.unique(model.r_gtid[ids]) for d in idle.devices_of_process(int(g))})
        return idle.windows(times.start_ns, times.end_ns, devices, top_gaps)
    return idle.ranges(model, ids, top_gaps)


def phase_idle(model: RangeModel, top_gaps: int = 10) -> dict:
    """{"burst_gap_ns", "definitions", "windows", "phases": {phase: WindowIdle.to_json()}}. A phase's
    window is its NVTX span (what the GPU did while the CPU was in it); the step's is its period
    (each step's start to the next's), so the steps' windows tile the steady state."""
    idle = idle_analysis(model.trace)
    phases = {name: range_idle(model, ids, top_gaps).to_json() for name, ids in phase_ids(model).items()}
    return {"burst_gap_ns": idle.burst_gap_ns, "definitions": DEFINITIONS,
            "windows": {"step": "the step period: each step's start to the next iteration's start (the last ends "
                                "with its GPU work)", "phases": "each phase range's NVTX span (the CPU's clock)"},
            "phases": phases}
