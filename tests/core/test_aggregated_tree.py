"""The aggregated range tree (instances merged by name path) is built over arrays, level by
level; it must be exactly the tree that merging the instance tree node by node gives (the
reference below: siblings' children, instance by instance, merged by path key in order of
first appearance), on every trace: same names, depths, instance ids in order, parents."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import SHARED, sample_traces
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import path_key, range_model
from nsight_tui.parsers.model.op_ranges import is_op_range


def _merged(nodes):
    """The reference: merge a list of instance nodes, recursively. The `ops` level merges with
    the `ops` levels of the other instances; PyTorch's op ranges show their folded name even
    once (parsers.op_ranges, the rule written again here from the ranges' text)."""
    by_key: dict = {}
    for node in nodes:
        by_key.setdefault((node.is_ops, "ops" if node.is_ops else path_key(node.name)), []).append(node)
    out = []
    for (is_ops, key), members in by_key.items():
        ids = np.concatenate([m.ids for m in members])
        text = members[0].model.trace.ranges["text"].iloc[int(members[0].ids[0])]
        op_range = not is_ops and is_op_range(text)
        name = key if len(members) > 1 or op_range else members[0].name
        kids = _merged([c for m in members for c in m.children])
        out.append((name, members[0].depth, tuple(ids.tolist()), kids))
    return out


def _shape(nodes):
    return [(n.name, n.depth, tuple(n.ids.tolist()), _shape(n.children)) for n in nodes]


def _traces():
    paths = sample_traces() + (sorted(SHARED.glob("*.sqlite")) if SHARED.is_dir() else [])
    return paths


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.stem)
def test_aggregated_tree_is_the_merged_instance_tree(path):
    try:
        trace = load_trace(path)
    except TraceError:
        pytest.skip("not loadable")
    model = range_model(trace, "process")
    agg, inst = model.aggregated_groups, model.thread_groups
    assert [(g.gtid, g.label, g.is_main) for g in agg] == [(g.gtid, g.label, g.is_main) for g in inst]
    for a, i in zip(agg, inst):
        assert _shape(a.roots) == _merged(i.roots)
        stack = list(a.roots)
        while stack:  # parents point to the merged node that holds them
            node = stack.pop()
            holder = node.parent if node.is_ops else node  # `ops` holds its children's ids
            for child in node.children:
                assert child.parent is node
                if child.is_ops:
                    continue
                parents = set(model.parent[child.ids].tolist())
                if holder is None or (child.foreign and not holder.foreign):  # top ranges (another thread's, copied)
                    assert parents == {-1}
                else:
                    assert parents <= set(holder.ids.tolist())
            stack.extend(node.children)
