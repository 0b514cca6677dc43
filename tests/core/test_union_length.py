"""The per-range busy time (RangeModel.busy_ns): the length of the union of each range's GPU
intervals, against a plain merge of the intervals written here."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.intervals import merged_length
from nsight_tui.parsers.model.ranges import _union_length




@pytest.mark.parametrize("seed", range(6))
def test_union_length_is_the_merged_intervals_length(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    m = int(rng.integers(1, 2_000))
    groups = rng.integers(0, n, m)
    starts = rng.integers(-10**6, 10**6, m)
    ends = starts + rng.integers(0, 10**5, m)
    want = [merged_length([(int(s), int(e)) for g, s, e in zip(groups, starts, ends) if g == k]) for k in range(n)]
    assert _union_length(groups, starts, ends, n).tolist() == want
    order = np.lexsort((starts, groups))  # the model's pairs come sorted by range, then start
    assert _union_length(groups[order], starts[order], ends[order], n, presorted=True).tolist() == want


def test_union_length_where_lifting_would_overflow():
    """Ends 2^62 apart: the running maximum goes through pandas' groupby instead."""
    groups = np.array([0, 0, 1, 1, 1])
    starts = np.array([0, 5, -2**61, 2**61, 2**61 + 3])
    ends = starts + np.array([10, 10, 7, 5, 5])
    assert _union_length(groups, starts, ends, 2).tolist() == [15, 7 + 8]
