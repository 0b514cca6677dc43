"""NVTX range trees with the GPU work each range launched: the one model under the TUI,
the CLI and the tests (it never imports Textual).

`RangeModel(trace, mode)` holds, per NVTX range: its parent (the tightest enclosing range
on the same thread, as nsys defines it), depth, CPU time, and over the GPU ops attributed
to it: op/kernel counts, summed kernel time, GPU projection (first op start to last op
end) and GPU busy time (union of op intervals). `RangeNode` objects wrap rows for the UI
(model.range_node); launches and correlations are model.launches, the cached tree model.tree_bundle.

Over ~600 lines on purpose: RangeModel's arrays (attribution pairs, per-range metrics, nesting)
are built, restored from the cache and restricted to one rank together, as one bundle; the
aggregated tree it builds from them stays beside them.
"""
from __future__ import annotations

from copy import copy as shallow_copy
from functools import cached_property

import numpy as np
import pandas as pd
from nsight_tui.parsers.model.attribution import (
    MODE_HELP,
    attribute,
    enclosing_pairs,
    slices_to_pairs,
)
from nsight_tui.parsers.read.groupstats import group_ids, group_stats
from nsight_tui.parsers.read.ids import KERNEL, OP_KINDS, PID_MASK, index_dtype
from nsight_tui.parsers.read.cache import Bundle
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.inferred import with_inferred_ranges
from nsight_tui.parsers.model.main_thread import MainThread
from nsight_tui.parsers.model.op_ranges import fold_trailing_number, is_op_range, op_key
from nsight_tui.parsers.model.launches import Correlation, LaunchRows, correlation, launch_rows
from nsight_tui.parsers.model.range_nesting import tightest_enclosing
from nsight_tui.parsers.model.range_node import RangeNode, ThreadGroup, copy_tree, gather_ops, display_name, path_key
from nsight_tui.parsers.model.tree_bundle import tree_bundle, tree_from_bundle
from nsight_tui.parsers.read.threads import in_parallel

# The model's front door: the tree's nodes and names live in range_node, launches in launches.
__all__ = ["Correlation", "LaunchRows", "RangeModel", "RangeNode", "ThreadGroup", "display_name", "path_key",
           "range_model"]


