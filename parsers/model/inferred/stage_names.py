"""One forward layer's stages named from its kernels' kinds in order, and the runs of one
name that make a stage."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import FINAL_MATMUL, SCORES, SOFTMAX


def norm_name(op_name: str) -> str:
    """A norm stage named for the norm its kernel computes."""
    low = op_name.lower()
    for key, name in (("rms", "RMS norm"), ("rsqrt", "RMS norm"), ("layer_norm", "layer norm"),
                      ("layernorm", "layer norm"), ("batch_norm", "batch norm"), ("batchnorm", "batch norm"),
                      ("bn_", "batch norm"), ("group_norm", "group norm"), ("instance_norm", "instance norm")):
        if key in low:
            return name
    return "norm"


def forward_stages(template: np.ndarray, kinds: list[str], layers,
                   op_names: list[str] | None = None) -> list[tuple[str, int, int]]:
    """One forward layer's stages, (name, first, end) as positions in the template, in order.

    A GEMM stage is a run of GEMM kernels (cuBLAS's split-K reduce follows its GEMM); which one
    it is follows from where it comes against the attention (the softmax of a manual attention, or
    the fused attention kernel): before it the Q/K/V projections (GPT-2's one fused GEMM, a Llama's
    three), the last of them the scores where the attention is manual; after it the product with V
    (manual only), then the output projection; after that the MLP, whose last GEMM is the down
    projection and the ones before it the up (and gate) projections, whichever side of the
    activation they sit (GPT-2: up, GELU, down; a gated MLP: gate, SiLU, up, multiply, down). An add
    between the projections and the attention is the rotary position embedding's, the others the
    residual adds."""
    if not layers:
        return []
    first, g = layers[0].typical_first, layers[0].g
    part = kinds[first:first + g]
    where = next((i for i, k in enumerate(part) if k in ("softmax", "attention")), None)
    if where is None:
        return _plain_stages(kinds, first, g, template, op_names)  # no attention: no transformer layer
    manual = part[where] == "softmax"
    groups = [i for i, k in enumerate(part) if k == "gemm" and (i == 0 or part[i - 1] != "gemm")]
    before = [i for i in groups if i < where]
    after = [i for i in groups if i > where]
    gemm_name: dict[int, str] = {}
    for j, i in enumerate(before):
        gemm_name[i] = SCORES if manual and j == len(before) - 1 and len(before) > 1 else "QKV GEMM"
    tail = after
    if manual and tail:
        gemm_name[tail[0]], tail = FINAL_MATMUL, tail[1:]
    if tail:
        gemm_name[tail[0]], tail = "output projection", tail[1:]
    for j, i in enumerate(tail):
        gemm_name[i] = "MLP down GEMM" if j == len(tail) - 1 else "MLP up GEMM"
    names: list[str] = []
    for i, kind in enumerate(part):
        name = ""
        if kind == "norm":
            name = norm_name(op_names[int(template[first + i])]) if op_names is not None else "layer norm"
        elif kind in ("softmax", "attention"):
            name = SOFTMAX if kind == "softmax" else "fused attention"
        elif kind == "activation":
            name = "activation"
        elif kind == "add":
            name = "rotary embedding" if before and before[0] < i < where else "residual add"
        elif kind == "gemm":
            name = gemm_name[i] if i in gemm_name else names[-1]  # the same matmul's next kernel
        names.append(name)
    return stage_runs(names, kinds, first, g)


_PLAIN = {"gemm": "GEMM", "conv": "conv", "norm": "norm", "activation": "activation", "add": "add", "softmax": "softmax",
          "layout": "layout transpose"}
# a conv net's GEMMs are its 1x1 convolutions (cuDNN runs them as matmuls)
_CONV_NET = {**_PLAIN, "gemm": "conv", "add": "residual add"}


def _plain_stages(kinds: list[str], first: int, g: int, template: np.ndarray | None = None,
                  op_names: list[str] | None = None) -> list[tuple[str, int, int]]:
    """A layer without attention (an MLP block, a CNN's conv-norm-activation block): its parts named by
    kind alone (conv, norm, activation, GEMM, add, layout transpose)."""
    part = kinds[first:first + g]
    table = _CONV_NET if "conv" in part else _PLAIN
    names = [table.get(k, "") for k in part]
    if op_names is not None and template is not None:
        names = [norm_name(op_names[int(template[first + i])]) if k == "norm" else n
                 for i, (k, n) in enumerate(zip(part, names))]
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
