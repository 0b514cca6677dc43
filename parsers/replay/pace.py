"""The CPU's pace over the steady steps: each thread's host time read position by position.

A thread does the same work in every steady step: its CUDA calls, aligned by name to one step's, and
the host time between two of them (the framework's Python and C++ between two launches) are the
same stretch step after step. What that stretch costs moves from step to step: a capture's CPU runs
one step at its usual pace and the next two or three times slower throughout (another process on its
cores, the profiler's own buffers), by chance. Where the GPU set the step that never showed; where an
edit hands the step to the CPU it does, and a prediction read off those few steps as they happened
follows whichever steps were slow.

- `typical_host`: each aligned stretch at its median over the steps, the step the CPU usually runs
  (its mean where the steps alternate: the typical step is then the mean one).
  An edit that keeps the host time replays that step; a one-off slow step no longer decides the
  median of four.
- `step_pace`: how far the steps strayed from it (each thread's fastest and slowest step over the
  median one);
- `cpu_range`: the range of every `whatif` prediction (a finding's range is its edits' own): each
  thread at the slower and the faster of its own steps' spread and another capture's pace
  (BETWEEN_CAPTURES), the step the CPU sets after an edit moving with the pace of the run it is
  measured in, which one capture cannot know."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.replay.align import opcodes
from nsight_tui.parsers.replay.graph import Graph

# How far another capture's CPU pace lies from this one's, on the same work: over the 30 CPU threads
# of the 14 committed twin pairs with `kernels-from` (tests/helpers/replay_twins.py, each pair captured
# back to back on one machine), the twin's time over the base's for the stretches of host time
# between two same-named launches that no changed kernel touches (stretches.carry's pace: 0.59 to
# 1.70, median 0.97); 80% of them lie within this factor either way (|ln pace| at its 80th
# percentile, 0.34). `python3 tests/helpers/twins_table.py --pace` prints them. The ResNet-50
# NCHW -> channels_last pair beside them (its threads x0.86 and x0.49, the second the memory format's
# own change to the framework's work, docs/whatif.md) would put 80% within x1.46.
BETWEEN_CAPTURES = 1.40


def own_time(g: Graph) -> np.ndarray:
    """Per point: its time since the previous point is the thread's own work (not a wait)."""
    free = np.ones(len(g.pt_time), bool)
    free[list(g.blocks)] = False
    free[list(g.handoffs)] = False
    free[[a for a, _ in g.thread_slices]] = False
    return free


@dataclass
class Aligned:
    """One thread's steps on the positions of its first step."""

    thread: int  # index into g.thread_slices
    own: np.ndarray  # steps x positions: own time (ns; 0 where the point waits), NaN where not aligned
    waits: np.ndarray  # steps x positions: the point waits (its time is no host work)
    points: np.ndarray  # steps x positions: the aligned point (-1: none)


