"""One forward layer's stages named from its kernels' kinds in order, and the runs of one
name that make a stage."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import FINAL_MATMUL, SCORES, SOFTMAX


def forward_stages(template: np.ndarray, kinds: list[str], layers) -> list[tuple[str, int, int]]:
    """One forward layer's stages, (name, first, end) as positions in the template, in order.

    A GEMM stage is a run of GEMM kernels (cuBLAS's split-K reduce follows its GEMM); which one
    it is follows from where it comes: before the attention's softmax the QKV projection, then
    the scores; after it the product with V (a fused attention has none), then the output
    projection; after the second layer norm the MLP's up and, past the activation, down GEMM."""
    if not layers:
        return []
    first, _, g, _ = layers[0]
    if not any(k in ("softmax", "attention") for k in kinds[first:first + g]):
        return _plain_stages(kinds, first, g)  # no attention: no transformer layer to name the parts of
    names: list[str] = []
    attention = activation = False
    norms = groups = 0  # layer norms seen; GEMM groups in the current part
    prev = ""
    for kind in kinds[first:first + g]:
        name = ""
        if kind == "norm":
            norms += 1
            groups = 0
            name = "layer norm"
        elif kind in ("softmax", "attention"):
            attention, groups = True, 0
            name = SOFTMAX if kind == "softmax" else "fused attention"
        elif kind == "activation":
            activation = True
            name = "activation"
        elif kind == "add":
            name = "residual add"
        elif kind == "gemm":
            if prev == "gemm":
                name = names[-1]  # the same matmul (split-K reduce, a second kernel of one GEMM)
            else:
                groups += 1
                if norms >= 2:
                    name = "MLP down GEMM" if activation else "MLP up GEMM"
                elif not attention:
                    name = "QKV GEMM" if groups == 1 else SCORES
                elif "fused attention" in names:
                    name = "output projection"
                else:
                    name = FINAL_MATMUL if groups == 1 else "output projection"
        names.append(name)
        prev = kind
    return stage_runs(names, kinds, first, g)



_PLAIN = {"gemm": "GEMM", "conv": "conv", "norm": "norm", "activation": "activation", "add": "add", "softmax": "softmax",
          "layout": "layout transpose"}


def _plain_stages(kinds: list[str], first: int, g: int) -> list[tuple[str, int, int]]:
    """A layer without attention (an MLP block, a CNN's conv-norm-activation block): its parts named by
    kind alone (conv, norm, activation, GEMM, add, layout transpose)."""
    names = [_PLAIN.get(k, "") for k in kinds[first:first + g]]
    return stage_runs(names, kinds, first, g) if any(names) else []


def stage_runs(names: list[str], kinds: list[str], first: int, g: int) -> list[tuple[str, int, int]]:
    """Consecutive kernels of one stage name as one stage, (name, first, end) in the template."""
    names = list(names)
    # Kernels of no stage kind (copies, scaling, masks) join the stage after them when it is a
    # matmul (the copies that lay out its operands: q @ k.T's contiguous copies), else the one before
    # them (the scores' scaling and mask); those first in the layer, the next.
    gemm_stage = {n for n, k in zip(names, kinds[first:first + g]) if k == "gemm"}
    following = ""
    for i in range(len(names) - 1, -1, -1):
        if names[i]:
            following = names[i]
        elif following in gemm_stage:
            names[i] = following
    for i in range(1, len(names)):
        names[i] = names[i] or names[i - 1]
    following = next((x for x in names if x), "layer")
    names = [x or following for x in names]
    out: list[tuple[str, int, int]] = []
    for i, name in enumerate(names):
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1], first + i + 1)
        else:
            out.append((name, first + i, first + i + 1))
    return out
