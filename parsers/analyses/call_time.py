"""What one CUDA API call's duration was spent on, told from when it returned against its GPU work.

A kernel launch returns before its kernel runs: its duration is launch overhead. A call that
returned only after its GPU work ended was blocked: a device-to-host copy into pageable memory (or a
synchronous cudaMemcpy) waits for the GPU work queued before it, then for the copy itself, and that
wait is the GPU's, not the launch's. A synchronise has no GPU work of its own and waits by design.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.ids import KERNEL

LAUNCH = "launch overhead (call duration)"
BLOCKED = "blocked until its GPU work ended (waiting on the GPU, not launch overhead)"
SYNCHRONISE = "waiting for the GPU (a synchronise)"
ASYNC = "call duration (returned before its GPU work ran)"
PLAIN = "call duration"


@dataclass(frozen=True)
class CallTime:
    label: str  # what the call's duration is (one of the labels above)
    duration_ns: int  # the call's own duration (end - start, CPU clock)
    queued_ns: int | None  # blocked: from the call's start to its GPU work's start (behind earlier GPU work)
    gpu_ns: int | None  # blocked: its GPU work's own span (the copy itself)

    @property
    def launch_overhead_ns(self) -> int | None:
        """The duration as launch overhead, only where it is one."""
        return self.duration_ns if self.label == LAUNCH else None


def call_time(name: str, start: int, end: int, op_starts, op_ends, op_kinds) -> CallTime:
    """`name`, `start`, `end`: the call; op_*: the GPU work it launched (may be empty)."""
    starts, ends, kinds = (np.asarray(x, dtype=np.int64) for x in (op_starts, op_ends, op_kinds))
    duration = int(end - start)
    if not len(starts):
        return CallTime(SYNCHRONISE if "Synchronize" in name else PLAIN, duration, None, None)
    if (kinds == KERNEL).any():  # a short kernel may end before its launch returns: still the launch's time
        return CallTime(LAUNCH, duration, None, None)
    first, last = int(starts.min()), int(ends.max())
    if end >= last:  # a copy or memset that returned only once it had ended
        return CallTime(BLOCKED, duration, max(0, first - int(start)), last - first)
    return CallTime(ASYNC, duration, None, None)


def of_correlation(c) -> CallTime:
    """call_time of a model.ranges.Correlation (its ops: start and duration)."""
    ops = c.ops
    starts = ops["start"].to_numpy(dtype=np.int64)
    return call_time(c.api_name, c.api_start, c.api_end, starts, starts + ops["duration"].to_numpy(dtype=np.int64),
                     ops["kind"].to_numpy())
