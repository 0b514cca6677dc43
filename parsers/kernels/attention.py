"""Attention written out, found by the order its kernels ran in: no NVTX range needed.

Unfused attention runs, per layer and per direction, a GEMM that makes the scores (Q·Kᵀ; in the
backward dP = dO·Vᵀ), passes over the T×T scores (scale, mask, softmax, the casts and copies
around them; in the backward the softmax's, the mask's and the scale's gradients), then a GEMM
that uses them (P·V; dQ and dK). F.scaled_dot_product_attention does all of it in one kernel that
never writes the scores. So on each stream, in the order its kernels ran, a softmax kernel with a
GEMM at most WINDOW kernels before it and at most WINDOW after it sits in an attention; the
kernels strictly between those two GEMMs that are not GEMMs, and the device-to-device copies among
them (the scores made contiguous: 4.5 ms a step at ctx 1024), are its passes (what fusing removes;
the GEMMs stand for the fused kernel's own matmuls).

Not attention: a softmax whose kernel name runs fewer than twice a step (the loss's log-softmax,
once a step, between the LM head's GEMM and its gradient's; a model of one layer is missed with
it), and any capture that already runs a fused-attention kernel in its steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.kernels.families import device_work_ops, name_families
from nsight_tui.parsers.read.ids import KERNEL

# Kernels between the softmax and each of its two GEMMs, at most: a scale, a mask (and its
# inversion), a cast or a copy each side, with room for one more (HF's eager attention: 3 before,
# 3 after in the backward). Wider would reach the next layer's GEMMs through the MLP's passes.
WINDOW = 6


@dataclass
class AttentionParts:
    """Positions (rows of trace.ops, in trace order) of unfused attention's work that a fused kernel
    does not do: `passes` over the scores, between each attention's two GEMMs; `closing`, the GEMM
    after its passes (P·V in the forward, dQ in the backward); `layout`, the copies its matmuls need
    (attention_parts); `gemms`, its matmuls (Q·Kᵀ and P·V; in the backward dV, dP, dQ and dK)."""

    passes: np.ndarray
    closing: np.ndarray
    layout: np.ndarray
    gemms: np.ndarray


def attention_passes(trace, inside: np.ndarray, n_steps: int) -> np.ndarray:
    """Positions (rows of trace.ops) of unfused attention's passes among the kernels `inside` (a mask
    over trace.ops: the steps' ops), in trace order; empty where there are none or where a fused
    attention kernel runs inside. `n_steps`: how many steps `inside` holds (a softmax name below
    two a step is not attention)."""
    return attention_parts(trace, inside, n_steps).passes


# Element types in PyTorch's kernel names (template arguments) that say a tensor of 16 bits
HALF_TYPES = ("c10::BFloat16", "c10::Half", "__nv_bfloat16", "__half")


def scores_in_half(trace, parts: AttentionParts) -> bool:
    """Whether the attention's scores were 16-bit (bf16 or fp16: autocast, or a model cast to it): a
    kernel among its passes names a 16-bit element type (the scaling of the score GEMM's output, the
    cast back after autocast's fp32 softmax). The GEMMs' own names (cuBLAS's nvjet) do not say it."""
    codes = np.unique(trace.ops["name"].to_numpy()[parts.passes])
    return any(t in trace.op_names[c] for c in codes.tolist() for t in HALF_TYPES)


def _is_copy(trace) -> np.ndarray:
    """Per op name code: a copy (a tensor copy kernel, a concatenation, a device memcpy)."""
    return np.array([("copy" in n.lower() or "memcpy" in n.lower()) for n in trace.op_names], bool)


def attention_parts(trace, inside: np.ndarray, n_steps: int) -> AttentionParts:
    """The passes, closing GEMMs and layout copies of the attentions written out among the ops `inside`.

    Layout copies: a matmul on the heads' strided views copies its operands contiguous first (`q @
    k.transpose(-2, -1)` copies q and k), and in the backward its gradients' too, then concatenates
    the q, k, v gradients for the projection that split them; a fused kernel reads the strided views
    and writes its gradients in place. So: the run of copies right before each forward attention's
    score GEMM, and in the backward (its softmax kernel's name says so) the runs right before its first
    two GEMMs (dV, dP) and right after its last two (dQ, dK). The copy of the output back into the
    model's layout, after P·V, stays (the fused path makes it too)."""
    ops = trace.ops
    work = device_work_ops(trace) & inside
    empty = np.zeros(0, np.int64)
    none = AttentionParts(empty, empty, empty, empty)
    if not (work & (ops["kind"].to_numpy() == KERNEL)).any():
        return none
    fam = np.asarray(name_families(trace))[ops["name"].to_numpy()]
    if (fam[work] == "attention").any():
        return none
    # per stream in start order, its kernels and device copies; the window counts kernels alone
    pos = np.flatnonzero(work)
    stream = (ops["gpid"].to_numpy()[pos].astype(np.int64), ops["device"].to_numpy()[pos].astype(np.int64),
              ops["stream"].to_numpy()[pos].astype(np.int64))
    order = np.lexsort((ops["start"].to_numpy()[pos], *reversed(stream)))
    pos = pos[order]
    group = np.r_[0, np.cumsum(np.any([np.diff(s[order]) != 0 for s in stream], axis=0))]
    is_kernel = ops["kind"].to_numpy()[pos] == KERNEL
    f = fam[pos]
    gemm = f == "gemm"
    k_idx = np.cumsum(is_kernel) - 1  # each op's place among its stream's kernels (a copy: the one before)
    idx = np.arange(len(pos))
    prev_gemm = np.maximum.accumulate(np.where(gemm, idx, -1))
    next_gemm = np.minimum.accumulate(np.where(gemm, idx, len(pos))[::-1])[::-1]
    soft = np.flatnonzero((f == "softmax") & is_kernel)
    p, n = prev_gemm[soft], next_gemm[soft]
    ok = (p >= 0) & (n < len(pos))
    soft, p, n = soft[ok], p[ok], n[ok]
    ok = ((group[p] == group[soft]) & (group[n] == group[soft])
          & (k_idx[soft] - k_idx[p] <= WINDOW) & (k_idx[n] - k_idx[soft] <= WINDOW))
    soft, p, n = soft[ok], p[ok], n[ok]
    names = ops["name"].to_numpy()[pos[soft]]
    per_name = np.bincount(names, minlength=int(names.max()) + 1 if len(names) else 0)
    ok = per_name[names] >= 2 * max(n_steps, 1)
    soft, p, n = soft[ok], p[ok], n[ok]
    mark = np.zeros(len(pos) + 1, np.int64)
    np.add.at(mark, p + 1, 1)
    np.add.at(mark, n, -1)
    between = (np.cumsum(mark)[:-1] > 0) & ~gemm
    copy = _is_copy(trace)[ops["name"].to_numpy()[pos]] & ~gemm & ~between
    backward = np.array(["backward" in trace.op_names[c].lower() for c in ops["name"].to_numpy()[pos[soft]]], bool)
    layout = np.zeros(len(pos), bool)
    matmul = np.zeros(len(pos), bool)

    def run(j: int, step: int, g: int) -> None:  # the copies from j on, one way, on stream group g
        while 0 <= j < len(pos) and copy[j] and group[j] == g:
            layout[j] = True
            j += step

    for a, b, back in zip(p.tolist(), n.tolist(), backward.tolist()):
        g = int(group[a])
        if back:
            a -= int(a > 0 and gemm[a - 1] and group[a - 1] == g)
            b += int(b + 1 < len(pos) and gemm[b + 1] and group[b + 1] == g)
            run(b + 1, 1, g)
        run(a - 1, -1, g)
        matmul[[a, b]] = True
    matmul[p] = matmul[n] = True
    return AttentionParts(np.sort(pos[between]), np.unique(pos[n]), np.sort(pos[layout]), np.sort(pos[matmul]))
