"""A folder of captures (`{model}_ctx{N}{variant}.sqlite`, OOM runs as `.oom.json`): the same
answers per run, laid out one table per question, rows model (size order), columns ctx."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers import conventions
from nsight_tui.parsers.errors import TraceError



@dataclass
class Run:
    path: Path
    model: str
    ctx: int
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


def _oom_message(path: Path) -> tuple[str, str]:
    """(status, message) of an OOM record; a record that cannot be read is an error, with why."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        return "error", f"OOM record unreadable ({exc.strerror})"
    except UnicodeDecodeError:
        return "error", "OOM record is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return "error", f"OOM record is not valid JSON ({exc.msg}, line {exc.lineno})"
    if not isinstance(record, dict):
        return "error", f"OOM record is a JSON {type(record).__name__}, expected an object"
    message = record.get("message", "out of memory")
    return "oom", message if isinstance(message, str) else "out of memory"


def discover(folder: Path, skipped: list[str] | None = None) -> list[Run]:
    """The captures in `folder`. Anything not a regular file (a FIFO would block the read)
    is left out, with a line in `skipped`."""
    runs = []
    for path in sorted(folder.iterdir()):
        name = path.name
        if (name.endswith(".oom.json") or name.endswith(".sqlite")) and not path.is_file():
            if skipped is not None:
                skipped.append(f"{name}: not a regular file, skipped")
            continue
        if name.endswith(".oom.json"):
            stem, status = name[: -len(".oom.json")], "oom"
        elif name.endswith(".sqlite"):
            stem, status = path.stem, "ok"
        else:
            continue
        m = conventions.STEM.match(stem)
        if not m:
            continue
        run = Run(path, m["model"], int(m["ctx"]), m["variant"], status)
        if status == "oom":
            run.status, run.message = _oom_message(path)
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
        except Exception as exc:  # one member must not end the sweep; its cell says why
            run.status, run.message = "error", f"could not be analysed: {exc}"
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


def tables(runs: list[Run]) -> list[SweepTable]:
    out = []
    variants = sorted({r.variant for r in runs})
    for variant in variants:
        vr = [r for r in runs if r.variant == variant]
        models = sorted({r.model for r in vr}, key=conventions.model_rank)
        ctxs = sorted({r.ctx for r in vr})
        cell = {(r.model, r.ctx): r for r in vr}
        suffix = f" [{variant.lstrip('_')}]" if variant else ""
        for title, basis, fn in QUESTIONS:
            t = SweepTable(title + suffix, basis, ["model", *[f"ctx {c}" for c in ctxs]])
            for model in models:
                row = [model]
                for c in ctxs:
                    run = cell.get((model, c))
                    if run is None:
                        row.append("")
                    elif run.status == "oom":
                        row.append("OOM")
                    elif run.status != "ok" or run.answers is None:
                        row.append("error")
                    else:
                        row.append(fn(run.answers))
                t.rows.append(row)
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
    for p in paths:  # files whose names do not follow {model}_ctx{N}: still compared
        if Path(p).resolve() not in seen:
            runs.append(Run(Path(p), Path(p).stem, 0, ""))
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


def compare(paths: list[Path], attribution: str = "process", progress=None) -> tuple[list[str], list[list]]:
    """One row per file (OOM records included)."""
    runs = analyse(runs_for(paths), attribution, progress)
    return COMPARE_HEADERS, compare_rows(runs)
