"""model.range_nesting (the views' tree, vectorised) against the stack sweep it replaces, written
here as a plain loop: every range's parent and depth, on real exports and on random ranges with
ties, equal ends and overlaps (which no binary search of a sorted list would get right by luck)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from nsight_tui.parsers.model.range_nesting import tightest_enclosing
from nsight_tui.parsers.read.load import load_trace


def stack_sweep(gtid, start, end):
    parent = np.full(len(start), -1, dtype=np.int64)
    depth = np.zeros(len(start), dtype=np.int64)
    stack: list[int] = []
    thread = None
    for i in sorted(range(len(start)), key=lambda i: (gtid[i], start[i], -end[i], i)):
        if gtid[i] != thread:
            stack, thread = [], gtid[i]
        while stack and end[stack[-1]] < end[i]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
            depth[i] = depth[stack[-1]] + 1
        stack.append(i)
    return parent, depth


@pytest.mark.parametrize("name", ["small_ctx128.sqlite", "small_ctx128_agnvtx.sqlite.xz", "edge_deep.sqlite.xz",
                                  "edge_overlap.sqlite.xz", "edge_duplicate.sqlite.xz", "edge_cross_thread.sqlite.xz",
                                  "edge_unended.sqlite.xz"])
def test_real_ranges_nest_as_the_stack_sweeps(name):
    r = load_trace(plain(SAMPLES / name)).ranges
    args = [r[c].to_numpy(np.int64) for c in ("gtid", "start", "end")]
    got, want = tightest_enclosing(*args), stack_sweep(*args)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(6))
def test_random_ranges_nest_as_the_stack_sweeps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    gtid = rng.integers(0, 3, size=n)
    start = rng.integers(0, 200, size=n)  # many ties
    end = start + rng.integers(0, 60, size=n)  # overlapping, not nested, equal ends
    got, want = tightest_enclosing(gtid, start, end), stack_sweep(gtid, start, end)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_deep_chain():
    n = 5000  # each range inside the one before: depth n - 1, pointer jumping in ~13 passes
    start, end = np.arange(n), 2 * n - np.arange(n)
    parent, depth = tightest_enclosing(np.zeros(n, dtype=np.int64), start, end)
    assert np.array_equal(parent, np.arange(-1, n - 1)) and np.array_equal(depth, np.arange(n))
