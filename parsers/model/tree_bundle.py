"""The aggregated range tree as arrays for the per-user cache (read.cache's bundles), and back."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nsight_tui.parsers.model.range_node import RangeNode, ThreadGroup
from nsight_tui.parsers.read.cache import Bundle

if TYPE_CHECKING:
    from nsight_tui.parsers.model.ranges import RangeModel


def tree_bundle(groups: list[ThreadGroup], n: int) -> Bundle:
    """The aggregated tree as arrays, its nodes in depth-first order (a parent before its
    children, children in order): each node's parent, depth, flags, name (a code into the
    distinct names) and instances (a slice of one array); the roots' threads."""
    nodes: list[RangeNode] = []
    parent: list[int] = []
    root_gtids: list[int] = []
    for g in groups:
        for root in g.roots:
            root_gtids.append(g.gtid)
            stack: list[tuple[RangeNode, int]] = [(root, -1)]
            while stack:
                node, above = stack.pop()
                at = len(nodes)
                nodes.append(node)
                parent.append(above)
                stack.extend((child, at) for child in reversed(node.children))
    counts = np.array([len(node.ids) for node in nodes], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    ids = np.concatenate([np.asarray(node.ids, dtype=np.int64) for node in nodes]) if nodes else np.zeros(0, np.int64)
    name_code, names = pd.factorize(pd.Series([node.name for node in nodes], dtype=object))
    arrays = {
        "parent": np.array(parent, dtype=np.int64),
        "depth": np.array([node.depth for node in nodes], dtype=np.int64),
        "flags": np.array([node.is_ops | node.foreign << 1 for node in nodes], dtype=np.int8),
        "name": name_code.astype(np.int32),
        "offsets": offsets,
        "ids": ids,
        "root_gtid": np.array(root_gtids, dtype=np.int64),
    }
    return Bundle(values={"n": n, "nodes": len(nodes), "names": [str(x) for x in names]}, arrays=arrays)


def tree_from_bundle(saved: Bundle, model: "RangeModel") -> dict[int, list[RangeNode]] | None:
    """The roots per thread `tree_bundle` stored, as nodes of `model`; None where the bundle
    does not fit the model (then the tree is built again)."""
    try:
        a, names = saved.arrays, saved.values["names"]
        k = int(saved.values["nodes"])
        parent, depth, flags, name, offsets, ids, root_gtid = (
            a[key] for key in ("parent", "depth", "flags", "name", "offsets", "ids", "root_gtid"))
        if saved.values["n"] != model.n or len(parent) != k or len(offsets) != k + 1:
            return None
        if k and (offsets[0] != 0 or offsets[-1] != len(ids) or (np.diff(offsets) < 0).any()
                  or (parent >= np.arange(k)).any() or name.min() < 0 or name.max() >= len(names)):
            return None
        if len(ids) and (ids.min() < 0 or ids.max() >= model.n):
            return None
        if int((parent < 0).sum()) != len(root_gtid):
            return None
    except (KeyError, TypeError, ValueError):
        return None
    nodes: list[RangeNode] = []
    roots: dict[int, list[RangeNode]] = {}
    gtids = iter(root_gtid.tolist())
    bounds, codes = offsets.tolist(), name.tolist()
    for i, (p, d, f) in enumerate(zip(parent.tolist(), depth.tolist(), flags.tolist())):
        above = nodes[p] if p >= 0 else None
        node = RangeNode(model, names[codes[i]], ids[bounds[i]:bounds[i + 1]], d, above,
                         is_ops=bool(f & 1), foreign=bool(f & 2))
        nodes.append(node)
        if above is None:
            roots.setdefault(next(gtids), []).append(node)
        else:
            above.children.append(node)
    return roots
