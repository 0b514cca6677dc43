"""Steps much slower than the median inside what is taken as steady state: which ones (their
pattern: the first steps, every Nth step, the last ones, or scattered) and what the export shows
differs in them from the typical step (kernels launched, GPU busy time, CUDA API calls by name).

It says what the evidence shows, not a cause it cannot see: only slow *first* steps point at warm-up
(compilation, autotuning, first allocations); a slow step every N steps is the workload's own period
(garbage collection, logging, checkpointing, a data-loader refill, an allocator flush), and the
differences below tell which side (GPU work or the CPU) the time went to.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.model.steps import STALL_RATIO
from nsight_tui.parsers.read.ids import KERNEL

SLOW_RATIO = STALL_RATIO  # a step this much slower than the median step is not steady state (nor alike: model.steps)
LEADING, TRAILING, PERIODIC, SCATTERED = "leading", "trailing", "periodic", "scattered"
# A difference worth saying: this share of the typical step's own figure, and this much time per step.
DIFFERS_SHARE = 0.10
DIFFERS_MIN_NS = 100_000
TOP_CALLS = 3  # the CUDA calls whose time grew most


@dataclass(frozen=True)
class Difference:
    """One figure of the slow steps (their mean) beside the typical step's (the median of the others)."""

    what: str  # "kernels launched", "GPU busy", or a CUDA API call's name ("cudaMalloc")
    slow: float
    typical: float
    unit: str  # "count" or "ns"
    calls_slow: float = 0.0  # for an API call: how many per slow step, and per typical step
    calls_typical: float = 0.0


def _nth(k: int | None) -> str:
    """`other` for 2, else the ordinal (3rd, 4th, 11th, 21st)."""
    if k is None or k == 2:
        return "other"
    suffix = "th" if 11 <= k % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


@dataclass(frozen=True)
class SlowSteps:
    steps: int  # the steady-state steps looked at
    median_step_ns: float
    slow: list[int]  # their indices among the steps (time order)
    slow_ns: list[int]  # each slow step's duration
    pattern: str  # LEADING | TRAILING | PERIODIC | SCATTERED
    period_steps: int | None  # PERIODIC: every this many steps
    differs: list[Difference] = field(default_factory=list)

    @property
    def excess_ns(self) -> float:
        """The slow steps' time above the median step, summed."""
        return float(sum(d - self.median_step_ns for d in self.slow_ns))

    @property
    def title(self) -> str:
        k, n = len(self.slow), self.steps
        if self.pattern == LEADING:
            first = "the first step" if k == 1 else f"the first {k} steps"
            return (f"{first} of {n} {'is' if k == 1 else 'are'} slow: warm-up inside the steady-state window "
                    "(compilation, autotuning, first allocations)")
        if self.pattern == PERIODIC:
            return f"every {_nth(self.period_steps)} step is slow ({k} of {n}): a periodic stall, not warm-up"
        if self.pattern == TRAILING:
            return f"the last step of {n} is slow" if k == 1 else f"the last {k} of {n} steps are slow"
        return f"{k} of {n} steps are slow, with no period"

    @property
    def evidence(self) -> str:
        """What differs in the slow steps, in words and figures ("" when nothing the export records does)."""
        parts = []
        for d in self.differs:
            if d.unit == "count":
                parts.append(f"{d.what} {d.slow:,.0f} vs {d.typical:,.0f} per step")
            elif d.calls_slow or d.calls_typical:
                parts.append(f"{d.what} {d.slow / 1e6:.2f} ms ({d.calls_slow:,.1f} calls) vs {d.typical / 1e6:.2f} ms "
                             f"({d.calls_typical:,.1f}) per step")
            else:
                parts.append(f"{d.what} {d.slow / 1e6:.2f} vs {d.typical / 1e6:.2f} ms per step")
        if not parts:
            return ("the same kernels, GPU busy time and CUDA calls as the typical step: the extra time is on the CPU "
                    "outside CUDA (Python: garbage collection, logging, I/O), which the export does not record")
        return "slow steps vs the typical one: " + "; ".join(parts)


