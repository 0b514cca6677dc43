"""NVTX range trees with the GPU work each range launched: the one model under the TUI,
the CLI and the tests (it never imports Textual).

`RangeModel(trace, mode)` holds, per NVTX range: its parent (the tightest enclosing range
on the same thread, as nsys defines it), depth, CPU time, and over the GPU ops attributed
to it: op/kernel counts, summed kernel time, GPU projection (first op start to last op
end) and GPU busy time (union of op intervals). `RangeNode` objects wrap rows for the UI.
"""
from __future__ import annotations

from copy import copy as shallow_copy
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from nsight_tui.parsers.attribution import (
    MODE_HELP,
    attribute,
    enclosing_pairs,
    slices_to_pairs,
)
from nsight_tui.parsers.groupstats import group_ids, group_stats
from nsight_tui.parsers.ids import KERNEL, OP_KINDS, PID_MASK, api_display_name, pid_of, tid_of
from nsight_tui.parsers.load import Trace
from nsight_tui.parsers.op_ranges import fold_name, fold_trailing_number, is_op_range, op_key

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
        return int(arr[self.ids].sum())

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
        return self.model.ops_of(self.ids)


@dataclass(eq=False)
class ThreadGroup:
    gpid: int
    gtid: int
    label: str
    roots: list[RangeNode]
    is_main: bool


