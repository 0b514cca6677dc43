"""Sets of time intervals as sorted, disjoint [start, end) arrays, vectorised.

GPU busy time, communication hidden behind compute and a phase's share of either are all
lengths of unions and intersections of op intervals; these helpers compute them with sorts
and binary searches, never a Python loop per interval.
"""
from __future__ import annotations

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
