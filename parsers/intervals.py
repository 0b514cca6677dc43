"""Sets of half-open time intervals [start, end) as sorted, disjoint int64 arrays, with the
prefix sums that make "how much of this set lies in [t0, t1)" two binary searches.

Used by the idle-time analysis (parsers/idle.py) and the timeline lanes (parsers/timeline.py):
both ask that question for millions of intervals and for hundreds of windows at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class IntervalSet:
    """Disjoint, sorted [start, end) intervals; `cum[i]` = total length of intervals 0..i-1."""

    start: np.ndarray
    end: np.ndarray
    cum: np.ndarray

    @classmethod
    def empty(cls) -> IntervalSet:
        return cls(_EMPTY, _EMPTY, np.zeros(1, dtype=np.int64))

    @classmethod
    def union(cls, starts, ends) -> IntervalSet:
        """The union of any intervals (overlapping, unsorted, empty ones ignored). Touching
        intervals ([a, b) and [b, c)) become one."""
        s, e = merge(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
        return cls.of_disjoint(s, e)

    @classmethod
    def of_disjoint(cls, s: np.ndarray, e: np.ndarray) -> IntervalSet:
        cum = np.zeros(len(s) + 1, dtype=np.int64)
        np.cumsum(e - s, out=cum[1:])
        return cls(s, e, cum)

    def __len__(self) -> int:
        return len(self.start)

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def before(self, t) -> np.ndarray:
        """|set ∩ (-inf, t)| for each t (scalar or array)."""
        t = np.asarray(t, dtype=np.int64)
        k = np.searchsorted(self.start, t, side="right")  # intervals starting at or before t
        last_end = self.end[np.maximum(k - 1, 0)] if len(self.end) else np.zeros_like(t)
        overhang = np.where(k > 0, np.maximum(last_end - t, 0), 0)
        return self.cum[k] - overhang

    def measure(self, t0, t1) -> np.ndarray:
        """|set ∩ [t0, t1)| for each window (arrays broadcast)."""
        return self.before(t1) - self.before(t0)

    def clip(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        """The intervals that overlap [t0, t1), clipped to it."""
        lo = int(np.searchsorted(self.end, t0, side="right"))
        hi = int(np.searchsorted(self.start, t1, side="left"))
        if hi <= lo:
            return _EMPTY, _EMPTY
        return np.maximum(self.start[lo:hi], t0), np.minimum(self.end[lo:hi], t1)

    def contains(self, t: int) -> bool:
        k = int(np.searchsorted(self.start, t, side="right")) - 1
        return k >= 0 and t < int(self.end[k])


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint (start, end) arrays: sort by start, a running
    maximum of ends, a new block wherever a start lies beyond every end before it."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if len(s) == 0:
        return _EMPTY, _EMPTY
    if len(s) > 1 and not (s[1:] >= s[:-1]).all():
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    run = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run[:-1]
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(s) - 1
    return s[first], run[last]


def label_segments(sets: list[IntervalSet], table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cut the time line where any set starts or ends; label each piece by which sets cover
    it. `table[mask]` is the label for a piece covered by the sets whose bits are in `mask`
    (bit k = sets[k]). Returns (edges, labels): piece i is [edges[i], edges[i+1]) with
    labels[i]; consecutive equal labels are merged. Outside the edges, mask 0 holds.

    One stable sort of the concatenated (already sorted) boundary runs, one cumulative sum
    of +-2^k steps: each set is disjoint, so the running sum is the coverage bitmask.
    """
    times = np.concatenate([a for s in sets for a in (s.start, s.end)])
    if len(times) == 0:
        return _EMPTY, np.zeros(0, dtype=np.int8)
    steps = np.concatenate([np.full(len(s), sign * (1 << k), dtype=np.int16)
                            for k, s in enumerate(sets) for sign in (1, -1)])
    order = np.argsort(times, kind="stable")  # timsort: merges the sorted runs
    t = times[order]
    mask = np.cumsum(steps[order], dtype=np.int16)
    last = np.empty(len(t), dtype=bool)  # the state after the last event at each time
    last[:-1] = t[1:] != t[:-1]
    last[-1] = True
    edges, labels = t[last], table[mask[last]]
    keep = np.empty(len(labels), dtype=bool)  # drop edges that do not change the label
    keep[0] = True
    keep[1:] = labels[1:] != labels[:-1]
    return edges[keep], labels[keep]


def pieces(edges: np.ndarray, labels: np.ndarray, label: int) -> IntervalSet:
    """The pieces of a labelled cut (label_segments) that carry `label`, as an IntervalSet."""
    idx = np.flatnonzero(labels[:-1] == label)
    return IntervalSet.of_disjoint(edges[idx], edges[idx + 1])
