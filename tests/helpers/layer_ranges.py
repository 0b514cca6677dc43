"""Per-layer NVTX ranges written into a copy of a real GPT-2 capture, placed from the model's own
structure (capture/model.py) in SQL, sharing no code with nsight_tui. Not a test module.

No committed capture annotates each transformer layer (the capture wraps the step, its phases and
the attention's parts), so a test that needs a user's per-layer ranges (`block_3`, `transformer.h.3`)
gets them the way a module's NVTX range would sit: a pre-LN block begins with its first layer norm,
so block j spans from the launch call of the forward's layer-norm kernel number 2j (each block runs
two, then the final norm) to just before the launch of number 2j + 2. The kernels, their times and
every other range are the capture's own. `span` layers per range and a `shift` of whole layer norms
make ranges that are not one per layer (the negative cases)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from helpers.export_sql import sql_rows

PUSH_POP = 59
# kernels in launch order with their launch call's start, of the process that launched them
_LAUNCHES = """
SELECT r.start, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN StringIds s ON s.id = k.demangledName
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
WHERE r.start >= ? AND r.start <= ? ORDER BY r.start"""
_FORWARDS = """SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
WHERE e.eventType = 59 AND coalesce(e.text, s.value) = 'forward' ORDER BY e.start"""
FORWARD_NORM = "vectorized_layer_norm_kernel"  # PyTorch's layer norm forward kernel (not its backward's)


def layer_spans(con: sqlite3.Connection, span: int = 1, shift: int = 0) -> list[tuple[int, int, int, int]]:
    """(index, start, end, thread) of each per-layer range, every forward range of the capture."""
    out = []
    for f_start, f_end, tid in con.execute(_FORWARDS).fetchall():
        norms = [start for start, name in con.execute(_LAUNCHES, (f_start, f_end)) if FORWARD_NORM in name]
        last = len(norms) - 1  # the final layer norm closes the last block
        j = 0
        while 2 * j * span + shift < last:
            first, after = 2 * j * span + shift, min(2 * (j + 1) * span + shift, last)
            out.append((j, norms[first], norms[after] - 1, tid))
            j += 1
    return out


def with_layer_ranges(src: Path, dst: Path, name: str = "block_{}", span: int = 1, shift: int = 0,
                      around: str = "", first: int = 0) -> Path:
    """A copy of `src` with a push/pop range `name.format(first + j)` around each forward's layer j,
    and with `around`, one range of that name around each forward's layers (a module tree's parent)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        spans = layer_spans(con, span, shift)
        # a push/pop range: its thread only (endGlobalTid is a start/end range's)
        rows = [(s, e, PUSH_POP, name.format(first + j), tid, 0) for j, s, e, tid in spans]
        if around:
            top = max(j for j, *_ in spans)
            firsts = [(s, tid) for j, s, _, tid in spans if j == 0]
            lasts = [e for j, _, e, _ in spans if j == top]
            rows += [(s - 1, e + 1, PUSH_POP, around, tid, 0) for (s, tid), e in zip(firsts, lasts)]
        con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                        "VALUES (?, ?, ?, ?, ?, ?)", rows)
        con.commit()
    finally:
        con.close()
    return dst


# Every GPU kernel with its launch call's start, in launch order (the two runs of one program are
# compared kernel by kernel by name)
_KERNELS = """
SELECT r.start, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN StringIds s ON s.id = k.demangledName
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
ORDER BY r.start, k.start"""
_NAMED = """SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
WHERE e.eventType = 59 AND coalesce(e.text, s.value) GLOB ? ORDER BY e.start"""



def layer_kernels(annotated: Path, pattern: str, same_program: Path | None = None) -> tuple[float, float]:
    """(kernel time ns, kernels) per step of the kernels whose launch call starts inside the NVTX
    ranges matching `pattern` (GLOB) within a `step_N` range of `annotated`. With `same_program`
    (a run of the same program, unannotated), the time is that run's, at the same places in launch
    order (asserted: the same kernel names in the same order)."""
    ops = sql_rows(annotated, _KERNELS)
    durations = [e - s for _, s, e, _ in ops]
    if same_program is not None:
        other = sql_rows(same_program, _KERNELS)
        assert [o[3] for o in other] == [o[3] for o in ops]
        durations = [e - s for _, s, e, _ in other]
    steps = sql_rows(annotated, _NAMED, "step_[0-9]*")
    layers = sql_rows(annotated, _NAMED, pattern)
    inside = lambda t, spans: any(s <= t <= e for s, e in spans)
    mine = [i for i, o in enumerate(ops) if inside(o[0], steps) and inside(o[0], layers)]
    return sum(durations[i] for i in mine) / len(steps), len(mine) / len(steps)
