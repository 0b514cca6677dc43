"""The CPU's pace over the steady steps: each thread's host time read position by position.

A thread does the same work in every steady step: its CUDA calls, aligned by name to one step's, and
the host time between two of them (the framework's Python and C++ between two launches) are the
same stretch step after step. What that stretch costs moves from step to step: a capture's CPU runs
one step at its usual pace and the next two or three times slower throughout (another process on its
cores, the profiler's own buffers), by chance. Where the GPU set the step that never showed; where an
edit hands the step to the CPU it does, and a prediction read off those few steps as they happened
follows whichever steps were slow.

- `typical_host`: each aligned stretch at its median over the steps, the step the CPU usually runs.
  The edits replay that step; a one-off slow step no longer decides the median of four.
- `step_pace`: how far the steps strayed from it (each thread's fastest and slowest step over the
  median one): the range of a prediction the CPU sets."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.replay.align import opcodes
from nsight_tui.parsers.replay.graph import Graph


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
    (start or end) to its first step's. `spans`: the steps' (pid, start, end)."""
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
        ref = key[i0:j0].tolist()
        for k, (i, j) in enumerate(cuts):
            for tag, r1, r2, c1, c2 in opcodes(ref, key[i:j].tolist()):
                if tag == "equal":
                    own[k, r1:r2] = d[i + c1:i + c2]
                    waits[k, r1:r2] = ~free[a + i + c1:a + i + c2]
                    points[k, r1:r2] = np.arange(a + i + c1, a + i + c2)
        out.append(Aligned(ti, own, waits, points))
    return out


def typical_host(g: Graph, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """`g.delta_ns` with each thread's own time inside the steps (three at least) at its position's
    median over the steps that spend own time there; a point that waits, or that no other step
    meets, keeps its time (the replay re-times the waits)."""
    out = g.delta_ns.copy()
    for al in aligned(g, spans):
        if len(al.own) < 3:
            continue
        mine = (al.points >= 0) & ~al.waits
        vals = np.where(mine, al.own, np.nan)
        has = mine.sum(axis=0) >= 2
        col = np.zeros(vals.shape[1])
        col[has] = np.nanmedian(vals[:, has], axis=0)
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
