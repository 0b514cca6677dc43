"""A folder of captures (`{model}_ctx{N}{variant}.sqlite`, OOM runs as `.oom.json`): the same
answers per run, laid out one table per question, rows model (size order), columns ctx.

Every run has a row in every table: a variant (`_fwd`, `_bf16`) is part of the row's label,
and a run whose model or context length is known neither from its `nsight-tui:config` mark
nor from its file name gets a row under its file name (column `ctx ?`), with a note saying why.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers import conventions
from nsight_tui.parsers.errors import TraceError

UNKNOWN_CTX = "ctx ?"


@dataclass
class Run:
    path: Path
    model: str | None  # None: the file name does not say (the config mark may)
    ctx: int | None
    variant: str  # "" for the default (training, fp32, manual attention), else e.g. "_fwd"
    status: str = "ok"  # ok | oom | error
    message: str = ""
    answers: dict | None = None


@dataclass
class SweepTable:
    title: str
    basis: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a row is where it is (unknown model/ctx)


def discover(folder: Path) -> list[Run]:
    runs = []
    for path in sorted(folder.iterdir()):
        name = path.name
        if name.endswith(".oom.json"):
            stem, status = name[: -len(".oom.json")], "oom"
        elif name.endswith(".sqlite"):
            stem, status = path.stem, "ok"
        else:
            continue
        parsed = conventions.parse_stem(stem)
        model, ctx, variant = parsed if parsed else (None, None, "")
        run = Run(path, model, ctx, variant, status)
        if status == "oom":
            try:
                run.message = json.loads(path.read_text()).get("message", "out of memory")
            except (OSError, json.JSONDecodeError):
                run.message = "out of memory"
        runs.append(run)
    return runs


def analyse(runs: list[Run], attribution: str = "process", progress=None) -> list[Run]:
    from nsight_tui.parsers.analysis import questions
    from nsight_tui.parsers.load import load_trace

    for i, run in enumerate(runs):
        if progress:
            progress(i / max(1, len(runs)), run.path.name)
        if run.status != "ok":
            continue
        try:
            run.answers = questions(load_trace(run.path), attribution)
        except TraceError as exc:
            run.status, run.message = "error", str(exc)
    return runs


def _ms(ns) -> str:
    return "–" if ns is None else f"{ns / 1e6:,.2f}"


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _x(x) -> str:
    return "–" if x is None else f"{x:.2f}x"


def _per_step(a: dict, phase: str):
    r = a["ranges"].get(phase)
    return None if not r else r["kernel_ns"] / r["instances"]


def _top(a: dict, phase: str, gemm: bool | None = None) -> str:
    r = a["ranges"].get(phase)
    if not r:
        return "–"
    for k in r["top_kernels"]:
        if gemm is None or (k["family"] == "gemm") == gemm:
            share = k["total_ns"] / r["kernel_ns"] if r["kernel_ns"] else 0
            return f"{k['short']} ({100 * share:.0f}%, ×{k['instances'] // r['instances']}/step)"
    return "–"


def _timing_cell(a: dict) -> str:
    t = a["timing"]
    if t["nvtx_step_mean_ns"] is None:
        return "–"
    py = t["python_step_mean_ns"]
    return f"{_ms(t['nvtx_step_mean_ns'])} / {_ms(py)}" if py else f"{_ms(t['nvtx_step_mean_ns'])} / –"


def _fwd_timing_cell(a: dict) -> str:
    r = a["ranges"].get("forward")
    if not r:
        return "–"
    nvtx = r["range_ns"] / r["instances"]
    py = a["timing"]["python_phase_mean_ns"].get("forward")
    return f"{_ms(nvtx)} / {_ms(py)}"


def _attention_cell(a: dict) -> str:
    ra = a["ratios"]
    rt, fl = ra["softmax_over_matmul_runtime"], ra["softmax_over_matmul_flops"]
    if rt is None and fl is None:
        return "–"
    return f"{'–' if rt is None else f'{rt:.2f}'} vs {'–' if fl is None else f'{fl:.3f}'}"


QUESTIONS = [
    ("Forward time per step, NVTX range / Python (ms)", "NVTX forward range mean vs perf_counter in the capture",
     _fwd_timing_cell),
    ("Forward GPU kernel time per step (ms)", "sum of kernel durations in forward / steps",
     lambda a: _ms(_per_step(a, "forward"))),
    ("Top forward kernel (share of forward kernel time, calls per step)", "kernel time in forward",
     lambda a: _top(a, "forward")),
    ("Top backward kernel", "kernel time in backward", lambda a: _top(a, "backward")),
    ("Top non-GEMM forward kernel", "kernel time in forward", lambda a: _top(a, "forward", gemm=False)),
    ("GEMM share: forward / whole step", "GEMM time / all GPU op time in the range",
     lambda a: f"{_pct(a['ratios']['gemm_share_forward'])} / {_pct(a['ratios']['gemm_share_step'])}"),
    ("Backward / forward kernel time", "forward kernel time", lambda a: _x(a["ratios"]["backward_over_forward"])),
    ("Optimizer share of the step", "step kernel time", lambda a: _pct(a["ratios"]["optimizer_share_step"])),
    ("Softmax / attention matmuls: runtime vs FLOPs", "QKᵀ + attn@V kernel time; FLOPs 5·B·H·T² / 4·B·H·T²·d_head",
     _attention_cell),
    ("Step time, NVTX / Python (ms)", "NVTX step_N mean vs perf_counter in the capture", _timing_cell),
]


def _placement(run: Run) -> tuple[str | None, int | None, str]:
    """(model, ctx, variant): from the file name, else from the run's config mark (the
    variant then from the config's mode, dtype, attention and batch, as the capture names files)."""
    model, ctx, variant = run.model, run.ctx, run.variant
    if model is not None and ctx is not None:
        return model, ctx, variant
    config = (run.answers or {}).get("config") or {}
    if model is None and isinstance(config.get("model"), str) and config["model"]:
        model = config["model"]
    if ctx is None and isinstance(config.get("ctx"), int):
        ctx = config["ctx"]
    if run.model is None and model is not None and ctx is not None:
        try:
            stem = conventions.output_stem(model, ctx, **{k: config[k] for k in ("mode", "dtype", "attention", "batch")
                                                          if k in config})
            variant = (conventions.parse_stem(stem) or (model, ctx, ""))[2]
        except (TypeError, ValueError):
            variant = ""
    return model, ctx, variant


