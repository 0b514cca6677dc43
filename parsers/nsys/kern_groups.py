"""nvtx_kern_sum's groups: every (range, kernel) pair of the range model grouped by (launching
thread, range name, range style, kernel name), with each group's duration statistics, its
distinct ranges (NVTX Inst) and distinct kernels (Kern Inst). Kernels in no range make groups
of their own, with no range (nsys's LEFT JOIN).

10^8 pairs at 24M kernels, so the groups never touch a Python string: every key is an integer
whose order is the strings' order (NULL = -1 sorts first, as in SQLite), and the keys are packed
into one int64 per pair, (thread rank, range name, style) then the op's rank among all ops
ordered by (kernel name, duration). One sort of those values (on every core: read.psort) gives
the groups in order, each group's sorted durations (its median) and its repeated ops (one op
under two same-named ranges) side by side; everything else is read back from the sorted keys.
Where the keys cannot be packed (too many distinct values), the five columns are grouped as
they are.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read.groupstats import Stats, distinct, group_ids, group_stats, run_stats
from nsight_tui.parsers.read.ids import KERNEL, index_dtype, pid_of, tid_of
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.psort import sort_in_place

BLOCK = 1 << 20  # pairs per block where a per-pair temporary would be int64
KEY_LIMIT = 2**62  # the packed pair keys stay under it (their sums and products too)
OP_KEY_BITS = 63  # (kernel name, duration, position) of an op in one non-negative int64
STYLES = ("PushPop", "StartEnd")


def kernel_groups(trace: Trace, m: RangeModel) -> tuple[pd.DataFrame, list, list]:
    """One row per group: pid, tid, name (range name rank, -1 none), style (0 PushPop, 1
    StartEnd, -1 none), kname (kernel name rank), total, num, avg, med, min, max, std, nvtx_inst,
    kern_inst; rows in group-key order. Also the range names and kernel names by rank."""
    ops = trace.ops
    is_k = ops["kind"].to_numpy() == KERNEL
    keys = _Keys(trace)
    if keys.packable:
        frame = _packed_groups(keys, m, is_k)
    else:
        frame = _column_groups(keys, m, is_k)
    return frame, list(keys.rname_text), list(keys.kname_text)


class _Keys:
    """The integer keys of ops and ranges, ranked as their texts and numbers sort."""

    def __init__(self, trace: Trace):
        ops, r = trace.ops, trace.ranges
        self.n_ops = len(ops)
        # The launching thread, per op: (pid, tid), -1 for an op no call launched; computed for
        # the distinct threads, then looked up (never a shift or mask per op)
        api_pos = ops["api"].to_numpy()
        gtid = trace.api["gtid"].to_numpy()
        op_gtid = np.where(api_pos >= 0, gtid[np.maximum(api_pos, 0)] if len(gtid) else 0, -1)
        del api_pos
        op_code, gtids = pd.factorize(op_gtid)
        del op_gtid
        gtids = np.asarray(gtids, dtype=np.int64)
        pid = np.where(gtids >= 0, pid_of(gtids), -1).astype(np.int32)  # 24-bit ids
        tid = np.where(gtids >= 0, tid_of(gtids), -1).astype(np.int32)
        thread_code, threads = pd.factorize((pid.astype(np.int64) << 32) | (tid.astype(np.int64) & 0xFFFFFFFF))
        self.thread_pid, self.thread_tid = pid, tid  # per distinct gtid (op_code)
        self.op_code = op_code
        rname_rank, self.rname_text = trace.range_names.sorted_ranks
        self.rname_rank = np.append(rname_rank, -1)  # position -1: no range
        self.style_rank = np.append(np.where(r["pushpop"].to_numpy(dtype=bool), 0, 1), -1)  # PushPop first
        kname_rank_of, self.kname_text = pd.factorize(pd.Series(trace.op_names), sort=True)
        self.op_kname = kname_rank_of.astype(np.int64)[ops["name"].to_numpy()]
        self.op_dur = ops["end"].to_numpy() - ops["start"].to_numpy()
        order = np.argsort(threads)
        self.threads_sorted = np.asarray(threads)[order]  # (pid << 32 | tid) by rank
        thread_rank = np.empty(len(order), dtype=np.int64)
        thread_rank[order] = np.arange(len(order))
        self.op_thread_rank = thread_rank[thread_code][op_code]
        self.n_threads = len(order)
        self.n_r3 = np.int64((len(self.rname_text) + 1) * 3)  # (range name, style) in one number
        # an op's rank in the low bits of a pair's key: shifts and masks, not divisions, take it apart
        self.rank_bits = max(self.n_ops - 1, 1).bit_length()
        self.packable = (self.n_threads * int(self.n_r3)) << self.rank_bits < KEY_LIMIT

    def op_pid_tid(self) -> tuple[np.ndarray, np.ndarray]:
        """Per op: the launching thread's pid and tid (-1 for none)."""
        return self.thread_pid[self.op_code], self.thread_tid[self.op_code]

    def range_part(self) -> np.ndarray:
        """Per range (position -1: none): (name rank + 1) * 3 + (style + 1), 0 for no range."""
        return (self.rname_rank.astype(np.int64) + 1) * 3 + (self.style_rank.astype(np.int64) + 1)


