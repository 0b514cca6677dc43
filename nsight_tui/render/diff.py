"""A RunDiff (nsight_tui.parsers.analyses.diff) as text: Markdown for people, JSON and CSV with the
exact numbers (ns per iteration, B − A) for scripts and spreadsheets.

Markdown shows milliseconds to the microsecond; JSON and CSV keep every figure as computed.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.kernels.kernel_names import distinct_labels, gemm_math, table_name
from nsight_tui.parsers.analyses.diff import (
    ADDED,
    BOTH,
    REMOVED,
    STEP_BASIS,
    Delta,
    FamilyDiff,
    KernelDiff,
    RangeDiff,
    RunDiff,
    ScopeDiff,
    StepDiff,
)
from nsight_tui.render.tables import markdown as table
from nsight_tui.render.safe import markdown as md
from nsight_tui.render.safe import visible

FORMATS = ("markdown", "json", "csv")
TOP_KERNELS = 30  # kernel rows in the Markdown; JSON/CSV have all
MISSING = "–"
STATUS_TEXT = {BOTH: "", REMOVED: "removed", ADDED: "added"}
BASIS_TEXT = {STEP_BASIS: "per step", "warmup": "per warmup iteration", "capture": "per capture"}


# -- numbers -----------------------------------------------------------------------------------
def ms(ns: float | None) -> str:
    return MISSING if ns is None else f"{ns / 1e6:,.3f}"


def signed_ms(ns: float) -> str:
    text = f"{ns / 1e6:+,.3f}"
    return "0.000" if text in ("+0.000", "-0.000") else text


def pct(p: float | None) -> str:
    return MISSING if p is None else f"{p:+.1f}%"


def count(n: float | None) -> str:
    if n is None:
        return MISSING
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.2f}"


def signed_count(n: float) -> str:
    return f"{n:+,.0f}" if float(n).is_integer() else f"{n:+,.2f}"


def delta_cells(d: Delta) -> list[str]:
    """A, B, Δ, Δ% of a time."""
    return [ms(d.a), ms(d.b), signed_ms(d.delta), pct(d.delta_pct)]


def family_label(key: str) -> str:
    return families.family(key).label


def _iterations(a: int, b: int) -> str:
    return f"{a}" if a == b else f"{a} | {b}"



def kernel_labels(kernels: list[KernelDiff], width: int = 36) -> dict[str, str]:
    """Short names people tell apart (kernel_names.distinct_labels: the functor, the dtype, the
    word that differs, or #1/#2), and for a GEMM what it multiplies in and on which units
    (`tf32, tensor cores`: an fp32 → tf32 diff says what its added kernels are)."""
    names = list(dict.fromkeys(k.name for k in kernels))
    labels, _ = distinct_labels(names)
    out = {}
    for name, label in zip(names, labels):
        units = gemm_math(name).partition(", ")[2]  # the label says the type already
        base = table_name(name)
        if units and label.startswith(base):  # `… tf32, tensor cores`, then any tag
            label = f"{base}, {units}{label[len(base):]}"
        out[name] = label
    return out


# -- Markdown -------------------------------------------------------------------------------
def verdict(step: StepDiff) -> str:
    """One sentence: slower or faster, and by how much."""
    d = step.step_ns
    word = "slower" if d.delta > 0 else "faster" if d.delta < 0 else "as fast"
    return (f"B's step is {abs(d.delta_pct or 0):.1f}% {word} than A's ({ms(d.a)} → {ms(d.b)} ms, "
            f"Δ {signed_ms(d.delta)} ms, step period (start to the next step's start), mean of "
            f"{_iterations(step.a_steps, step.b_steps)} steps)")


MATH_PATH_WORDS = {"fp32": "fp32 on CUDA cores", "tf32": "TF32 on tensor cores", "bf16": "bf16/fp16 on tensor cores",
                   "fp8": "fp8 on tensor cores"}


def math_path_text(step: StepDiff) -> str:
    """The GEMMs' change of math path in words (`fp32 on CUDA cores → TF32 on tensor cores`), with
    the GEMM time per step on each path in A and B; "" when their main path is the same."""
    change = step.math_path_change()
    if change is None:
        return ""
    (a,), (b,) = change
    per = "; ".join(f"{MATH_PATH_WORDS.get(p, p)} {ms(d.a)} → {ms(d.b)} ms/step" for p, d in step.gemm_paths.items())
    return (f"GEMM math path changed: {MATH_PATH_WORDS.get(a, a)} → {MATH_PATH_WORDS.get(b, b)} "
            f"(GEMM kernel time by path: {per})")


def why_lines(step: StepDiff) -> list[str]:
    """The step's Δ in words: wall time against GPU time, then the families and phases."""
    idle = Delta((step.step_ns.a or 0) - (step.busy_ns.a or 0), (step.step_ns.b or 0) - (step.busy_ns.b or 0))
    fams = ", ".join(f"{family_label(k)} {signed_ms(d.delta)} ms" for k, d in step.families if d.delta)
    phases = ", ".join(f"{p.phase} {signed_ms(p.op_ns.delta)} ms" for p in step.phases if p.op_ns.delta)
    lines = [
        (f"- GPU busy per step {ms(step.busy_ns.a)} → {ms(step.busy_ns.b)} ms (Δ {signed_ms(step.busy_ns.delta)} ms); "
        f"step period not covered by GPU work (period − GPU busy) {ms(idle.a)} → {ms(idle.b)} ms "
        f"(Δ {signed_ms(idle.delta)} ms)."),
        f"- GPU op time per step (kernels + memcpy/memset) {ms(step.op_ns.a)} → {ms(step.op_ns.b)} ms "
        f"(Δ {signed_ms(step.op_ns.delta)} ms)" + (f": {fams}." if fams else "."),
    ]
    if phases:
        lines.append(f"- By phase (GPU op time): {phases}.")
    change = math_path_text(step)
    if change:
        lines.append(f"- {change}.")
    if step.warmup_ns is not None:
        lines.append(f"- Warmup (apart, mean of {_iterations(step.a_warmup, step.b_warmup)} iterations): "
                     f"{ms(step.warmup_ns.a)} → {ms(step.warmup_ns.b)} ms (Δ {signed_ms(step.warmup_ns.delta)} ms).")
    return lines


def waterfall_table(step: StepDiff) -> tuple[list[str], list[list]]:
    """Phase x family: Δ GPU op time per step (ms); families that moved, largest first."""
    keys = [k for k, d in step.families if d.delta]
    headers = ["phase", "Δ total", *[family_label(k) for k in keys]]
    rows = [[p.phase, signed_ms(p.op_ns.delta), *[signed_ms(p.family_ns[k].delta) for k in keys]]
            for p in step.phases]
    rows.append(["step", signed_ms(step.op_ns.delta), *[signed_ms(d.delta) for k, d in step.families if d.delta]])
    return headers, rows


def kernel_rows(kernels: list[KernelDiff], labels: dict[str, str] | None = None) -> list[list]:
    labels = labels or kernel_labels(kernels)
    return [[labels.get(k.name, k.short), family_label(k.family), STATUS_TEXT[k.status], *delta_cells(k.time_ns),
             count(k.count.a), count(k.count.b)] for k in kernels]


KERNEL_HEADERS = ["kernel", "family", "status", "A ms", "B ms", "Δ ms", "Δ%", "A count", "B count"]
FAMILY_HEADERS = ["family", "A ms", "B ms", "Δ ms", "Δ%", "A count", "B count", "removed", "added"]


def family_rows(fams: list[FamilyDiff]) -> list[list]:
    return [[f.label, *delta_cells(f.time_ns), count(f.count.a), count(f.count.b), f.removed, f.added]
            for f in fams]


def scope_markdown(scope: ScopeDiff, level: str = "##", top: int | None = TOP_KERNELS) -> str:
    basis = f"{BASIS_TEXT[scope.basis]}, A over {scope.a_iterations} and B over {scope.b_iterations}"
    out = [f"{level} Kernels: {md(scope.scope)}", "",
           (f"_GPU ops matched by name, {basis}; sorted by |Δ time|. Total: {ms(scope.time_ns.a)} → "
           f"{ms(scope.time_ns.b)} ms (Δ {signed_ms(scope.time_ns.delta)} ms)._"), ""]
    shown = scope.kernels if top is None else scope.kernels[:top]
    notes = [f"{len(scope.kernels) - len(shown)} more rows in `-f json` / `-f csv`"] if len(shown) < len(scope.kernels) else []
    labels = kernel_labels(scope.kernels)
    out.append(table(KERNEL_HEADERS, kernel_rows(shown, labels), notes=notes))
    for title, rows in (("Removed (only in A)", scope.removed), ("Added (only in B)", scope.added)):
        if rows:
            out.append(f"**{title}:** " + ", ".join(f"{md(labels[k.name])} ({signed_ms(k.time_ns.delta)} ms)"
                                                     for k in rows) + "\n")
    out.append(table(FAMILY_HEADERS, family_rows(scope.families), title=f"By family: {scope.scope}"))
    return "\n".join(out)


def range_rows(d: RunDiff) -> tuple[list[str], list[list]]:
    headers = ["range", "status", "basis", "CPU A ms", "CPU B ms", "CPU Δ ms", "CPU Δ%",
               "GPU busy A ms", "GPU busy B ms", "GPU busy Δ ms", "GPU busy Δ%",
               "kernel A ms", "kernel B ms", "kernel Δ ms", "kernel Δ%", "kernels A", "kernels B", "kernels Δ"]
    many = len(d.threads) > 1
    rows = []
    for t in d.threads:
        for root in t.roots:
            for r in root.walk():
                name = f"{t.label}: {r.path_text}" if many else r.path_text
                name += f" (= {r.role_match})" if r.role_match else ""
                rows.append([name, STATUS_TEXT[r.status], BASIS_TEXT[r.basis], *delta_cells(r.cpu_ns),
                             *delta_cells(r.busy_ns), *delta_cells(r.kernel_ns), count(r.kernels.a),
                             count(r.kernels.b), signed_count(r.kernels.delta)])
    return headers, rows


def config_rows(d: RunDiff) -> list[list]:
    return [[c.key, MISSING if c.a is None else c.a, MISSING if c.b is None else c.b, "" if c.same else "≠"]
            for c in d.config]


def markdown(d: RunDiff, top: int | None = TOP_KERNELS) -> str:
    a, b = Path(d.a_path).name, Path(d.b_path).name
    # names from the profiles and the paths are data: every one through safe.markdown
    out = [f"# nsight-tui diff: {md(a)} → {md(b)}", "",
           f"_A: {md(d.a_path)} · B: {md(d.b_path)} · Δ = B − A · attribution: {d.attribution}_", "",
           f"_basis: {md(d.basis)}_", ""]
    out += [f"> note: {md(n)}" for n in d.notes]
    if d.notes:
        out.append("")
    out.append("## Why: the step's Δ")
    out.append("")
    if d.step is None:
        out.append("No per-step comparison: " + md(d.basis.split(": ", 1)[-1]) + ". The kernel and family diff "
                   "below compares the whole captures.\n")
    else:
        s = d.step
        out += [f"**{verdict(s)}**", "", *why_lines(s), ""]
        headers, rows = waterfall_table(s)
        out.append(table(headers, rows, title="Step Δ by phase and family (GPU op time, ms per step)",
                         notes=[("each phase row adds up to its Δ total; `rest of step`: ops of the step in "
                                "no forward/backward/optimizer range")]))
        out.append(table(KERNEL_HEADERS, kernel_rows(s.top_kernels, kernel_labels(d.kernels.kernels)),
                         title="Largest contributors: kernels (per step)"))
        if s.top_ranges:
            out.append(table(["range", "status", "kernel A ms", "kernel B ms", "Δ ms", "Δ%"],
                             [[r.path_text, STATUS_TEXT[r.status], *delta_cells(r.kernel_ns)] for r in s.top_ranges],
                             title="Largest contributors: ranges inside the step (kernel time per step)"))
    out.append("## Configuration")
    out.append("")
    out.append(table(["", "A", "B", ""], config_rows(d), notes=["≠: differs; nothing is normalised for it"]))
    out.append("## Ranges")
    out.append("")
    out.append(f"_{d.common_ranges} name paths in both runs; per iteration of each range's basis "
               "(per step under step_N, per warmup iteration under warmup_N, else per capture)._\n")
    headers, rows = range_rows(d)
    out.append(table(headers, rows) if rows else "No NVTX ranges in either run.\n")
    out.append(scope_markdown(d.kernels, top=top))
    return "\n".join(out)


# -- JSON -------------------------------------------------------------------------------------
def _delta(d: Delta | None) -> dict | None:
    if d is None:
        return None
    return {"a": d.a, "b": d.b, "delta": d.delta, "delta_pct": d.delta_pct}


def _range(r: RangeDiff) -> dict:
    return {"name": r.name, "path": r.path_text, "status": r.status, "basis": r.basis,
            **({"role_match": r.role_match} if r.role_match else {}),
            **({"layers_by_index": r.layers_by_index} if r.layers_by_index else {}),
            **({"role_unmatched": r.role_unmatched} if r.role_unmatched else {}),
            "a_iterations": r.a_iterations, "b_iterations": r.b_iterations,
            "a_instances": r.a_instances, "b_instances": r.b_instances,
            "cpu_ns": _delta(r.cpu_ns), "busy_ns": _delta(r.busy_ns), "kernel_ns": _delta(r.kernel_ns),
            "kernels": _delta(r.kernels), "children": [_range(c) for c in r.children]}


def _kernel(k: KernelDiff) -> dict:
    return {"name": k.name, "short": k.short, "kind": k.kind, "family": k.family, "status": k.status,
            "time_ns": _delta(k.time_ns), "count": _delta(k.count)}


def _scope(s: ScopeDiff) -> dict:
    return {"scope": s.scope, "basis": s.basis, "a_iterations": s.a_iterations, "b_iterations": s.b_iterations,
            "time_ns": _delta(s.time_ns), "count": _delta(s.count),
            "kernels": [_kernel(k) for k in s.kernels],
            "families": [{"family": f.family, "label": f.label, "time_ns": _delta(f.time_ns),
                          "count": _delta(f.count), "removed": f.removed, "added": f.added} for f in s.families]}


def _step(s: StepDiff | None) -> dict | None:
    if s is None:
        return None
    return {
        "a_steps": s.a_steps, "b_steps": s.b_steps, "a_warmup": s.a_warmup, "b_warmup": s.b_warmup,
        "step_ns": _delta(s.step_ns), "step_cpu_ns": _delta(s.step_cpu_ns), "busy_ns": _delta(s.busy_ns), "op_ns": _delta(s.op_ns),
        "kernel_ns": _delta(s.kernel_ns), "kernels": _delta(s.kernels), "warmup_ns": _delta(s.warmup_ns),
        "slower_pct": s.slower_pct,
        "gemm_math_path_ns": {p: _delta(d) for p, d in s.gemm_paths.items()},
        "gemm_math_path_change": (lambda c: None if c is None else {"a": c[0][0], "b": c[1][0]})(s.math_path_change()),
        "phases": [{"phase": p.phase, "op_ns": _delta(p.op_ns),
                    "family_ns": {k: _delta(v) for k, v in p.family_ns.items() if v.a or v.b}} for p in s.phases],
        "families": [{"family": k, "op_ns": _delta(d)} for k, d in s.families],
        "top_kernels": [_kernel(k) for k in s.top_kernels],
        "top_ranges": [r.path_text for r in s.top_ranges],
    }


def as_json(d: RunDiff) -> dict:
    return {
        "a": d.a_path, "b": d.b_path, "delta": "B - A", "attribution": d.attribution, "basis": d.basis,
        "notes": d.notes,
        "config": [{"key": c.key, "a": c.a, "b": c.b, "same": c.same} for c in d.config],
        "step": _step(d.step),
        "common_ranges": d.common_ranges,
        "threads": [{"thread": t.label, "status": t.status, "a": t.a_label, "b": t.b_label,
                     "ranges": [_range(r) for r in t.roots]} for t in d.threads],
        "kernels": _scope(d.kernels),
    }


def json_text(d: RunDiff) -> str:
    return json.dumps(as_json(d), indent=1, ensure_ascii=False, default=str) + "\n"


# -- CSV: one tidy table -----------------------------------------------------------------------------
CSV_HEADERS = ["section", "scope", "name", "status", "basis", "metric", "a", "b", "delta", "delta_pct"]


def csv_rows(d: RunDiff) -> list[list]:
    rows: list[list] = []

    def add(section, scope, name, status, basis, metric, delta: Delta | None):
        if delta is not None:
            rows.append([section, scope, name, status, basis, metric, delta.a, delta.b, delta.delta, delta.delta_pct])

    for c in d.config:
        rows.append(["config", "", c.key, "same" if c.same else "differs", "", "", c.a, c.b, "", ""])
    if d.step is not None:
        s = d.step
        for metric in ("step_ns", "busy_ns", "op_ns", "kernel_ns", "kernels", "warmup_ns"):
            add("step", "step_N", "step_N", BOTH, STEP_BASIS, metric, getattr(s, metric))
        for p in s.phases:
            add("waterfall", p.phase, "all families", BOTH, STEP_BASIS, "op_ns", p.op_ns)
            for k, v in p.family_ns.items():
                if v.a or v.b:
                    add("waterfall", p.phase, k, BOTH, STEP_BASIS, "op_ns", v)
    for t in d.threads:
        for root in t.roots:
            for r in root.walk():
                for metric in ("cpu_ns", "busy_ns", "kernel_ns", "kernels"):
                    add("range", t.label, r.path_text, r.status, r.basis, metric, getattr(r, metric))
    scope = d.kernels
    for row in scope.kernels:
        add("kernel", scope.scope, row.name, row.status, scope.basis, "time_ns", row.time_ns)
        add("kernel", scope.scope, row.name, row.status, scope.basis, "count", row.count)
    for f in scope.families:
        add("family", scope.scope, f.family, BOTH, scope.basis, "time_ns", f.time_ns)
        add("family", scope.scope, f.family, BOTH, scope.basis, "count", f.count)
    return rows


def csv_text(d: RunDiff) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADERS)
    # names as `stats -f csv` shows them: control characters visible (`\x1b`, `\n`), one row a line
    writer.writerows([["" if v is None else visible(v) if isinstance(v, str) else v for v in row]
                      for row in csv_rows(d)])
    return buf.getvalue()


def render(d: RunDiff, fmt: str, top: int | None = TOP_KERNELS) -> str:
    if fmt == "json":
        return json_text(d)
    if fmt == "csv":
        return csv_text(d)
    return markdown(d, top)
