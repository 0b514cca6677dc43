"""Whose device memory it is: PyTorch's caching allocator's segments apart from what
libraries cudaMalloc themselves and from modules' static globals, told by the events alone.

nsys's memory events name no caller. What tells the allocator's segments apart is the call before:
PyTorch's caching allocator asks whether the stream is being captured into a CUDA graph before
each segment it takes from the driver (`cudaMallocMaybeCapturing` in
c10/cuda/CUDACachingAllocator.cpp calls `cudaStreamIsCapturing`, then `cudaMalloc`), so the CUDA
runtime call just before such a `cudaMalloc` on the same thread is `cudaStreamIsCapturing`. A
library's own allocations have other neighbours: cuBLAS's handle setup makes three (1 KiB,
128 KiB, 64 MiB) between `cudaEventCreateWithFlags` calls, once per thread that runs a GEMM
(the main thread's forward and autograd's thread). "Device Static" events are modules'
`__device__` globals, loaded with their modules. A free belongs to whoever made its address.

On the committed captures the segments told this way sum to torch's `max_memory_reserved` to the
byte (tests/core/test_memory_owners.py reads both with its own SQL).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.gpu_memory import ALLOCATION, DEVICE_KIND, DEVICE_STATIC_KIND

ALLOCATOR, LIBRARY, STATIC, OTHER = "allocator", "library", "static", "other"
ALLOCATOR_CHECK = "cudaStreamIsCapturing"  # the caching allocator's call before each segment's cudaMalloc
OWNER_HELP = {
    ALLOCATOR: "PyTorch's caching allocator's segments (torch's reserved): cudaMalloc right after its "
               "cudaStreamIsCapturing check on the same thread",
    LIBRARY: "Device memory a library cudaMalloc'd itself, not through torch's allocator (cuBLAS handles: "
             "1 KiB + 128 KiB + 64 MiB per thread that runs a GEMM)",
    STATIC: "Device Static: modules' __device__ globals, loaded with the modules",
    OTHER: "any other memory kind (pinned, managed, arrays)",
}


@dataclass
class OwnerGroup:
    """The allocations of one owner: how many, their bytes, and where and when the first was."""

    owner: str
    allocations: int = 0
    bytes: int = 0  # sum of the allocations' bytes
    held_at_end_bytes: int = 0  # allocations minus frees by the capture's end
    threads: list[int] = field(default_factory=list)  # thread ids (gtid's low 24 bits) that made them
    first_ns: int | None = None
    sizes: dict[int, int] = field(default_factory=dict)  # allocation size -> how many (the largest 8)
    before: dict[str, int] = field(default_factory=dict)  # the CUDA call before each on its thread -> how many


def calls_of(events: pd.DataFrame, api: pd.DataFrame, api_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """For each event, matched to its CUDA runtime call by correlation id and process: the name of the
    call just before it on the same thread ('' where unknown) and the thread (gtid, -1 where unknown)."""
    previous = np.full(len(events), "", dtype=object)
    thread = np.full(len(events), -1, dtype=np.int64)
    if not len(api) or not len(events):
        return previous, thread
    gtid = api["gtid"].to_numpy(np.int64)
    order = np.lexsort((api["start"].to_numpy(np.int64), gtid))
    gtid, corr, names = gtid[order], api["corr"].to_numpy(np.int64)[order], api["name"].to_numpy(np.int64)[order]
    same_thread = np.concatenate(([False], gtid[1:] == gtid[:-1]))
    # a call is (process, correlation id): one key each, sorted once, looked up for every event at once
    keys = ((gtid >> 24) << 32) | (corr & 0xFFFFFFFF)
    by_key = np.argsort(keys, kind="stable")
    sorted_keys = keys[by_key]
    wanted = ((events["gpid"].to_numpy(np.int64) >> 24) << 32) | (events["corr"].to_numpy(np.int64) & 0xFFFFFFFF)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(keys) - 1)
    found = (sorted_keys[at] == wanted) & (events["corr"].to_numpy(np.int64) > 0)  # static globals carry 0
    i = by_key[at]
    thread[found] = gtid[i[found]]
    before = names[np.maximum(i - 1, 0)]
    for k in np.flatnonzero(found & same_thread[i] & (before >= 0) & (before < len(api_names))):
        previous[k] = api_names[int(before[k])]
    return previous, thread


def owners_of(events: pd.DataFrame, previous: np.ndarray) -> np.ndarray:
    """The owner of each event: allocations by their kind and the call before them, frees by their
    address's allocation."""
    n = len(events)
    owner = np.full(n, OTHER, dtype=object)
    if n == 0:
        return owner
    kind = events["kind"].to_numpy(np.int64)
    op = events["op"].to_numpy(np.int64)
    owner[kind == DEVICE_STATIC_KIND] = STATIC
    device = kind == DEVICE_KIND
    checked = np.array([str(p).startswith(ALLOCATOR_CHECK) for p in previous], dtype=bool)
    owner[device & checked] = ALLOCATOR
    owner[device & ~checked] = LIBRARY
    # a free is its allocation's: the allocator frees its own segments (empty_cache, after a failed cudaMalloc)
    made: dict[int, str] = {}
    address = events["address"].to_numpy(np.int64)
    for i in range(n):
        if op[i] == ALLOCATION:
            made[int(address[i])] = owner[i]
        elif int(address[i]) in made:
            owner[i] = made.pop(int(address[i]))
    return owner


def owner_groups(events: pd.DataFrame, signed: np.ndarray, owner: np.ndarray, previous: np.ndarray,
                 thread: np.ndarray) -> dict[str, OwnerGroup]:
    """Each owner's allocations: how many, their bytes, the sizes, the calls before them, the threads."""
    groups: dict[str, OwnerGroup] = {}
    start = events["start"].to_numpy(np.int64)
    for name in (ALLOCATOR, LIBRARY, STATIC, OTHER):
        mine = owner == name
        made = mine & (signed > 0)
        if not made.any():
            continue
        g = OwnerGroup(name, allocations=int(made.sum()), bytes=int(signed[made].sum()),
                       held_at_end_bytes=int(signed[mine].sum()), first_ns=int(start[made].min()))
        sizes, counts = np.unique(signed[made], return_counts=True)
        top = sorted(np.argsort(-counts, kind="stable")[:8].tolist(), key=lambda i: -int(sizes[i]))
        g.sizes = {int(sizes[i]): int(counts[i]) for i in top}
        calls, n = np.unique(previous[made].astype(str), return_counts=True)
        g.before = {str(c) or "(unknown)": int(k) for c, k in zip(calls, n)}
        g.threads = sorted({int(t) & 0xFFFFFF for t in thread[made] if t >= 0})
        groups[name] = g
    return groups
