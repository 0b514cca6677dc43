"""The iteration's period in the kernel sequence, and where each iteration begins."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import is_backward, is_optimizer
from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence

PERIOD_TOLERANCE = 0.05  # a steady iteration's kernel count may differ from the median by this much
HEAD = 16  # kernels that mark an iteration's start
MAX_PER_ITERATION = 32  # a name's launches an iteration that can anchor it (micro-batches of gradient accumulation)


def period_anchor(codes: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Occurrences of the name most widely and regularly spaced, and their median spacing.

    The name's repeats must cover most of the run. Two exceptions, looked for only where no name
    meets that rule: a name launched k times an iteration at uneven places (each micro-batch's kernels
    under gradient accumulation: k forwards and backwards, then one optimizer step) is regular every
    k-th occurrence, its anchors every k-th, k the fewest that make it regular (the fewest of all names
    first: a larger k can be regular at a multiple of the iteration by chance); and a name may cover the
    run from its own first launch on (a compiled model's first iteration runs thousands of kernels of
    its compilation)."""
    order = np.argsort(codes, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)
    return _anchor(groups, len(codes), 1) or _anchor(groups, len(codes), MAX_PER_ITERATION)


def _anchor(groups: list[np.ndarray], n: int, max_k: int) -> tuple[np.ndarray, int] | None:
    """period_anchor's choice over names launched up to `max_k` times an iteration (1: the rule itself,
    each name's repeats covering most of the run)."""
    best: tuple[np.ndarray, int] | None = None
    best_key: tuple[bool, int, int] | None = None
    for group in groups:  # positions are in order within a group (stable sort)
        for k in range(1, max_k + 1):
            if len(group) < 3 * k or len(group) > k * n // 4:
                break
            steady = (group[k:] - group[:-k])[k:]
            median = int(np.median(steady))
            if median < 4 or np.any(np.abs(steady - median) > PERIOD_TOLERANCE * median):
                continue
            covered = median * (len(group) // k)
            key = (covered >= n // 2, -k, median)
            needed = n // 2 if max_k == 1 else (n - int(group[0])) // 2
            if covered >= needed and (best_key is None or key > best_key):
                best, best_key = (group[::k], median), key
            break
    return best


def after_optimizer(cycle: np.ndarray, op_names: list[str]) -> int | None:
    """In one whole cycle of a training loop (name codes, any rotation), the position of the first
    kernel after the optimizer: where the next forward begins. None where the cycle has no backward
    or no optimizer kernel told by name (an inference loop; a hand-written update).

    The backward's kernels are named so (autograd's `*_backward*`) and come densely; the widest
    stretch between two of them, around the cycle, is where the backward's last gradients, the
    optimizer and the next forward up to its loss lie. The optimizer ends that stretch's share of
    the step: the last kernel named as an optimizer's in it (a fused or foreach AdamW, SGD: one
    `multi_tensor_apply` per parameter group) closes the step, whatever the host did around it."""
    n = len(cycle)
    named = [op_names[int(c)] for c in cycle.tolist()]
    bwd = np.flatnonzero([is_backward(x) for x in named])
    opt = np.flatnonzero([is_optimizer(x) for x in named])
    if not len(bwd) or not len(opt):
        return None
    gaps = np.diff(np.append(bwd, bwd[0] + n))  # from each backward kernel to the next, around
    widest = int(np.argmax(gaps))
    lo, hi = int(bwd[widest]), int(bwd[widest] + gaps[widest])  # the stretch (lo, hi) around the cycle
    inside = [(o - lo) % n for o in opt.tolist() if 0 < (o - lo) % n < hi - lo]
    if not inside:
        return None
    return (lo + max(inside) + 1) % n


def iteration_starts(seq: KernelSequence, anchors: np.ndarray, period: int,
                     op_names: list[str] | None = None) -> np.ndarray:
    """Where each iteration begins (positions in the sequence): a training loop's at the first
    kernel after its optimizer (`after_optimizer`: the forward's first); elsewhere where the host
    paused longest before the launch, the median over the steady cycles (the loop's synchronise,
    logging, the next batch). A pause alone misleads a training loop: a `loss.item()` before
    `optimizer.step()` makes the host's longest wait the one before the optimizer."""
    codes = seq.codes
    steady = anchors[1:]
    cut = after_optimizer(codes[steady[-1] - period + 1:steady[-1] + 1], op_names) \
        if op_names is not None and steady[-1] - period + 1 >= 0 else None
    if cut is not None:
        back = period - 1 - cut  # the cycle's position `cut` is `back` kernels before its anchor
    else:
        offsets = np.arange(period)
        at = steady[:, None] - offsets[None, :]
        valid = at >= 1
        gap = np.zeros(len(codes), dtype=np.float64)
        gap[1:] = np.diff(seq.launch)
        pause = np.where(valid, gap[np.clip(at, 0, None)], np.nan)
        with np.errstate(all="ignore"):
            back = int(np.nanargmax(np.nanmedian(pause, axis=0)))
    return starts_from(seq, int(steady[-1] - back), period)


def starts_from(seq: KernelSequence, first: int, period: int) -> np.ndarray:
    """Every iteration's start, given one (`first`): where the HEAD kernels it begins with recur, one a period."""
    codes = seq.codes
    k = min(HEAD, max(1, period // 4))
    head = codes[first:first + k]
    hits = np.flatnonzero(codes[: len(codes) - k + 1] == head[0])
    if len(head) > 1 and len(hits):
        windows = np.lib.stride_tricks.sliding_window_view(codes, k)[hits]
        hits = hits[(windows == head).all(axis=1)]
    if first >= 1 and len(hits) and len(hits) > 1.5 * (len(codes) - hits[0]) / period:  # more than one an iteration
        return _micro_batched_starts(codes, hits, first, period)
    starts: list[int] = []
    for h in hits.tolist():
        if not starts or h - starts[-1] >= (1 - PERIOD_TOLERANCE) * period:  # one start per iteration
            starts.append(h)
    return np.array(starts, dtype=np.int64)


def _micro_batched_starts(codes: np.ndarray, hits: np.ndarray, first: int, period: int) -> np.ndarray:
    """The starts where the head recurs more than once an iteration (each micro-batch's forward under gradient
    accumulation begins alike): only the hits after the kernel `first` follows (the optimizer's last), a period
    apart, out from `first` both ways; before them, the run's first hit a period or more earlier (its first
    iteration follows the set-up, not an optimizer)."""
    after = hits[codes[np.maximum(hits - 1, 0)] == codes[first - 1]]
    gap = (1 - PERIOD_TOLERANCE) * period
    starts = [first]
    for h in after[after > first].tolist():
        if h - starts[-1] >= gap:
            starts.append(h)
    for h in after[after < first][::-1].tolist():
        if starts[0] - h >= gap:
            starts.insert(0, h)
    earlier = hits[hits <= starts[0] - gap]
    if len(earlier):
        starts.insert(0, int(earlier[0]))
    return np.array(starts, dtype=np.int64)
