"""Which NVTX ranges does each GPU operation belong to? The process view, defined once.

nsys's rule: an op belongs to every range *on the launching thread* that encloses the
whole launching API call. PyTorch launches the backward pass from its autograd thread, so
under that rule the Python thread's `backward` shows almost nothing.

The `process` rule: every range keeps nsys's answer, and each range on the process's main
thread (parsers.main_thread: the thread whose ranges frame the iteration) also holds every
GPU op launched by any other thread of the process while it was open (the launching call
starts inside it) -- also when that thread has ranges of its own (the autograd thread's op
ranges under `--pytorch=autograd-nvtx`). Other threads' ranges keep nsys's answer only, so
their trees, and `--attribution nsys`, are NVIDIA's numbers.

Both are computed as (api call, range) pairs with sorted searches: per range, the API
calls that start inside it are one contiguous slice of calls sorted by (thread, start),
so the work is proportional to the number of pairs, not ranges x calls.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from nsight_tui.parsers.model import main_thread as main_thread_choice
from nsight_tui.parsers.read.ids import PID_MASK, index_dtype
from nsight_tui.parsers.read.threads import in_parallel

MODES = ("process", "nsys")
BLOCK = 1 << 20  # pairs per block where a per-pair temporary would be int64
MODE_HELP = {
    "nsys": "nsys rule: kernels count only for ranges on the thread that launched them",
    "process": "main-thread ranges hold the kernels any thread launched while they were open",
}


def slices_to_pairs(lo: np.ndarray, hi: np.ndarray, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """For row i, emit (i, j) for j in [lo[i], hi[i]) (`dtype`: of both outputs; j < 2^31
    and len(lo) < 2^31 for int32)."""
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total >= 2**31:  # np.arange below counts the pairs
        dtype = np.int64
    rows = np.repeat(np.arange(len(lo), dtype=dtype), counts)
    if total == 0:
        return rows, np.zeros(0, dtype=dtype)
    shift = (lo - np.concatenate(([0], np.cumsum(counts)[:-1]))).astype(dtype)
    pos = np.repeat(shift, counts)
    del shift, counts
    for a in range(0, total, BLOCK):  # in place, in blocks: one array of `total`, not three
        pos[a:a + BLOCK] += np.arange(a, min(a + BLOCK, total), dtype=dtype)
    return rows, pos


def enclosing_pairs(
    r_group: np.ndarray, r_start: np.ndarray, r_end: np.ndarray,
    c_group: np.ndarray, c_start: np.ndarray, c_end: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (range i, call j) with equal group and r_start <= c_start, c_end <= r_end.

    With c_end None the test is "open at the call's start": r_start <= c_start <= r_end.
    Positions are int32 while ranges and calls number under 2^31, else int64.
    """
    dtype = index_dtype(len(r_start), len(c_start))
    if len(r_start) == 0 or len(c_start) == 0:
        return np.zeros(0, dtype=dtype), np.zeros(0, dtype=dtype)
    # distinct groups by hashing (a few threads or processes among 10^7 calls: 5x np.unique's sort)
    uniq = np.unique(np.concatenate([pd.unique(r_group), pd.unique(c_group)]))
    rg, cg = np.searchsorted(uniq, r_group), np.searchsorted(uniq, c_group)  # group codes, in order
    order, cg_s, cs_s = _by_group_then_start(cg, c_start, len(uniq))
    order = order.astype(dtype, copy=False)
    # Search each range's [start, end] inside its group's slice of sorted calls.
    g_lo = np.searchsorted(cg_s, rg, side="left")
    g_hi = np.searchsorted(cg_s, rg, side="right")
    lo = np.empty(len(rg), dtype=np.int64)
    hi = np.empty(len(rg), dtype=np.int64)
    for g in np.unique(rg):  # one vectorised search per group (threads/processes: few)
        sel = rg == g
        a, b = g_lo[sel][0], g_hi[sel][0]
        seg = cs_s[a:b]
        lo[sel] = a + np.searchsorted(seg, r_start[sel], side="left")
        hi[sel] = a + np.searchsorted(seg, r_end[sel], side="right")
    del cg_s, cs_s, g_lo, g_hi
    ri, cj = slices_to_pairs(lo, hi, dtype)
    cj = _mapped(order, cj, cj.dtype)  # sorted position -> call, in place
    if c_end is not None:
        keep = np.empty(len(cj), dtype=bool)
        for a in range(0, len(cj), BLOCK):  # in blocks: no int64 array per pair, twice
            np.less_equal(c_end[cj[a:a + BLOCK]], r_end[ri[a:a + BLOCK]], out=keep[a:a + BLOCK])
        if not keep.all():
            ri = ri[keep]
            cj = cj[keep]
    return ri, cj


