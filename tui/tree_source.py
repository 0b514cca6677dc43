"""The NVTX range tree flattened into the rows a DataGrid draws: one row per thread group,
then its ranges, each shown when its parent is expanded. No Textual here.

Expanding and collapsing splice the visible list in place, so a 76k-range instance tree
costs only the rows that appear or disappear.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np

from nsight_tui.parsers.model.ranges import RangeNode, ThreadGroup, display_name, path_key
from nsight_tui.parsers.read.conventions import INFERRED_DOMAIN
from nsight_tui.render.safe import visible
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column

INDENT = 2
MAX_INDENT_LEVELS = 16  # deeper rows keep this indent and show their level instead
LABEL_LIMIT = 1024  # characters of a name in a tree row (the detail and exports keep it whole)
_STEP = re.compile(r"^step_(N|\d+)$")


_ITERATION = re.compile(r"^(step|warmup)_(N|\d+)$")


@lru_cache(maxsize=256)
def _folded_text(name: str) -> str:
    """The name folded (`step_N`), behind its domain tag: asked per row drawn and per ancestor, and
    folding reads the whole name (10 MB for some), so each name is folded once."""
    return path_key(name).rsplit(":", 1)[-1]


def _is_step(name: str) -> bool:
    return bool(_STEP.match(_folded_text(name)))


def is_step_row(node) -> bool:
    """The row is a steady-state iteration (`step_N`, `inferred:step_N`), not a range inside one."""
    name = getattr(node, "name", None)
    return isinstance(name, str) and bool(name) and not getattr(node, "is_ops", False) and _is_step(name) \
        and iteration_of(node) is node


def iteration_of(node) -> RangeNode | None:
    """The iteration (`step_N`, `warmup_N`, inferred ones too) the range is or is inside; None outside one."""
    while node is not None:
        name = getattr(node, "name", None)
        if name and _ITERATION.match(_folded_text(name)):
            return node
        node = getattr(node, "parent", None)
    return None


def _first_step(roots, max_depth: int = 6):
    """The first `step_N` range under `roots`, breadth first (the shallowest one)."""
    level = list(roots)
    for _ in range(max_depth):
        for node in level:
            if getattr(node, "name", None) and _is_step(node.name) and not getattr(node, "is_ops", False):
                return node
        level = [c for n in level if not getattr(n, "is_ops", False) for c in getattr(n, "children", [])]
    return None


@dataclass(eq=False)
class TreeRow:
    obj: RangeNode | ThreadGroup
    depth: int
    expanded: bool = False

    @property
    def is_group(self) -> bool:
        return isinstance(self.obj, ThreadGroup)

    @property
    def children(self) -> list[RangeNode]:
        return self.obj.roots if isinstance(self.obj, ThreadGroup) else self.obj.children


def node_key(node: RangeNode) -> tuple[str, ...]:
    """A range's identity across the aggregated and instance trees: its name path, numbers
    folded (`step_3` and `step_N` both give `step_N`)."""
    out = []
    cur: RangeNode | None = node
    while cur is not None:
        out.append(display_name(path_key(cur.name)))
        cur = cur.parent
    return tuple(reversed(out))


def find_path(roots: list[RangeNode], key: tuple[str, ...]) -> RangeNode | None:
    """The first node under `roots` whose name path (as node_key gives it) is `key`."""
    level, found = roots, None
    for name in key:
        found = next((n for n in level if display_name(path_key(n.name)) == name), None)
        if found is None:
            return None
        level = found.children
    return found


def path_text(node: RangeNode) -> str:
    return "/".join(node.path)


INFERRED = f"{INFERRED_DOMAIN}:"  # the label's tag of ranges inferred from the kernel sequence

# The CPU column's header where the tree holds ranges inferred from the kernel sequence:
# theirs is no NVTX span but their kernels' launch span; the mark sends the reader to the crumb,
# which says it in few words (it must fit 80 columns beside the aggregation's words)
INFERRED_CPU_MARK = "*"
INFERRED_CPU_TEXT = "launch span for inferred: ranges"
INFERRED_CPU_SHORT = "launch span if inferred"


# What an aggregated row's figures are: totals over its instances, per instance (total ÷ ×N), or
# per step (total ÷ the instances of the iteration it is in: attention ×36 in step_N ×3 is 12 calls' time).
TOTAL, PER_INSTANCE, PER_STEP = "total", "instance", "step"


def tree_columns(aggregated: bool = True, per_instance: bool | str = False, inferred: bool = False) -> list[Column]:
    """The tree's columns. Aggregated rows add up their instances (`step_N ×3`): the figures are
    totals over them, per instance (the total ÷ N), or per step (÷ its iteration's instances);
    the headers and exports say which. `per_instance`: True or PER_INSTANCE, PER_STEP, or
    False/TOTAL. `inferred`: some ranges are inferred, their CPU figure a launch span (the header is marked)."""
    figures = PER_INSTANCE if per_instance is True else (per_instance or TOTAL)
    if aggregated and figures == PER_STEP:
        cpu, gpu_time, gpu, kernels = "CPU/step", "GPU/step", "Busy/step", "Kern/step"
        what = "per iteration: total ÷ the instances of the step_N or warmup_N it is in"
    elif aggregated and figures == PER_INSTANCE:
        cpu, gpu_time, gpu, kernels, what = "CPU/inst", "GPU/inst", "Busy/inst", "Kern/inst", "mean per instance"
    else:
        cpu, gpu_time, gpu, kernels = "CPU", "GPU", "GPU busy", "Kernels"
        what = "total over instances" if aggregated else "one instance"
    span = f"NVTX span; {INFERRED_CPU_TEXT}" if inferred else "NVTX span"
    return [
        Column("range", "Range", None, "left", md_header="Range path", min_width=18, text=True),
        Column("instances", "×N", 6, priority=6),
        # Two clocks: CPU, the NVTX span (when the CPU issued the work); GPU, its GPU work's span
        # (first start to last end, nsys's projection). They differ when the GPU runs behind.
        Column("cpu", cpu + (INFERRED_CPU_MARK if inferred else ""), 9, fmt=numbers.duration,
               md_header=f"CPU: {span} (ns, {what})", priority=7),
        Column("gpu_time", gpu_time, 9, fmt=numbers.duration, md_header=f"GPU time: its work's span (ns, {what})",
               priority=7),
        Column("gpu", gpu, 9, fmt=numbers.duration, md_header=f"GPU busy (ns, {what})", priority=8),
        Column("share", "%parent", 7, fmt=numbers.percent, md_header="GPU share of parent", priority=4),
        Column("kernels", kernels, 9 if figures != TOTAL and aggregated else 8,
               fmt=lambda v: numbers.count(round(v)) if v is not None else "", md_header=f"Kernels ({what})", priority=5),
    ]


class RangeTreeSource:
    columns = tree_columns()

    # an iteration the run died in (out of GPU memory): said on its row, it is no step
    DIED_MARK = " ✗ died (OOM)"

    def __init__(self, groups: list[ThreadGroup], aggregated: bool, per_instance: bool | str = False,
                 inferred: bool = False, died: frozenset[int] = frozenset()):
        figures = PER_INSTANCE if per_instance is True else (per_instance or TOTAL)
        self.figures = figures if aggregated else TOTAL
        self.per_instance = self.figures == PER_INSTANCE
        if "columns" not in self.__dict__:  # a subclass (the diff's tree) may have set its own
            self.columns = tree_columns(aggregated, per_instance, inferred)
        self.groups = groups
        self.aggregated = aggregated
        self.died = died  # range positions of the iterations the run died in
        self.rows: list[TreeRow] = [TreeRow(g, 0) for g in groups]
        self._group_of_root = {id(r): g for g in groups for r in g.roots}
        self._all: list[RangeNode] | None = None
        self._index: dict[int, int] | None = None
        self._labels: list[str] | None = None
        self._open: set[int] = set()  # ids of expanded nodes, kept while an ancestor is closed

    def __len__(self) -> int:
        return len(self.rows)

    # -- cells -----------------------------------------------------------------------------
    def label(self, row: TreeRow) -> str:
        pad = " " * (INDENT * min(row.depth, MAX_INDENT_LEVELS))
        if row.depth > MAX_INDENT_LEVELS:
            pad += f"[{row.depth}] "
        mark = ("▾ " if row.expanded else "▸ ") if row.children else "· "
        g = row.obj
        if isinstance(g, ThreadGroup):
            return f"{pad}{mark}{visible(g.label)}{'  [main thread]' if g.is_main else ''}"
        name = g.label
        if len(name) > LABEL_LIMIT:  # cut before making it visible: a 10 MB name costs per repaint
            return f"{pad}{mark}{visible(name[:LABEL_LIMIT])}… (+{len(name) - LABEL_LIMIT:,} characters)"
        return f"{pad}{mark}{visible(name)}" + (self.DIED_MARK if self.holds_died(g) else "")

    def holds_died(self, node) -> bool:
        """The row is (or aggregates) an iteration the run died in."""
        ids = getattr(node, "ids", None)
        if not self.died or ids is None or getattr(node, "is_ops", False) or iteration_of(node) is not node:
            return False
        return bool(np.isin(ids, np.fromiter(self.died, dtype=np.int64)).any())

    def value(self, row: TreeRow, key: str):
        node = row.obj
        if isinstance(node, ThreadGroup):
            return None
        if key in ("gpu", "gpu_time", "share", "kernels") and node.model.gpu_pending:
            return None  # the load's first stage: GPU work not read yet, blank rather than zero
        if key == "instances":
            return node.instances
        per = self.divisor(node)
        if key == "cpu":
            return node.cpu_ns / per if per > 1 else node.cpu_ns
        if key == "gpu":
            return node.busy_ns / per if per > 1 else node.busy_ns
        if key == "gpu_time":
            return node.proj_ns / per if per > 1 else node.proj_ns
        if key == "share":
            return node.share_of_parent()
        if key == "kernels":
            return node.kernels / per if per > 1 else node.kernels
        return node.label

    def divisor(self, node: RangeNode) -> int:
        """What the row's totals are divided by (1: totals)."""
        if self.figures == PER_INSTANCE:
            return node.instances or 1
        if self.figures == PER_STEP:
            it = iteration_of(node)
            return (it.instances or 1) if it is not None else 1
        return 1

    def cell(self, i: int, column: Column) -> str:
        row = self.rows[i]
        if column.key == "range":
            return self.label(row)
        v = self.value(row, column.key)
        if v is None:
            return ""
        if column.key == "instances":
            return numbers.instances(v)
        return column.fmt(v)

    def spans(self, i: int) -> bool:
        """Thread rows are headings across the whole line."""
        return self.rows[i].is_group

    def row_class(self, i: int) -> str | None:
        return "datagrid--group" if self.rows[i].is_group else None

    def node_at(self, i: int) -> RangeNode | None:
        """The range at row i (None on a thread row). A subclass may hold other node types."""
        if 0 <= i < len(self.rows) and not self.rows[i].is_group:
            return cast(RangeNode, self.rows[i].obj)
        return None

    def group_at(self, i: int) -> ThreadGroup:
        while i > 0 and not self.rows[i].is_group:
            i -= 1
        group = self.rows[i].obj
        assert isinstance(group, ThreadGroup)
        return group

    # -- expand / collapse --------------------------------------------------------------------
    def expand(self, i: int) -> bool:
        """Show row i's children, and again whatever was open under them before."""
        row = self.rows[i]
        if row.expanded or not row.children:
            return False
        row.expanded = True
        self._open.add(id(row.obj))
        new: list[TreeRow] = []
        self._visible_under(row, new)
        self.rows[i + 1:i + 1] = new
        return True

    def _visible_under(self, row: TreeRow, out: list[TreeRow]) -> None:
        stack = [(row, iter(row.children))]  # depth-first without recursion (ranges nest thousands deep)
        while stack:
            parent, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                continue
            sub = TreeRow(child, parent.depth + 1, id(child) in self._open and bool(child.children))
            out.append(sub)
            if sub.expanded:
                stack.append((sub, iter(sub.children)))

    def collapse(self, i: int) -> bool:
        row = self.rows[i]
        if not row.expanded:
            return False
        row.expanded = False
        self._open.discard(id(row.obj))
        j = i + 1
        while j < len(self.rows) and self.rows[j].depth > row.depth:
            j += 1
        del self.rows[i + 1:j]
        return True

    def parent_row(self, i: int) -> int | None:
        depth = self.rows[i].depth
        for j in range(i - 1, -1, -1):
            if self.rows[j].depth < depth:
                return j
        return None

    def expand_default(self, max_rows: int = 40, max_depth: int = 5) -> None:
        """Open the main threads level by level while the whole level fits in `max_rows`
        rows (so step_N/forward/backward show at once); other threads, and the `ops` levels
        (PyTorch's op ranges), stay closed."""
        for depth in range(max_depth):
            level = [i for i, r in enumerate(self.rows)
                     if r.depth == depth and not r.expanded and r.children and self.group_at(i).is_main
                     and not (not r.is_group and getattr(r.obj, "is_ops", False))]
            if not level:
                return
            added = sum(len(self.rows[i].children) for i in level)
            if len(self.rows) + added > max_rows:
                return
            for i in reversed(level):  # from the bottom, so earlier indices stay valid
                self.expand(i)

    def home_row(self) -> int:
        """Where the cursor starts: the first steady-state iteration (`step_N`), shown (its
        thread opened) when it is on a thread that is not open, or nested under other ranges
        (an autograd thread taken for the main one before the GPU work is read; unbalanced
        NVTX); else the first range."""
        for i, row in enumerate(self.rows):
            name = getattr(row.obj, "name", None)  # the diff's merged rows have none
            if not row.is_group and name and _is_step(name):
                return i
        for group in sorted(self.groups, key=lambda g: not g.is_main):
            node = _first_step(group.roots)
            if node is not None:
                at = self.reveal(node)
                if at is not None:
                    return at
        return 1 if len(self.rows) > 1 else 0

    def reveal(self, node: RangeNode) -> int | None:
        """Expand the ancestors of `node`; its row index."""
        chain = []
        cur: RangeNode | None = node
        while cur is not None:
            chain.append(cur)
            cur = cur.parent
        chain.reverse()
        group = self._group_of_root.get(id(chain[0]))
        if group is None:
            return None
        i = next(k for k, r in enumerate(self.rows) if r.obj is group)
        for target in chain:
            self.expand(i)
            depth = self.rows[i].depth + 1
            j = i + 1
            while j < len(self.rows) and self.rows[j].depth >= depth:
                if self.rows[j].depth == depth and self.rows[j].obj is target:
                    break
                j += 1
            else:
                return None
            i = j
        return i

    def find_key(self, gtid: int, key: tuple[str, ...]) -> RangeNode | None:
        """The first node on thread `gtid` whose name path matches `key`."""
        group = next((g for g in self.groups if g.gtid == gtid), None)
        return None if group is None else find_path(group.roots, key)

    # -- search ---------------------------------------------------------------------------
    def all_nodes(self) -> list[RangeNode]:
        """Every range, pre-order, in display order (built on first search)."""
        if self._all is None:
            out: list[RangeNode] = []
            stack = [n for g in reversed(self.groups) for n in reversed(g.roots)]
            while stack:
                node = stack.pop()
                out.append(node)
                stack.extend(reversed(node.children))
            self._all = out
        return self._all

    def preorder_index(self, node: RangeNode) -> int:
        """Position of `node` in all_nodes(); -1 if absent."""
        if self._index is None:
            self._index = {id(n): k for k, n in enumerate(self.all_nodes())}
        return self._index.get(id(node), -1)

    def prepare_search(self) -> None:
        """Build the search structures now (a worker calls this for big trees)."""
        nodes = self.all_nodes()
        if self._labels is None:
            self._labels = [n.label.lower() for n in nodes]
        self.preorder_index(nodes[0]) if nodes else None

    def matches(self, query: str) -> list[RangeNode]:
        """Ranges whose name contains `query` (any case); with a `/`, whose path ends with it."""
        q = query.strip().lower()
        if not q:
            return []
        nodes = self.all_nodes()
        if "/" in q:
            return [n for n in nodes if "/".join(node_key(n)).lower().endswith(q)
                    or path_text(n).lower().endswith(q)]
        if self._labels is None:
            self._labels = [n.label.lower() for n in nodes]
        return [n for n, label in zip(nodes, self._labels) if q in label]

    # -- export ---------------------------------------------------------------------------
    def export_rows(self) -> tuple[list[str], list[list]]:
        headers = ["Thread", *[c.export_header for c in self.columns]]
        rows = []
        group = None
        for row in list(self.rows):  # a snapshot: expand/collapse may splice the live list meanwhile
            node = row.obj
            if isinstance(node, ThreadGroup):
                group = node  # rows follow their group: no walk back per row
                continue
            share = node.share_of_parent()
            per = self.divisor(node)  # the figures the headers name: totals, per instance or per step
            rows.append([group.label if group else "", path_text(node), node.instances, _per(node.cpu_ns, per),
                         _per(node.proj_ns, per), _per(node.busy_ns, per),
                         None if share is None else round(share, 4), _per(node.kernels, per)])
        return headers, rows


def _per(total, per: int):
    """A total as exported: itself (÷ 1), else rounded to whole nanoseconds (counts: 2 decimals)."""
    return total if per == 1 else round(total / per, 2)
