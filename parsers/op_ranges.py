"""PyTorch's own NVTX ranges (`--pytorch=autograd-nvtx`, `emit_nvtx`): telling them from the
user's ranges, their sequence numbers, and their names folded for aggregation.

Forward ops read `aten::addmm, seq = 1195, op_id = 614` (with `record_shapes`, also
`, sizes = [[4, 768], ...]`); backward nodes, on the autograd thread, read
`AddmmBackward0, seq = 1195, op_id = 640` inside
`autograd::engine::evaluate_function: AddmmBackward0, op_id = 639`. The `seq` of a backward
node is the sequence number of the forward op that created it.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

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


def seq_of(text: str) -> int:
    """The sequence number, or -1."""
    m = re.search(r", seq = (\d+)", text)
    return int(m.group(1)) if m else -1


def is_backward_node(base: str) -> bool:
    """A backward node's own range (`AddmmBackward0`, `FlashAttnFuncBackward`), not the engine's
    wrapper around it and not a forward op."""
    return bool(_NODE.search(base)) and not base.startswith(ENGINE_WRAPPER)


class RangeKinds:
    """Per NVTX range of a trace (positions in trace.ranges; `texts` = the names without their
    domain): op range or user range, sequence number, folded name. Worked out once per
    distinct text, then spread by code."""

    def __init__(self, texts: pd.Series):
        texts = texts.astype(object) if len(texts) else pd.Series([], dtype=object)
        codes, uniq = pd.factorize(texts)
        uniq = list(uniq)
        is_op = np.array([is_op_range(t) for t in uniq], dtype=bool)
        seq = np.array([seq_of(t) for t in uniq], dtype=np.int64)
        base = [base_name(t) for t in uniq]
        base_codes, base_uniq = pd.factorize(pd.Series(base, dtype=object))
        node = np.array([is_backward_node(b) for b in base_uniq], dtype=bool)
        accumulate = np.array([b == ACCUMULATE_GRAD for b in base_uniq], dtype=bool)
        codes = np.asarray(codes, dtype=np.int64)
        self.is_op = is_op[codes] if len(codes) else np.zeros(0, dtype=bool)
        self.seq = seq[codes] if len(codes) else np.zeros(0, dtype=np.int64)
        self.base_code = np.asarray(base_codes, dtype=np.int64)[codes] if len(codes) else np.zeros(0, dtype=np.int64)
        self.base_names: list[str] = list(base_uniq)
        self.is_node = node[self.base_code] & (self.seq >= 0) if len(codes) else np.zeros(0, dtype=bool)
        self.is_accumulate = accumulate[self.base_code] if len(codes) else np.zeros(0, dtype=bool)

    def base(self, i: int) -> str:
        return self.base_names[self.base_code[i]]
