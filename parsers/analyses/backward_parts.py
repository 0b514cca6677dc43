"""Backward mapped onto the forward's parts: per forward part (the user's ranges under
`forward`, e.g. forward/scaled_dot_product_attention/computing_softmax), its forward kernel
time, the backward kernel time that belongs to it, and bwd/fwd.

Two ways to know which backward work belongs to which part:

- `seq` (captures with `--pytorch=autograd-nvtx` or `emit_nvtx`): each backward GPU op is
  launched inside a backward node's range on the autograd thread (`AddmmBackward0, seq = 1195`),
  or by the engine inside that node's `autograd::engine::evaluate_function: AddmmBackward0`
  range just after it (reducing a broadcast bias gradient to the bias's shape, adding a
  gradient into the next node's input buffer): that work is the node's too, and its share is
  reported (`engine_kernel_ns`). The forward op range with the same sequence number in the
  process (the latest one that began before the node: the op that created the node) is
  `aten::addmm, seq = 1195`, and the innermost user range around that forward op is the part.
- `name` (captures with `--backward-ranges`): a backward op inside `backward:<part>` belongs to
  the forward part named `<part>`; the rest of backward belongs to `forward` as a whole (its
  time is `unnamed_kernel_ns`).

Times are inclusive: a part's row holds its sub-parts, and the `forward` row is everything.
Backward work that maps to no part is listed by reason, never dropped: AccumulateGrad nodes,
work outside any backward node (the engine's bookkeeping, the loss gradient's seed on the
Python thread), nodes whose seq has no forward op, forward ops outside `forward`.

Scope: the steady-state iterations (`step_N`; all `forward`/`backward` ranges of the main
threads when there are none). The numbers follow the model's attribution (the `process`
view is the one where `backward` holds its kernels).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.read.conventions import BACKWARD_PREFIX
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK
from nsight_tui.parsers.read.text_codes import Coded
from nsight_tui.parsers.model.ranges import RangeModel, path_key
from nsight_tui.parsers.model.op_ranges import ACCUMULATE_GRAD, base_name, is_backward_node, is_op_range, seq_of


# Why a backward op maps to no forward part (keys of BackwardParts.unmapped).
ACCUMULATE = "AccumulateGrad (gradients added into .grad)"
OUTSIDE_NODES = "outside every backward node and engine range (e.g. the loss gradient's seed)"
NO_FORWARD_OP = "backward node whose seq has no forward op range"
OUTSIDE_FORWARD = "forward op outside the `forward` range (e.g. the loss)"
UNKNOWN_PART = "backward:<part> with no forward part of that name"


@dataclass
class PartRow:
    path: tuple[str, ...]  # ("forward", "scaled_dot_product_attention", "computing_softmax")
    forward_kernel_ns: int
    forward_kernels: int
    backward_kernel_ns: int
    backward_kernels: int
    # the same less the sub-parts' (for `forward`: MLPs, norms, projections, embeddings, loss)
    forward_self_ns: int = 0
    backward_self_ns: int = 0
    # the backward kernels mapped to this part (its sub-parts' included): positions in trace.ops
    backward_ops: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64), repr=False, compare=False)

    @property
    def ratio(self) -> float | None:
        return self.backward_kernel_ns / self.forward_kernel_ns if self.forward_kernel_ns else None

    @property
    def self_ratio(self) -> float | None:
        return self.backward_self_ns / self.forward_self_ns if self.forward_self_ns else None


@dataclass
class BackwardParts:
    method: str  # "seq" or "name"
    iterations: int  # instances of `backward` in scope
    backward_kernel_ns: int  # all kernel time held by `backward` in scope
    backward_kernels: int
    backward_other_ns: int  # memcpy/memset time in backward (not kernels; not in the table)
    engine_kernel_ns: int = 0  # mapped kernel time the engine launched around a node (seq method)
    unnamed_kernel_ns: int = 0  # backward kernel time outside every backward:<part> (name method)
    parts: list[PartRow] = field(default_factory=list)  # tree order, `forward` first
    unmapped: dict[str, tuple[int, int]] = field(default_factory=dict)  # reason -> (kernel_ns, kernels)

    @property
    def mapped_kernel_ns(self) -> int:
        return self.backward_kernel_ns - sum(ns for ns, _ in self.unmapped.values())

    @property
    def mapped_share(self) -> float | None:
        return self.mapped_kernel_ns / self.backward_kernel_ns if self.backward_kernel_ns else None


def backward_parts(model: RangeModel) -> list[BackwardParts]:
    """One table per way the trace allows (`seq`, then `name`); empty when it allows neither or
    has no `forward`/`backward` ranges."""
    ctx = _Context.build(model)
    if ctx is None:
        return []
    out = []
    if ctx.kinds.is_node.any():
        out.append(ctx.by_seq())
    named = np.flatnonzero(model.trace.range_texts.per_value(
        lambda t: isinstance(t, str) and t.startswith(BACKWARD_PREFIX)))
    if len(named):
        out.append(ctx.by_name(named.astype(np.int64)))
    return out


@dataclass
class _Context:
    model: RangeModel
    kinds: RangeKinds
    texts: np.ndarray
    forward_of: np.ndarray  # per range: its `forward` ancestor-or-self in scope, else -1
    user_parent: np.ndarray  # per range: innermost user (non-op) range enclosing it on its thread, or self
    rel_path: dict[int, tuple[str, ...]]  # user range under forward -> path from `forward`
    fwd_ops: np.ndarray
    bwd_ops: np.ndarray
    iterations: int

    @classmethod
    def build(cls, model: RangeModel) -> _Context | None:
        if model.n == 0:
            return None
        texts = model.trace.range_texts.objects
        kinds = RangeKinds(model.trace.range_texts)
        mains = np.isin(model.r_gtid, np.array(list(model.main_threads.values()), dtype=np.int64))
        iters = steps_of(model).steady
        in_scope = _within(model.parent, iters) if len(iters) else mains
        fwd = np.flatnonzero((texts == "forward") & in_scope & mains)
        bwd = np.flatnonzero((texts == "backward") & in_scope & mains)
        if len(fwd) == 0 or len(bwd) == 0:
            return None
        forward_of = _ancestor_in(model.parent, fwd)
        user = ~kinds.is_op
        user_parent = _nearest_ancestor(model.parent, user)
        rel = {}
        for i in np.flatnonzero(user & (forward_of >= 0)).tolist():  # user ranges: few
            chain, j = [], i
            while j >= 0 and j != forward_of[i]:
                if user[j]:
                    chain.append(path_key(texts[j]))
                j = model.parent[j]
            rel[i] = ("forward", *reversed(chain))
        return cls(model, kinds, texts, forward_of, user_parent, rel, model.ops_of(fwd), model.ops_of(bwd), len(bwd))

    # -- the two mappings ------------------------------------------------------------------
    def by_seq(self) -> BackwardParts:
        m, k = self.model, self.kinds
        ops = self.bwd_ops
        node = self._innermost(ops, k.is_node)
        # Work in a node's engine wrapper but outside the node itself is the node's too.
        nodes = np.flatnonzero(k.is_node | k.is_accumulate)
        wrapped = np.full(m.n, -1, dtype=np.int64)
        wrapped[m.parent[nodes][m.parent[nodes] >= 0]] = nodes[m.parent[nodes] >= 0]
        is_wrapper = np.zeros(m.n, dtype=bool)
        is_wrapper[m.parent[nodes][m.parent[nodes] >= 0]] = True
        wrapper = self._innermost(ops, is_wrapper)
        via_engine = (node < 0) & (wrapper >= 0)
        node = np.where(via_engine, wrapped[np.maximum(wrapper, 0)], node)
        acc = np.where(node >= 0, k.is_accumulate[np.maximum(node, 0)], False) | \
            (self._innermost(ops, k.is_accumulate) >= 0)
        reason = np.full(len(ops), "", dtype=object)
        reason[acc] = ACCUMULATE
        reason[(node < 0) & ~acc] = OUTSIDE_NODES
        node = np.where(acc | ~k.is_node[np.maximum(node, 0)], -1, node)
        # The forward op of each node: same process and seq, the latest that began before it.
        has = node >= 0
        fwd_op = np.full(len(ops), -1, dtype=np.int64)
        cand = np.flatnonzero((k.seq >= 0) & k.is_op & ~k.is_node)
        if has.any() and len(cand):
            nodes = node[has]
            left = pd.DataFrame({"pid": m.r_gtid[nodes] & PID_MASK, "seq": k.seq[nodes],
                                 "start": m.r_start[nodes], "row": np.arange(len(nodes))}).sort_values("start")
            right = pd.DataFrame({"pid": m.r_gtid[cand] & PID_MASK, "seq": k.seq[cand],
                                  "start": m.r_start[cand], "fwd": cand}).sort_values("start")
            hit = pd.merge_asof(left, right, on="start", by=["pid", "seq"], allow_exact_matches=False)
            found = np.full(len(nodes), -1, dtype=np.int64)
            found[hit["row"].to_numpy()] = hit["fwd"].fillna(-1).to_numpy(dtype=np.int64)
            fwd_op[np.flatnonzero(has)] = found
        reason[has & (fwd_op < 0)] = NO_FORWARD_OP
        part = np.where(fwd_op >= 0, self.user_parent[np.maximum(fwd_op, 0)], -1)
        part_ok = (part >= 0) & (self.forward_of[np.maximum(part, 0)] >= 0)
        reason[(fwd_op >= 0) & ~part_ok] = OUTSIDE_FORWARD
        table = self._table("seq", ops, np.where(part_ok, part, -1), reason)
        trace = m.trace
        engine = ops[via_engine & part_ok & (trace.ops["kind"].to_numpy()[ops] == KERNEL)]
        table.engine_kernel_ns = int((trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy())[engine].sum())
        return table

    def by_name(self, named: np.ndarray) -> BackwardParts:
        ops = self.bwd_ops
        # Each backward:<part> range, as the user part of that name under forward (first in tree order).
        by_text: dict[str, int] = {}
        for i, path in sorted(self.rel_path.items(), key=lambda kv: (len(kv[1]), self.model.r_start[kv[0]])):
            by_text.setdefault(path[-1], i)
        target = np.array([by_text.get(self.texts[i][len(BACKWARD_PREFIX):], -1) for i in named], dtype=np.int64)
        is_named = np.zeros(self.model.n, dtype=bool)
        is_named[named] = True
        inner = self._innermost(ops, is_named)
        where = np.full(self.model.n, -1, dtype=np.int64)
        where[named] = target
        forward = next(i for i, path in self.rel_path.items() if path == ("forward",))
        part = np.where(inner >= 0, where[np.maximum(inner, 0)], forward)
        reason = np.full(len(ops), "", dtype=object)
        reason[(inner >= 0) & (part < 0)] = UNKNOWN_PART
        table = self._table("name", ops, part, reason)
        trace = self.model.trace
        unnamed = ops[(inner < 0) & (trace.ops["kind"].to_numpy()[ops] == KERNEL)]
        table.unnamed_kernel_ns = int((trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy())[unnamed].sum())
        return table

    # -- helpers ---------------------------------------------------------------------------
    def _innermost(self, ops: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Per op, the deepest range with `mask` that holds it (on the launching thread: the
        only ranges holding an op besides the main thread's), or -1."""
        m = self.model
        out = np.full(len(ops), -1, dtype=np.int64)
        keep = mask[m.pair_range]
        p_op, p_range = m.pair_op[keep].astype(np.int64), m.pair_range[keep].astype(np.int64)
        if len(p_op) == 0 or len(ops) == 0:
            return out
        order = np.lexsort((m.depth[p_range], p_op))
        p_op, p_range = p_op[order], p_range[order]
        last = np.ones(len(p_op), dtype=bool)
        last[:-1] = p_op[1:] != p_op[:-1]
        deepest = pd.Series(p_range[last], index=p_op[last])
        return deepest.reindex(ops).fillna(-1).to_numpy(dtype=np.int64)

    def _table(self, method: str, bwd_ops: np.ndarray, bwd_part: np.ndarray, reason: np.ndarray) -> BackwardParts:
        trace = self.model.trace
        is_k = trace.ops["kind"].to_numpy() == KERNEL
        dur = trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy()
        # Forward: each forward op's innermost user range under forward.
        f_ops = self.fwd_ops
        f_part = self._innermost(f_ops, (~self.kinds.is_op) & (self.forward_of >= 0))
        sums: dict[tuple[str, ...], list[int]] = {}
        bwd_of: dict[tuple[str, ...], list[np.ndarray]] = {}

        def add(ops: np.ndarray, parts: np.ndarray, column: int) -> None:
            sel = is_k[ops] & (parts >= 0)
            frame = pd.DataFrame({"part": parts[sel], "ns": dur[ops[sel]], "op": ops[sel]})
            for part, g in frame.groupby("part"):
                path = self.rel_path[int(part)]
                for depth in range(1, len(path) + 1):  # inclusive: every enclosing part too
                    row = sums.setdefault(path[:depth], [0, 0, 0, 0])
                    row[column] += int(g["ns"].sum())
                    row[column + 1] += len(g)
                    if column == 2:
                        bwd_of.setdefault(path[:depth], []).append(g["op"].to_numpy(np.int64))

        add(f_ops, f_part, 0)
        add(bwd_ops, bwd_part, 2)
        unmapped: dict[str, tuple[int, int]] = {}
        kern = is_k[bwd_ops]
        for why in (ACCUMULATE, OUTSIDE_NODES, NO_FORWARD_OP, OUTSIDE_FORWARD, UNKNOWN_PART):
            sel = kern & (reason == why)
            if sel.any():
                unmapped[why] = (int(dur[bwd_ops[sel]].sum()), int(sel.sum()))
        ordered = sorted(sums.items(), key=lambda kv: _tree_order(kv[0], sums))
        rows = [PartRow(path, vals[0], vals[1], vals[2], vals[3]) for path, vals in ordered]
        for row in rows:
            kids = [sums[p] for p in sums if len(p) == len(row.path) + 1 and p[:-1] == row.path]
            row.forward_self_ns = row.forward_kernel_ns - sum(k[0] for k in kids)
            row.backward_self_ns = row.backward_kernel_ns - sum(k[2] for k in kids)
            got = bwd_of.get(row.path)
            row.backward_ops = np.sort(np.concatenate(got)) if got else np.empty(0, np.int64)
        return BackwardParts(
            method=method, iterations=self.iterations,
            backward_kernel_ns=int(dur[bwd_ops[kern]].sum()), backward_kernels=int(kern.sum()),
            backward_other_ns=int(dur[bwd_ops[~kern]].sum()), parts=rows, unmapped=unmapped)


