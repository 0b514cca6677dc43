"""What replaying a CUDA graph costs, read from the capture for the `graph` edit (replay.edits):
per graph launch traced node by node (`--cuda-graph-trace=node`: each node an op whose launch is
the cudaGraphLaunch), when its nodes can start, the mean GPU gap between them, and the call's CPU
time per node. Where the capture launches no graph, GRAPH_FALLBACK: committed captures' figures,
named in the sentence.

When a graph's nodes can start (devruns/graph_start.py and gpu_graph_start.log, docs/whatif.md
"When a graph's GPU work starts"): the launch call hands the GPU its graph a *segment* at a time,
a segment being a run of consecutive kernel nodes and device-to-device copies on one stream, ended
by a memset node, another copy, or a fork onto another stream. The call first spends a share of its
time on the whole graph (about 2-3%), then walks the nodes at an even CPU cost each and submits a
segment once it has reached that segment's last node; the segment's first node starts a few
microseconds later (3-7 us on an H200 or H100). So a graph that is one segment (every transformers
decode graph measured: kernels only) starts only after its launch call returns, and one cut by
memsets (the training steps' graphs, the ViT's forward) starts while the call still runs: the two
ways seen on every graph captured so far, from one rule that an eager capture's own ops carry.

Every figure here is of graphs traced node by node, the only way a node can be placed: that tracing
puts 0.7-1.0 us a node of nsys's own work into each launch call (devruns/gpu_graph_trace_cost.log), so
a graphed step predicted here is the step a twin captured by `capture` runs, slower than the program's.
A graph traced whole (nsys's default, ids.GRAPH) is one op; it is never read for these figures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.kernels.families import device_work_ops
from nsight_tui.parsers.replay.graph import GRAPH_LAUNCHES

# the runtime's version tag, any length (cudaGraphLaunch_v10000): nsys's display names keep a long one
_VERSION = re.compile(r"_v\d+$")


@dataclass(frozen=True)
class GraphTiming:
    """Each figure as (low, central, high): the favourable end first (the smaller step)."""

    lead_ns: tuple[int, int, int]  # a segment's first node's start after the call has submitted it, ns
    upfront: tuple[float, float, float]  # the share of the call spent before it submits any segment
    node_gap_ns: tuple[int, int, int]  # mean GPU gap between consecutive nodes of one launch, ns
    cpu_per_node_ns: tuple[int, int, int]  # the launch call's CPU time / its nodes, ns
    launches: int  # how many launches the figures are read from (0: the stated captures')
    source: str  # where the figures come from, in words

    def node_offsets_ns(self, end: int, segment_end: np.ndarray) -> np.ndarray:
        """Per node of one launch (in chain order, `segment_end` from segment_ends), the earliest
        start after the launch call starts, at end 0, 1 or 2: the call's upfront share of its time,
        then its walk up to the node's segment's last node, then the lead. ns."""
        n, per, f = len(segment_end), self.cpu_per_node_ns[end], self.upfront[end]
        return np.round(self.lead_ns[end] + per * (f * n + (1 - f) * (segment_end + 1))).astype(np.int64)

    def words(self) -> str:
        return (f"a graph's nodes handed to the GPU a segment at a time (a run of kernels and device copies on "
                f"one stream, ended by a memset, another copy or another stream) once its launch call has spent "
                f"{100 * self.upfront[0]:.1f}..{100 * self.upfront[2]:.1f}% of its time and reached the segment's "
                f"last node, each segment's first node {self.lead_ns[0] / 1e3:.1f}..{self.lead_ns[2] / 1e3:.1f} us "
                "after that (figures of graphs traced node by node, as `capture` and the twins trace them: nsys's "
                "0.7-1.0 us a node is in each launch call, so the program alone gains more)")


def segment_ends(chainable: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Per node of one graph launch in chain order, the position of the last node of its segment:
    a run of consecutive `chainable` nodes (kernels, device-to-device copies) on one stream; any
    other node (a memset, another copy) is a segment of its own."""
    n = len(chainable)
    if n == 0:
        return np.zeros(0, np.int64)
    starts = np.ones(n, bool)
    starts[1:] = ~chainable[1:] | ~chainable[:-1] | (stream[1:] != stream[:-1])
    first = np.flatnonzero(starts)
    last = np.append(first[1:] - 1, n - 1)
    return last[np.cumsum(starts) - 1]


