"""A sweep of captures as text: one table per question (rows model in size order, columns ctx,
OOM/error cells marked), and the several-files comparison rows the TUI shows.

Every run has a row in every table: a variant (`_fwd`, `_bf16`) is part of the row's label,
and a run whose model or context length is known neither from its file name nor from its
config mark gets a row under its file name (column `ctx ?`), the table's notes saying why.

The numbers come from `parsers.analysis.questions` per run (`parsers.sweep.analyse`); every
cell's text is made here, with `numbers`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nsight_tui.parsers.read.conventions import model_rank
from nsight_tui.parsers.analyses.sweep import Run, placement
from nsight_tui.render import findings, numbers, roofline
from nsight_tui.render.document import document
from nsight_tui.render.idle import IDLE_FIGURES
from nsight_tui.render.numbers import MISSING


@dataclass
class SweepTable:
    title: str
    basis: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a row is where it is (unknown model/ctx)


UNKNOWN_CTX = "ctx ?"


def _ms(ns) -> str:
    return numbers.ms(ns, digits=2)


def _per_step(a: dict, phase: str):
    r = a["ranges"].get(phase)
    return None if not r else r["kernel_ns"] / r["instances"]


def _top(a: dict, phase: str, gemm: bool | None = None) -> str:
    r = a["ranges"].get(phase)
    if not r:
        return MISSING
    for k in r["top_kernels"]:
        if gemm is None or (k["family"] == "gemm") == gemm:
            share = k["total_ns"] / r["kernel_ns"] if r["kernel_ns"] else 0
            return f"{k['short']} ({numbers.percent(share, 0)}, ×{k['instances'] // r['instances']}/step)"
    return MISSING


def _timing_cell(a: dict) -> str:
    t = a["timing"]
    period = t.get("step_period_mean_ns", t["nvtx_step_mean_ns"])
    if period is None:
        return MISSING
    return f"{_ms(period)} / {_ms(t['python_step_mean_ns'] or None)}"


def _fwd_timing_cell(a: dict) -> str:
    r = a["ranges"].get("forward")
    if not r:
        return MISSING
    return f"{_ms(r['proj_ns'] / r['instances'])} / {_ms(r['range_ns'] / r['instances'])}"


def _attention_cell(a: dict) -> str:
    ra = a["ratios"]
    rt, fl = ra["softmax_over_matmul_runtime"], ra["softmax_over_matmul_flops"]
    if rt is None and fl is None:
        return MISSING
    return f"{numbers.fixed(rt, 2)} vs {numbers.fixed(fl, 3)}"


def _gemm_cell(a: dict) -> str:
    return f"{numbers.percent(a['ratios']['gemm_share_forward'])} / {numbers.percent(a['ratios']['gemm_share_step'])}"


def _memory_cell(a: dict) -> str:
    m = a.get("memory") or {}
    peak, reserved = m.get("peak_bytes"), m.get("torch_peak_reserved_bytes")
    if peak is None and reserved is None:
        return MISSING
    return f"{numbers.bytes_(peak)} / {numbers.bytes_(reserved)}"


# (title, basis, answers -> cell text): one line per question.
QUESTIONS: list[tuple[str, str, Callable[[dict], str]]] = [
    ("Forward time per step, GPU / CPU (ms)", "forward's GPU work span (first kernel start to last end, nsys's "
     "projection) vs its NVTX (CPU) span, mean per step: they differ when the GPU runs behind the CPU", _fwd_timing_cell),
    ("Forward GPU kernel time per step (ms)", "sum of kernel durations in forward / steps",
     lambda a: _ms(_per_step(a, "forward"))),
    ("Top forward kernel (share of forward kernel time, calls per step)", "kernel time in forward",
     lambda a: _top(a, "forward")),
    ("Top backward kernel", "kernel time in backward", lambda a: _top(a, "backward")),
    ("Top non-GEMM forward kernel", "kernel time in forward", lambda a: _top(a, "forward", gemm=False)),
    ("GEMM share: forward / whole step", "GEMM time / all GPU op time in the range", _gemm_cell),
    ("Backward / forward kernel time", "forward kernel time",
     lambda a: numbers.times(a["ratios"]["backward_over_forward"])),
    ("Optimizer share of the step", "step kernel time", lambda a: numbers.percent(a["ratios"]["optimizer_share_step"])),
    ("Softmax / attention matmuls: runtime vs FLOPs", "QKᵀ + attn@V kernel time; FLOPs 5·B·H·T² / 4·B·H·T²·d_head",
     _attention_cell),
    ("Step time, period / Python (ms)", "mean step period (each step_N's start to the next's; the last ends with "
     "its GPU work) vs perf_counter in the capture", _timing_cell),
    *IDLE_FIGURES,
    ("GPU memory peak: in use / torch reserved", "in use: device memory cudaMalloc'd by the process (nsys memory "
     "events); reserved: torch.cuda.max_memory_reserved over the phases (step marks); OOM (range): where the run "
     "ran out", _memory_cell),
    *roofline.SWEEP_QUESTIONS,  # MFU, achieved TFLOP/s, bound (render.roofline)
    *findings.SWEEP_QUESTIONS,  # what to fix first (render.findings)
]


def _cell(run: Run | None, fn: Callable[[dict], str], pages: dict[int, dict]) -> str:
    if run is None:
        return ""
    if run.status == "oom":  # where it ran out, when the record or its export says
        return f"OOM ({run.oom_range.rsplit('/', 1)[-1]})" if run.oom_range else "OOM"
    if run.status != "ok" or run.report is None:
        return "error"
    return fn(pages[id(run)])


def _pages(runs: list[Run]) -> dict[int, dict]:
    """Each analysed run's report as its document (render.document), laid out once per table set."""
    return {id(run): document(run.report) for run in runs if run.report is not None}