class RangeModel:
    def __init__(self, trace: Trace, mode: str = "process", main_thread: str | None = None):
        self.trace = trace
        self.mode = mode
        self.mode_help = MODE_HELP[mode]
        self.main_thread_spec = main_thread
        r = trace.ranges
        self.n = len(r)
        self.r_start = r["start"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.r_end = r["end"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.r_gtid = r["gtid"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.cpu_ns = self.r_end - self.r_start
        op_pos, range_pos, self.main_info = attribute(r, trace.api, trace.ops, mode, trace.threads, main_thread)
        self.main_threads = {gpid: m.gtid for gpid, m in self.main_info.items()}
        # Pairs sorted by range, then op start: per-range slices are contiguous.
        ops = trace.ops
        o_start = ops["start"].to_numpy()
        order = np.lexsort((o_start[op_pos], range_pos))
        # int32 halves the largest arrays the model holds (pairs ~ kernels x nesting depth).
        index_type = np.int32 if max(len(ops), self.n) < 2**31 else np.int64
        self.pair_op = op_pos[order].astype(index_type)
        self.pair_range = range_pos[order].astype(index_type)
        del op_pos, range_pos, order
        self.pair_offsets = np.searchsorted(self.pair_range, np.arange(self.n + 1))
        # The scope: every process and GPU (None), or part of them (`restricted`: one rank's)
        self.scope_gpids: frozenset[int] | None = None
        self.scope_ops: np.ndarray | None = None
        self.scope_label = ""
        self._metrics()
        self.parent, self.depth = self._nesting()

    def restricted(self, op_mask: np.ndarray, gpids: set[int] | frozenset[int], label: str) -> "RangeModel":
        """This model over part of the trace: the ranges (and trees) of the processes `gpids`,
        every GPU figure over the ops where `op_mask` (over trace.ops) holds. The attribution
        is this model's (same main threads, same pairs, fewer of them): a range's numbers are
        its full numbers restricted to those ops, not a new attribution of a cut trace."""
        sub = shallow_copy(self)
        for built in ("thread_groups", "aggregated_groups"):  # their nodes read the metrics: rebuilt
            sub.__dict__.pop(built, None)
        keep = np.asarray(op_mask, dtype=bool)[self.pair_op]
        sub.pair_op, sub.pair_range = self.pair_op[keep], self.pair_range[keep]
        sub.pair_offsets = np.searchsorted(sub.pair_range, np.arange(self.n + 1))
        sub.scope_gpids = frozenset(int(g) for g in gpids)
        sub.scope_ops = np.flatnonzero(op_mask)
        sub.scope_label = label
        sub._metrics()
        return sub

    def scope_op_positions(self) -> np.ndarray:
        """Every GPU op in this model's scope (the whole trace, or one rank's)."""
        return np.arange(len(self.trace.ops), dtype=np.int64) if self.scope_ops is None else self.scope_ops

    # -- per-range metrics, all vectorised over the pairs --------------------------------
    def _metrics(self):
        ops = self.trace.ops
        n = self.n
        o_start = ops["start"].to_numpy()[self.pair_op]
        o_end = ops["end"].to_numpy()[self.pair_op]
        dur = o_end - o_start
        is_k = ops["kind"].to_numpy()[self.pair_op] == KERNEL
        pr = self.pair_range
        self.op_count = np.bincount(pr, minlength=n).astype(np.int64)
        self.kernel_count = np.bincount(pr, weights=is_k, minlength=n).astype(np.int64)
        self.kernel_ns = _int_bincount(pr, np.where(is_k, dur, 0), n)
        self.op_ns = _int_bincount(pr, dur, n)
        proj_start = np.full(n, np.iinfo(np.int64).max)
        proj_end = np.full(n, np.iinfo(np.int64).min)
        np.minimum.at(proj_start, pr, o_start)
        np.maximum.at(proj_end, pr, o_end)
        has = self.op_count > 0
        self.proj_ns = np.where(has, proj_end - proj_start, 0)
        self.busy_ns = _union_length(pr, o_start, o_end, n)

    def _nesting(self) -> tuple[np.ndarray, np.ndarray]:
        """Parent = tightest enclosing range on the same thread (a stack sweep per thread)."""
        parent = np.full(self.n, -1, dtype=np.int64)
        depth = np.zeros(self.n, dtype=np.int64)
        if self.n == 0:
            return parent, depth
        order = np.lexsort((-self.r_end, self.r_start, self.r_gtid))
        stack: list[int] = []
        cur_thread = None
        ends, gtids = self.r_end, self.r_gtid
        for i in order.tolist():
            g = gtids[i]
            if g != cur_thread:
                stack, cur_thread = [], g
            while stack and ends[stack[-1]] < ends[i]:
                stack.pop()
            if stack:
                parent[i] = stack[-1]
                depth[i] = depth[stack[-1]] + 1
            stack.append(i)
        return parent, depth

    # -- queries --------------------------------------------------------------------------
    def ops_of(self, range_ids) -> np.ndarray:
        """Positions of the GPU ops attributed to any of the ranges (each op once)."""
        ids = np.atleast_1d(np.asarray(range_ids, dtype=np.int64))
        if len(ids) == 1:
            i = ids[0]
            return self.pair_op[self.pair_offsets[i]: self.pair_offsets[i + 1]]
        lo, hi = self.pair_offsets[ids], self.pair_offsets[ids + 1]
        _, pos = slices_to_pairs(lo, hi)
        ops = np.sort(self.pair_op[pos])  # a plain sort: np.unique hashes, 5x slower here
        return ops[np.concatenate(([True], ops[1:] != ops[:-1]))] if len(ops) else ops

    @cached_property
    def thread_groups(self) -> list[ThreadGroup]:
        """Per process and thread, the root ranges with their subtrees (instances)."""
        nodes: list[RangeNode | None] = [None] * self.n
        names = self.trace.ranges["name"].tolist() if self.n else []
        # children in time order (ties: the longer first, then by thread), whatever the rows' order
        order = np.lexsort((self.r_gtid, -self.r_end, self.r_start, self.depth))
        roots: dict[int, list[RangeNode]] = {}
        for i in order.tolist():
            p = self.parent[i]
            node = RangeNode(self, names[i], np.array([i]), int(self.depth[i]), nodes[p] if p >= 0 else None)
            nodes[i] = node
            if p >= 0:
                nodes[p].children.append(node)
            else:
                roots.setdefault(int(self.r_gtid[i]), []).append(node)
        if self.mode == "process":
            self._embed_foreign(nodes, roots)
        stack = list(roots.values())
        while stack:  # every level, the copies' too
            level = stack.pop()
            _gather_ops(level)
            stack.extend(n.children for n in level if n.children)
        return self._groups(roots)

    def _embed_foreign(self, nodes: list, roots: dict[int, list[RangeNode]]) -> None:
        """The process view: each top range of a thread whose GPU work the main thread's
        ranges hold (PyTorch's autograd thread) is also shown under the innermost main range
        open when it began (`backward` -> AddmmBackward0 ...), as a copy of its subtree."""
        mains = set(self.main_threads.values())
        api = self.trace.api
        launched = self.trace.ops["api"].to_numpy()
        launchers = set(np.unique(api["gtid"].to_numpy()[launched[launched >= 0]]).tolist()) if len(api) else set()
        foreign = [r for g, rs in roots.items() if g not in mains and g in launchers for r in rs]
        if not foreign or not mains:
            return
        f_ids = np.array([r.ids[0] for r in foreign], dtype=np.int64)
        m_ids = np.flatnonzero(np.isin(self.r_gtid, list(mains)))
        hi, fj = enclosing_pairs(self.r_gtid[m_ids] & PID_MASK, self.r_start[m_ids], self.r_end[m_ids],
                                 self.r_gtid[f_ids] & PID_MASK, self.r_start[f_ids], None)
        if len(fj) == 0:
            return
        host_pos = m_ids[hi]
        order = np.lexsort((self.depth[host_pos], fj))  # per foreign range, deepest host last
        fj, host_pos = fj[order], host_pos[order]
        last = np.ones(len(fj), dtype=bool)
        last[:-1] = fj[1:] != fj[:-1]
        for j, host in zip(fj[last].tolist(), host_pos[last].tolist()):
            parent = nodes[host]
            parent.children.append(_copy_tree(foreign[j], parent))
        for n in {id(nodes[h]): nodes[h] for h in host_pos[last].tolist()}.values():
            n.children.sort(key=lambda c: c.start)

    @cached_property
    def aggregated_groups(self) -> list[ThreadGroup]:
        """The same trees with instances merged by name path (`step_N/forward` x N)."""
        groups = []
        for g in self.thread_groups:
            merged: list[RangeNode] = []
            self._merge_into(g.roots, merged, None)
            groups.append(ThreadGroup(g.gpid, g.gtid, g.label, merged, g.is_main))
        return groups

    def _merge_into(self, nodes: list[RangeNode], out: list[RangeNode], parent: RangeNode | None):
        # A work list, not recursion: NVTX ranges nest thousands deep in the wild.
        work = [(nodes, out, parent)]
        while work:
            level, into, above = work.pop()
            by_key: dict[tuple[bool, str], list[RangeNode]] = {}
            for node in level:
                by_key.setdefault((node.is_ops, node.key), []).append(node)
            for (is_ops, key), members in by_key.items():
                ids = np.concatenate([m.ids for m in members])
                # op ranges show their folded name even once (their op ids differ run to run)
                name = key if len(members) > 1 or members[0].is_op_range else members[0].name
                agg = RangeNode(self, name, ids, members[0].depth, above, is_ops=is_ops,
                                foreign=members[0].foreign)
                into.append(agg)
                work.append(([c for m in members for c in m.children], agg.children, agg))

    def _groups(self, roots: dict[int, list[RangeNode]]) -> list[ThreadGroup]:
        out = []
        mains = set(self.main_threads.values())
        for gtid, nodes in roots.items():
            gpid = gtid & PID_MASK
            if self.scope_gpids is not None and gpid not in self.scope_gpids:
                continue
            label = f"{self.trace.process_label(gpid)} / {self.trace.thread_label(gtid)}"
            out.append(ThreadGroup(gpid, gtid, label, nodes, gtid in mains))
        # Main threads first, then by process and thread id.
        out.sort(key=lambda g: (g.gpid, not g.is_main, g.gtid))
        return out

    @cached_property
    def range_is_op(self) -> np.ndarray:
        """Per range: one of PyTorch's op/node ranges (parsers.op_ranges), not the user's."""
        return self._names_folded[0]

    @cached_property
    def range_key(self) -> np.ndarray:
        """Per range: its name folded for aggregation (path_key), as an object array."""
        return self._names_folded[1]

    @cached_property
    def _names_folded(self) -> tuple[np.ndarray, np.ndarray]:
        # 10^5 op ranges with unique op ids are 10^5 distinct names: plain str methods, no regex
        names = self.trace.ranges["name"].tolist() if self.n else []
        texts = self.trace.ranges["text"].tolist() if self.n else []
        is_op = np.fromiter((is_op_range(t) for t in texts), dtype=bool, count=len(texts))
        # op keys from the text, behind the name's domain tag (`:` for the default domain)
        key = np.array([n[:len(n) - len(t)] + op_key(t) if op else fold_trailing_number(n)
                        for n, t, op in zip(names, texts, is_op.tolist())], dtype=object)
        return is_op, key

    @cached_property
    def children_index(self) -> dict[int, list[int]]:
        """Range position -> positions of its children."""
        kids: dict[int, list[int]] = {}
        for child, parent in enumerate(self.parent.tolist()):
            if parent >= 0:
                kids.setdefault(parent, []).append(child)
        return kids

    def ranges_named(self, name: str) -> np.ndarray:
        """Positions of all range instances whose display name is `name`."""
        if self.n == 0:
            return np.zeros(0, dtype=np.int64)
        names = self.trace.ranges["name"].map(display_name).to_numpy()
        return np.flatnonzero(names == name)

    # -- tables for the UI and the reports ---------------------------------------------
    def op_table(self, op_positions: np.ndarray) -> pd.DataFrame:
        """The ops at these positions with names, durations and their launching call."""
        t = self.trace
        ops = t.ops.iloc[op_positions]
        df = pd.DataFrame({
            "op": op_positions,
            "kind": ops["kind"].to_numpy(),
            "name": [t.op_names[i] for i in ops["name"].to_numpy()],
            "short": [t.op_short[i] for i in ops["name"].to_numpy()],
            "start": ops["start"].to_numpy(),
            "duration": (ops["end"] - ops["start"]).to_numpy(),
            "device": ops["device"].to_numpy(),
            "stream": ops["stream"].to_numpy(),
            "corr": ops["corr"].to_numpy(),
            "api": ops["api"].to_numpy(),
        })
        return df

    def kernel_summary(self, op_positions: np.ndarray) -> pd.DataFrame:
        """Per op name: instances, total/avg/min/max/median duration, share of the total.

        Sorted by total time, descending; `name` is the demangled name (nsys's default).
        """
        ops = self.trace.ops
        pos = np.asarray(op_positions, dtype=np.int64)
        if len(pos) == 0:
            return pd.DataFrame(columns=["name", "short", "kind", "instances", "total_ns", "avg_ns", "med_ns",
                                         "min_ns", "max_ns", "share"])
        codes = ops["name"].to_numpy()[pos]
        dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos]
        groups = group_ids(codes)
        st = group_stats(groups.gid, groups.n, dur)
        first = pos[groups.first]
        names = self.trace.op_names
        res = pd.DataFrame({
            "name": [names[c] for c in ops["name"].to_numpy()[first]],
            "short": [self.trace.op_short[c] for c in ops["name"].to_numpy()[first]],
            "kind": [OP_KINDS[k] for k in ops["kind"].to_numpy()[first]],
            "instances": st.num, "total_ns": st.total, "avg_ns": st.avg, "med_ns": st.med,
            "min_ns": st.min, "max_ns": st.max,
        })
        total = int(st.total.sum())
        res["share"] = res["total_ns"] / total if total else 0.0
        return res.sort_values(["total_ns", "instances", "name"], ascending=[False, True, True],
                               kind="stable").reset_index(drop=True)

    def launches(self, op_positions: np.ndarray, name: str | None = None) -> pd.DataFrame:
        """Individual launches (optionally of one op name) with their launching API call:
        start, duration, device, stream, correlation ID, API name and thread, and launch
        latency = op start - API call start. Grid/block: `trace.op_details(df.op)` for the
        rows on screen (read from the file on demand)."""
        t = self.trace
        pos = np.asarray(op_positions, dtype=np.int64)
        if name is not None:
            code = t.op_names.index(name) if name in t.op_names else -1
            pos = pos[t.ops["name"].to_numpy()[pos] == code]
        ops = t.ops
        o_api = ops["api"].to_numpy()[pos]
        has = o_api >= 0
        safe = np.where(has, o_api, 0)
        api = t.api
        if len(api):
            a_start = np.where(has, api["start"].to_numpy()[safe], -1)
            a_gtid = np.where(has, api["gtid"].to_numpy()[safe], -1)
            a_name = np.where(has, api["name"].to_numpy()[safe], -1)
        else:
            a_start = a_gtid = a_name = np.full(len(pos), -1)
        o_start = ops["start"].to_numpy()[pos]
        # Strings are looked up once per distinct value, then spread by index.
        names = np.array(t.op_names, dtype=object)
        api_names = np.array([*map(api_display_name, t.api_names), ""], dtype=object)
        threads, thread_idx = np.unique(a_gtid, return_inverse=True)
        thread_text = np.array([t.thread_label(int(g)) if g >= 0 else "" for g in threads], dtype=object)
        df = pd.DataFrame({
            "op": pos,
            "name": names[ops["name"].to_numpy()[pos]],
            "start": o_start,
            "duration": ops["end"].to_numpy()[pos] - o_start,
            "device": ops["device"].to_numpy()[pos],
            "stream": ops["stream"].to_numpy()[pos],
            "corr": ops["corr"].to_numpy()[pos],
            "api_name": api_names[a_name],
            "api_start": a_start,
            "tid": np.where(a_gtid >= 0, tid_of(a_gtid), -1),
            "thread": thread_text[thread_idx.reshape(-1)] if len(pos) else np.array([], dtype=object),
            "latency": np.where(has, o_start - a_start, 0),
        })
        return df.sort_values(["start", "device", "stream", "corr"], kind="stable").reset_index(drop=True)

    def stack_at(self, gtid: int, t_start: int, t_end: int | None = None) -> list[int]:
        """Range positions on thread `gtid` open over [t_start, t_end], outermost first."""
        if self.n == 0:
            return []
        t_end = t_start if t_end is None else t_end
        sel = np.flatnonzero((self.r_gtid == gtid) & (self.r_start <= t_start) & (self.r_end >= t_end))
        return sel[np.argsort(self.depth[sel], kind="stable")].tolist()

    def correlation(self, corr: int, gpid: int | None = None) -> "Correlation | None":
        """The API call with this correlation ID (in process `gpid`, or the first process
        that has it), the GPU ops it launched, and the NVTX ranges open around it."""
        t = self.trace
        api = t.api
        sel = np.flatnonzero(api["corr"].to_numpy() == corr)
        if gpid is not None:
            sel = sel[(api["gtid"].to_numpy()[sel] & PID_MASK) == gpid]
        if len(sel) == 0:
            return None
        a = int(sel[0])
        row = api.iloc[a]
        gtid = int(row["gtid"])
        op_pos = np.flatnonzero(t.ops["api"].to_numpy() == a)
        op_pos = op_pos[np.lexsort((t.ops["corr"].to_numpy()[op_pos], t.ops["start"].to_numpy()[op_pos]))]
        own = self.stack_at(gtid, int(row["start"]), int(row["end"]))
        main = self.main_threads.get(gtid & PID_MASK)
        attributed = sorted(set(self.pair_range[np.isin(self.pair_op, op_pos)].tolist()),
                            key=lambda i: (self.depth[i], self.r_start[i]))
        return Correlation(
            corr=corr, api_pos=a, api_name=api_display_name(t.api_names[int(row["name"])]), api_start=int(row["start"]),
            api_end=int(row["end"]), gtid=gtid, pid=pid_of(gtid), tid=tid_of(gtid),
            thread=t.thread_label(gtid), process=t.process_label(gtid & PID_MASK), ops=self.op_table(op_pos),
            own_stack=[display_name(t.ranges["name"].iat[i]) for i in own],
            main_thread=t.thread_label(main) if main is not None else "",
            main_stack=[display_name(t.ranges["name"].iat[i]) for i in self.stack_at(main, int(row["start"]))]
            if main is not None and main != gtid else [],
            attributed=[display_name(t.ranges["name"].iat[i]) for i in attributed],
        )


def _copy_tree(node: RangeNode, parent: RangeNode) -> RangeNode:
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


def _gather_ops(level: list[RangeNode]) -> None:
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


@dataclass
class Correlation:
    corr: int
    api_pos: int
    api_name: str
    api_start: int
    api_end: int
    gtid: int
    pid: int
    tid: int
    thread: str
    process: str
    ops: pd.DataFrame
    own_stack: list[str]
    main_thread: str
    main_stack: list[str]
    attributed: list[str]


def _int_bincount(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact integer sums per group (np.bincount goes through float64)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, groups, values.astype(np.int64))
    return out


def _union_length(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray, n: int) -> np.ndarray:
    """Per group, the length of the union of [start, end) intervals (sorted by group, start)."""
    out = np.zeros(n, dtype=np.int64)
    if len(groups) == 0:
        return out
    order = np.lexsort((starts, groups))
    g, s, e = groups[order], starts[order], ends[order]
    # Running max of ends within each group, shifted by one: the frontier before each op.
    run = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(run)
    prev[1:] = run[:-1]
    new_group = np.ones(len(g), dtype=bool)
    new_group[1:] = g[1:] != g[:-1]
    prev[new_group] = np.iinfo(np.int64).min
    contrib = np.where(e > prev, e - np.maximum(s, prev), 0)
    np.add.at(out, g, contrib)
    return out


def range_model(trace: Trace, attribution: str = "process", main_thread: str | None = None) -> RangeModel:
    """The range tree of `trace` under one attribution mode and main-thread choice (`None`:
    chosen by parsers.main_thread; else a thread id or name), built once and kept with the trace."""
    if attribution not in ("process", "nsys"):
        raise ValueError(f"unknown attribution mode {attribution!r}")
    key = ("range_model", attribution, main_thread or None)
    if key not in trace.derived:
        trace.derived[key] = RangeModel(trace, attribution, main_thread or None)
    return trace.derived[key]
