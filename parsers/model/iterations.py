"""Iterations and phases: which ranges are the training loop's steps (`step_N`, `warmup_N`) and
its phases (`forward`, `backward`, `optimizer`) inside them. The model's notion, below every
analysis: the report page, findings, the roofline, idle time, diff and ranks all ask it."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    # a pass over every range's name: asked by most analyses of one model, so kept on it
    kept = model.__dict__.setdefault("_iteration_ranges", {})
    if pattern.pattern not in kept:
        hit = _text_matches(model, pattern.pattern, lambda t: isinstance(t, str) and bool(pattern.match(t)))
        ids = np.flatnonzero(hit)
        # the innermost: no child of its own is one too (marked through the children's parents)
        parent = np.asarray(model.parent)
        has_hit_child = np.zeros(model.n, dtype=bool)
        has_hit_child[parent[ids][parent[ids] >= 0]] = True
        inner = ids[~has_hit_child[ids]].astype(np.int64)
        kept[pattern.pattern] = inner[np.lexsort((model.r_gtid[inner], model.r_start[inner]))]  # time order
    return kept[pattern.pattern].copy()


def _text_matches(model: RangeModel, key: str, test) -> np.ndarray:
    """Per range: `test(its text)`, asked once per distinct text (steps repeat a few hundred
    names: 10^6 regex matches on the UI thread took seconds at 4.8M kernels); kept on the model."""
    kept = model.__dict__.setdefault("_text_matches", {})
    if key not in kept:
        # the Series itself: Arrow factorizes its strings in C (an object array first: 10x slower)
        codes, distinct = pd.factorize(model.trace.ranges["text"])
        per_text = np.array([bool(test(t)) for t in distinct] + [bool(test(None))], dtype=bool)
        kept[key] = per_text[codes]  # a missing text (code -1) takes the last entry
    return kept[key]


def phase_ranges(model: RangeModel, iterations: np.ndarray, text: str) -> np.ndarray:
    """Ranges named `text` inside the given iterations (any depth), not inside another iteration
    nested in them: where unbalanced NVTX push/pop nests `step_N` under `warmup_0/forward`, the
    warmup's forward is its own, not the steps' too."""
    # Per-range flags from one test per distinct text, kept on the model: this walk runs per phase
    # and per caller, and reading the texts per call (Arrow strings to objects) plus an array per
    # node cost 4.5 s of `report` on an autograd-shapes export (180k ranges).
    alias = conventions.INFERRED_PART_OF.get(text, text)  # an inferred stage of the same part
    named = _text_matches(model, f"phase={text}", lambda t: t == text or t == alias)
    iteration = _text_matches(model, "iteration", _is_iteration)
    children = model.children_index
    out = []
    stack = [int(i) for i in iterations]
    while stack:
        i = stack.pop()
        for c in children.get(i, ()):
            c = int(c)
            if named[c]:
                out.append(c)
            if not iteration[c]:
                stack.append(c)
    return np.array(sorted(out), dtype=np.int64)


def _is_iteration(text) -> bool:
    return isinstance(text, str) and bool(STEP.match(text) or WARMUP.match(text))


def nested_iterations(model: RangeModel) -> list[tuple[int, int]]:
    """(outer, inner) range positions where an iteration range (`step_N`, `warmup_N`) lies inside
    another iteration range on its thread: unbalanced NVTX (torch.compile's push/pop left open
    nests every later iteration under one range). A domain-tagged copy of the same iteration
    (same name) is no nesting."""
    if model.n == 0:
        return []
    # equal texts, equal codes: no object array of every range's text (seconds at 3M ranges)
    texts, _ = pd.factorize(model.trace.ranges["text"])
    parent = np.asarray(model.parent)
    is_iteration = _text_matches(model, "iteration", _is_iteration)
    out = []
    for i in np.flatnonzero(is_iteration).tolist():
        p = int(parent[i])
        while p >= 0:
            if is_iteration[p] and texts[p] != texts[i]:
                out.append((p, i))
                break
            p = int(parent[p])
    return out


def nesting_note(model: RangeModel) -> str:
    """One line saying which iterations nest in which ("" when none)."""
    pairs = nested_iterations(model)
    if not pairs:
        return ""
    texts = model.trace.ranges["text"].to_numpy()
    inner = [int(i) for _, i in pairs]
    parent = np.asarray(model.parent)
    outer = sorted({int(parent[i]) for i in inner})  # the ranges they sit in (warmup_0/forward)
    names = sorted({str(texts[i]) for i in inner}, key=lambda t: (not t.startswith("warmup"), len(t), t))
    where = ", ".join(_path(model, o) for o in outer[:2])
    return (f"unbalanced NVTX: {len(inner)} iteration range{'s' if len(inner) != 1 else ''} ({', '.join(names[:4])}"
            f"{', …' if len(names) > 4 else ''}) nest inside {where} (a push without its pop, e.g. torch.compile); "
            "iterations are still found by name, and phases are counted per iteration")


def _path(model: RangeModel, i: int) -> str:
    texts = model.trace.ranges["text"].to_numpy()
    parent = np.asarray(model.parent)
    out = []
    while i >= 0:
        out.append(str(texts[i]))
        i = int(parent[i])
    return "/".join(reversed(out))


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


# -- time on both clocks -------------------------------------------------------------------------
# The CPU's clock: an NVTX range's span (start to end on its thread). The GPU's clock: the span of
# the GPU work attributed to it, from its first op's start to its last op's end (NVIDIA's
# `nvtx_gpu_proj_sum` "projection"). In a capture that does not synchronise at phase ends the GPU
# runs behind the CPU and the two differ by tens of percent; the step itself is its *period*.
@dataclass(frozen=True)
class StepTimes:
    """Iterations in time order with their times on both clocks, all in ns, one entry each.

    period: from this iteration's start to the next iteration's start on the same thread (the pace
    the loop keeps: in steady state, the pace the GPU sets); the last iteration ends when its GPU
    work ends (or its range, if later). `cpu` is the NVTX span, `gpu` NVIDIA's projection."""

    ids: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray  # the period's end
    cpu_ns: np.ndarray
    gpu_ns: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def period_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def mean_period_ns(self) -> float | None:
        return float(self.period_ns.mean()) if self.n else None

    def gpu_lags(self) -> bool:
        """The GPU's work on these iterations outlasts their CPU spans (the CPU ran ahead)."""
        return bool(self.n) and gpu_lags(float(self.gpu_ns.sum()), float(self.cpu_ns.sum()))


