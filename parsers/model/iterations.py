"""Iterations and phases by name: which ranges are the training loop's steps (`step_N`,
`warmup_N`) and its phases (`forward`, `backward`, `optimizer`) inside them. The pickers under
model.steps, the one module that asks them (a contract in pyproject.toml): every analysis takes
its steps from there."""
from __future__ import annotations

import re
import numpy as np
import pandas as pd

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace

STEP, WARMUP = conventions.STEP_RANGE, conventions.WARMUP_RANGE


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
    names: 10^6 regex matches on the UI thread took seconds at 4.8M kernels); kept with the trace's
    range texts under `key`."""
    return model.trace.range_texts.per_value(lambda t: bool(test(t)), key=("text_matches", key))


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
    texts = model.trace.range_texts.codes
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
    texts = model.trace.range_texts.objects
    inner = [int(i) for _, i in pairs]
    parent = np.asarray(model.parent)
    outer = sorted({int(parent[i]) for i in inner})  # the ranges they sit in (warmup_0/forward)
    names = sorted({str(texts[i]) for i in inner}, key=lambda t: (not t.startswith("warmup"), len(t), t))
    where = ", ".join(_path(model, o) for o in outer[:2])
    return (f"unbalanced NVTX: {len(inner)} iteration range{'s' if len(inner) != 1 else ''} ({', '.join(names[:4])}"
            f"{', …' if len(names) > 4 else ''}) nest inside {where} (a push without its pop, e.g. torch.compile); "
            "iterations are still found by name, and phases are counted per iteration")


def _path(model: RangeModel, i: int) -> str:
    texts = model.trace.range_texts.objects
    parent = np.asarray(model.parent)
    out = []
    while i >= 0:
        out.append(str(texts[i]))
        i = int(parent[i])
    return "/".join(reversed(out))


def _plain(text: str) -> str:
    return text.split(":", 1)[1] if ":" in text and not text.startswith("nsight-tui") else text


def process_ranges(trace: Trace, pid: int, pattern, key=None) -> tuple[np.ndarray, np.ndarray]:
    """Start/end of this process's ranges whose plain name matches, innermost copy per name.
    `key` names the pattern (hashable): its answers per distinct text are then kept with the trace."""
    r = trace.ranges
    if len(r) == 0:
        return intervals.EMPTY
    mine = pid_of(r["gtid"].to_numpy(np.int64)) == pid
    texts = trace.range_texts
    hit = mine & texts.per_value(lambda t: isinstance(t, str) and bool(pattern(_plain(t))), key=None if key is None else ("plain", key))
    if not hit.any():
        return intervals.EMPTY
    # the texts (and their plain names) by code: no text column copied per call
    sel = pd.DataFrame({"plain_code": texts.codes[hit], "start": r["start"].to_numpy()[hit],
                        "end": r["end"].to_numpy()[hit]}, index=r.index[hit])
    sel["dur"] = sel["end"] - sel["start"]
    # a domain-tagged copy of the same iteration nests it: keep the innermost (shortest) per start
    sel["plain"] = texts.kept("plain_codes", lambda: _plain_codes(texts))[sel["plain_code"].to_numpy()]
    sel = sel.sort_values(["start", "dur"]).drop_duplicates(subset=["plain", "start"], keep="first")
    sel = sel.sort_values("start")
    return sel["start"].to_numpy(np.int64), sel["end"].to_numpy(np.int64)


def _plain_codes(texts) -> np.ndarray:
    """Per distinct text: a code of its plain name (texts equal behind their domain tag share one)."""
    plain = [_plain(t) if isinstance(t, str) else t for t in texts.values]
    codes, _ = pd.factorize(pd.Series(plain, dtype=object))
    return np.asarray(codes, dtype=np.int64)
