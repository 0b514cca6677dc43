"""The aggregated range tree (instances merged by name path) is built over arrays, level by
level; it must be exactly the tree that merging the instance tree node by node gives (the
reference below: siblings' children, instance by instance, merged by path key in order of
first appearance), on every trace: same names, depths, instance ids in order, parents."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import SHARED, sample_traces
from nsight_tui.parsers.errors import TraceError
from nsight_tui.parsers.load import load_trace
from nsight_tui.parsers.model import path_key, range_model


def _merged(nodes):
    """The reference: merge a list of instance nodes, recursively."""
    by_key: dict = {}
    for node in nodes:
        by_key.setdefault(path_key(node.name), []).append(node)
    out = []
    for key, members in by_key.items():
        ids = np.concatenate([m.ids for m in members])
        name = key if len(members) > 1 else members[0].name
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
            for child in node.children:
                assert child.parent is node
                assert set(model.parent[child.ids].tolist()) <= set(node.ids.tolist())
            stack.extend(node.children)
