"""The iteration's period in the kernel sequence, and where each iteration begins."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence

PERIOD_TOLERANCE = 0.05  # a steady iteration's kernel count may differ from the median by this much
HEAD = 16  # kernels that mark an iteration's start


def period_anchor(codes: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Occurrences of the name most widely and regularly spaced, and their median spacing."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
    best: tuple[np.ndarray, int] | None = None
    n = len(codes)
    for group in np.split(order, cuts):
        if len(group) < 3 or len(group) > n // 4:
            continue
        gaps = np.diff(group)  # positions are in order within a group (stable sort)
        steady = gaps[1:]
        median = int(np.median(steady))
        if median < 4 or np.any(np.abs(steady - median) > PERIOD_TOLERANCE * median):
            continue
        if (median * len(group)) < n // 2:  # the repeats must cover most of the run
            continue
        if best is None or median > best[1]:
            best = (group, median)
    return best


def iteration_starts(seq: KernelSequence, anchors: np.ndarray, period: int) -> np.ndarray:
    """Where each iteration begins (positions in the sequence)."""
    codes = seq.codes
    steady = anchors[1:]
    offsets = np.arange(period)
    at = steady[:, None] - offsets[None, :]
    valid = at >= 1
    gap = np.zeros(len(codes), dtype=np.float64)
    gap[1:] = np.diff(seq.launch)
    pause = np.where(valid, gap[np.clip(at, 0, None)], np.nan)
    with np.errstate(all="ignore"):
        back = int(np.nanargmax(np.nanmedian(pause, axis=0)))
    first = int(steady[-1] - back)
    k = min(HEAD, max(1, period // 4))
    head = codes[first:first + k]
    hits = np.flatnonzero(codes[: len(codes) - k + 1] == head[0])
    if len(head) > 1 and len(hits):
        windows = np.lib.stride_tricks.sliding_window_view(codes, k)[hits]
        hits = hits[(windows == head).all(axis=1)]
    starts: list[int] = []
    for h in hits.tolist():
        if not starts or h - starts[-1] >= period // 2:
            starts.append(h)
    return np.array(starts, dtype=np.int64)
