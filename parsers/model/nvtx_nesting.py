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

from nsight_tui.parsers.model.range_nesting import depths, path_any, tightest_enclosing


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
    # The stack's parents (vectorised: model.range_nesting), kept on every thread whose intervals
    # nest or are disjoint: there the innermost open interval is the shortest enclosing one. A
    # thread where an interval the stack pops at i overlaps or touches i (two that overlap without
    # nesting) is swept again for the shortest enclosing interval. The interval popped last at i,
    # the one with the latest end, is i's previous sibling (same parent, same thread), so
    # checking that one checks them all.
    u_parent, _ = tightest_enclosing(ug, us, ue)
    bounds = np.flatnonzero(np.append(True, ug[1:] != ug[:-1]))
    ends = np.append(bounds[1:], len(ug))
    sibling = _previous_sibling(u_parent, np.repeat(np.arange(len(bounds)), ends - bounds))
    has = sibling >= 0
    clash = np.zeros(len(ug), dtype=bool)
    clash[has] = ue[sibling[has]] >= us[has]
    for t in np.flatnonzero(np.add.reduceat(clash, bounds) > 0).tolist():
        lo, hi = int(bounds[t]), int(ends[t])
        u_parent[lo:hi] = -1
        _shortest_enclosing(us, ue, lo, hi, u_parent)
    # Levels over unique intervals: the number of parents up to a root; undefined from a duplicate
    # group downwards.
    dup = members > 1
    u_level = depths(u_parent).astype(np.float64)
    u_level[path_any(u_parent, dup)] = np.nan
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


def _previous_sibling(parent: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Per interval (in sweep order), the last interval before it with the same parent on the
    same thread (roots: the same thread's previous root), or -1."""
    n = len(parent)
    order = np.lexsort((np.arange(n), parent, thread))  # by (thread, parent), then sweep order
    same = np.zeros(n, dtype=bool)
    same[1:] = (thread[order][1:] == thread[order][:-1]) & (parent[order][1:] == parent[order][:-1])
    out = np.full(n, -1, dtype=np.int64)
    out[order[1:][same[1:]]] = order[:-1][same[1:]]
    return out


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
