"""What replaying a CUDA graph costs, read from the capture for the `graph` edit (replay.edits):
per graph launch traced node by node (`--cuda-graph-trace=node`: each node an op whose launch is
the cudaGraphLaunch), when its first node starts, the mean GPU gap between its nodes, and the
call's CPU time per node. Where the capture launches no graph, GRAPH_FALLBACK: the committed
cuda-graph twin's figures, and at the high end the committed decode graph's; the sentence says so.

When the first node starts: two ways, measured on every graph captured so far
(devruns/gpu_thirdparty_twins.sh, docs/whatif.md "Beyond GPT-2"). The training steps' graphs (GPT-2
on an H100 and an H200, timm's ViT) and the ViT's forward alone start 18-131 us after the launch call
starts, long before it returns; every graph of transformers' Llama decoding (by hand with 6 or 18
layers, bf16 or fp32, with or without cuDNN's attention, a memcpy, a memset or a multi-tensor kernel
first or last, an NVTX range inside the capture, and transformers' own compiled static-cache decode)
starts 1-6 us after the call returns, its nodes ~0.42 us apart against the others' ~0.1. Neither the
node count, nor training against inference, nor those kernels, nor the dtype, nor NVTX tells the two
apart, so a capture without graph launches cannot know which way its graph will go: the fallback's
range holds both, the central figure the twin's.
"""
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

    first_node_ns: tuple[int, int, int]  # first node's start - the launch call's start, or its end (below)
    node_gap_ns: tuple[int, int, int]  # mean GPU gap between consecutive nodes of one launch
    cpu_per_node_ns: tuple[int, int, int]  # the launch call's CPU time / its nodes
    launches: int  # how many launches the figures are read from (0: the stated captures')
    source: str  # where the figures come from, in words
    # per end: the first node counted from the call's return (the graph starts once the call has
    # submitted it all) rather than from its start
    after_call: tuple[bool, bool, bool] = (False, False, False)

    def first_node_offset_ns(self, end: int, nodes: int) -> int:
        """When a graph of `nodes` nodes starts after its launch call starts, at end 0, 1 or 2."""
        after = self.after_call[end]
        return self.first_node_ns[end] + (self.cpu_per_node_ns[end] * nodes if after else 0)

    def first_node_words(self) -> str:
        def one(end: int) -> str:
            return f"{self.first_node_ns[end] / 1e3:.1f} us after its launch call " + (
                "returns" if self.after_call[end] else "starts")
        if self.after_call[0] == self.after_call[2]:
            how = "returns" if self.after_call[0] else "starts"
            return (f"{self.first_node_ns[0] / 1e3:.1f}..{self.first_node_ns[2] / 1e3:.1f} us after its launch "
                    f"call {how}")
        return f"{one(0)} (central {self.first_node_ns[1] / 1e3:.1f}) to {one(2)}"


# Measured on the committed twin sample_traces/findings/small_ctx128_b1_nosync_cuda-graph (H200,
# one 1,078-node graph on one stream, its four launches after the first; min, median, max):
# tests/core/test_replay_graph_timing.py recomputes them in SQL.
GRAPH_TWIN_TIMING = GraphTiming((37_050, 40_202, 44_608), (195, 197, 199), (845, 862, 924), 0,
                                "the committed cuda-graph twin's (H200, 4 launches of a 1,078-node graph)")
# The committed decode graph, sample_traces/thirdparty/hf_generate_llama_static (H100, transformers'
# compiled static-cache decode: 122 launches of one 115-node graph after its first; medians): its
# first node 3.46 us after the call returns, nodes 466 ns apart, 2,151 ns of CPU per node (the test
# recomputes them in SQL).
DECODE_GRAPH_MEDIANS = (3_456, 466, 2_151)
# A capture that launches no graph: the twin's figures, with the decode graph's at the high end.
GRAPH_FALLBACK = GraphTiming(
    (GRAPH_TWIN_TIMING.first_node_ns[0], GRAPH_TWIN_TIMING.first_node_ns[1], DECODE_GRAPH_MEDIANS[0]),
    (GRAPH_TWIN_TIMING.node_gap_ns[0], GRAPH_TWIN_TIMING.node_gap_ns[1],
     max(GRAPH_TWIN_TIMING.node_gap_ns[2], DECODE_GRAPH_MEDIANS[1])),
    (GRAPH_TWIN_TIMING.cpu_per_node_ns[0], GRAPH_TWIN_TIMING.cpu_per_node_ns[1],
     max(GRAPH_TWIN_TIMING.cpu_per_node_ns[2], DECODE_GRAPH_MEDIANS[2])),
    0, "the committed cuda-graph twin's (H200, a 1,078-node training step), and at the high end the committed "
    "decode graph's (H100, a 115-node compiled decode, medians): a graph that starts only once its launch call "
    "returns, as transformers' Llama decoding graphs did (docs/whatif.md)", (False, False, True))


