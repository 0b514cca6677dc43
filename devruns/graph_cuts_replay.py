"""The segment rule (parsers/replay/cudagraph.py) checked on a real workload's twins one change apart:
the graphed decode loop as captured (one segment a token) and the same graph cut by a cudaMemsetAsync
before every decoder layer but the first (devruns/gpu_graph_cuts.sh, `--cut-layers`). The uncut
capture is replayed with its graph launches' nodes placed by the rule, once as one segment and once
cut where its twin's memset nodes sit (read off the twin's launches, mapped to the uncut graph's
nodes), each launch's figures this capture's own; the predicted change is the difference of the two
replays' median step periods (the memsets' own GPU time, ~1 µs each, left out), against the change
the workload's Python clock measured (medians over the steps).

    PYTHONPATH=$PWD python3 devruns/graph_cuts_replay.py FOLDER      (cuts_rK_graph{,_cut}.sqlite.xz)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.step_sql import python_steps  # noqa: E402
from helpers.xz_samples import plain  # noqa: E402
from nsight_tui.parsers.read.ids import MEMSET  # noqa: E402
from nsight_tui.parsers.read.load import load_trace  # noqa: E402
from nsight_tui.parsers.replay.cudagraph import graph_launch_ops, graph_timing  # noqa: E402
from nsight_tui.parsers.replay.predict import graph_of, replay  # noqa: E402
from nsight_tui.parsers.replay.simulate import Plan  # noqa: E402


def cut_positions(twin) -> list[int]:
    """Where the twin's graph is cut, as positions of the uncut graph's nodes: each memset node's
    position less the memsets before it (its last launch, the graph's steady form)."""
    nodes = graph_launch_ops(twin)[-1]
    is_memset = twin.ops["kind"].to_numpy()[nodes] == MEMSET
    return [int(i - is_memset[:i].sum()) for i in np.flatnonzero(is_memset)]


def segment_ends_cut(n: int, cuts: list[int]) -> np.ndarray:
    """Per node, its segment's last node when a cut sits before each position in `cuts`."""
    bounds = sorted({c for c in cuts if 0 < c < n}) + [n]
    ends = np.empty(n, np.int64)
    start = 0
    for b in bounds:
        ends[start:b] = b - 1
        start = b
    return ends


def period_ms(trace, cuts: list[int] | None) -> float:
    g, sr = graph_of(trace)
    plan = Plan.of(g)
    timing = graph_timing(trace)
    for nodes in graph_launch_ops(trace):
        n = len(nodes)
        ends = segment_ends_cut(n, cuts) if cuts else np.full(n, n - 1, np.int64)
        plan.op_launch_off[nodes] = timing.node_offsets_ns(1, ends)
    return float(np.median(replay(g, sr, plan).periods_ns)) / 1e6


def main(folder: Path) -> None:
    print("| pair | measured change | predicted | error | the base's token, replayed one segment / measured |")
    print("|---|---:|---:|---:|---:|")
    for base_path in sorted(folder.glob("cuts_r*_graph.sqlite.xz")):
        twin_path = base_path.with_name(base_path.name.replace("_graph.", "_graph_cut."))
        base, twin = load_trace(base_path), load_trace(twin_path)
        measured = (np.median(python_steps(plain(twin_path))) - np.median(python_steps(plain(base_path)))) / 1e6
        whole, cut = period_ms(base, None), period_ms(base, cut_positions(twin))
        print(f"| {base_path.name.split('_graph')[0]} | {measured:+.3f} | {cut - whole:+.3f} | "
              f"{cut - whole - measured:+.3f} | {whole:.3f} / {np.median(python_steps(plain(base_path))) / 1e6:.3f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
