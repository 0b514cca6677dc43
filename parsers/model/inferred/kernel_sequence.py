"""A process's kernels in launch order: what the period, layers and ranges are found in."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import Trace

MIN_KERNELS = 20  # fewer kernels than this: no iteration to find


@dataclass
class KernelSequence:
    pos: np.ndarray  # op positions, in launch order
    codes: np.ndarray  # their name codes
    launch: np.ndarray  # launch call start (CPU clock; GPU start where no call is linked)
    launch_end: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    gtid: np.ndarray  # the launching thread (-1: unknown)
    call: np.ndarray  # the launching call's position in trace.api (-1: unknown); a CUDA graph launch's kernels share one


def processes_by_kernels(trace: Trace) -> list[int]:
    """The processes with kernels, the one with the most first."""
    ops = trace.ops
    gpid = ops["gpid"].to_numpy()[ops["kind"].to_numpy() == KERNEL]
    values, counts = np.unique(gpid, return_counts=True)
    return [int(v) for v in values[np.argsort(-counts, kind="stable")]]


def kernel_sequence(trace: Trace, gpid: int) -> KernelSequence | None:
    ops = trace.ops
    kernels = np.flatnonzero((ops["kind"].to_numpy() == KERNEL) & (ops["gpid"].to_numpy() == gpid))
    if len(kernels) < MIN_KERNELS:
        return None
    start, end = ops["start"].to_numpy()[kernels], ops["end"].to_numpy()[kernels]
    api_pos = ops["api"].to_numpy()[kernels].astype(np.int64)
    linked = api_pos >= 0
    api = trace.api
    launch, launch_end, gtid = start.astype(np.int64), end.astype(np.int64), np.full(len(kernels), -1, np.int64)
    call = np.full(len(kernels), -1, np.int64)
    if len(api) and linked.all():
        launch = api["start"].to_numpy()[api_pos].astype(np.int64)
        launch_end = api["end"].to_numpy()[api_pos].astype(np.int64)
        gtid = api["gtid"].to_numpy()[api_pos].astype(np.int64)
        call = api_pos
    order = np.lexsort((start, launch))
    return KernelSequence(kernels[order], ops["name"].to_numpy()[kernels][order].astype(np.int64), launch[order],
                     launch_end[order], start[order].astype(np.int64), end[order].astype(np.int64), gtid[order],
                     call[order])
