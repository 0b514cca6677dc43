"""PyTorch's own NVTX ranges (`--pytorch=autograd-nvtx`, `emit_nvtx`): telling them from the
user's ranges, their sequence numbers, and their names folded for aggregation. Plain string
work (the capture's FLOP counter folds names the same way, in the workload's process).

Forward ops read `aten::addmm, seq = 1195, op_id = 614` (with `record_shapes`, also
`, sizes = [[4, 768], ...]`); backward nodes, on the autograd thread, read
`AddmmBackward0, seq = 1195, op_id = 640` inside
`autograd::engine::evaluate_function: AddmmBackward0, op_id = 639`. The `seq` of a backward
node is the sequence number of the forward op that created it.
"""
from __future__ import annotations

import re

OP_PREFIXES = ("aten::", "autograd::", "torch::autograd::", "c10d::", "cudnn::", "prim::")
_NODE = re.compile(r"Backward\d*$")
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
ENGINE_WRAPPER = "autograd::engine::evaluate_function: "


def is_op_range(text: str) -> bool:
    """PyTorch's op/node ranges, as opposed to the user's own (`forward`, `computing_softmax`)."""
    return ", op_id = " in text or ", seq = " in text or text.startswith(OP_PREFIXES)


def base_name(text: str) -> str:
    """`aten::addmm, seq = 1195, op_id = 614` -> `aten::addmm` (names folded for aggregation):
    everything PyTorch appends (seq, op_id, sizes, input_op_ids) follows the first `, `."""
    return text.partition(", ")[0]


def op_key(text: str) -> str:
    """The name op ranges aggregate under: details stripped, and the engine's wrapper named
    after its node (`autograd::engine::evaluate_function: AddmmBackward0, op_id = 9` ->
    `AddmmBackward0 [engine]`), so a narrow column still shows which node."""
    base = base_name(text)
    if base.startswith(ENGINE_WRAPPER):
        return f"{base[len(ENGINE_WRAPPER):]} [engine]"
    return base


def fold_trailing_number(name: str) -> str:
    """`step_3` -> `step_N`, as re.sub(r"\\d+$", "N", name) but read from the end: that search
    starts at every position of the name, which a 10 MB name turns into seconds per range."""
    end = len(name) - 1 if name.endswith("\n") else len(name)  # `$` also matches before a final newline
    i = end
    while i > 0 and name[i - 1].isdecimal():  # isdecimal() is exactly re's \d
        i -= 1
    return name if i == end else name[:i] + "N" + name[end:]


def fold_name(name: str) -> str:
    """The name a range aggregates under: a user range's trailing number folded (`step_3` ->
    `step_N`), an op range's details stripped (`aten::mm, seq = 12, op_id = 17` -> `aten::mm`).
    `name` may carry nsys's default-domain tag (`:step_3`); it is kept."""
    text = name[1:] if name.startswith(":") else name
    if is_op_range(text):
        return name[:len(name) - len(text)] + op_key(text)
    return fold_trailing_number(name)


def seq_of(text: str) -> int:
    """The sequence number, or -1."""
    m = re.search(r", seq = (\d+)", text)
    return int(m.group(1)) if m else -1


def is_backward_node(base: str) -> bool:
    """A backward node's own range (`AddmmBackward0`, `FlashAttnFuncBackward`), not the engine's
    wrapper around it and not a forward op."""
    return bool(_NODE.search(base)) and not base.startswith(ENGINE_WRAPPER)
