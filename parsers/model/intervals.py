"""Sets of time intervals as sorted, disjoint [start, end) arrays, vectorised.

GPU busy time, communication hidden behind compute and a phase's share of either are all
lengths of unions and intersections of op intervals; these helpers compute them with sorts
and binary searches, never a Python loop per interval.

`IntervalSet` keeps its prefix sums, so "how much of the set lies in [t0, t1)" is two binary
searches for any number of windows at once (the idle analysis, parsers/analyses/idle.py, and the
timeline's cells, parsers/analyses/timeline.py, ask it per range and per screen cell);
`label_segments` cuts the time line by which of several sets cover it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted disjoint intervals (touching ones merged)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # a new block starts where an interval begins after everything before it has ended
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    return s[first], reach[last]


def length(block: tuple[np.ndarray, np.ndarray]) -> int:
    s, e = block
    return int((e - s).sum())


def covered_before(block: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """For each time in `t`, how much of the (disjoint, sorted) `block` lies before it."""
    s, e = block
    t = np.asarray(t, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(len(t), dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(e - s)))
    i = np.searchsorted(s, t, side="right") - 1  # the last block starting at or before t
    inside = np.where(i >= 0, np.clip(t - s[np.maximum(i, 0)], 0, (e - s)[np.maximum(i, 0)]), 0)
    return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0)


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of the intersection of two disjoint sorted interval sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return 0
    return int((covered_before(b, a[1]) - covered_before(b, a[0])).sum())


def clip(block: tuple[np.ndarray, np.ndarray], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The part of `block` inside [lo, hi)."""
    s, e = block
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def _elementary(a, b):
    """The elementary segments between all boundaries of a and b, and whether each lies in a, in b."""
    points = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    lo, hi = points[:-1], points[1:]
    seg = hi - lo
    in_a = (covered_before(a, hi) - covered_before(a, lo)) == seg
    in_b = (covered_before(b, hi) - covered_before(b, lo)) == seg
    return lo, hi, in_a, in_b


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The intersection of two disjoint sorted interval sets, as one."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    lo, hi, in_a, in_b = _elementary(a, b)
    return union(lo[in_a & in_b], hi[in_a & in_b])


def difference(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """a without b, for disjoint sorted interval sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo, hi, in_a, in_b = _elementary(a, b)
    return union(lo[in_a & ~in_b], hi[in_a & ~in_b])


@dataclass(frozen=True)
class IntervalSet:
    """Disjoint, sorted [start, end) intervals; `cum[i]` = total length of intervals 0..i-1."""

    start: np.ndarray
    end: np.ndarray
    cum: np.ndarray

    @classmethod
    def empty(cls) -> IntervalSet:
        return cls(EMPTY[0], EMPTY[0], np.zeros(1, dtype=np.int64))

    @classmethod
    def union(cls, starts, ends) -> IntervalSet:
        """The union of any intervals (overlapping, unsorted, empty ones ignored). Touching
        intervals ([a, b) and [b, c)) become one."""
        return cls.of_disjoint(*union(starts, ends))

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
            return EMPTY[0], EMPTY[0]
        return np.maximum(self.start[lo:hi], t0), np.minimum(self.end[lo:hi], t1)

    def contains(self, t: int) -> bool:
        k = int(np.searchsorted(self.start, t, side="right")) - 1
        return k >= 0 and t < int(self.end[k])


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
        return EMPTY[0], np.zeros(0, dtype=np.int8)
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
