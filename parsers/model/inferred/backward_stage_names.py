"""One backward layer's stages: the forward layer's met in reverse, each `<stage> (grad)`."""
from __future__ import annotations

import re

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import SOFTMAX
from nsight_tui.parsers.model.inferred.stage_names import norm_name, stage_runs

GRAD = " (grad)"  # a backward stage: the forward stage's name with this suffix
# Kernels that finish the gradient of the stage before them: a Linear's bias gradient (a sum over
# the batch, after its two GEMMs; cuBLAS's split-K reduce), a layer norm's weight and bias gradient
_FINISHES = {"gemm": re.compile(r"reduce_kernel.*sum_functor|splitKreduce", re.I),
             "norm": re.compile(r"GammaBeta|gamma_beta|layer_norm.*backward|LayerNormBackward", re.I)}


def backward_stages_of(template: np.ndarray, kinds: list[str], op_names: list[str], layers,
                     forward: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """One backward layer's stages, (name, first, end) in the template: the forward layer's stages
    met in reverse, each named `<forward stage> (grad)`.

    The backward runs the layer's operations last to first, so its GEMM groups (a Linear's two
    gradient GEMMs, dX and dW, back to back; a batched matmul's two) are the forward's GEMM stages
    in reverse order: named so where the counts agree, else by kind. The norms', activation's,
    softmax's and adds' gradient kernels are told by kind; a bias's or a norm weight's gradient goes
    with the stage before it. Other kernels (the gradients of a stage's copies, scaling and masks)
    come before the stage's own: they join the stage after them (the forward's after-the-matmul
    scaling and mask are the scores' gradient's first kernels), those last in the layer the one
    before."""
    if len(layers) < 2 or not forward:
        return []
    first, g = layers[1].typical_first, layers[1].g
    f_first, f_g = layers[0].typical_first, layers[0].g
    f_kinds = kinds[f_first:f_first + f_g]
    # the forward's GEMM stages in order (a stage is a GEMM one when a GEMM kernel is in it)
    gemm_stages = [name for name, a, b in forward if "gemm" in f_kinds[a - f_first:b - f_first]]
    part = kinds[first:first + g]
    groups = sum(1 for i, k in enumerate(part) if k == "gemm" and (i == 0 or part[i - 1] != "gemm"))
    reverse = list(reversed(gemm_stages)) if groups == len(gemm_stages) else []
    plain = {n for n, _, _ in forward}
    names: list[str] = []
    group, last_kind = -1, ""  # the kind of the last kernel that had one
    for i, kind in enumerate(part):
        name = ""
        finishes = _FINISHES.get(last_kind)
        if kind == "gemm" and i and part[i - 1] == "gemm":
            name = names[-1]  # the matmul's second gradient GEMM
        elif names and names[-1] and finishes is not None and finishes.search(op_names[int(template[first + i])]):
            name = names[-1]
        elif kind == "gemm":
            group += 1
            name = reverse[group] if reverse else "GEMM"
        elif kind == "norm":
            name = norm_name(op_names[int(template[first + i])])
        elif kind in ("conv", "layout"):
            name = "conv" if kind == "conv" else "layout transpose"
        elif kind == "softmax":
            name = SOFTMAX if SOFTMAX in plain else "softmax"
        elif kind == "attention":
            name = "fused attention"
        elif kind == "activation":
            name = "activation"
        elif kind == "add":
            name = "residual add" if "residual add" in plain else "add"
        names.append(name)
        last_kind = (kind or last_kind) if name else ""
    if not any(names):
        return []
    following = ""
    for i in range(len(names) - 1, -1, -1):
        following = names[i] = names[i] or following
    for i in range(1, len(names)):
        names[i] = names[i] or names[i - 1]
    return [(name + GRAD, a, b) for name, a, b in stage_runs(names, kinds, first, g)]