class RangeKinds:
    """Per NVTX range of a trace (positions in trace.ranges; `texts` = the names without their
    domain): op range or user range, sequence number, folded name. Worked out once per
    distinct text, then spread by code."""

    def __init__(self, texts: Coded):
        codes, uniq = texts.codes, texts.values.tolist()
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


def _tree_order(path: tuple[str, ...], sums: dict) -> tuple:
    """Pre-order with siblings by forward kernel time, largest first."""
    return tuple(item for depth in range(1, len(path) + 1)
                 for item in (-sums[path[:depth]][0], path[depth - 1]))


def _within(parent: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Per range: is it one of `roots` or below one."""
    return _ancestor_in(parent, roots) >= 0


def _ancestor_in(parent: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per range: the nearest ancestor-or-self among `targets`, or -1 (pointer jumps, one per level)."""
    is_t = np.zeros(len(parent), dtype=bool)
    is_t[targets] = True
    out = np.full(len(parent), -1, dtype=np.int64)
    cur = np.arange(len(parent), dtype=np.int64)
    live = np.ones(len(parent), dtype=bool)
    while live.any():
        hit = live & (cur >= 0) & is_t[np.maximum(cur, 0)]
        out[hit] = cur[hit]
        live &= ~hit & (cur >= 0)
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)
    return out


def _nearest_ancestor(parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per range: the nearest ancestor-or-self with `mask`, or -1."""
    return _ancestor_in(parent, np.flatnonzero(mask))
