"""Which thread of a process is its main thread: the one whose NVTX ranges frame the iteration.

Per process, among the threads with NVTX ranges, the main thread is the one whose ranges
(their union in time, i.e. its outermost ranges) hold the start of the most GPU launches of
the whole process, whichever thread made them. The thread that *launches* most is the wrong
test: under `--pytorch=autograd-nvtx` / `emit_nvtx` PyTorch's autograd thread has ranges of
its own and launches most of the work, while `step_N` -> forward / backward / optimizer are
on the Python thread, around everything. Ties: the thread that launches more itself, then
more ranges, then the lower thread id.

The user may name the main thread (`--main-thread TID|NAME`): in each process where a thread
with ranges matches, it is taken; elsewhere the choice above stands.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.ids import PID_MASK, tid_of


@dataclass(frozen=True)
class MainThread:
    """One process's main thread and the numbers it was chosen on."""

    gpid: int
    gtid: int
    framed_ops: int  # GPU ops of the process whose launching call starts inside this thread's ranges
    process_ops: int  # GPU ops the process launched (all threads)
    own_ops: int  # GPU ops this thread launched itself
    picked_by: str  # "auto", or the --main-thread value that chose it
    candidates: int  # threads of the process with NVTX ranges


def framed_ops(iv_start: np.ndarray, iv_end: np.ndarray, call_start_sorted: np.ndarray,
               ops_cumsum: np.ndarray) -> int:
    """GPU ops whose launching call starts inside the disjoint intervals (calls sorted by start,
    `ops_cumsum[i]` = ops launched by calls before position i)."""
    lo = np.searchsorted(call_start_sorted, iv_start, side="left")
    hi = np.searchsorted(call_start_sorted, iv_end, side="right")
    return int((ops_cumsum[hi] - ops_cumsum[lo]).sum())


def matches(spec: str, gtid: int, thread_name: str) -> bool:
    spec = spec.strip()
    if spec.isdigit():
        return tid_of(gtid) == int(spec)
    return thread_name.lower() == spec.lower()


def choose(r_gtid: np.ndarray, r_start: np.ndarray, r_end: np.ndarray,
           c_gtid: np.ndarray, c_start: np.ndarray, c_ops: np.ndarray,
           thread_names: dict[int, str] | None = None, prefer: str | None = None) -> dict[int, MainThread]:
    """globalPid -> MainThread. Ranges: the eligible NVTX ranges (thread, start, end); calls: the
    API calls that launched GPU work, with how many ops each."""
    names = thread_names or {}
    out: dict[int, MainThread] = {}
    if len(r_gtid) == 0:
        return out
    threads = np.unique(pd.unique(r_gtid))  # hashed, then the few threads sorted
    per_process: dict[int, list[tuple[tuple, int, int, int]]] = {}
    c_gpid = c_gtid & PID_MASK
    # gtid & PID_MASK is monotonic in gtid: the calls are of one process when the extremes share it
    one_process = not len(c_gtid) or (int(c_gtid.min()) & PID_MASK) == (int(c_gtid.max()) & PID_MASK)
    for gpid in np.unique(threads & PID_MASK).tolist():
        if one_process and (not len(c_gpid) or int(c_gpid[0]) == gpid):
            starts, ops = c_start, c_ops  # every call is this process's: no copies of 10^7 calls
        else:
            sel = c_gpid == gpid
            starts, ops = c_start[sel], c_ops[sel]
        if not bool(np.all(starts[1:] >= starts[:-1])):  # a table kept in start order needs no sort
            order = np.argsort(starts, kind="stable")
            starts, ops = starts[order], ops[order]
        cum = np.zeros(len(ops) + 1, dtype=np.result_type(ops.dtype, np.int64))
        np.cumsum(ops, out=cum[1:])
        total = int(cum[-1])
        ranked = []
        for gtid in threads[(threads & PID_MASK) == gpid].tolist():
            on = r_gtid == gtid
            framed = framed_ops(*intervals.union(r_start[on], r_end[on]), starts, cum)
            own = int(c_ops[c_gtid == gtid].sum())
            ranked.append(((framed, own, int(on.sum()), -tid_of(gtid)), gtid, framed, own))
        ranked.sort(reverse=True)
        per_process[gpid] = ranked
        _, gtid, framed, own = ranked[0]
        out[gpid] = MainThread(gpid, gtid, framed, total, own, "auto", len(ranked))
    if prefer:
        hits = 0
        for gpid, ranked in per_process.items():
            pick = next((r for r in ranked if matches(prefer, r[1], names.get(r[1], ""))), None)
            if pick is not None:
                hits += 1
                out[gpid] = MainThread(gpid, pick[1], pick[2], out[gpid].process_ops, pick[3], prefer, len(ranked))
        if not hits:
            known = ", ".join(sorted({f"{names.get(g, '?')} ({tid_of(g)})" for g in threads.tolist()}))
            raise TraceError(f"--main-thread {prefer}: no thread with NVTX ranges has that id or name "
                             f"(threads with ranges: {known})")
    return out


def as_json(trace, infos: dict[int, MainThread]) -> list[dict]:
    """Plain data per process (for `report --format json`)."""
    return [{"pid": (m.gpid >> 24) & 0xFFFFFF, "tid": tid_of(m.gtid), "thread": trace.thread_label(m.gtid),
             "framed_ops": m.framed_ops, "process_ops": m.process_ops, "own_ops": m.own_ops,
             "picked_by": m.picked_by, "threads_with_ranges": m.candidates}
            for m in sorted(infos.values(), key=lambda m: m.gpid)]