def _spread(values: list[float]) -> tuple[int, int, int]:
    v = np.asarray(values, float)
    return int(round(v.min())), int(round(float(np.median(v)))), int(round(v.max()))


def graph_timing(trace) -> GraphTiming:
    """The capture's own figures where it launches a graph traced node by node on one stream (each
    graph's first launch left out, a graph known by its node count and first node), else
    GRAPH_FALLBACK. Read once per trace (kept in `trace.derived`: the findings apply `graph` alone
    and with the other fixes)."""
    if "replay.graph_timing" not in trace.derived:
        trace.derived["replay.graph_timing"] = _read(trace)
    return trace.derived["replay.graph_timing"]


def graph_launch_calls(trace) -> np.ndarray:
    """Per trace.api row: whether the call launches a CUDA graph."""
    if len(trace.api) == 0:
        return np.zeros(0, bool)
    is_launch_name = np.array([_VERSION.sub("", n) in GRAPH_LAUNCHES for n in trace.api_names], bool)
    return is_launch_name[trace.api["name"].to_numpy(np.int64)]


def graph_launch_ops(trace) -> list[np.ndarray]:
    """Each graph launch's nodes traced one by one (op positions in trace.ops, in start order), in
    the order of the launch calls; [] where the capture launches no graph."""
    api, ops = trace.api, trace.ops
    if len(api) == 0 or len(ops) == 0:
        return []
    calls = np.flatnonzero(graph_launch_calls(trace))
    o_api = ops["api"].to_numpy(np.int64)
    if len(calls) == 0 or not np.isin(o_api, calls).any():
        return []
    a_start, o_start = api["start"].to_numpy(np.int64), ops["start"].to_numpy(np.int64)
    order = np.argsort(o_api, kind="stable")
    keys = o_api[order]
    out = []
    for c in calls[np.argsort(a_start[calls], kind="stable")].tolist():
        nodes = order[np.searchsorted(keys, c):np.searchsorted(keys, c, side="right")]
        if len(nodes):
            out.append(nodes[np.argsort(o_start[nodes], kind="stable")])
    return out


def _read(trace) -> GraphTiming:
    launches = graph_launch_ops(trace)
    if not launches:
        return GRAPH_FALLBACK
    api, ops = trace.api, trace.ops
    o_api = ops["api"].to_numpy(np.int64)
    a_start, a_end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    o_start, o_end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    o_stream, o_name = ops["stream"].to_numpy(np.int64), ops["name"].to_numpy(np.int64)
    first, after, gap, per_node = [], [], [], []
    seen: set[tuple[int, int]] = set()
    for nodes in launches:
        c = int(o_api[nodes[0]])
        if len(nodes) < 2 or len(np.unique(o_stream[nodes])) != 1:
            continue  # one node, or a graph over several streams: its gaps are not one chain's
        graph_key = (len(nodes), int(o_name[nodes[0]]))
        if graph_key not in seen:
            seen.add(graph_key)  # a graph's first launch uploads it (cudaGraphUpload): not a step's
            continue
        span = int(o_end[nodes].max() - o_start[nodes].min())
        busy = int((o_end[nodes] - o_start[nodes]).sum())
        first.append(float(o_start[nodes].min() - a_start[c]))
        after.append(float(o_start[nodes].min() - a_end[c]))
        gap.append(max(0.0, (span - busy) / (len(nodes) - 1)))
        per_node.append((a_end[c] - a_start[c]) / len(nodes))
    if not first:
        return GRAPH_FALLBACK
    # most launches start their first node only after the call returns: count from there
    after_call = float(np.median(after)) >= 0
    return GraphTiming(_spread(after if after_call else first), _spread(gap), _spread(per_node), len(first),
                       f"this capture's ({len(first)} graph launches)", (after_call,) * 3)