def _op_order(keys: _Keys) -> np.ndarray:
    """The ops ordered by (kernel name, duration), ties in position order (np.lexsort's): where
    name, duration and position fit one int64, one sort of those values (a third of an argsort
    here); else the two-key argsort."""
    n = keys.n_ops
    index_bits = max(n - 1, 1).bit_length()
    name_bits = max(int(keys.op_kname.max(initial=0)), 1).bit_length()
    dur_bits = OP_KEY_BITS - index_bits - name_bits
    dur = keys.op_dur
    if n and dur_bits > 0 and int(dur.min()) >= 0 and int(dur.max()) < (1 << dur_bits):
        packed = keys.op_kname << (dur_bits + index_bits)
        packed |= dur << index_bits
        packed |= np.arange(n, dtype=np.int64)
        sort_in_place(packed, runs=True)  # ops in time order: each step's kernels in the same order
        packed &= (1 << index_bits) - 1
        return packed
    return np.lexsort((dur, keys.op_kname))


def _packed_groups(keys: _Keys, m: RangeModel, is_k: np.ndarray) -> pd.DataFrame:
    bits = keys.rank_bits
    mask = np.int64((1 << bits) - 1)
    index = index_dtype(keys.n_ops + 1, m.n + 1)  # millions of pairs: half the memory
    by_name_dur = _op_order(keys).astype(index)
    op_rank = np.empty(keys.n_ops, dtype=index)
    op_rank[by_name_dur] = np.arange(keys.n_ops, dtype=index)
    kname_of_rank = keys.op_kname[by_name_dur]
    dur_of_rank = keys.op_dur[by_name_dur]
    del by_name_dur
    range_part = keys.range_part()
    op_thread_part = keys.op_thread_rank * keys.n_r3  # per op
    # The kernel pairs, then the kernels in no range, packed block by block
    pair_op, pair_range = m.pair_op, m.pair_range
    blocks = [(a, min(a + BLOCK, len(pair_op))) for a in range(0, len(pair_op), BLOCK)]
    kernel_pair = np.empty(len(pair_op), dtype=bool)
    in_range = np.zeros(keys.n_ops, dtype=bool)
    for a, b in blocks:
        o = pair_op[a:b]
        kernel_pair[a:b] = is_k[o]
        in_range[o] = True
    n_kp = int(np.count_nonzero(kernel_pair))
    lone = np.flatnonzero(is_k & ~in_range)
    del in_range
    key = np.empty(n_kp + len(lone), dtype=np.int64)
    at = 0
    for a, b in blocks:
        sel = kernel_pair[a:b]
        o, r = pair_op[a:b][sel], pair_range[a:b][sel]
        k = op_thread_part[o] + range_part[r]
        k <<= bits
        k |= op_rank[o]
        key[at:at + len(k)] = k
        at += len(k)
    key[at:] = ((op_thread_part[lone] + range_part[-1]) << bits) | op_rank[lone]
    del lone
    sort_in_place(key, runs=True)  # the pairs range by range: (thread, range) in stretches
    # Groups change where (thread, range name, style) or the kernel name does; a pair whose key
    # equals the one before is the same op again in the same group (not another kernel).
    n = len(key)
    new_group = np.empty(n, dtype=bool)
    repeats = []
    for a in range(0, n, BLOCK):
        lo, b = max(a - 1, 0), min(a + BLOCK, n)
        k = key[lo:b]
        cls, rank = k >> bits, k & mask
        kn = kname_of_rank[rank]
        if a == 0:
            new_group[0] = True
        np.not_equal(cls[1:], cls[:-1], out=new_group[lo + 1:b])
        new_group[lo + 1:b] |= kn[1:] != kn[:-1]
        repeats.append(lo + 1 + np.flatnonzero(k[1:] == k[:-1]))
    del op_rank
    starts = np.flatnonzero(new_group)
    del new_group
    first_key = key[starts]
    # the keys' array turned into the sorted pairs' durations, in place (no second array of
    # 10^8 values: fresh pages cost as much as the work here)
    for a in range(0, n, BLOCK):
        b = min(a + BLOCK, n)
        key[a:b] = dur_of_rank[key[a:b] & mask]
    st = run_stats(key, starts)
    repeated_at = np.concatenate(repeats) if repeats else np.zeros(0, dtype=np.int64)
    kern_inst = st.num - np.bincount(np.searchsorted(starts, repeated_at, side="right") - 1,
                                     minlength=len(starts))
    # Each group's keys, read back from its first pair's key
    cls, rank = first_key >> bits, first_key & mask
    thread_rank, part = np.divmod(cls, keys.n_r3)
    rname, style = np.divmod(part, 3)
    thread = keys.threads_sorted[thread_rank]
    kname = kname_of_rank[rank]
    frame = _frame(thread >> 32, (thread & 0xFFFFFFFF).astype(np.uint32).view(np.int32), rname - 1, style - 1,
                   kname, st, kern_inst)
    # NVTX Inst: distinct ranges per group, from the distinct (range, launching thread, kernel
    # name) of the kernel pairs; their groups found by (thread, range name, style, kernel name),
    # the order the groups are in.
    n_k = np.int64(len(keys.kname_text) + 1)
    tk_bits = max(keys.n_threads * int(n_k) - 1, 1).bit_length()  # (thread, kernel name) below the range
    op_tk = keys.op_thread_rank * n_k + keys.op_kname
    rk = key[:n_kp]  # the durations are read: their array is filled again
    del key
    at = 0
    for a, b in blocks:
        sel = kernel_pair[a:b]
        o, r = pair_op[a:b][sel], pair_range[a:b][sel]
        k = r.astype(np.int64) << tk_bits
        k |= op_tk[o]
        rk[at:at + len(k)] = k
        at += len(k)
    del kernel_pair, op_tk
    # the model's pairs come range by range: nearly in order, which the stable (merging) sort
    # takes in runs, several times faster than sorting them from scratch
    rk.sort(kind="stable")
    if len(rk):
        rk = rk[np.concatenate(([True], rk[1:] != rk[:-1]))]
    r_of, tk = rk >> tk_bits, rk & ((1 << tk_bits) - 1)
    del rk
    t_of, k_of = np.divmod(tk, n_k)
    del tk
    wanted = (t_of * keys.n_r3 + range_part[r_of]) * n_k + k_of
    group_key = (thread_rank * keys.n_r3 + part) * n_k + kname
    frame["nvtx_inst"] = np.bincount(np.searchsorted(group_key, wanted), minlength=len(starts))
    return frame