def _cell(run: Run | None, fn) -> str:
    if run is None:
        return ""
    if run.status == "oom":
        return "OOM"
    if run.status != "ok" or run.answers is None:
        return "error"
    return fn(run.answers)


def tables(runs: list[Run]) -> list[SweepTable]:
    """One table per question; every run in every table (rows model + variant, columns ctx)."""
    placed: dict[tuple[str, int | None], Run] = {}
    rank: dict[str, tuple] = {}
    notes: list[str] = []
    for run in runs:
        model, ctx, variant = _placement(run)
        unknown = [w for w, v in (("model", model), ("context length", ctx)) if v is None]
        if unknown:
            where = "its row is its file name" if model is None else f"its row is {model}"
            where += f", column `{UNKNOWN_CTX}`" if ctx is None else f", column `ctx {ctx}`"
            notes.append(f"{run.path.name}: {' and '.join(unknown)} unknown (no nsight-tui:config mark, and the "
                         f"name is not {{model}}_ctx{{N}}): {where}")
        elif run.model is None or run.ctx is None:
            notes.append(f"{run.path.name}: placed by its nsight-tui:config mark (the name is not {{model}}_ctx{{N}})")
        if model is None:
            label = run.path.name
            rank[label] = (1, label)
        else:
            label = model + (f" [{variant.lstrip('_')}]" if variant else "")
            rank[label] = (0, conventions.model_rank(model), variant)
        if (label, ctx) in placed:  # two runs in one cell: the second is its own row
            notes.append(f"{run.path.name}: same model and ctx as {placed[(label, ctx)].path.name}: "
                         "its row is its file name")
            label = run.path.name
            rank[label] = (1, label)
        placed[(label, ctx)] = run
    labels = sorted({label for label, _ in placed}, key=lambda lb: rank[lb])
    ctxs: list[int | None] = [*sorted({c for _, c in placed if c is not None})]
    if any(c is None for _, c in placed):
        ctxs.append(None)
    headers = ["model", *[UNKNOWN_CTX if c is None else f"ctx {c}" for c in ctxs]]
    out = []
    for title, basis, fn in QUESTIONS:
        t = SweepTable(title, basis, list(headers), notes=list(notes))
        for label in labels:
            t.rows.append([label, *[_cell(placed.get((label, c)), fn) for c in ctxs]])
        out.append(t)
    return out


def runs_for(paths: list[Path]) -> list[Run]:
    """Runs for these files, plus the OOM records beside them (a sweep folder's `.oom.json`)."""
    wanted = {Path(p).resolve() for p in paths}
    runs: list[Run] = []
    seen: set[Path] = set()
    for folder in dict.fromkeys(Path(p).resolve().parent for p in paths):
        for run in discover(folder):
            if run.status == "oom" or run.path.resolve() in wanted:
                runs.append(run)
                seen.add(run.path.resolve())
    for p in paths:  # files whose names do not follow {model}_ctx{N}: placed by their config mark
        if Path(p).resolve() not in seen:
            runs.append(Run(Path(p), None, None, ""))
    return runs


COMPARE_HEADERS = ["file", "fwd ms/step", "bwd ms/step", "opt ms/step", "top kernel", "GEMM share (step)", "status"]


def compare_rows(runs: list[Run]) -> list[list]:
    """One row per run, for the TUI's several-files view (runs already analysed)."""
    rows = []
    for run in runs:
        a = run.answers
        if a is None:
            rows.append([run.path.name, None, None, None, "", None, run.message or run.status])
            continue
        step = "step" if "step" in a["ranges"] else "forward"
        ratios = a["ratios"]
        gemm = ratios["gemm_share_step"] if ratios["gemm_share_step"] is not None else ratios["gemm_share_forward"]
        rows.append([
            run.path.name,
            *[None if _per_step(a, p) is None else round(_per_step(a, p) / 1e6, 3) for p in ("forward", "backward", "optimizer")],
            _top(a, step), None if gemm is None else round(100 * gemm, 1), "ok",
        ])
    return rows
