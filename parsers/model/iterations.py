"""Iterations and phases: which ranges are the training loop's steps (`step_N`, `warmup_N`) and
its phases (`forward`, `backward`, `optimizer`) inside them. The model's notion, below every
analysis: the report page, findings, the roofline, idle time, diff and ranks all ask it."""
from __future__ import annotations

import re

import numpy as np

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace

STEP, WARMUP = conventions.STEP_RANGE, conventions.WARMUP_RANGE
PHASES, ATTENTION_PARTS = conventions.PHASES, conventions.ATTENTION_PARTS


def iteration_ranges(model: RangeModel, pattern: re.Pattern) -> np.ndarray:
    """Positions of iteration ranges (`step_N` or `warmup_N`), one per iteration: where a
    domain-tagged copy nests the same iteration, the innermost is kept."""
    if model.n == 0:
        return np.zeros(0, dtype=np.int64)
    texts = model.trace.ranges["text"].to_numpy()
    hit = np.array([bool(pattern.match(t)) for t in texts], dtype=bool)
    ids = np.flatnonzero(hit)
    inner = np.array([i for i in ids if not any(hit[c] for c in _children_ids(model, int(i)))], dtype=np.int64)
    return inner[np.lexsort((model.r_gtid[inner], model.r_start[inner]))]  # time order, whatever the rows' order


def _children_ids(model: RangeModel, i: int) -> np.ndarray:
    return np.array(model.children_index.get(int(i), []), dtype=np.int64)


def phase_ranges(model: RangeModel, iterations: np.ndarray, text: str) -> np.ndarray:
    """Ranges named `text` inside the given iterations (any depth)."""
    texts = model.trace.ranges["text"].to_numpy()
    out = []
    stack = [int(i) for i in iterations]
    while stack:
        i = stack.pop()
        for c in _children_ids(model, i).tolist():
            if texts[c] == text:
                out.append(c)
            stack.append(c)
    return np.array(sorted(out), dtype=np.int64)


def _plain(text: str) -> str:
    return text.split(":", 1)[1] if ":" in text and not text.startswith("nsight-tui") else text


def process_ranges(trace: Trace, pid: int, pattern) -> tuple[np.ndarray, np.ndarray]:
    """Start/end of this process's ranges whose plain name matches, innermost copy per name."""
    r = trace.ranges
    if len(r) == 0:
        return intervals.EMPTY
    mine = pid_of(r["gtid"].to_numpy(np.int64)) == pid
    texts = r["text"].to_numpy()
    hit = mine & np.array([isinstance(t, str) and bool(pattern(_plain(t))) for t in texts], dtype=bool)
    sel = r[hit]
    if len(sel) == 0:
        return intervals.EMPTY
    sel = sel.assign(plain=[_plain(t) for t in sel["text"]], dur=sel["end"] - sel["start"])
    # a domain-tagged copy of the same iteration nests it: keep the innermost (shortest) per start
    sel = sel.sort_values(["start", "dur"]).drop_duplicates(subset=["plain", "start"], keep="first")
    sel = sel.sort_values("start")
    return sel["start"].to_numpy(np.int64), sel["end"].to_numpy(np.int64)