def _by_group_then_start(group: np.ndarray, start: np.ndarray,
                         n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.lexsort((start, group)), the ties in position order, with both keys in that order. The
    calls come from a table kept in start order: taking each group's positions in turn (a
    process or two), or a stable counting sort of the group codes (threads), leaves each group
    in start order already, in linear time; checked, and the two-key sort done where it does not."""
    if n_groups == 1:  # one process (the process view's calls): the table's own order, no copies
        if bool(np.all(start[1:] >= start[:-1])):
            return np.arange(len(start)), group, start
        order = None
    elif n_groups <= 4:
        order = np.concatenate([np.flatnonzero(group == g) for g in range(n_groups)])
    elif n_groups <= np.iinfo(np.uint16).max:
        order = np.argsort(group.astype(np.uint16), kind="stable")  # a radix sort for 16-bit keys
    else:
        order = None
    if order is not None:
        g, s = group[order], start[order]
        if bool(np.all((s[1:] >= s[:-1]) | (g[1:] != g[:-1]))):
            return order, g, s
    order = np.lexsort((start, group))
    return order, group[order], start[order]


def _mapped(table: np.ndarray, idx: np.ndarray, dtype, then: np.ndarray | None = None) -> np.ndarray:
    """table[idx] (then `then`[that]) as `dtype`, block by block, written over `idx` itself
    when it has that dtype: no second array the size of the pairs."""
    out = idx if idx.dtype == dtype else np.empty(len(idx), dtype=dtype)
    for a in range(0, len(idx), BLOCK):
        got = table[idx[a:a + BLOCK]]
        out[a:a + BLOCK] = got if then is None else then[got]
    return out


def _appended(first: np.ndarray, table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """first followed by table[idx] (in first's dtype: the values fit), filled in blocks;
    `first` is grown in place (realloc) when it owns its memory: it is then the result, and
    no view of it may exist (enclosing_pairs' outputs have none)."""
    n = len(first)
    if first.flags.owndata and first.base is None:
        out = first
        out.resize(n + len(idx), refcheck=False)
    else:
        out = np.empty(n + len(idx), dtype=first.dtype)
        out[:n] = first
    tail = out[n:]
    for a in range(0, len(idx), BLOCK):
        tail[a:a + BLOCK] = table[idx[a:a + BLOCK]]
    return out


def attribute(ranges: pd.DataFrame, api: pd.DataFrame, ops: pd.DataFrame, mode: str,
              thread_names: dict[int, str] | None = None, main_thread: str | None = None):
    """(op position, range position) pairs under `mode`, plus the main thread per process
    (gpid -> parsers.main_thread.MainThread; `main_thread` names one, else chosen).

    Ranges that end on another thread than they began are left out, as nsys does.
    """
    if mode not in MODES:
        raise ValueError(f"attribution must be one of {MODES}, not {mode!r}")
    eligible = ~ranges["cross"].to_numpy(dtype=bool) if len(ranges) else np.zeros(0, dtype=bool)
    r_idx = np.flatnonzero(eligible)
    op_api = ops["api"].to_numpy()
    launched = op_api >= 0
    # The API calls that launched something, with how many ops each (counted, not sorted:
    # call positions are 0..len(api)).
    launches = np.bincount(op_api[launched], minlength=len(api))
    unlaunched = len(op_api) - int(launched.sum())
    del launched
    calls = np.flatnonzero(launches)
    ops_per_call = launches[calls]
    del launches
    c_start = api["start"].to_numpy()[calls]
    c_end = api["end"].to_numpy()[calls]
    c_gtid = api["gtid"].to_numpy()[calls]
    n_calls = len(calls)
    del calls
    r_start = ranges["start"].to_numpy()[r_idx] if len(r_idx) else np.zeros(0, dtype=np.int64)
    r_end = ranges["end"].to_numpy()[r_idx] if len(r_idx) else np.zeros(0, dtype=np.int64)
    r_gtid = ranges["gtid"].to_numpy()[r_idx] if len(r_idx) else np.zeros(0, dtype=np.int64)

    def main_threads_and_theirs():
        """The main threads, and (process view) the pairs of their ranges with calls made off them."""
        mains = main_thread_choice.choose(r_gtid, r_start, r_end, c_gtid, c_start, ops_per_call,
                                          thread_names, main_thread)
        if not (mode == "process" and n_calls and mains):
            return mains, None
        main_gtids = np.array([m.gtid for m in mains.values()], dtype=np.int64)
        mr = np.flatnonzero(np.isin(r_gtid, main_gtids))
        oi = np.flatnonzero(~np.isin(c_gtid, main_gtids))  # calls made off the main threads
        return mains, (mr, oi, *enclosing_pairs(
            r_gtid[mr] & PID_MASK, r_start[mr], r_end[mr], c_gtid[oi] & PID_MASK, c_start[oi], None))

    # nsys's pairs and the process view's own, each on a core of its own
    nsys_pairs = partial(enclosing_pairs, r_gtid, r_start, r_end, c_gtid, c_start, c_end)
    del c_end  # the call's own reference goes with it
    (ri, cj), (mains, theirs) = in_parallel(nsys_pairs, main_threads_and_theirs)
    del nsys_pairs
    if theirs is not None:
        mr, oi, ri2, cj2 = theirs
        del theirs
        ri = _appended(ri, mr, ri2)
        del ri2
        cj = _appended(cj, oi, cj2)
        del cj2
    # Expand call pairs to op pairs: ops sorted by launching call form contiguous runs, the
    # run of calls[k] starting after the ops of calls[:k] (and the unlaunched ones, first).
    dtype = index_dtype(len(ops), len(ranges))
    op_order = np.argsort(op_api, kind="stable").astype(dtype)
    run_start = (unlaunched + np.concatenate(([0], np.cumsum(ops_per_call)[:-1]))).astype(dtype)
    r_idx = r_idx.astype(dtype)
    if len(ops_per_call) and ops_per_call.max() == 1:  # one op per call: no expansion
        op_pos = _mapped(run_start, cj, dtype, then=op_order)
        del cj
        range_pos = _mapped(r_idx, ri, dtype)
    else:
        first = run_start[cj]
        pi, pos = slices_to_pairs(first, first + ops_per_call[cj], dtype)
        del cj, first
        op_pos = op_order[pos]
        range_pos = r_idx[ri[pi]]
    return op_pos, range_pos, mains
