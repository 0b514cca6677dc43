"""NVTX range nesting as nsys's nvtx_gpu_proj_sum defines it (its `Avg Range Lvl` and
`Avg Num Child` columns), which differs from a tree in four ways, each checked against
NVIDIA's own output on the committed `sample_traces/edge_*.sqlite`:

- only ranges without an `endGlobalTid` take part, even one naming its own thread;
- a range's parent is the *shortest* range on the same thread that encloses it
  (start <= its start, end >= its end); with overlapping start/end ranges or an unended
  range (closed at the last range timestamp) that is not what a push/pop stack gives;
- two identical ranges (same thread, start, end) enclose each other: each is the other's
  parent, so neither is reachable from a root, and their level, and the level of every
  range below them, is undefined (nsys's average leaves it out);
- a level is the number of parents up to a root.

The usual case, ranges that nest or are disjoint, is one stack sweep per thread; a thread
whose ranges overlap without nesting takes an O(n log n) sweep instead.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def nsys_nesting(ranges: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(parent position or -1, level as float, NaN where undefined) for every range."""
    n = len(ranges)
    parent = np.full(n, -1, dtype=np.int64)
    level = np.full(n, np.nan)
    if n == 0:
        return parent, level
    eligible = np.flatnonzero(~ranges["cross"].to_numpy(dtype=bool))
    s = ranges["start"].to_numpy(dtype=np.int64)[eligible]
    e = ranges["end"].to_numpy(dtype=np.int64)[eligible]
    g = ranges["gtid"].to_numpy(dtype=np.int64)[eligible]
    order = np.lexsort((eligible, -e, s, g))  # thread, start, longest first, then file order
    s, e, g, pos = s[order], e[order], g[order], eligible[order]
    if len(pos) == 0:
        return parent, level
    # Identical intervals form one unique interval with several members.
    new = np.ones(len(pos), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1]) | (e[1:] != e[:-1])
    uid = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    us, ue, ug = s[first], e[first], g[first]
    members = np.diff(np.append(first, len(pos)))
    u_parent = np.full(len(first), -1, dtype=np.int64)
    bounds = np.flatnonzero(np.append(True, ug[1:] != ug[:-1]))
    for lo, hi in zip(bounds.tolist(), np.append(bounds[1:], len(ug)).tolist()):
        if not _stack_parents(us, ue, lo, hi, u_parent):
            _shortest_enclosing(us, ue, lo, hi, u_parent)
    # Levels over unique intervals: parents come first in this order (earlier start, or the
    # same start and a later end). Undefined from a duplicate group downwards.
    u_level = np.zeros(len(first), dtype=np.float64)
    dup = members > 1
    up = u_parent.tolist()
    lv = u_level.tolist()
    for i, p in enumerate(up):
        if dup[i]:
            lv[i] = np.nan
        elif p >= 0:
            lv[i] = lv[p] + 1
    u_level = np.asarray(lv)
    level[pos] = u_level[uid]
    # Parents of ranges: a lone range points at the first member of its parent interval;
    # members of a duplicate group point at each other in a ring (nsys: tightness 0).
    first_member = pos[first]
    single = ~dup[uid]
    has_parent = single & (u_parent[uid] >= 0)
    parent[pos[has_parent]] = first_member[u_parent[uid[has_parent]]]
    for gi in np.flatnonzero(dup):
        ring = pos[first[gi]: first[gi] + members[gi]]
        parent[ring] = np.roll(ring, -1)
    return parent, level


def _stack_parents(s, e, lo: int, hi: int, out: np.ndarray) -> bool:
    """Parents for one thread's intervals [lo, hi) if they nest or are disjoint (then the
    innermost open interval is the shortest enclosing one). False if two overlap without
    nesting, or touch: then a stack would miss a shorter enclosing interval."""
    stack: list[int] = []
    ends = e.tolist()
    starts = s.tolist()
    for i in range(lo, hi):
        while stack and ends[stack[-1]] < ends[i]:
            top = stack.pop()
            if ends[top] >= starts[i]:
                return False
        if stack:
            out[i] = stack[-1]
        stack.append(i)
    return True


def _shortest_enclosing(s, e, lo: int, hi: int, out: np.ndarray) -> None:
    """For each interval of [lo, hi) (sorted by start, longest first), the shortest other
    interval with start <= its start and end >= its end: a sweep by start with a Fenwick tree
    over end ranks that keeps the minimum (duration, index)."""
    ends = e[lo:hi]
    uniq = np.unique(ends)
    rank = (len(uniq) - 1 - np.searchsorted(uniq, ends)).tolist()  # larger end = smaller rank
    size = len(uniq)
    inf = (np.iinfo(np.int64).max, -1)
    tree = [inf] * (size + 1)
    dur = (e[lo:hi] - s[lo:hi]).tolist()
    for k in range(hi - lo):
        r = rank[k] + 1
        best = inf
        j = r  # prefix over ranks <= r: intervals ending at or after this one
        while j > 0:
            if tree[j] < best:
                best = tree[j]
            j -= j & -j
        if best[1] >= 0:
            out[lo + k] = lo + best[1]
        item = (dur[k], k)
        j = r
        while j <= size:
            if item < tree[j]:
                tree[j] = item
            j += j & -j