def pattern_of(slow: list[int], steps: int) -> tuple[str, int | None]:
    """LEADING (steps 0..k-1), TRAILING (the last k), PERIODIC (3 or more, evenly spaced: every N
    steps), else SCATTERED."""
    k = len(slow)
    if k and slow == list(range(k)):
        return LEADING, None
    if k and slow == list(range(steps - k, steps)):
        return TRAILING, None
    gaps = np.diff(slow)
    if k >= 3 and len(set(gaps.tolist())) == 1 and gaps[0] > 1:
        return PERIODIC, int(gaps[0])
    return SCATTERED, None


def _per_step(t0: np.ndarray, t1: np.ndarray, start: np.ndarray, end: np.ndarray | None = None) -> np.ndarray:
    """Per step [t0, t1): how many items start in it (end None), else their time in it (clipped)."""
    out = np.zeros(len(t0), dtype=np.float64)
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = end[order] if end is not None else None
    for i, (a, b) in enumerate(zip(t0.tolist(), t1.tolist())):
        lo, hi = np.searchsorted(s, [a, b])
        if e is None:
            out[i] = hi - lo
        else:
            out[i] = float((np.minimum(e[lo:hi], b) - s[lo:hi]).clip(min=0).sum())
    return out


def _busy_per_step(t0: np.ndarray, t1: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The GPU's busy time in each step: the union of its ops' intervals, clipped to the step."""
    busy = intervals.union(start, end)
    # the busy time before each step's end less that before its start: one pass for every step
    return (intervals.covered_before(busy, t1) - intervals.covered_before(busy, t0)).astype(np.float64)


def _differs(slow: float, typical: float, unit: str) -> bool:
    gap = slow - typical
    if unit == "ns" and gap < DIFFERS_MIN_NS:
        return False
    return gap > DIFFERS_SHARE * max(typical, 1.0)


def slow_steps(trace, t0: np.ndarray, t1: np.ndarray, device: int, pid: int | None = None,
               ratio: float = SLOW_RATIO) -> SlowSteps | None:
    """The steps of [t0, t1) (time order) slower than `ratio` x the median, their pattern and what
    differs in them (kernels launched and busy time on `device`; CUDA API calls of process `pid`,
    every process's when None). None: fewer than 3 steps, or none slow."""
    t0, t1 = np.asarray(t0, dtype=np.int64), np.asarray(t1, dtype=np.int64)
    d = (t1 - t0).astype(np.float64)
    if len(d) < 3:
        return None
    med = float(np.median(d))
    slow = np.flatnonzero(d > ratio * med)
    if len(slow) == 0:
        return None
    typical = np.setdiff1d(np.arange(len(d)), slow)
    pattern, period = pattern_of(slow.tolist(), len(d))
    ops = trace.ops
    on = ops["device"].to_numpy() == device
    start, end = ops["start"].to_numpy()[on], ops["end"].to_numpy()[on]
    kernels = ops["kind"].to_numpy()[on] == KERNEL
    differs = []
    figures = [("kernels launched", _per_step(t0, t1, start[kernels]), "count"),
               ("GPU busy", _busy_per_step(t0, t1, start, end), "ns")]
    for what, per, unit in figures:
        s, t = float(per[slow].mean()), float(np.median(per[typical])) if len(typical) else 0.0
        if _differs(s, t, unit) or (unit == "count" and s < t * (1 - DIFFERS_SHARE)):
            differs.append(Difference(what, s, t, unit))
    api, n_calls = trace.api, 0
    if len(api):
        mine = np.ones(len(api), dtype=bool) if pid is None else (api["gtid"].to_numpy() >> 24) == pid
        a_start, a_end = api["start"].to_numpy()[mine], api["end"].to_numpy()[mine]
        names = api["name"].to_numpy()[mine]
        for code in np.unique(names).tolist():
            sel = names == code
            time = _per_step(t0, t1, a_start[sel], a_end[sel])
            s, t = float(time[slow].mean()), float(np.median(time[typical])) if len(typical) else 0.0
            if _differs(s, t, "ns"):
                count = _per_step(t0, t1, a_start[sel])
                differs.append(Difference(str(trace.api_names[int(code)]), s, t, "ns", float(count[slow].mean()),
                                          float(np.median(count[typical])) if len(typical) else 0.0))
                n_calls += 1
    grew = sorted(differs[len(differs) - n_calls:] if n_calls else [], key=lambda x: -(x.slow - x.typical))
    differs = differs[: len(differs) - n_calls] + grew[:TOP_CALLS]
    return SlowSteps(len(d), med, slow.tolist(), [int(x) for x in d[slow]], pattern, period, differs)
