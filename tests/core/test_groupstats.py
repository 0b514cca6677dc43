"""read.groupstats against numpy's and pandas' own grouping (independent computations)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsight_tui.parsers.read.groupstats import group_ids, group_stats


@pytest.mark.parametrize("dtype, lo, hi", [(np.int32, 0, 50), (np.int64, -7, 300), (np.uint16, 3, 9),
                                           (np.int64, 0, 2**40),  # sparse: a sort, not a table
                                           (np.uint64, 2**63, 2**64 - 1)])
def test_one_key_groups_are_numpys_unique(dtype, lo, hi):
    rng = np.random.default_rng(7)
    key = rng.integers(lo, hi, size=5000, dtype=dtype, endpoint=True)
    uniq, inverse = np.unique(key, return_inverse=True)
    g = group_ids(key)
    assert g.n == len(uniq)
    assert np.array_equal(g.gid, inverse.reshape(-1))
    assert np.array_equal(key[g.first], uniq)  # a row of each group, groups in key order
    # the first row of each group (what readers of `first` rely on for its keys: any row would do)
    assert np.array_equal(g.first, np.array([np.flatnonzero(key == u)[0] for u in uniq]))


def test_group_stats_equal_pandas_groupby():
    rng = np.random.default_rng(11)
    key = rng.integers(0, 40, size=20000).astype(np.int32)
    values = rng.integers(0, 10**9, size=len(key))
    g = group_ids(key)
    st = group_stats(g.gid, g.n, values)
    want = pd.Series(values).groupby(key).agg(["sum", "count", "mean", "median", "min", "max", "std"])
    assert np.array_equal(st.total, want["sum"].to_numpy())
    assert np.array_equal(st.num, want["count"].to_numpy())
    assert np.array_equal(st.min, want["min"].to_numpy()) and np.array_equal(st.max, want["max"].to_numpy())
    assert np.array_equal(st.med, want["median"].to_numpy())
    assert np.allclose(st.avg, want["mean"].to_numpy(), rtol=0, atol=1e-6)
    assert np.allclose(st.std, want["std"].fillna(0).to_numpy(), rtol=1e-9)


def test_run_stats_equal_pandas_groupby():
    """The figures of groups given as runs of (group, value)-ordered values."""
    from nsight_tui.parsers.read.groupstats import run_stats

    rng = np.random.default_rng(5)
    key = np.sort(rng.integers(0, 300, size=30000))
    values = rng.integers(0, 10**12, size=len(key))
    order = np.lexsort((values, key))
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    st = run_stats(values, starts)
    want = pd.Series(values).groupby(key).agg(["sum", "count", "median", "min", "max", "std"])
    assert np.array_equal(st.total, want["sum"].to_numpy())
    assert np.array_equal(st.num, want["count"].to_numpy())
    assert np.array_equal(st.min, want["min"].to_numpy()) and np.array_equal(st.max, want["max"].to_numpy())
    assert np.array_equal(st.med, want["median"].to_numpy())
    assert np.allclose(st.std, want["std"].fillna(0).to_numpy(), rtol=1e-9)


@pytest.mark.parametrize("n, workers", [(10, 2), ((1 << 22) + 7, 2), ((1 << 22) + 5, 3), (1 << 23, 1)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
@pytest.mark.parametrize("runs", [False, True])
def test_sort_in_place_is_numpys_sort(n, workers, dtype, runs):
    """read.psort on several threads, by either sort: the values numpy's one-threaded sort gives."""
    from nsight_tui.parsers.read.psort import sort_in_place

    rng = np.random.default_rng(n)
    values = rng.integers(0, np.iinfo(dtype).max, size=n, dtype=dtype)
    values[: n // 3] = values[n // 3: 2 * (n // 3)]  # ties
    want = np.sort(values)
    sort_in_place(values, workers=workers, runs=runs)
    assert np.array_equal(values, want)
