"""model.nvtx_nesting (nsys's nesting for nvtx_gpu_proj_sum), vectorised, against the per-range
stack loop it replaced, written here as it was: parents and levels equal on real exports and on
random ranges that nest, touch, overlap without nesting and repeat (NVIDIA's own CSVs check the
report's columns in test_nsys_oracle.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from nsight_tui.parsers.model import nvtx_nesting
from nsight_tui.parsers.read.load import load_trace


def loop_nesting(ranges: pd.DataFrame):
    n = len(ranges)
    parent = np.full(n, -1, dtype=np.int64)
    level = np.full(n, np.nan)
    eligible = np.flatnonzero(~ranges["cross"].to_numpy(dtype=bool))
    s = ranges["start"].to_numpy(dtype=np.int64)[eligible]
    e = ranges["end"].to_numpy(dtype=np.int64)[eligible]
    g = ranges["gtid"].to_numpy(dtype=np.int64)[eligible]
    order = np.lexsort((eligible, -e, s, g))
    s, e, g, pos = s[order], e[order], g[order], eligible[order]
    if len(pos) == 0:
        return parent, level
    new = np.ones(len(pos), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1]) | (e[1:] != e[:-1])
    uid = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    us, ue, ug = s[first], e[first], g[first]
    members = np.diff(np.append(first, len(pos)))
    u_parent = np.full(len(first), -1, dtype=np.int64)
    bounds = np.flatnonzero(np.append(True, ug[1:] != ug[:-1]))
    for lo, hi in zip(bounds.tolist(), np.append(bounds[1:], len(ug)).tolist()):
        stack: list[int] = []
        ok = True
        for i in range(lo, hi):
            while stack and ue[stack[-1]] < ue[i]:
                top = stack.pop()
                if ue[top] >= us[i]:
                    ok = False
                    break
            if not ok:
                break
            if stack:
                u_parent[i] = stack[-1]
            stack.append(i)
        if not ok:
            u_parent[lo:hi] = -1
            for i in range(lo, hi):  # the shortest other interval enclosing it, earliest on ties
                best = None
                for j in range(lo, hi):
                    if j != i and us[j] <= us[i] and ue[j] >= ue[i]:
                        cand = (ue[j] - us[j], j - lo)
                        best = cand if best is None or cand < best else best
                if best is not None:
                    u_parent[i] = lo + best[1]
    dup = members > 1
    lv = np.zeros(len(first))
    for i, p in enumerate(u_parent.tolist()):
        lv[i] = np.nan if dup[i] else (lv[p] + 1 if p >= 0 else 0.0)
    level[pos] = lv[uid]
    single = ~dup[uid]
    has_parent = single & (u_parent[uid] >= 0)
    parent[pos[has_parent]] = pos[first][u_parent[uid[has_parent]]]
    for gi in np.flatnonzero(dup):
        ring = pos[first[gi]: first[gi] + members[gi]]
        parent[ring] = np.roll(ring, -1)
    return parent, level


def _same(ranges):
    got, want = nvtx_nesting.nsys_nesting(ranges), loop_nesting(ranges)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1], equal_nan=True)


@pytest.mark.parametrize("name", ["small_ctx128.sqlite", "small_ctx128_agnvtx.sqlite.xz", "edge_overlap.sqlite.xz",
                                  "edge_duplicate.sqlite.xz", "edge_unended.sqlite.xz", "edge_cross_thread.sqlite.xz",
                                  "edge_deep.sqlite.xz"])
def test_real_exports_nest_as_the_loop_did(name):
    _same(load_trace(plain(SAMPLES / name)).ranges)


@pytest.mark.parametrize("seed", range(8))
def test_random_ranges_nest_as_the_loop_did(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    start = rng.integers(0, 300, size=n)
    nested = seed % 2 == 0  # half the cases nest (the stack's path), half overlap (the sweep's)
    end = start + (rng.integers(0, 4, size=n) * 50 if nested else rng.integers(0, 80, size=n))
    frame = pd.DataFrame({"start": start, "end": end, "gtid": rng.integers(0, 3, size=n),
                          "cross": rng.random(n) < 0.05})
    _same(frame)
