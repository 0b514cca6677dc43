"""The command palette's kernel entries: the op names with the most GPU time."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.read.load import Trace

MAX_KERNELS = 500


def top_kernels(trace: Trace, limit: int = MAX_KERNELS) -> list[tuple[str, str]]:
    """(name, nsys short name) of the op names with the most GPU time, most first."""
    ops = trace.ops
    codes = ops["name"].to_numpy()
    if not len(codes):
        return []
    dur = (ops["end"] - ops["start"]).to_numpy()
    totals = np.bincount(codes, weights=dur, minlength=len(trace.op_names))
    out = []
    for code in np.argsort(-totals, kind="stable")[:limit]:
        if totals[code] <= 0:
            break
        out.append((trace.op_names[code], trace.op_short[code]))
    return out
