"""One export holding every rank, split into one trace per process (its calls, ops, ranges and
marks; its lazy reads still go to the one file, whose rows of other processes match none of its
calls): what per-rank exports of the same run would hold, on the one clock. Not a test module."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace


def one_process(t: Trace, pid: int) -> Trace:
    api = t.api
    keep = pid_of(api["gtid"].to_numpy()) == pid
    position = np.cumsum(keep) - 1  # a kept call's position among the kept
    ops = t.ops[pid_of(t.ops["gpid"].to_numpy()) == pid].reset_index(drop=True).copy()
    launched = ops["api"].to_numpy()
    ops["api"] = np.where(launched >= 0, position[np.maximum(launched, 0)], -1).astype(launched.dtype)
    ranges = t.ranges[pid_of(t.ranges["gtid"].to_numpy()) == pid].reset_index(drop=True)
    marks = t.marks[pid_of(t.marks["gtid"].to_numpy()) == pid].reset_index(drop=True)
    return replace(t, ops=ops, api=api[keep].reset_index(drop=True), ranges=ranges, marks=marks, derived={},
                   stash=None)


def processes(t: Trace) -> list[Trace]:
    """One trace per process with GPU work, in pid order."""
    return [one_process(t, p) for p in sorted({int(p) for p in np.unique(pid_of(t.ops["gpid"].to_numpy()))})]