# The lead: the committed decode twin's graph (sample_traces/replay/graph_decode/decode_graph, H200:
# one 326-node segment, 24 launches after the first): first node - the call's return, min/median/max.
DECODE_TWIN_LEAD_NS = (3_638, 4_618, 6_011)
# The upfront share: the committed cuda-graph twin (sample_traces/findings/small_ctx128_b1_nosync_
# cuda-graph, H200: a 1,078-node graph whose first segment is 13 nodes, 4 launches after the first),
# with the lead's central; and its gap and CPU per node. tests/core/test_replay_graph_timing.py
# recomputes every one in SQL.
GRAPH_TWIN_TIMING = GraphTiming(DECODE_TWIN_LEAD_NS, (0.0238, 0.0266, 0.0284), (195, 197, 199), (845, 862, 924), 0,
                                "the committed cuda-graph twin's (H200, 4 launches of a 1,078-node graph)")
# The committed compiled decode, sample_traces/thirdparty/hf_generate_llama_static (H100, transformers'
# compiled static-cache decode: 122 launches of one 115-node graph after its first; medians): nodes
# 466 ns apart, 2,151 ns of CPU per node: the fallback's high end.
DECODE_GRAPH_MEDIANS = (466, 2_151)
# A capture that launches no graph: the twins' figures, with the compiled decode's at the high end.
GRAPH_FALLBACK = GraphTiming(
    GRAPH_TWIN_TIMING.lead_ns, GRAPH_TWIN_TIMING.upfront,
    (GRAPH_TWIN_TIMING.node_gap_ns[0], GRAPH_TWIN_TIMING.node_gap_ns[1],
     max(GRAPH_TWIN_TIMING.node_gap_ns[2], DECODE_GRAPH_MEDIANS[0])),
    (GRAPH_TWIN_TIMING.cpu_per_node_ns[0], GRAPH_TWIN_TIMING.cpu_per_node_ns[1],
     max(GRAPH_TWIN_TIMING.cpu_per_node_ns[2], DECODE_GRAPH_MEDIANS[1])),
    0, "the committed twins' (H200: the decode graph's lead, the 1,078-node training step's upfront share, "
    "gap and CPU per node), and at the high end the committed compiled decode's (H100, a 115-node graph, "
    "medians)")


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
    return read_timing(trace, GRAPH_FALLBACK) or GRAPH_FALLBACK


def read_timing(trace, known: GraphTiming) -> GraphTiming | None:
    """The figures of the capture's own graph launches traced node by node on one stream, each
    graph's first launch left out (it uploads the graph: not a step's); None where there are none.
    The lead is read off launches that are one segment (the first node after the call returns), the
    upfront share off the others (their first node after their first segment's walk, less the lead's
    central); a figure no launch shows is `known`'s, and the words say so."""
    launches = graph_launch_ops(trace)
    if not launches:
        return None
    api, ops = trace.api, trace.ops
    o_api = ops["api"].to_numpy(np.int64)
    a_start, a_end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    o_start, o_end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    o_stream, o_name = ops["stream"].to_numpy(np.int64), ops["name"].to_numpy(np.int64)
    # a segment chains kernels and device-to-device copies (transformers' decode graphs with a device
    # copy first start as late as without)
    chain = device_work_ops(trace)
    after_return, walked, gap, per_node = [], [], [], []
    seen: set[tuple[int, int]] = set()
    for nodes in launches:
        c = int(o_api[nodes[0]])
        if len(nodes) < 2 or len(np.unique(o_stream[nodes])) != 1:
            continue  # one node, or a graph over several streams: its gaps are not one chain's
        graph_key = (len(nodes), int(o_name[nodes[0]]))
        if graph_key not in seen:
            seen.add(graph_key)  # a graph's first launch uploads it (cudaGraphUpload): not a step's
            continue
        n = len(nodes)
        per = (a_end[c] - a_start[c]) / n
        span = int(o_end[nodes].max() - o_start[nodes].min())
        busy = int((o_end[nodes] - o_start[nodes]).sum())
        gap.append(max(0.0, (span - busy) / (n - 1)))
        per_node.append(per)
        first_end = int(segment_ends(chain[nodes], o_stream[nodes])[0])
        if first_end == n - 1:
            after_return.append(float(o_start[nodes[0]] - a_end[c]))
        else:  # (first node after the first segment's walk, the walk left after it)
            walked.append((float(o_start[nodes[0]] - a_start[c] - per * (first_end + 1)), per * (n - first_end - 1)))
    if not per_node:
        return None
    lead = _spread(after_return) if after_return else known.lead_ns
    upfront = known.upfront
    if walked:
        shares = [min(1.0, max(0.0, (w - lead[1]) / rest)) for w, rest in walked]
        upfront = (float(min(shares)), float(np.median(shares)), float(max(shares)))
    words = f"this capture's ({len(per_node)} graph launches"
    if not after_return or not walked:
        words += "; " + ("the lead" if not after_return else "the upfront share") + " the stated captures'"
    return GraphTiming(lead, upfront, _spread(gap), _spread(per_node), len(per_node), words + ")")