def _layout(runs: list[Run]) -> tuple[list[str], list[int | None], dict, list[str]]:
    """Row labels (size order, then unplaced files), columns (ctx, then unknown), the run of
    each (label, ctx) cell, and a note for each run not placed by its file name."""
    placed: dict[tuple[str, int | None], Run] = {}
    rank: dict[str, tuple] = {}
    notes: list[str] = []
    for run in runs:
        model, ctx, variant = placement(run)
        name = run.path.name
        unknown = [w for w, v in (("model", model), ("context length", ctx)) if v is None]
        if unknown:
            where = "its row is its file name" if model is None else f"its row is {model}"
            where += f", column `{UNKNOWN_CTX}`" if ctx is None else f", column `ctx {ctx}`"
            notes.append(f"{name}: {' and '.join(unknown)} unknown (no nsight-tui:config mark, and the name is "
                         f"not {{model}}_ctx{{N}}): {where}")
        elif run.model is None or run.ctx is None:
            notes.append(f"{name}: placed by its nsight-tui:config mark (the name is not {{model}}_ctx{{N}})")
        if model is None:
            label, rank[name] = name, (1, name)
        else:
            label = model + (f" [{variant.lstrip('_')}]" if variant else "")
            rank[label] = (0, model_rank(model), variant)
        if (label, ctx) in placed:  # two runs in one cell: the second gets a row of its own
            notes.append(f"{name}: same model and ctx as {placed[(label, ctx)].path.name}: its row is its file name")
            label, rank[name] = name, (1, name)
        placed[(label, ctx)] = run
    labels = sorted({label for label, _ in placed}, key=lambda lb: rank[lb])
    ctxs: list[int | None] = [*sorted({c for _, c in placed if c is not None})]
    if any(c is None for _, c in placed):
        ctxs.append(None)
    return labels, ctxs, placed, notes


def tables(runs: list[Run]) -> list[SweepTable]:
    """One table per question, every run in it: rows model (size order; a variant is a row of
    its own), columns ctx."""
    labels, ctxs, placed, notes = _layout(runs)
    pages = _pages(runs)
    headers = ["model", *[UNKNOWN_CTX if c is None else f"ctx {c}" for c in ctxs]]
    out = []
    for title, basis, fn in QUESTIONS:
        t = SweepTable(title, basis, list(headers), notes=list(notes))
        t.rows = [[label, *[_cell(placed.get((label, c)), fn, pages) for c in ctxs]] for label in labels]
        out.append(t)
    return out


# What each figure is, in its header and in COMPARE_BASIS (the view's crumb): a phase's kernel
# time (the sum of its kernels' durations) per instance, not its CPU span nor its GPU time; the
# GEMM share a percentage of the step's GPU op time. As wide as before: the file names keep their room.
COMPARE_HEADERS = ["file", "fwd kern ms", "bwd kern ms", "opt kern ms", "top kernel", "GEMM % step ops", "status"]
COMPARE_BASIS = "kern ms: kernel time per step (sum of durations) · GEMM %: of the step's GPU op time"


def compare_rows(runs: list[Run]) -> list[list]:
    """One row per run for the several-files view: numbers stay numbers (ms, percent) so the
    view sorts them; None where a run has no such range."""
    rows = []
    for run in runs:
        a = document(run.report) if run.report is not None else None
        if a is None:
            rows.append([run.path.name, None, None, None, "", None, run.message or run.status])
            continue
        step = "step" if "step" in a["ranges"] else "forward"
        ratios = a["ratios"]
        gemm = ratios["gemm_share_step"] if ratios["gemm_share_step"] is not None else ratios["gemm_share_forward"]
        per_step = [_per_step(a, p) for p in ("forward", "backward", "optimizer")]
        rows.append([run.path.name, *[None if v is None else round(v / 1e6, 3) for v in per_step],
                     _top(a, step), None if gemm is None else round(100 * gemm, 1), "ok"])
    return rows
