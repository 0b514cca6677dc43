"""The range tree's nodes: one NVTX range instance, or (aggregated) every instance sharing a name
path (`RangeNode`), the roots per thread (`ThreadGroup`), and how names fold into one row."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from nsight_tui.parsers.model.op_ranges import fold_name

if TYPE_CHECKING:
    from nsight_tui.parsers.model.ranges import RangeModel

OPS = "ops"  # the level that holds PyTorch's op ranges under a user range (collapsed by default)


def path_key(name: str) -> str:
    """Names that differ only by a trailing number are one row when aggregated
    (`step_3` -> `step_N`); PyTorch's op ranges lose their seq, op id and shapes
    (`aten::mm, seq = 12, op_id = 17` -> `aten::mm`): parsers.op_ranges.fold_name."""
    return fold_name(name)


def display_name(name: str) -> str:
    """nsys tags ranges `domain:text`; the default domain shows as a bare name."""
    return name[1:] if name.startswith(":") else name


@dataclass(eq=False, slots=True)
class RangeNode:
    """One NVTX range instance, or (aggregated view) all instances sharing a name path."""

    model: "RangeModel" = field(repr=False)
    name: str
    ids: np.ndarray  # positions in trace.ranges (one for an instance, N when aggregated)
    depth: int
    parent: "RangeNode | None" = field(default=None, repr=False)
    children: list["RangeNode"] = field(default_factory=list, repr=False)
    is_ops: bool = False  # the synthetic `ops` level: ids are its children's
    foreign: bool = False  # another thread's range shown under the main range it ran in
    # (model, op positions): kept, since the kernel table and its ratios both ask, and a
    # node of every step holds 10^6 of them
    ops_cache: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # per metric array: (the array, this node's sum over it); kept, since every redraw of a
    # tree row asks (a node of every step sums 10^5 instances: 40-60 ms a key at 3M ranges)
    sums: dict | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def instances(self) -> int:
        return len(self.ids)

    @property
    def label(self) -> str:
        return OPS if self.is_ops else display_name(self.name)

    @property
    def is_op_range(self) -> bool:
        return not self.is_ops and bool(self.model.range_is_op[self.ids[0]])

    @property
    def key(self) -> str:
        """The name it aggregates under (`step_N`, `aten::mm`; `ops` for the ops level)."""
        return OPS if self.is_ops else self.model.range_key[self.ids[0]]

    @property
    def start(self) -> int:
        return int(self.model.r_start[self.ids].min())

    @property
    def end(self) -> int:
        return int(self.model.r_end[self.ids].max())

    def _sum(self, arr) -> int:
        sums = self.sums
        if sums is None:
            sums = self.sums = {}
        kept = sums.get(id(arr))
        if kept is None or kept[0] is not arr:  # a new model's array (tree_from, a rank's scope)
            kept = sums[id(arr)] = (arr, int(arr[self.ids].sum()))
        return kept[1]

    @property
    def cpu_ns(self) -> int:
        return self._sum(self.model.cpu_ns)

    @property
    def kernel_ns(self) -> int:
        return self._sum(self.model.kernel_ns)

    @property
    def op_ns(self) -> int:
        return self._sum(self.model.op_ns)

    @property
    def kernels(self) -> int:
        return self._sum(self.model.kernel_count)

    @property
    def ops(self) -> int:
        return self._sum(self.model.op_count)

    @property
    def proj_ns(self) -> int:
        return self._sum(self.model.proj_ns)

    @property
    def busy_ns(self) -> int:
        return self._sum(self.model.busy_ns)

    @property
    def gtid(self) -> int:
        return int(self.model.r_gtid[self.ids[0]])

    @property
    def path(self) -> tuple[str, ...]:
        node: RangeNode | None = self
        out = []
        while node is not None:
            out.append(node.label)
            node = node.parent
        return tuple(reversed(out))

    def share_of_parent(self) -> float | None:
        if self.parent is None or self.parent.busy_ns == 0:
            return None
        return self.busy_ns / self.parent.busy_ns

    def op_positions(self) -> np.ndarray:
        """Positions of the ops attributed to this node (kept: the kernel table and its
        ratios both ask, and a node of every step holds 10^6 of them)."""
        cached = self.ops_cache
        if cached is None or cached[0] is not self.model:
            cached = self.ops_cache = (self.model, self.model.ops_of(self.ids))
        return cached[1]


@dataclass(eq=False)
class ThreadGroup:
    gpid: int
    gtid: int
    label: str
    roots: list[RangeNode]
    is_main: bool


def copy_tree(node: RangeNode, parent: RangeNode) -> RangeNode:
    """`node`'s subtree again, under `parent` (the same ranges, another place in the tree)."""
    top = RangeNode(node.model, node.name, node.ids, parent.depth + 1, parent, foreign=True)
    stack = [(node, top)]
    while stack:
        src, dst = stack.pop()
        for child in src.children:
            copy = RangeNode(child.model, child.name, child.ids, dst.depth + 1, dst, foreign=True)
            dst.children.append(copy)
            stack.append((child, copy))
    return top


def gather_ops(level: list[RangeNode]) -> None:
    """Where user ranges and PyTorch's op ranges are siblings, the op ranges move under one
    `ops` node, after the user ranges (the user's own structure stays on top)."""
    ops = [n for n in level if n.is_op_range]
    if not ops or len(ops) == len(level):
        return
    parent = ops[0].parent
    holder = RangeNode(ops[0].model, OPS, np.concatenate([n.ids for n in ops]),
                       ops[0].depth, parent, is_ops=True)
    for n in ops:
        n.parent = holder
        n.depth = holder.depth + 1
    holder.children = ops
    level[:] = [n for n in level if not n.is_op_range] + [holder]
