"""FLOPs from PyTorch's op shapes in the NVTX text: the roofline, MFU and the bound
verdicts on traces that `nsight-tui capture` did not make.

nsys `--pytorch=autograd-shapes-nvtx` (and `torch.autograd.profiler.emit_nvtx(record_shapes=True)`)
write each op's input shapes into its range's text:

    aten::addmm, seq = 6, op_id = 1656, sizes = [[2304], [512, 768], [768, 2304], [], []], input_op_ids = [...]

`[]` is an argument that is no tensor (or a 0-d one). The backward's own matmuls run on the autograd
thread as ops of their own (`aten::mm` twice under `MmBackward0`: grad input and grad weight) with
their shapes, so each op is counted from its own sizes, forward and backward alike, as PyTorch's
FlopCounterMode counts dispatched ops (torch/utils/flop_counter.py: only multiplications of matmuls
and attention; a multiply-add is 2 FLOPs). Composite ops (`aten::linear`, `aten::matmul`,
`aten::scaled_dot_product_attention`) are not counted: the op they dispatch to is; where two counted
ops nest, the outer one counts.

Convolutions (`aten::convolution` and the ops it dispatches to) need their output's shape, which
the text does not hold: it is the shape the next op that reads the output lists at that input
(`input_op_ids = [(325,0)]` names the producing op's id, the conv2d/convolution range's own). A
transposed convolution sits under `aten::conv_transpose*d`. `aten::convolution_backward` lists the
output gradient, the input and the weight; it counts both gradients, grad input and grad weight
(2x the forward), as PyTorch's formula does when both are asked for: where the input needs no
gradient (a network's first layer) PyTorch skips grad input and this counts one forward too many
(the NVTX text does not say which gradients were asked for).

Each counted op is attributed to the innermost user range (not an op range) open on its process's
main thread when the op's range began: a forward op to the range around it; a backward op (autograd
thread) to the main thread's range that waits in `loss.backward()`. The result is a FlopCounts
(source `shapes`) keyed by those ranges' folded paths, so parsers.roofline reads it like the
capture's counts.

Bytes: each counted op's input tensors read and its output written, once, at an element size the
caller gives (the NVTX text has no dtypes): a lower bound, and only for the counted ops.
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.kernels.flop_counts import FlopCounts, OpCount, op_family
from nsight_tui.parsers.model.op_ranges import base_name
from nsight_tui.parsers.model.ranges import RangeModel

SIZES = ", sizes = "
NOT_COUNTED = ("convolutions whose output no later op reads in the text; a convolution's backward counts "
               "grad input even where the input needs none (a first layer)")
OP_ID = re.compile(r", op_id = (\d+)")
INPUT_IDS = ", input_op_ids = "
_PAIR = re.compile(r"\((\d+),(-?\d+)\)")
CONV_FORWARD = frozenset(f"aten::{n}" for n in (
    "convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose", "convolution_overrideable",
    "miopen_convolution", "miopen_convolution_transpose", "mkldnn_convolution", "_slow_conv2d_forward",
    "slow_conv3d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d", "_nnpack_spatial_convolution"))
CONV_BACKWARD = "aten::convolution_backward"


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape)


def _tensors(sizes: list) -> list[list[int]]:
    return [s for s in sizes if isinstance(s, list) and s and all(isinstance(d, int) for d in s)]


# -- PyTorch's formulas (torch/utils/flop_counter.py), on the shapes as the NVTX text lists them ---
def _mm(a, b):  # [m, k] @ [k, n]
    (m, k), (_k2, n) = a, b
    return 2 * m * k * n, m * n, f"2·m·k·n, m={m} k={k} n={n}"


def _bmm(a, b):  # [b, m, k] @ [b, k, n]
    (bt, m, k), (_b2, _k2, n) = a, b
    return 2 * bt * m * k * n, bt * m * n, f"2·b·m·k·n, b={bt} m={m} k={k} n={n}"


def _sdpa(q, k, v):  # [b, h, s_q, d_q], [b, h_kv, s_k, d_q], [b, h_kv, s_k, d_v]
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    return (2 * b * h * s_q * s_k * (d_q + d_v), b * h * s_q * d_v,
            f"QKᵀ + attn@V: 2·b·h·s_q·s_k·(d_q + d_v), b={b} h={h} s_q={s_q} s_k={s_k} d_q={d_q} d_v={d_v}")


def _sdpa_backward(grad_out, q, k, v):
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    # recompute QKᵀ, grad scores, grad V, grad Q, grad K: five matmuls
    return (2 * b * h * s_q * s_k * (3 * d_q + 2 * d_v), _numel(q) + _numel(k) + _numel(v),
            f"5 matmuls (QKᵀ recomputed, dS, dV, dQ, dK): 2·b·h·s_q·s_k·(3·d_q + 2·d_v), b={b} h={h} "
            f"s_q={s_q} s_k={s_k} d_q={d_q} d_v={d_v}")


def _conv(x, w, out, transposed: bool):
    """torch.utils.flop_counter.conv_flop_count: 2 · batch · (spatial of the output, of the input when
    transposed) · every weight element."""
    spatial = (x if transposed else out)[2:]
    return (2 * x[0] * _numel(spatial) * _numel(w), _numel(out),
            f"2·N·(spatial of {'the input (transposed)' if transposed else 'the output'})·weight elements, "
            f"x={x} w={w} out={out}")


def _conv_backward(grad_out, x, w):
    """Grad input and grad weight, each the forward's FLOPs (PyTorch's conv_backward_flop with both
    asked for). Transposed when the weight's first dimension is the input's channels, not the
    output gradient's (a tie: when the output is the larger)."""
    transposed = x[1] == w[0] and (grad_out[1] != w[0] or _numel(grad_out[2:]) > _numel(x[2:]))
    flops, _, formula = _conv(x, w, grad_out, transposed)
    return 2 * flops, _numel(x) + _numel(w), f"grad input + grad weight: 2 × ({formula})"


