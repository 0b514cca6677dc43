"""Ids, kinds and masks of an nsys export, shared by the loader, the model and the reports.

Kept apart from `load` so that nothing needs the loader to name an op kind or split a
globalTid (this is what used to tie load <-> model <-> attribution into a cycle).
"""
from __future__ import annotations

# GRAPH: a CUDA graph launch traced whole (nsys --cuda-graph-trace=graph, its default): one op for all
# its nodes' GPU work, from CUPTI_ACTIVITY_KIND_GRAPH_TRACE
KERNEL, MEMCPY, MEMSET, GRAPH = 0, 1, 2, 3
OP_KINDS = ("kernel", "memcpy", "memset", "graph")

# NVTX_EVENTS.eventType values (nsys's ENUM_NSYS_EVENT_TYPE)
NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND = 59, 60, 70, 71
NVTX_MARK, NVTXT_MARK = 34, 73
NVTX_DOMAIN_CREATE = 75
RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)

PID_MASK = ~0xFFFFFF  # globalTid -> globalPid (nsys: & 0xFFFFFFFFFF000000), kept int64-safe


def api_display_name(name: str) -> str:
    """nsys drops a trailing `_vNNNN` version tag (exactly four characters after `_v`)."""
    return name[:-6] if name[-6:-4] == "_v" else name


def pid_of(gtid):
    return (gtid >> 24) & 0xFFFFFF


def tid_of(gtid):
    return gtid & 0xFFFFFF


def index_dtype(*sizes: int):
    """int32 positions while every array indexed is under 2^31 rows: pairs number kernels x
    nesting depth, the largest arrays a load makes, and half the bytes is half the peak."""
    import numpy as np

    return np.int32 if max(sizes, default=0) < 2**31 else np.int64
