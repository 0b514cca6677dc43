"""The workload run alone, without the profiler: `capture --bare-run` runs it once just before its
capture (the same machine and minute) and keeps its Python step times beside the export
(STEM.bare.json). Against the capture's own step marks it says what the profiler cost the step:
nsys traces every CUDA call, and a step the CPU holds pays for each (docs/whatif.md)."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from nsight_tui.parsers.read import conventions


@dataclass(frozen=True)
class ProfilerCost:
    """Medians of the steady steps (step_N) on the workload's own clock, ns."""

    alone_step_ns: int  # run alone, without nsys (STEM.bare.json)
    alone_steps: int
    captured_step_ns: int | None  # the same steps in the capture (its step marks); None: no marks
    captured_steps: int
    source: str  # the record's file name

    @property
    def slowdown(self) -> float | None:
        """The captured step over the step alone (1.25: the profiler made it 25% longer)."""
        if self.captured_step_ns is None or self.alone_step_ns <= 0:
            return None
        return self.captured_step_ns / self.alone_step_ns


def _median_step_ns(steps) -> tuple[int | None, int]:
    seconds = [float(s["seconds"]) for s in steps if isinstance(s, dict) and str(s.get("name", "")).startswith("step_")
               and isinstance(s.get("seconds"), (int, float)) and not isinstance(s.get("seconds"), bool)
               and 0 < s["seconds"] < float("inf")]
    return (round(statistics.median(seconds) * 1e9) if seconds else None), len(seconds)


def profiler_cost(trace) -> ProfilerCost | None:
    """The bare run beside `trace` against its step marks; None where there is no well-formed record
    (read only; a record without steps is no record)."""
    name = Path(trace.beside).name
    if not name.endswith(".sqlite"):
        return None
    side = Path(trace.beside).with_name(name[: -len(".sqlite")] + conventions.BARE_SIDECAR_SUFFIX)
    try:
        value = json.loads(side.read_text()) if side.is_file() else None
    except (OSError, ValueError):
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    alone, n_alone = _median_step_ns(steps if isinstance(steps, list) else [])
    if alone is None:
        return None
    captured, n_captured = _median_step_ns(trace.meta().steps)
    return ProfilerCost(alone, n_alone, captured, n_captured, side.name)