class RangeModel:
    def __init__(self, trace: Trace, mode: str = "process", main_thread: str | None = None,
                 tree_from: "RangeModel | None" = None):
        """`main_thread`: None (chosen by parsers.main_thread), or a thread id or name.
        `tree_from`: a model of the same ranges frame (the loader's early, GPU-less stage):
        its nesting and tree nodes are taken over instead of being built again."""
        self.trace = trace
        self.mode = mode
        self.mode_help = MODE_HELP[mode]
        self.main_thread_spec = main_thread
        # The loader's first stage has ranges but no GPU work yet: GPU figures are unknown,
        # not zero (screens show them blank until the full model replaces this one).
        self.gpu_pending = bool(trace.info.gpu_pending)
        r = trace.ranges
        self.n = len(r)
        self.r_start = r["start"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.r_end = r["end"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.r_gtid = r["gtid"].to_numpy(dtype=np.int64) if self.n else np.zeros(0, np.int64)
        self.cpu_ns = self.r_end - self.r_start
        # The scope: every process and GPU (None), or part of them (`restricted`: one rank's)
        self.scope_gpids: frozenset[int] | None = None
        self.scope_ops: np.ndarray | None = None
        self.scope_label = ""
        self.tree_from_cache = False  # the aggregated tree was read from the cache (tests ask)
        self._tree_written = False  # its cache bundle is being written (with the model's)
        # A second open of the same file: the attribution, metrics and nesting from the cache
        bundle_name = f"range_model-{mode}-{main_thread or 'auto'}"
        saved = trace.stash.read(bundle_name) if trace.stash is not None else None
        if saved is not None and self._restore(saved):
            if tree_from is not None and tree_from.trace.ranges is r:
                self._adopt_tree(tree_from)
            return
        self._attribute(trace, mode, main_thread, tree_from)
        if trace.stash is not None:
            # the model's bundle and then the aggregated tree, both made in the writer's thread: the
            # tree's keys the bundle keeps (seconds at 3M ranges) are not the caller's to wait for, and
            # whichever command opens the file first (`stats` never draws the tree) leaves the tree for
            # the TUI's next open; the tree the load's first stage built (taken over) is the one kept
            tree = self._tree_bundle_name()
            adopted = self.__dict__.get("aggregated_groups")
            groups = (lambda: adopted) if adopted is not None else self._merged_groups
            self._tree_written = tree is not None
            trace.stash.write(bundle_name, self._bundle,
                              then=(tree, lambda: tree_bundle(groups(), self.n)) if tree is not None else None)

    SAVED = ("pair_range", "pair_op", "pair_offsets", "op_count", "kernel_count", "kernel_ns", "op_ns", "proj_ns",
             "gpu_end", "busy_ns", "parent", "depth")

    def _bundle(self) -> Bundle:
        main = [[int(g), vars(m)] for g, m in self.main_info.items()]
        arrays = {name: getattr(self, name) for name in self.SAVED}
        # What the tree on screen needs next, linear in the ranges (seconds at 3M ranges):
        # computed now, once, and kept with the rest.
        is_op = self.range_is_op
        key_code, key_text = self.range_key_codes
        tops, hosts = self._foreign_tops()
        arrays.update(range_is_op=is_op, range_key_code=key_code.astype(np.int32), foreign_tops=tops,
                      foreign_hosts=hosts)
        return Bundle(values={"main_info": main, "n": self.n, "ops": len(self.trace.ops),
                              "range_keys": [str(k) for k in key_text]}, arrays=arrays)

    def _restore(self, saved: Bundle) -> bool:
        """Take what `_bundle` stored; False (nothing taken) if it does not fit this trace."""
        try:
            if saved.values["n"] != self.n or saved.values["ops"] != len(self.trace.ops):
                return False
            main_info = {int(g): MainThread(**fields) for g, fields in saved.values["main_info"]}
            arrays = {name: saved.arrays[name] for name in self.SAVED}
            if not all(k in saved.arrays for k in ("range_is_op", "range_key_code", "foreign_tops", "foreign_hosts")):
                return False
        except (KeyError, TypeError, ValueError):
            return False
        self.main_info = main_info
        self.main_threads = {gpid: m.gtid for gpid, m in self.main_info.items()}
        for name, values in arrays.items():
            setattr(self, name, values)
        keys = np.array(saved.values["range_keys"] + [""], dtype=object)
        self.__dict__["_names_folded"] = (saved.arrays["range_is_op"], keys[saved.arrays["range_key_code"]])
        self.__dict__["range_key_codes"] = (np.asarray(saved.arrays["range_key_code"], dtype=np.int64), keys[:-1])
        self._foreign = (saved.arrays["foreign_tops"], saved.arrays["foreign_hosts"])
        return True

    def _attribute(self, trace: Trace, mode: str, main_thread: str | None, tree_from: "RangeModel | None") -> None:
        r = trace.ranges
        op_pos, range_pos, self.main_info = attribute(r, trace.api, trace.ops, mode, trace.threads, main_thread)
        self.main_threads = {gpid: m.gtid for gpid, m in self.main_info.items()}
        # Pairs sorted by range, then op start (ties: op position): per-range slices are
        # contiguous and in time order. One sort of one int64 key, (range << 32) | the op's
        # rank by start, instead of a two-key lexsort of 10^6 pairs.
        ops = trace.ops
        # int32 halves the largest arrays the model holds (pairs ~ kernels x nesting depth).
        index_type = index_dtype(len(ops), self.n + 1)
        by_start = _ops_by_start(trace).astype(index_type)
        start_rank = np.empty(len(ops), dtype=index_type)
        start_rank[by_start] = np.arange(len(ops), dtype=index_type)
        # built in place: the pairs' int64 key is the one array of its size at any time
        key = range_pos.astype(np.int64)
        del range_pos
        key <<= 32
        key |= start_rank[op_pos]
        del op_pos, start_rank
        # The pairs arrive range by range (then calls in start order): a few long ascending runs,
        # which the stable sort (a merging sort) takes whole: ~30x faster than quicksort here.
        key.sort(kind="stable")
        self.pair_range = np.empty(len(key), dtype=index_type)
        np.right_shift(key, 32, out=self.pair_range, casting="unsafe")
        key &= 0xFFFFFFFF
        self.pair_op = by_start[key]
        del key, by_start
        self.pair_offsets = _offsets(self.pair_range, self.n)
        self._metrics()
        if tree_from is not None and tree_from.trace.ranges is r:
            self._adopt_tree(tree_from)
        else:
            self.parent, self.depth = self._nesting()

    def _adopt_tree(self, other: "RangeModel") -> None:
        """Take over `other`'s nesting and tree nodes (built from the same ranges): the nodes
        now read this model's figures. Thread groups are rebuilt: which thread is the main
        one depends on the GPU work. Not the nodes when this model copies another thread's
        ranges under the main thread's (`_embed_foreign` needs the GPU work to know which)."""
        self.parent, self.depth = other.parent, other.depth
        if len(self._foreign_tops()[0]) or len(other._foreign_tops()[0]):
            return
        for name in ("thread_groups", "aggregated_groups"):
            groups = other.__dict__.get(name)
            if groups is None:
                continue
            stack = [root for g in groups for root in g.roots]
            while stack:
                node = stack.pop()
                node.model = self
                stack.extend(node.children)
            self.__dict__[name] = self._groups({g.gtid: g.roots for g in groups})

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
        sub.pair_offsets = _offsets(sub.pair_range, self.n)
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
        n = self.n
        self.op_count = np.diff(self.pair_offsets).astype(np.int64)
        self.kernel_count = np.zeros(n, dtype=np.int64)
        self.kernel_ns = np.zeros(n, dtype=np.int64)
        self.op_ns = np.zeros(n, dtype=np.int64)
        self.proj_ns = np.zeros(n, dtype=np.int64)
        self.gpu_end = np.zeros(n, dtype=np.int64)  # the last op's end (0: no op); gpu_end - proj_ns: the first's start
        self.busy_ns = np.zeros(n, dtype=np.int64)
        # Block by block of whole ranges, ~10^6 pairs each: every figure is per range, and
        # the pairs' start/end/duration arrays then never exist for all pairs at once.
        blocks = _range_blocks(self.pair_offsets, METRIC_BLOCK_PAIRS)
        # two halves of the blocks on two cores: each block writes its own ranges' figures
        half = len(blocks) // 2

        def run(part: list[tuple[int, int]]) -> None:
            for lo, hi in part:
                self._block_metrics(lo, hi)

        in_parallel(lambda: run(blocks[:half]), lambda: run(blocks[half:]))

    def _block_metrics(self, lo: int, hi: int) -> None:
        """The GPU figures of ranges lo..hi-1 (their pairs are one contiguous slice)."""
        ops = self.trace.ops
        a, b = int(self.pair_offsets[lo]), int(self.pair_offsets[hi])
        pair_op = self.pair_op[a:b]
        o_start = ops["start"].to_numpy()[pair_op]
        o_end = ops["end"].to_numpy()[pair_op]
        dur = o_end - o_start
        is_k = ops["kind"].to_numpy()[pair_op] == KERNEL
        # Pairs are sorted by (range, op start): per-range sums are reductions over slices.
        count = self.op_count[lo:hi]
        has = count > 0
        at = self.pair_offsets[lo:hi][has] - a

        def per_range(values, reduce=np.add, dtype=None):
            out = np.zeros(hi - lo, dtype=np.int64)
            if len(at):
                out[has] = reduce.reduceat(values, at, dtype=dtype)
            return out

        self.kernel_count[lo:hi] = per_range(is_k, dtype=np.int64)
        self.op_ns[lo:hi] = per_range(dur)
        dur[~is_k] = 0
        self.kernel_ns[lo:hi] = per_range(dur)
        del dur, is_k
        proj_start = np.zeros(hi - lo, dtype=np.int64)
        proj_start[has] = o_start[at]  # the first op of each range starts first
        last_end = per_range(o_end, np.maximum)
        self.gpu_end[lo:hi] = np.where(has, last_end, 0)
        self.proj_ns[lo:hi] = np.where(has, last_end - proj_start, 0)
        self.busy_ns[lo:hi] = _union_length(self.pair_range[a:b] - lo, o_start, o_end, hi - lo, presorted=True)

    def _nesting(self) -> tuple[np.ndarray, np.ndarray]:
        """Parent = tightest enclosing range on the same thread (a stack sweep per thread)."""
        return tightest_enclosing(self.r_gtid, self.r_start, self.r_end)

    # -- queries --------------------------------------------------------------------------
    def ops_of(self, range_ids) -> np.ndarray:
        """Positions of the GPU ops attributed to any of the ranges (each op once)."""
        ids = np.atleast_1d(np.asarray(range_ids, dtype=np.int64))
        if len(ids) == 1:
            i = ids[0]
            return self.pair_op[self.pair_offsets[i]: self.pair_offsets[i + 1]]
        lo, hi = self.pair_offsets[ids], self.pair_offsets[ids + 1]
        _, pos = slices_to_pairs(lo, hi)
        found = self.pair_op[pos]
        n_ops = len(self.trace.ops)
        if len(found) * 16 >= n_ops:
            # Many ops (step_N over every step): mark them; one pass, no sort of 10^6 values.
            mark = np.zeros(n_ops, dtype=bool)
            mark[found] = True
            return np.flatnonzero(mark)
        ops = np.sort(found)  # a plain sort: np.unique hashes, 5x slower here
        return ops[np.concatenate(([True], ops[1:] != ops[:-1]))] if len(ops) else ops

    @cached_property
    def thread_groups(self) -> list[ThreadGroup]:
        """Per process and thread, the root ranges with their subtrees (instances)."""
        nodes: list[RangeNode | None] = [None] * self.n
        names = self.trace.range_names.objects.tolist() if self.n else []
        # children in time order (ties: the longer first, then by thread), whatever the rows' order
        order = np.lexsort((self.r_gtid, -self.r_end, self.r_start, self.depth))
        roots: dict[int, list[RangeNode]] = {}
        one = np.arange(self.n, dtype=np.int64)  # node i's ids: a view one[i:i+1], not a new array
        parents, depths = self.parent.tolist(), self.depth.tolist()
        for i in order.tolist():
            p = parents[i]
            node = RangeNode(self, names[i], one[i:i + 1], depths[i], nodes[p] if p >= 0 else None)
            nodes[i] = node
            if p >= 0:
                nodes[p].children.append(node)
            else:
                roots.setdefault(int(self.r_gtid[i]), []).append(node)
        if self.mode == "process":
            self._embed_foreign(nodes, roots)
        stack = list(roots.values()) if self.range_is_op.any() else []
        while stack:  # every level, the copies' too
            level = stack.pop()
            gather_ops(level)
            stack.extend(n.children for n in level if n.children)
        return self._groups(roots)

    def _embed_foreign(self, nodes: list, roots: dict[int, list[RangeNode]]) -> None:
        """The process view: each top range of a thread whose GPU work the main thread's
        ranges hold (PyTorch's autograd thread) is also shown under the innermost main range
        open when it began (`backward` -> AddmmBackward0 ...), as a copy of its subtree."""
        tops, hosts = self._foreign_tops()
        for top, host in zip(tops.tolist(), hosts.tolist()):
            parent = nodes[host]
            parent.children.append(copy_tree(nodes[top], parent))
        for n in {id(nodes[h]): nodes[h] for h in hosts.tolist()}.values():
            n.children.sort(key=lambda c: c.start)

    def _foreign_tops(self) -> tuple[np.ndarray, np.ndarray]:
        """(top range, host range) pairs `_embed_foreign` copies, in the order it copies them:
        tops per thread in the instance tree's order (threads by first top in time order)."""
        cached = self.__dict__.get("_foreign")
        if cached is None:
            # set once, whole: the cache writer's thread may ask too (`_bundle`), and either
            # thread then finds nothing or the answer, never a placeholder
            cached = self._foreign = self._find_foreign_tops()
        return cached

    def _find_foreign_tops(self) -> tuple[np.ndarray, np.ndarray]:
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        mains = set(self.main_threads.values())
        api = self.trace.api
        if self.mode != "process" or not self.n or not mains or not len(api):
            return none
        launched = self.trace.ops["api"].to_numpy()
        launchers = np.unique(pd.unique(api["gtid"].to_numpy()[launched[launched >= 0]]))  # hashed, then the few sorted
        order = np.lexsort((self.r_gtid, -self.r_end, self.r_start, self.depth))
        tops = order[self.parent[order] < 0]
        # the instance tree's roots dict: threads in order of their first top
        _, first, thread_of = np.unique(self.r_gtid[tops], return_index=True, return_inverse=True)
        tops = tops[np.lexsort((np.arange(len(tops)), first[thread_of.reshape(-1)]))]
        g = self.r_gtid[tops]
        f_ids = tops[np.isin(g, launchers) & ~np.isin(g, list(mains))]
        if not len(f_ids):
            return none
        m_ids = np.flatnonzero(np.isin(self.r_gtid, list(mains)))
        hi, fj = enclosing_pairs(self.r_gtid[m_ids] & PID_MASK, self.r_start[m_ids], self.r_end[m_ids],
                                 self.r_gtid[f_ids] & PID_MASK, self.r_start[f_ids], None)
        if len(fj) == 0:
            return none
        host_pos = m_ids[hi]
        order = np.lexsort((self.depth[host_pos], fj))  # per foreign range, deepest host last
        fj, host_pos = fj[order], host_pos[order]
        last = np.ones(len(fj), dtype=bool)
        last[:-1] = fj[1:] != fj[:-1]
        return f_ids[fj[last]], host_pos[last]

    @cached_property
    def aggregated_groups(self) -> list[ThreadGroup]:
        """The same trees with instances merged by name path (`step_N/forward` x N): among
        the children of one merged node (its instances' children, instance by instance, each
        in time order) the ones with the same key (`range_key`; the `ops` level by itself)
        merge, in order of first appearance. Kept in the cache with the model (a second open
        reads it: 0.5 s of building at 3M ranges)."""
        kept = self._kept_tree()
        if kept is not None:
            return kept
        groups = self._merged_groups()
        if not self._tree_written:  # (a model attributed now has its tree written with it)
            self._keep_tree(groups)
        return groups

    def _tree_bundle_name(self) -> str | None:
        """The cache bundle of this model's aggregated tree; None where it is not cached: a
        rank's scope (rebuilt from the whole model's), the load's first stage (no GPU work:
        which thread's ranges are copied under the main thread's is not known yet)."""
        if self.trace.stash is None or self.scope_gpids is not None or self.gpu_pending:
            return None
        # (the number of ranges too: a model with ranges inferred from the kernel sequence and
        # one without, of the same file, keep one tree each)
        return f"aggregated_tree-{self.mode}-{self.main_thread_spec or 'auto'}-{self.n}"

    def _keep_tree(self, groups: list[ThreadGroup]) -> None:
        name = self._tree_bundle_name()
        if name is not None and self.trace.stash is not None:
            self.trace.stash.write(name, tree_bundle(groups, self.n))

    def _kept_tree(self) -> list[ThreadGroup] | None:
        name, stash = self._tree_bundle_name(), self.trace.stash
        saved = stash.read(name) if name is not None and stash is not None else None
        if saved is None or name is None or stash is None:
            return None
        roots = tree_from_bundle(saved, self)
        if roots is None:  # whole but not this model's tree: removed, so the tree built now is kept
            stash.discard(name)
            return None
        self.tree_from_cache = True
        return self._groups(roots)

    def _merged_groups(self) -> list[ThreadGroup]:
        if self.n and not self.range_is_op.any() and not len(self._foreign_tops()[0]):
            return self._aggregated_from_arrays()
        # PyTorch's op ranges gathered under `ops`, or another thread's ranges copied under
        # the main thread's: merge the instance tree, which holds both.
        groups = []
        for g in self.thread_groups:
            merged: list[RangeNode] = []
            self._merge_into(g.roots, merged, None)
            groups.append(ThreadGroup(g.gpid, g.gtid, g.label, merged, g.is_main))
        return groups

    def _aggregated_from_arrays(self) -> list[ThreadGroup]:
        """`aggregated_groups` for a tree without `ops` levels or copied ranges, built level
        by level over arrays, without the instance tree: the instance tree's order (time,
        ties: the longer first, then position) and `_merge_into`'s merging (tests/core/
        test_aggregated_tree.py checks they agree). Only merged nodes become objects: a few
        hundred, not one per range."""
        n = self.n
        names = self.trace.range_names.objects  # one shared string per distinct name
        key, key_text = self.range_key_codes
        n_keys = max(len(key_text), 1)
        agg = np.full(n, -1, dtype=np.int64)  # merged node of each range
        rank = np.zeros(n, dtype=np.int64)  # its place among that node's instances
        nodes: list[RangeNode] = []
        roots: dict[int, list[RangeNode]] = {}
        _, gtid_code = np.unique(self.r_gtid, return_inverse=True)
        neg_end = -self.r_end
        for d in range(int(self.depth.max()) + 1):
            rows = np.flatnonzero(self.depth == d)
            if d == 0:  # per thread, in time order (ties: the longer first, then position)
                outer = gtid_code.reshape(-1)[rows].astype(np.int64)
                order = np.lexsort((rows, neg_end[rows], self.r_start[rows], outer))
            else:  # per merged parent, instance by instance, each one's children in time order
                par = self.parent[rows]
                outer = agg[par]
                order = np.lexsort((rows, neg_end[rows], self.r_start[rows], rank[par], outer))
            rows, outer = rows[order], outer[order]
            group_of, _ = pd.factorize(outer * n_keys + key[rows])  # codes in first-appearance order
            by_group = np.argsort(group_of, kind="stable")
            members = rows[by_group]
            counts = np.bincount(group_of)
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            base = len(nodes)
            agg[members] = base + np.repeat(np.arange(len(counts)), counts)
            rank[members] = np.arange(len(members)) - np.repeat(starts, counts)
            firsts = members[starts]
            once = names[firsts[counts == 1]].tolist()[::-1]
            for a, c in zip(starts.tolist(), counts.tolist()):
                ids = members[a:a + c]
                first = int(ids[0])
                label = key_text[key[first]] if c > 1 else once.pop()
                parent = nodes[int(agg[self.parent[first]])] if d else None
                node = RangeNode(self, label, ids, d, parent)
                nodes.append(node)
                if parent is None:
                    roots.setdefault(int(self.r_gtid[first]), []).append(node)
                else:
                    parent.children.append(node)
        return self._groups(roots)

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
    def range_key_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """`range_key` as `pd.factorize` gives it (int64 codes in first-appearance order, the
        distinct keys), worked out per distinct (name, text), not by hashing every range's key."""
        if "range_key_codes" not in self.__dict__:
            self._names_folded  # noqa: B018 -- works them out beside the keys
        return self.__dict__["range_key_codes"]

    @cached_property
    def _names_folded(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.n:
            self.__dict__["range_key_codes"] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
            return np.zeros(0, dtype=bool), np.zeros(0, dtype=object)
        # Once per distinct (name, text), not per range: steps repeat the same few hundred
        # names. 10^5 op ranges with unique op ids are 10^5 distinct names: plain str methods.
        name_code, names = self.trace.range_names.codes, self.trace.range_names.values
        text_code, texts = self.trace.range_texts.codes, self.trace.range_texts.values
        pair, first = np.unique(name_code.astype(np.int64) * max(len(texts), 1) + text_code, return_index=True)
        pair_of = np.searchsorted(pair, name_code.astype(np.int64) * max(len(texts), 1) + text_code)
        u_names, u_texts = names[name_code[first]], texts[text_code[first]]
        is_op = np.fromiter((is_op_range(t) for t in u_texts), dtype=bool, count=len(u_texts))
        # op keys from the text, behind the name's domain tag (`:` for the default domain)
        key = np.array([n[:len(n) - len(t)] + op_key(t) if op else fold_trailing_number(n)
                        for n, t, op in zip(u_names, u_texts, is_op.tolist())], dtype=object)
        # the keys' codes by range, numbered in order of first appearance (as pd.factorize)
        per_pair, distinct = pd.factorize(pd.Series(key, dtype=object))
        codes, order = pd.factorize(np.asarray(per_pair, dtype=np.int64)[pair_of])
        self.__dict__["range_key_codes"] = (np.asarray(codes, dtype=np.int64),
                                            np.asarray(distinct, dtype=object)[np.asarray(order, dtype=np.int64)])
        return is_op[pair_of], key[pair_of]

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
        return np.flatnonzero(self.trace.range_names.per_value(lambda n: display_name(n) == name))

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
        if len(pos) * 16 >= len(ops):
            # A big share of the trace: pick its ops out of the trace's ops sorted once by
            # (name, duration) instead of sorting them again (the kernel table of a range
            # holding every kernel opens in milliseconds, not a quarter of a second).
            order, codes_sorted, dur_sorted = _by_name_and_duration(self.trace)
            mark = np.zeros(len(ops), dtype=bool)
            mark[pos] = True
            keep = mark[order]
            codes, dur, rows = codes_sorted[keep], dur_sorted[keep], order[keep]
            new_group = np.concatenate(([True], codes[1:] != codes[:-1]))
            gid = np.cumsum(new_group) - 1
            st = group_stats(gid, int(gid[-1]) + 1, dur, presorted=True)
            first = rows[new_group]
        else:
            codes = ops["name"].to_numpy()[pos]
            dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos]
            groups = group_ids(codes)
            st = group_stats(groups.gid, groups.n, dur)
            first = pos[groups.first]
        names = self.trace.op_names
        first_codes = ops["name"].to_numpy()[first]
        # most time first, then fewer instances, then the name: one row per name, so the order is
        # total; sorted in numpy over the names' ranks (a pandas sort on the string column costs
        # more than the rest of the summary)
        order = np.lexsort((_name_ranks(self.trace)[first_codes], st.num, -np.asarray(st.total)))
        first_codes = first_codes[order]
        total = int(st.total.sum())
        res = pd.DataFrame({
            "name": [names[c] for c in first_codes],
            "short": [self.trace.op_short[c] for c in first_codes],
            "kind": [OP_KINDS[k] for k in ops["kind"].to_numpy()[first[order]]],
            "instances": st.num[order], "total_ns": st.total[order], "avg_ns": st.avg[order],
            "med_ns": st.med[order], "min_ns": st.min[order], "max_ns": st.max[order],
        })
        res["share"] = res["total_ns"] / total if total else 0.0
        return res

    def launches(self, op_positions: np.ndarray, name: str | None = None) -> pd.DataFrame:
        """Individual launches (optionally of one op name) with their launching API call:
        start, duration, device, stream, correlation ID, API name and thread, and launch
        latency = op start - API call start. Grid/block: `trace.op_details(df.op)` for the
        rows on screen (read from the file on demand)."""
        rows = self.launch_rows(op_positions, name)
        return pd.DataFrame({key: rows.text(key) if key in rows.texts else values for key, values in rows.columns.items()})

    def launch_rows(self, op_positions: np.ndarray, name: str | None = None) -> LaunchRows:
        """`launches` as arrays, in launch order (model.launches.launch_rows)."""
        return launch_rows(self, op_positions, name)

    def stack_at(self, gtid: int, t_start: int, t_end: int | None = None) -> list[int]:
        """Range positions on thread `gtid` open over [t_start, t_end], outermost first."""
        if self.n == 0:
            return []
        t_end = t_start if t_end is None else t_end
        sel = np.flatnonzero((self.r_gtid == gtid) & (self.r_start <= t_start) & (self.r_end >= t_end))
        return sel[np.argsort(self.depth[sel], kind="stable")].tolist()

    def correlation(self, corr: int, gpid: int | None = None) -> Correlation | None:
        """The API call with this correlation ID, its GPU ops and the ranges around it
        (model.launches.correlation)."""
        return correlation(self, corr, gpid)


METRIC_BLOCK_PAIRS = 1 << 20


def _offsets(pair_range: np.ndarray, n: int) -> np.ndarray:
    """Where each range's pairs begin (n + 1 values; pairs sorted by range)."""
    return np.searchsorted(pair_range, np.arange(n + 1, dtype=pair_range.dtype))


def _range_blocks(offsets: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Ranges 0..n-1 cut into consecutive blocks [lo, hi): a block starts at the range
    holding each multiple of `size`, so it has its first range's pairs and at most `size`
    more. `offsets`: n + 1 pair offsets."""
    n = len(offsets) - 1
    if n <= 0:
        return []
    total = int(offsets[-1])
    cuts = np.searchsorted(offsets, np.arange(size, total, size, dtype=np.int64), side="right") - 1
    bounds = np.unique(np.concatenate(([0], cuts, [n])))
    return [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _ops_by_start(trace: Trace) -> np.ndarray:
    """Op positions ordered by start time (ties: position); computed once per trace."""
    key = "ops_by_start"
    if key not in trace.derived:
        trace.derived[key] = np.argsort(trace.ops["start"].to_numpy(), kind="stable")
    return trace.derived[key]


def _name_ranks(trace: Trace) -> np.ndarray:
    """Per op name code: its place among the trace's op names in string order; computed once per trace."""
    key = "op_name_ranks"
    if key not in trace.derived:
        names = np.asarray(trace.op_names, dtype=object)
        ranks = np.empty(len(names), dtype=np.int64)
        ranks[np.argsort(names, kind="stable")] = np.arange(len(names))
        trace.derived[key] = ranks
    return trace.derived[key]


def _by_name_and_duration(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All ops ordered by (name code, duration, position), with those two keys in that order;
    computed once per trace."""
    key = "ops_by_name_and_duration"
    if key not in trace.derived:
        ops = trace.ops
        codes = ops["name"].to_numpy()
        dur = ops["end"].to_numpy() - ops["start"].to_numpy()
        order = np.lexsort((dur, codes))
        trace.derived[key] = (order, codes[order], dur[order])
    return trace.derived[key]


def _union_length(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray, n: int,
                  presorted: bool = False) -> np.ndarray:
    """Per group, the length of the union of [start, end) intervals (`presorted`: the rows
    are already ordered by group, then start)."""
    out = np.zeros(n, dtype=np.int64)
    if len(groups) == 0:
        return out
    if presorted:
        g, s, e = groups, starts, ends
    else:
        order = np.lexsort((starts, groups))
        g, s, e = groups[order], starts[order], ends[order]
    # Running max of ends within each group, shifted by one: the frontier before each op.
    new_group = np.ones(len(g), dtype=bool)
    new_group[1:] = g[1:] != g[:-1]
    prev = _group_cummax(g, e, new_group)
    prev[1:] = prev[:-1]  # the frontier before each op, over the running max (numpy copies overlaps as if apart)
    prev[new_group] = np.iinfo(np.int64).min
    contrib = np.maximum(s, prev)
    np.subtract(e, contrib, out=contrib)
    contrib[e <= prev] = 0
    firsts = np.flatnonzero(new_group)
    out[g[firsts]] = np.add.reduceat(contrib, firsts)
    return out


def _group_cummax(g: np.ndarray, e: np.ndarray, new_group: np.ndarray) -> np.ndarray:
    """Running maximum of `e` restarting at each group (rows sorted by group): one
    np.maximum.accumulate over values lifted by group number, so no group can carry into
    the next; pandas' groupby when the lift would overflow int64."""
    lo, span = int(e.min()), int(e.max()) - int(e.min()) + 1
    lift = np.cumsum(new_group, dtype=np.int64)
    lift -= 1  # the group's rank
    if span * (int(lift[-1]) + 1) >= 2**62:
        return pd.Series(e).groupby(g).cummax().to_numpy(copy=True)  # (written over by the caller)
    lift *= span
    # in place: two arrays of the rows' size (a block's pairs, ~10^6), not eight
    run = np.subtract(e, lo, dtype=np.int64)
    run += lift
    np.maximum.accumulate(run, out=run)
    run -= lift
    run += lo
    return run


def range_model(trace: Trace, attribution: str = "process", main_thread: str | None = None,
                tree_from: RangeModel | None = None, inferred: bool = True) -> RangeModel:
    """The range tree of `trace` under one attribution mode and main-thread choice (`None`:
    chosen by parsers.main_thread; else a thread id or name), built once and kept with the trace
    (`tree_from`: see RangeModel). `inferred=False`: the export's ranges only, never ranges
    inferred from the kernel sequence (NVIDIA's reports, parsers.nsys, have none)."""
    if attribution not in ("process", "nsys"):
        raise ValueError(f"unknown attribution mode {attribution!r}")
    key = ("range_model", attribution, main_thread or None, inferred)
    if key not in trace.derived:
        # A trace without iteration ranges gets those inferred from its kernel sequence:
        # the model is built over a copy of the trace whose ranges hold them too, so every view
        # shows them (tagged `inferred:`); `trace` itself keeps the export's ranges.
        # Where nothing is inferred, both kinds of model are one and the same: built once
        # (`stats` asks for both, 7 s at 4.8M kernels each).
        plain = ("range_model", attribution, main_thread or None, False)
        source = with_inferred_ranges(trace) if inferred else trace
        if source is trace and plain in trace.derived and key != plain and tree_from is None:
            trace.derived[key] = trace.derived[plain]
        elif not inferred and (same := trace.derived.get(key[:3] + (True,))) is not None and same.trace is trace:
            trace.derived[key] = same
        else:
            trace.derived[key] = RangeModel(source, attribution, main_thread or None, tree_from)
    return trace.derived[key]