def aligned(g: Graph, spans: list[tuple[int, int, int]]) -> list[Aligned]:
    """Per thread with own time in two steps or more: its points in each step aligned by call name
    (start or end) to its first step's (a step that differs from it by more than a tenth of its
    calls stays unaligned). `spans`: the steps' (pid, start, end)."""
    free = own_time(g)
    names = g.trace.api["name"].to_numpy(np.int64)
    out: list[Aligned] = []
    for ti, (a, b) in enumerate(g.thread_slices):
        t = g.pt_time[a:b]
        d = np.where(free[a:b], g.delta_ns[a:b], 0).astype(np.float64)
        key = names[g.pt_call[a:b]] * 2 + g.pt_is_end[a:b]
        cuts = [(int(np.searchsorted(t, s_, side="right")), int(np.searchsorted(t, e, side="right")))
                for _pid, s_, e in spans]
        cuts = [(i, j) for i, j in cuts if j > i and d[i:j].sum() > 0]
        if len(cuts) < 2:
            continue
        i0, j0 = cuts[0]
        own = np.full((len(cuts), j0 - i0), np.nan)
        waits = np.zeros(own.shape, bool)
        points = np.full(own.shape, -1, np.int64)
        ref = key[i0:j0]
        for k, (i, j) in enumerate(cuts):
            if j - i == j0 - i0 and np.array_equal(key[i:j], ref):  # most steps: the same calls in order
                own[k], waits[k], points[k] = d[i:j], ~free[a + i:a + j], np.arange(a + i, a + j)
                continue
            # a step whose calls differ from the reference's by more than a tenth is other work
            for tag, r1, r2, c1, c2 in opcodes(ref.tolist(), key[i:j].tolist(), max(16, len(ref) // 10), False):
                if tag == "equal":
                    own[k, r1:r2] = d[i + c1:i + c2]
                    waits[k, r1:r2] = ~free[a + i + c1:a + i + c2]
                    points[k, r1:r2] = np.arange(a + i + c1, a + i + c2)
        out.append(Aligned(ti, own, waits, points))
    return out


def typical_host(g: Graph, spans: list[tuple[int, int, int]], alike: bool = True) -> np.ndarray:
    """`g.delta_ns` with each thread's own time inside the steps (three at least) at its position's
    median over the steps that spend own time there, or its mean where the steps are not alike
    (model.steps.steps_alike: steps that alternate, whose every other step holds a long wait; the
    median would leave it out of the typical step, and every edit's saving with it); a point that
    waits, or that no other step meets, keeps its time (the replay re-times the waits)."""
    out = g.delta_ns.copy()
    for al in aligned(g, spans):
        if len(al.own) < 3:
            continue
        mine = (al.points >= 0) & ~al.waits
        vals = np.where(mine, al.own, np.nan)
        has = mine.sum(axis=0) >= 2
        col = np.zeros(vals.shape[1])
        col[has] = (np.nanmedian if alike else np.nanmean)(vals[:, has], axis=0)
        sel = mine & has[None, :]
        out[al.points[sel]] = np.round(np.broadcast_to(col, vals.shape)[sel]).astype(np.int64)
    return out


def step_pace(g: Graph, spans: list[tuple[int, int, int]]) -> dict[int, tuple[float, float]]:
    """Per thread (index): its fastest and slowest steady step's pace over the median step's: how far
    this capture's CPU pace moved from step to step. A step's pace is the mean, over the thread's
    stretches between two CUDA calls met in every step, of the stretch's time over its median across
    the steps, a tenth of the stretches left out at each end (a one-off stall is not a pace)."""
    out: dict[int, tuple[float, float]] = {}
    for al in aligned(g, spans):
        m = al.own
        col = np.nanmedian(m, axis=0)
        use = (col >= 1_000) & ~np.isnan(m).any(axis=0)  # met in every step, a microsecond and more
        if not use.any():
            continue
        r = np.sort(m[:, use] / col[use], axis=1)
        cut = r.shape[1] // 10  # a tenth at each end: a stall, or a stretch that happened to be short
        pace = r[:, cut:r.shape[1] - cut].mean(axis=1)
        pace = pace / float(np.median(pace))
        out[al.thread] = (float(pace.min()), float(pace.max()))
    return out


@dataclass
class CpuRange:
    """Per thread (index): the factors its own time inside the steps takes at the range's low end
    (fastest) and high end (slowest), and the words that say so."""

    factors: dict[int, tuple[float, float]]
    assumption: str


def cpu_range(g: Graph, spans: list[tuple[int, int, int]]) -> CpuRange:
    """Each thread at the faster of its fastest step's pace and another capture's (1/BETWEEN_CAPTURES
    of this one), and at the slower of its slowest step's and BETWEEN_CAPTURES; `g` as captured."""
    spread = step_pace(g, spans)
    factors = {ti: (min(spread.get(ti, (1.0, 1.0))[0], 1 / BETWEEN_CAPTURES),
                    max(spread.get(ti, (1.0, 1.0))[1], BETWEEN_CAPTURES)) for ti in range(len(g.thread_slices))}
    lo = min((a for a, _ in spread.values()), default=1.0)
    hi = max((b for _, b in spread.values()), default=1.0)
    return CpuRange(factors, (
        f"the CPU runs at this capture's pace; the range puts every thread at x{min(lo, 1 / BETWEEN_CAPTURES):.2f}.."
        f"x{max(hi, BETWEEN_CAPTURES):.2f} of it: this capture's own steps at x{lo:.2f}..x{hi:.2f} of its median "
        f"step's pace, and another capture of the same program on the same machine within x{1 / BETWEEN_CAPTURES:.2f}"
        f"..x{BETWEEN_CAPTURES:.2f} (80% of the committed twin pairs' threads); at each end the unchanged and the edited "
        "step both at that pace, the saving of the change on a machine running that fast or that slow"))