def _args(positions, formula, ranks):
    """A formula over the tensors at these argument positions, each of the given rank."""
    def count(sizes: list):
        picked = [sizes[i] if i < len(sizes) else None for i in positions]
        if any(not isinstance(s, list) or len(s) != r for s, r in zip(picked, ranks)):
            return None
        return formula(*picked)
    return count


FORMULAS = {
    "aten::mm": _args((0, 1), _mm, (2, 2)),
    "aten::addmm": _args((1, 2), _mm, (2, 2)),
    "aten::bmm": _args((0, 1), _bmm, (3, 3)),
    "aten::baddbmm": _args((1, 2), _bmm, (3, 3)),
    **{f"aten::{name}": _args((0, 1, 2), _sdpa, (4, 4, 4)) for name in (
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward")},
    **{f"aten::{name}": _args((0, 1, 2, 3), _sdpa_backward, (4, 4, 4, 4)) for name in (
        "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention_backward")},
    CONV_BACKWARD: lambda sizes: (_conv_backward(*sizes[:3]) if len(sizes) >= 3 and all(
        isinstance(t, list) and len(t) >= 3 for t in sizes[:3]) else None),
}
# flash/efficient forward and backward kernels' own ops take [b, s, h, d]: only counted when no
# sdpa op around them was (the outer op wins), and then their shapes are read as given.


def parse_sizes(text: str) -> list | None:
    """The `sizes = [[...], ...]` list of an op range's text, or None."""
    at = text.find(SIZES)
    if at < 0:
        return None
    rest = text[at + len(SIZES):]
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0:
            try:
                value = json.loads(rest[:i + 1])
            except ValueError:
                return None
            return value if isinstance(value, list) else None
    return None


@dataclass(frozen=True)
class OpFlops:
    """One counted op range: its FLOPs and bytes from its shapes."""

    range_id: int  # position in trace.ranges
    op: str  # `aten::mm`
    flops: int
    bytes: int
    formula: str


def op_flops(text: str, element_bytes: int) -> OpFlops | None:
    """FLOPs and bytes of one op range from its text (range_id -1), or None when not counted."""
    name = base_name(text)
    count = FORMULAS.get(name)
    if count is None:
        return None
    sizes = parse_sizes(text)
    if sizes is None:
        return None
    got = count(sizes)
    if got is None:
        return None
    flops, out_numel, formula = got
    moved = element_bytes * (sum(_numel(s) for s in _tensors(sizes)) + out_numel)
    return OpFlops(-1, name, int(flops), int(moved), formula)


def has_shapes(model: RangeModel) -> bool:
    """Op ranges whose text carries `sizes = `."""
    if not model.n:
        return False
    texts = model.trace.range_texts  # each distinct text once: op ranges repeat a few hundred
    return any(SIZES in texts.values[c] for c in np.unique(texts.codes[model.range_is_op]).tolist())


def _outputs(model: RangeModel, texts: np.ndarray, ops: np.ndarray) -> dict[tuple[int, int], list[int]]:
    """(process, op id) -> the shape of that op's first output, as the earliest op reading it lists it."""
    pid = model.r_gtid >> 24
    out: dict[tuple[int, int], list[int]] = {}
    for i in ops[np.argsort(model.r_start[ops], kind="stable")].tolist():
        text = texts[i]
        at = text.find(INPUT_IDS)
        if at < 0:
            continue
        sizes = parse_sizes(text)
        if not sizes:
            continue
        for position, (producer, index) in enumerate(_PAIR.findall(text[at:])):
            if index == "0" and producer != "0" and position < len(sizes):
                out.setdefault((int(pid[i]), int(producer)), sizes[position])
    return out


def _conv_forward(model: RangeModel, texts: np.ndarray, i: int, outputs: dict, element_bytes: int) -> OpFlops | None:
    """A forward convolution: its output's shape from the op that reads it (the range's own op id or
    an enclosing op range's: `aten::conv2d` around `aten::convolution`)."""
    sizes = parse_sizes(texts[i])
    if not sizes or len(sizes) < 2 or not all(isinstance(t, list) and len(t) >= 3 for t in sizes[:2]):
        return None
    x, w = sizes[0], sizes[1]
    pid = int(model.r_gtid[i] >> 24)
    transposed, out, j = "transpose" in base_name(texts[i]), None, i
    while j >= 0 and model.range_is_op[j]:
        transposed = transposed or base_name(texts[j]).startswith("aten::conv_transpose")
        m = OP_ID.search(texts[j])
        if out is None and m is not None:
            out = outputs.get((pid, int(m.group(1))))
        j = int(model.parent[j])
    if out is None or len(out) != len(x):
        return None
    flops, out_numel, formula = _conv(x, w, out, transposed)
    moved = element_bytes * (sum(_numel(t) for t in _tensors(sizes)) + out_numel)
    return OpFlops(i, base_name(texts[i]), int(flops), int(moved), formula)


def counted_ops(model: RangeModel, element_bytes: int) -> list[OpFlops]:
    """Every op range counted from its shapes, outer counted ops winning over nested ones."""
    texts = model.trace.range_texts.objects
    found: dict[int, OpFlops] = {}
    ops = np.flatnonzero(model.range_is_op)
    outputs: dict | None = None
    for i in ops.tolist():
        text = texts[i]
        if SIZES not in text:
            continue
        name = base_name(text)
        if name in CONV_FORWARD:
            if outputs is None:  # only traces with convolutions pay for reading every op's inputs
                outputs = _outputs(model, texts, ops)
            conv = _conv_forward(model, texts, i, outputs, element_bytes)
            if conv is not None:
                found[i] = conv
            continue
        if name not in FORMULAS:
            continue
        got = op_flops(text, element_bytes)
        if got is not None:
            found[i] = OpFlops(i, got.op, got.flops, got.bytes, got.formula)
    parent = model.parent
    kept = []
    for i, op in found.items():
        j = int(parent[i])
        while j >= 0 and j not in found:
            j = int(parent[j])
        if j < 0:
            kept.append(op)
    return kept


def _user_paths(model: RangeModel) -> tuple[np.ndarray, list[str]]:
    """Per range: its folded user path (`step_N/forward`; '' for op ranges) and the distinct paths."""
    keys = model.range_key
    is_op = model.range_is_op
    parent = model.parent
    paths = np.full(model.n, "", dtype=object)
    for i in np.argsort(model.depth, kind="stable").tolist():  # parents before children
        if is_op[i]:
            continue
        name = str(keys[i])
        name = name.split(":", 1)[1] if ":" in name else name  # the domain tag, as flop_counts._text
        j = int(parent[i])
        while j >= 0 and is_op[j]:
            j = int(parent[j])
        paths[i] = f"{paths[j]}/{name}" if j >= 0 and paths[j] else name
    return paths, sorted(set(paths[~is_op].tolist()) - {""})


def enclosing_user_range(model: RangeModel, range_ids: np.ndarray) -> np.ndarray:
    """Per range: the innermost user range on its process's main thread open when it began (-1: none)."""
    r_start, r_end, gtid = model.r_start, model.r_end, model.r_gtid
    ids = np.asarray(range_ids, dtype=np.int64)
    out = np.full(len(ids), -1, dtype=np.int64)
    mains = set(model.main_threads.values())
    pid = gtid >> 24
    for main in mains:
        users = np.flatnonzero((gtid == main) & ~model.range_is_op)
        if not len(users):
            continue
        order = users[np.lexsort((-r_end[users], r_start[users]))]
        starts = r_start[order]
        mine = np.flatnonzero(pid[ids] == (main >> 24))
        t = r_start[ids[mine]]
        cand = np.searchsorted(starts, t, side="right") - 1
        at = np.where(cand >= 0, order[np.maximum(cand, 0)], -1)
        # walk up the user ranges until one is still open at t (ranges on one thread nest)
        parent, is_op = model.parent, model.range_is_op
        for _ in range(256):
            closed = (at >= 0) & (r_end[np.maximum(at, 0)] < t)
            if not closed.any():
                break
            up = parent[at[closed]]
            while True:
                opish = (up >= 0) & is_op[np.maximum(up, 0)]
                if not opish.any():
                    break
                up = np.where(opish, parent[np.maximum(up, 0)], up)
            at[closed] = up
        out[mine] = at
    return out


def from_op_shapes(model: RangeModel, element_bytes: int = 4, element_note: str = "") -> FlopCounts | None:
    """FLOPs and bytes per user range path from the op shapes (None without shapes or counted ops)."""
    if not has_shapes(model):
        return None
    ops = counted_ops(model, element_bytes)
    if not ops:
        return None
    paths, _ = _user_paths(model)
    where = enclosing_user_range(model, np.array([o.range_id for o in ops], dtype=np.int64))
    acc: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0, 0, ""])
    outside = 0
    for o, w in zip(ops, where.tolist()):
        if w < 0:
            outside += 1
            continue
        row = acc[(paths[w], o.op)]
        row[0] += 1
        row[1] += o.flops
        row[2] += o.bytes
        row[3] = row[3] or o.formula
    user = ~model.range_is_op
    instances: dict[str, int] = defaultdict(int)
    for p in paths[user].tolist():
        instances[p] += 1
    rows = [OpCount(path, op.removeprefix("aten::"), op_family(op.removeprefix("aten::")), calls,
                    float(flops), float(moved), formula)
            for (path, op), (calls, flops, moved, formula) in sorted(acc.items())]
    detail = (f"{len(ops):,} op ranges counted from the shapes in their NVTX text (PyTorch's flop "
              f"formulas: mm, addmm, bmm, baddbmm, scaled-dot-product attention, convolution, forward and "
              f"backward); "
              f"other ops count no FLOPs and no bytes; {NOT_COUNTED} not counted; bytes: inputs read + "
              f"output written at {element_bytes} bytes an element{element_note}")
    if outside:
        detail += f"; {outside:,} counted ops ran outside every user range (left out)"
    return FlopCounts("shapes", detail, rows, dict(instances))
