"""Idle time by cause for the report's phases: forward, backward, optimizer and the step
itself, over the steady-state iterations (`step_N`): a `PhaseIdle` (render.idle lays it out
under "gpu_idle")."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.steps import PHASES, steps_of
from nsight_tui.parsers.analyses.idle import DEFINITIONS, WindowIdle, idle_analysis
from nsight_tui.parsers.model.ranges import RangeModel

WINDOWS = {"step": "the step period: each step's start to the next iteration's start (the last ends with its GPU work)",
           "phases": "each phase range's NVTX span (the CPU's clock)"}


@dataclass(frozen=True)
class PhaseIdle:
    """GPU idle by cause per phase (`forward`, ..., `step`) over its instances' windows (how each
    window is taken: `windows`); burst_gap_ns: the gap that splits launch bursts; definitions: the
    causes in words."""

    burst_gap_ns: int
    definitions: dict[str, str]
    windows: dict[str, str]
    phases: dict[str, WindowIdle]


def phase_ids(model: RangeModel) -> dict[str, np.ndarray]:
    """Range positions per phase: steady-state steps and their forward/backward/optimizer;
    without step ranges, every range named forward/backward/optimizer."""
    steps = steps_of(model)
    if not steps.found:
        return {p: ids for p in PHASES if len(ids := steps.named(p))}
    out = {p: ids for p in PHASES if len(ids := steps.phase(p))}
    out["step"] = steps.steady
    return out


def range_idle(model: RangeModel, ids: np.ndarray, top_gaps: int = 10) -> WindowIdle:
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


def phase_idle(model: RangeModel, top_gaps: int = 10) -> PhaseIdle:
    """Idle by cause per phase. A phase's window is its NVTX span (what the GPU did while the CPU
    was in it); the step's is its period (each step's start to the next's), so the steps' windows
    tile the steady state."""
    idle = idle_analysis(model.trace)
    phases = {name: range_idle(model, ids, top_gaps) for name, ids in phase_ids(model).items()}
    return PhaseIdle(burst_gap_ns=idle.burst_gap_ns, definitions=DEFINITIONS, windows=WINDOWS, phases=phases)
