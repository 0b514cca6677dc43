"""The ratios shown beside a range: family shares of its GPU time, GPU busy vs CPU time, launch
overhead and queue delay (the CPU's lead), backward/forward and the optimizer's share. Every ratio
carries its basis (what it divides by), so a table can say it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.model.steps import PHASES
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import Trace


@dataclass
class Ratio:
    label: str
    value: float | str | None  # a str for a word (a verdict), unit "text"
    unit: str  # how to read `value`: "fraction" (0..1), "ns", "count", "per_instance", "x"
    basis: str  # what the value divides by, in words


def op_families(trace: Trace, op_positions: np.ndarray) -> np.ndarray:
    """Family key of each op (memcpy/memset are `memory`)."""
    return families.name_families(trace)[trace.ops["name"].to_numpy()[op_positions]]


def family_shares(model: RangeModel, op_positions: np.ndarray) -> pd.DataFrame:
    """Per family: GPU time (sum of op durations), share of the total, op count.

    Always lists every family, in the families table's order, so tables line up.
    """
    trace = model.trace
    pos = np.asarray(op_positions, dtype=np.int64)
    dur = (trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy())[pos]
    # Sum per op name first (integer codes: a few thousand), then per family: comparing the
    # family strings of 10^6 ops, family by family, cost a quarter of a second.
    codes = trace.ops["name"].to_numpy()[pos]
    n_names = len(trace.op_names)
    per_name_ns = np.zeros(n_names, dtype=np.int64)
    np.add.at(per_name_ns, codes, dur)
    per_name_n = np.bincount(codes, minlength=n_names)
    name_family = families.name_families(trace)
    total = int(dur.sum())
    rows = []
    for f in families.FAMILIES:
        sel = name_family == f.key
        t = int(per_name_ns[sel].sum())
        rows.append({"family": f.key, "label": f.label, "total_ns": t, "share": t / total if total else 0.0,
                     "kernels": int(per_name_n[sel].sum())})
    return pd.DataFrame(rows)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _child(node: RangeNode, text: str) -> RangeNode | None:
    for c in node.children:
        if _text(c) == text:
            return c
    return None


def _text(node: RangeNode) -> str:
    """Range name without its domain (`trainer:step_N` -> `step_N`)."""
    return node.name.split(":", 1)[1] if ":" in node.name else node.name


def ratio_panel(model: RangeModel, node: RangeNode) -> list[Ratio]:
    """The ratios shown beside a range: families, GPU busy vs CPU, latency, phase ratios."""
    out: list[Ratio] = []
    pos = node.op_positions()
    shares = family_shares(model, pos)
    for row in shares.itertuples():
        if row.total_ns or row.family == "gemm":
            out.append(Ratio(f"{row.label} share", row.share, "fraction", "kernel + memory op time in range"))
    busy = _ratio(node.busy_ns, node.cpu_ns)
    out.append(Ratio("GPU busy / CPU time", busy, "fraction",
                     "CPU (NVTX) range time; low means the GPU waited on the CPU (launch-bound)"))
    out.append(Ratio("kernels", float(node.kernels), "count", "count of kernels attributed"))
    if node.instances > 1:
        out.append(Ratio("kernels / instance", node.kernels / node.instances, "per_instance",
                         f"{node.instances} instances"))
    timing = launch_timing(model, pos)
    if timing is not None:
        overhead_ns, queue_ns = timing
        out.append(Ratio("launch overhead (median)", overhead_ns, "ns",
                         "the launching API call's own duration (cudaLaunchKernel…), median over kernels"))
        out.append(Ratio("queue delay / CPU lead (median)", queue_ns, "ns",
                         "kernel start − launching call start, median over kernels: how far the CPU ran "
                         "ahead, i.e. how long the kernel waited behind earlier GPU work"))
    fwd, bwd, opt = (_child(node, p) for p in PHASES)
    if fwd is not None and bwd is not None:
        r = _ratio(bwd.kernel_ns, fwd.kernel_ns)
        out.append(Ratio("backward / forward", r, "x", "forward kernel time"))
    if opt is not None and node.kernel_ns:
        r = _ratio(opt.kernel_ns, node.kernel_ns)
        out.append(Ratio("optimizer share", r, "fraction", f"kernel time of {node.label}"))
    return out


def launch_timing(model: RangeModel, op_positions: np.ndarray) -> tuple[float, float] | None:
    """(launch overhead, queue delay) in ns, medians over the kernels at these positions that
    have a launching API call. Launch overhead is the call's own duration (end − start); queue
    delay, or CPU lead, is kernel start − call start: large when the GPU is busy with earlier
    work, which is healthy, not an overhead."""
    trace = model.trace
    ops = trace.ops
    pos = np.asarray(op_positions, dtype=np.int64)
    pos = pos[(ops["kind"].to_numpy()[pos] == KERNEL) & (ops["api"].to_numpy()[pos] >= 0)]
    if len(pos) == 0 or trace.api.empty:
        return None
    call = ops["api"].to_numpy()[pos]
    call_start = trace.api["start"].to_numpy()[call]
    overhead = trace.api["end"].to_numpy()[call] - call_start
    queue = ops["start"].to_numpy()[pos] - call_start
    return float(np.median(overhead)), float(np.median(queue))