def _frame(pid, tid, rname, style, kname, st: Stats, kern_inst) -> pd.DataFrame:
    small = np.int32  # keys fit; the frame is one row per group
    return pd.DataFrame({"pid": np.asarray(pid).astype(small), "tid": np.asarray(tid).astype(small),
                         "name": rname, "style": style, "kname": kname,
                         "total": st.total, "num": st.num, "avg": st.avg, "med": st.med,
                         "min": st.min, "max": st.max, "std": st.std, "kern_inst": kern_inst})


def _column_groups(keys: _Keys, m: RangeModel, is_k: np.ndarray) -> pd.DataFrame:
    """Too many distinct keys to pack: group on the five columns."""
    keep = is_k[m.pair_op]
    p_op, p_range = m.pair_op[keep], m.pair_range[keep]
    in_range = np.zeros(keys.n_ops, dtype=bool)
    in_range[p_op] = True
    lone = np.flatnonzero(is_k & ~in_range)
    index = index_dtype(keys.n_ops + 1, m.n + 1)
    all_op = np.concatenate([p_op.astype(index, copy=False), lone.astype(index)])
    all_range = np.concatenate([p_range.astype(index, copy=False), np.full(len(lone), -1, dtype=index)])
    small = np.int32
    op_pid, op_tid = keys.op_pid_tid()
    pid, tid = op_pid[all_op], op_tid[all_op]
    rname = keys.rname_rank.astype(small)[all_range]
    style = keys.style_rank.astype(small)[all_range]
    kname = keys.op_kname.astype(small)[all_op]
    groups = group_ids(pid, tid, rname, style, kname)
    gid, n_groups, first = groups.gid, groups.n, groups.first
    st = group_stats(gid, n_groups, keys.op_dur[all_op])
    stride = np.int64(max(keys.n_ops, m.n) + 1)
    kern_inst = np.bincount(distinct(gid * stride + all_op) // stride, minlength=n_groups)
    first_op, first_range = all_op[first], all_range[first]
    frame = _frame(op_pid[first_op], op_tid[first_op], keys.rname_rank[first_range],
                   keys.style_rank[first_range], keys.op_kname[first_op], st, kern_inst)
    # count(DISTINCT range) per group (NULL ranges not counted)
    in_r = all_range >= 0
    range_gid = all_range[in_r].astype(np.int64) * np.int64(max(n_groups, 1)) + gid[in_r]
    frame["nvtx_inst"] = np.bincount(distinct(range_gid) % np.int64(max(n_groups, 1)), minlength=n_groups)
    return frame


