"""What replaying a CUDA graph costs, read from the capture for the `graph` edit (replay.edits):
per graph launch traced node by node (`--cuda-graph-trace=node`: each node an op whose launch is
the cudaGraphLaunch), its first node's start after the call's start, the mean GPU gap between its
nodes, and the call's CPU time per node. Where the capture launches no graph, the figures of the
committed cuda-graph twin (GRAPH_TWIN_TIMING) and the sentence that says so.

Why the mean gap and not the median: a graphed step's GPU time is its nodes' time plus the sum of
the gaps between them, and a sum is the count times the mean; the median (96 ns on the twin) leaves
out the few long gaps (a memset node's set-up) that make the mean twice it (197 ns)."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.replay.graph import GRAPH_LAUNCHES

# the runtime's version tag, any length (cudaGraphLaunch_v10000): nsys's display names keep a long one
_VERSION = re.compile(r"_v\d+$")


@dataclass(frozen=True)
class GraphTiming:
    """Each figure as (low, central, high): the favourable end first (the smaller step). ns."""

    first_node_ns: tuple[int, int, int]  # first node's start - the launch call's start
    node_gap_ns: tuple[int, int, int]  # mean GPU gap between consecutive nodes of one launch
    cpu_per_node_ns: tuple[int, int, int]  # the launch call's CPU time / its nodes
    launches: int  # how many launches the figures are read from (0: the stated twin's)
    source: str  # where the figures come from, in words


# Measured on the committed twin sample_traces/findings/small_ctx128_b1_nosync_cuda-graph (H100,
# one 1,078-node graph on one stream, its four launches after the first; min, median, max):
# tests/core/test_replay_graph_timing.py recomputes them in SQL.
GRAPH_TWIN_TIMING = GraphTiming((37_050, 40_202, 44_608), (195, 197, 199), (845, 862, 924), 0,
                                "the committed cuda-graph twin's (H100, 4 launches of a 1,078-node graph)")


def _spread(values: list[float]) -> tuple[int, int, int]:
    v = np.asarray(values, float)
    return int(round(v.min())), int(round(float(np.median(v)))), int(round(v.max()))


def graph_timing(trace) -> GraphTiming:
    """The capture's own figures where it launches a graph traced node by node on one stream (each
    graph's first launch left out, a graph known by its node count and first node), else the
    committed twin's. Read once per trace (kept in `trace.derived`: the findings apply `graph` alone
    and with the other fixes)."""
    if "replay.graph_timing" not in trace.derived:
        trace.derived["replay.graph_timing"] = _read(trace)
    return trace.derived["replay.graph_timing"]


def _read(trace) -> GraphTiming:
    api, ops = trace.api, trace.ops
    if len(api) == 0 or len(ops) == 0:
        return GRAPH_TWIN_TIMING
    is_launch_name = np.array([_VERSION.sub("", n) in GRAPH_LAUNCHES for n in trace.api_names], bool)
    calls = np.flatnonzero(is_launch_name[api["name"].to_numpy(np.int64)])
    o_api = ops["api"].to_numpy(np.int64)
    if len(calls) == 0 or not np.isin(o_api, calls).any():
        return GRAPH_TWIN_TIMING
    a_start, a_end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    o_start, o_end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    o_stream, o_name = ops["stream"].to_numpy(np.int64), ops["name"].to_numpy(np.int64)
    order = np.argsort(o_api, kind="stable")
    keys = o_api[order]
    first, gap, per_node = [], [], []
    seen: set[tuple[int, int]] = set()
    for c in calls[np.argsort(a_start[calls], kind="stable")].tolist():
        lo, hi = np.searchsorted(keys, c), np.searchsorted(keys, c, side="right")
        nodes = order[lo:hi]
        if len(nodes) < 2 or len(np.unique(o_stream[nodes])) != 1:
            continue  # one node, or a graph over several streams: its gaps are not one chain's
        graph_key = (len(nodes), int(o_name[nodes[np.argmin(o_start[nodes])]]))
        if graph_key not in seen:
            seen.add(graph_key)  # a graph's first launch uploads it (cudaGraphUpload): not a step's
            continue
        span = int(o_end[nodes].max() - o_start[nodes].min())
        busy = int((o_end[nodes] - o_start[nodes]).sum())
        first.append(float(o_start[nodes].min() - a_start[c]))
        gap.append(max(0.0, (span - busy) / (len(nodes) - 1)))
        per_node.append((a_end[c] - a_start[c]) / len(nodes))
    if not first:
        return GRAPH_TWIN_TIMING
    return GraphTiming(_spread(first), _spread(gap), _spread(per_node), len(first),
                       f"this capture's ({len(first)} graph launches)")