# The GPU "lags" a range when its GPU work spans this much more than the range's CPU span: below
# it the two clocks agree within launch latency and jitter.
LAG_RATIO = 1.05


def gpu_lags(gpu_ns: float, cpu_ns: float) -> bool:
    return cpu_ns > 0 and gpu_ns > LAG_RATIO * cpu_ns


def period_ends(start: np.ndarray, last_end: np.ndarray, loop_starts: np.ndarray) -> np.ndarray:
    """Where each iteration's period ends: at the next start in `loop_starts` (every iteration of
    that loop, warm-ups too), else at `last_end` (the later of its range's and its GPU work's end)."""
    loop = np.sort(np.asarray(loop_starts, dtype=np.int64))
    after = np.searchsorted(loop, start, side="right")
    has_next = after < len(loop)
    return np.where(has_next, loop[np.minimum(after, max(len(loop) - 1, 0))] if len(loop) else 0, last_end)


def step_times(model: RangeModel, ids: np.ndarray) -> StepTimes:
    """The given iteration ranges' times (see StepTimes). The next iteration of one is the next
    `step_N` or `warmup_N` on its thread, so the last warm-up's period ends where step_0 starts."""
    ids = np.asarray(ids, dtype=np.int64)
    ids = ids[np.lexsort((model.r_start[ids], model.r_gtid[ids]))] if len(ids) else ids
    start = model.r_start[ids].astype(np.int64)
    cpu_end = model.r_end[ids].astype(np.int64)
    gpu = model.proj_ns[ids].astype(np.int64)
    end = np.maximum(cpu_end, np.where(gpu > 0, model.gpu_end[ids], cpu_end))
    every = np.concatenate([iteration_ranges(model, STEP), iteration_ranges(model, WARMUP)])
    for g in np.unique(model.r_gtid[ids]):
        mine = np.flatnonzero(model.r_gtid[ids] == g)
        end[mine] = period_ends(start[mine], end[mine], model.r_start[every[model.r_gtid[every] == g]])
    order = np.argsort(start, kind="stable")
    return StepTimes(ids[order], start[order], end[order], (cpu_end - start)[order], gpu[order])
