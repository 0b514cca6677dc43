"""Sorting 10^8 integers on every core: numpy's sort is single-threaded, and the reports'
biggest sorts (10^8 packed pair keys at 24M kernels, ~9 s) are most of a `stats` run.

The array is cut in one piece per core, each piece sorted in place on a thread of its own
(numpy releases the GIL while it sorts), then the sorted pieces are merged by the stable sort,
a merging sort that takes each sorted piece as one run: linear work. The result is exactly
`np.sort`'s: a sort of integers has one answer.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np

from nsight_tui.parsers.read.threads import cores

PARALLEL_MIN = 1 << 22  # below ~4M values one thread is as fast (the threads' start, the merge)


def sort_in_place(values: np.ndarray, workers: int | None = None, runs: bool = False) -> None:
    """values.sort(), in place, on `workers` threads (default: the cores this process may use).
    `runs`: the values come in long ascending stretches (keys built range by range), which the
    stable (merging) sort takes whole: about half the CPU of the default sort on such keys; the
    sorted values are the same either way."""
    n = len(values)
    workers = min(cores() if workers is None else workers, 8)
    kind: Literal["stable", "quicksort"] = "stable" if runs else "quicksort"  # quicksort: numpy's default
    if workers < 2 or n < PARALLEL_MIN or values.dtype.kind not in "iub":
        values.sort(kind=kind)
        return
    bounds = np.linspace(0, n, workers + 1).astype(np.int64)
    pieces = [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsight-tui-sort") as pool:
        for done in pool.map(lambda piece: piece.sort(kind=kind), pieces):
            del done
    values.sort(kind="stable")  # merges the sorted pieces (runs)
