"""The diff views (no Textual): two runs' merged range tree with Δ columns, the kernel/family
diff of one range, and the why summary, from nsight_tui.parsers.analyses.diff.

The tree is a RangeTreeSource over the merged ranges (expand/collapse/search as in the range
view); its cells show one metric in full (A, B, Δ, Δ%; `t` picks which) and the Δ of the
others. Exports carry exact values (ns per iteration).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from pathlib import Path

import pandas as pd

from nsight_tui.render.diff import math_path_text
from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.analyses.diff import ADDED, REMOVED, Delta, RangeDiff, RunDiff, ScopeDiff, ThreadDiff, diff_runs, kernel_diff
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import Trace, load_trace
from nsight_tui.parsers.model.ranges import ThreadGroup
from nsight_tui.render.diff import BASIS_TEXT, kernel_labels, waterfall_table
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column, TableModel
from nsight_tui.tui.tree_source import RangeTreeSource, TreeRow

METRICS = (("busy_ns", "GPU busy"), ("kernel_ns", "kernel time"), ("cpu_ns", "CPU time"), ("kernels", "kernels"))
STATUS = {REMOVED: "removed", ADDED: "added"}


def signed_duration(ns) -> str:
    if numbers.missing(ns):
        return ""
    return ("+" if ns > 0 else "") + numbers.duration(ns) if abs(ns) >= 0.5 else "0"


def signed_count(n) -> str:
    if numbers.missing(n):
        return ""
    return f"{n:+,.0f}" if float(n).is_integer() else f"{n:+,.1f}"


def plain_count(n) -> str:
    if numbers.missing(n):
        return ""
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def signed_pct(p) -> str:
    return "" if numbers.missing(p) else f"{p:+.1f}%"


def _value_fmt(metric: str):
    return plain_count if metric == "kernels" else numbers.duration


def _delta_fmt(metric: str):
    return signed_count if metric == "kernels" else signed_duration


# -- the range tree ---------------------------------------------------------------------------
def thread_group(t: ThreadDiff, first: bool) -> ThreadGroup:
    """A merged thread as the tree's group row (the first is opened by default): the role,
    then which thread it is in A and in B."""
    sides = " · ".join(f"{s}: {label.rsplit(' / ', 1)[-1]}" for s, label in (("A", t.a_label), ("B", t.b_label))
                       if label)
    status = f" ({STATUS[t.status]})" if t.status in STATUS else ""
    return ThreadGroup(-1, -1, f"{t.label}{status} · {sides}", t.roots, first)  # type: ignore[arg-type]


class DiffTreeSource(RangeTreeSource):
    """The merged ranges as DataGrid rows: one metric in full (A, B, Δ, Δ%), the others' Δ."""

    def __init__(self, diff: RunDiff, metric: str = "busy_ns"):
        self.diff = diff
        self.metric = metric
        self.columns = self._columns()
        super().__init__([thread_group(t, i == 0) for i, t in enumerate(diff.threads)], aggregated=True)

    def _columns(self) -> list[Column]:
        label = dict(METRICS)[self.metric]
        short = {"busy_ns": "busy", "kernel_ns": "kern", "cpu_ns": "CPU", "kernels": "#k"}
        value, delta = _value_fmt(self.metric), _delta_fmt(self.metric)
        cols = [
            Column("range", "Range", None, "left", md_header="Range path", min_width=26, text=True),
            Column("status", "", 7, "left", md_header="Status", priority=8, text=True),
            Column("a", f"{short[self.metric]} A", 9, fmt=value, md_header=f"{label} A", priority=9),
            Column("b", f"{short[self.metric]} B", 9, fmt=value, md_header=f"{label} B", priority=9),
            Column("delta", "Δ", 10, fmt=delta, md_header=f"{label} Δ", priority=10),
            Column("pct", "Δ%", 7, fmt=signed_pct, md_header=f"{label} Δ%", priority=7),
        ]
        for key, name in METRICS:
            if key != self.metric:
                cols.append(Column(f"d:{key}", f"{short[key]} Δ", 10, fmt=_delta_fmt(key), md_header=f"{name} Δ",
                                   priority=3))
        return cols

    def set_metric(self, metric: str) -> None:
        self.metric = metric
        self.columns = self._columns()

    def label(self, row: TreeRow) -> str:
        pad = " " * (2 * row.depth)
        mark = ("▾ " if row.expanded else "▸ ") if row.children else "· "
        obj = row.obj
        if isinstance(obj, ThreadGroup):
            return f"{pad}{mark}{obj.label}"
        node = cast(RangeDiff, obj)
        # matched by role: the other side's name for it (its basis is in the notes and the exports)
        role = f" (= {node.role_match.split(' · ')[0]})" if node.role_match else ""
        return f"{pad}{mark}{node.name}{role}"

    def value(self, row: TreeRow, key: str):
        if row.is_group:
            return None
        node = cast(RangeDiff, row.obj)
        if key.startswith("d:"):
            return getattr(node, key[2:]).delta
        d: Delta = getattr(node, self.metric)
        cells = {"status": STATUS.get(node.status, ""), "a": d.a, "b": d.b, "delta": d.delta, "pct": d.delta_pct}
        return cells.get(key, node.name)

    def export_rows(self) -> tuple[list[str], list[list]]:
        """The rows as expanded on screen, every metric in full (ns per iteration, exact)."""
        headers = ["Thread", "Range path", "Status", "Basis", "A iterations", "B iterations"]
        headers += [f"{name} {side}" for _, name in METRICS for side in ("A", "B", "Δ", "Δ%")]
        rows, thread = [], ""
        for row in list(self.rows):  # a snapshot: the tree may be expanded meanwhile
            if row.is_group:
                thread = row.obj.label
            else:
                rows.append([thread, *_export_cells(cast(RangeDiff, row.obj))])
        return headers, rows


def _export_cells(n: RangeDiff) -> list:
    cells: list = [n.path_text, n.status, BASIS_TEXT[n.basis], n.a_iterations, n.b_iterations]
    for key, _ in METRICS:
        d: Delta = getattr(n, key)
        cells += [numbers.exact(d.a), numbers.exact(d.b), numbers.exact(d.delta), None if d.delta_pct is None else round(d.delta_pct, 3)]
    return cells


@dataclass
class DiffView:
    diff: RunDiff
    a_name: str
    b_name: str
    headline: str  # the verdict, or why there is none
    summary: list[str]  # a few lines under it

    def crumb(self) -> str:
        # the basis first: the file names are long, and a narrow screen cuts the end
        return f"diff {self.basis_short()} · Δ = B − A · {self.a_name} → {self.b_name}"

    def basis_short(self) -> str:
        s = self.diff.step
        if s is None:
            return "per capture"
        return f"per step ({s.a_steps} | {s.b_steps} steps)" if s.a_steps != s.b_steps else f"per step ({s.a_steps} steps)"


SHORT_FAMILY = {"attention": "fused att", "elementwise": "elementw", "normalization": "norm",
                "communication": "comm"}


def short_family(key: str) -> str:
    return SHORT_FAMILY.get(key, key)


def headline(s) -> str:
    """The verdict in one line: `step +0.3% (B slower): 28.07 ms → 28.16 ms (+93.8 µs/step, 3 steps)`
    (the step period, each step's start to the next's, mean over each run's steps)."""
    d = s.step_ns
    word = "B slower" if d.delta > 0 else "B faster" if d.delta < 0 else "same"
    steps = f"{s.a_steps}" if s.a_steps == s.b_steps else f"{s.a_steps} | {s.b_steps}"
    return (f"step period {signed_pct(d.delta_pct)} ({word}): {numbers.duration(d.a)} → {numbers.duration(d.b)} "
            f"({signed_duration(d.delta)}/step, {steps} steps)")


def summary_lines(d: RunDiff) -> tuple[str, list[str]]:
    """The verdict and two short lines: what the GPU time did, by family and by phase."""
    s = d.step
    if s is None:
        head = "no per-step comparison: " + d.basis.split(": ", 1)[-1]
        fams = ", ".join(f"{short_family(f.family)} {signed_duration(f.time_ns.delta)}" for f in d.kernels.families[:4]
                         if f.time_ns.delta)
        return head, [f"whole capture, GPU op time Δ {signed_duration(d.kernels.time_ns.delta)}: {fams}", *d.notes]
    fams = " · ".join(f"{short_family(k)} {signed_duration(v.delta)}" for k, v in s.families[:3] if v.delta)
    phases = " · ".join(f"{p.phase} {signed_duration(p.op_ns.delta)}" for p in s.phases if p.op_ns.delta)
    lines = [f"GPU busy {signed_duration(s.busy_ns.delta)} · {fams}",
             f"GPU op time by phase: {phases}" if phases else "", math_path_text(s), *d.notes]
    return headline(s), [line for line in lines if line]


def build(a: Trace, b: Trace, attribution: str) -> DiffView:
    d = diff_runs(a, b, attribution)
    head, lines = summary_lines(d)
    return DiffView(d, Path(d.a_path).name, Path(d.b_path).name, head, lines)


@dataclass(frozen=True)
class CannotCompare:
    """Why two files could not be compared (one line: a file that cannot be read)."""

    message: str


def compare_files(a: Path, b: Path, attribution: str, held: Callable[[Path], Trace | None],
                  say: Callable[[str], object]) -> DiffView | CannotCompare:
    """The diff of two files: each one the app holds already (`held`), else loaded here
    (read-only, as everywhere); `say` tells the stages."""
    def trace(path: Path) -> Trace:
        kept = held(path)
        if kept is not None:
            return kept
        say(f"loading {path.name}…")
        return load_trace(path)

    try:
        first, second = trace(a), trace(b)
        say("aligning the runs…")
        return build(first, second, attribution)
    except TraceError as exc:
        return CannotCompare(str(exc))


# -- a range's kernels and families ------------------------------------------------------------------
def kernel_columns(count_header: str = "count") -> list[Column]:
    return [
        Column("label", "Kernel", None, "left", text=True, min_width=24, md_header="Kernel"),
        Column("family", "Family", 12, "left", text=True, priority=4, md_header="Family"),
        Column("status", "", 7, "left", text=True, priority=8, md_header="Status"),
        Column("a", "A", 9, fmt=numbers.duration, priority=7, md_header="A (ns)"),
        Column("b", "B", 9, fmt=numbers.duration, priority=7, md_header="B (ns)"),
        Column("delta", "Δ", 10, fmt=signed_duration, priority=10, md_header="Δ (ns)"),
        Column("pct", "Δ%", 7, fmt=signed_pct, priority=6, md_header="Δ%", md_fmt=lambda v: numbers.exact(v)),
        Column("a_count", f"A {count_header}", 7, fmt=plain_count, priority=3, md_header=f"A {count_header}"),
        Column("b_count", f"B {count_header}", 7, fmt=plain_count, priority=3, md_header=f"B {count_header}"),
        Column("name", "", show=False, text=True, md_header="Name (demangled)"),
    ]


@dataclass
class ScopeView:
    scope: ScopeDiff
    kernels: TableModel
    families: TableModel

    def crumb(self) -> str:
        s = self.scope
        base = BASIS_TEXT[s.basis] + (f" ({s.a_iterations} | {s.b_iterations})" if s.basis != "capture" else "")
        return (f"kernels of {s.scope} · {base} · {len(s.removed)} removed, {len(s.added)} added · "
                f"Δ {signed_duration(s.time_ns.delta)}")


def _frame(rows: list[dict]) -> pd.DataFrame:
    keys = ["label", "family", "status", "a", "b", "delta", "pct", "a_count", "b_count", "name"]
    return pd.DataFrame(rows, columns=keys) if rows else pd.DataFrame({k: [] for k in keys})


def scope_view(scope: ScopeDiff) -> ScopeView:
    labels = kernel_labels(scope.kernels)
    krows = [{"label": labels[k.name], "family": families.family(k.family).label, "status": STATUS.get(k.status, ""),
              "a": k.time_ns.a, "b": k.time_ns.b, "delta": k.time_ns.delta, "pct": k.time_ns.delta_pct,
              "a_count": k.count.a, "b_count": k.count.b, "name": k.name} for k in scope.kernels]
    frows = [{"label": f.label, "family": f.label, "status": f"-{f.removed} +{f.added}" if f.removed or f.added else "",
              "a": f.time_ns.a, "b": f.time_ns.b, "delta": f.time_ns.delta, "pct": f.time_ns.delta_pct,
              "a_count": f.count.a, "b_count": f.count.b, "name": f.family} for f in scope.families]
    fcols = kernel_columns("ops")
    fcols[0] = Column("label", "Family", None, "left", text=True, min_width=18, md_header="Family")
    fcols[1] = Column("family", "", show=False, text=True, md_header="Family label")
    fcols[2] = Column("status", "names", 7, "left", text=True, priority=8, md_header="Op names removed/added")
    return ScopeView(scope, TableModel(_frame(krows), kernel_columns()), TableModel(_frame(frows), fcols))


def range_scope(node: RangeDiff) -> ScopeView:
    return scope_view(kernel_diff(node))


# -- the why summary ----------------------------------------------------------------------------
TOP = 3  # contributors of each kind on the why screen (the CLI's Markdown lists more)


@dataclass
class WhyView:
    lines: list[str]
    waterfall: TableModel | None  # phase x family, Δ ns per step
    contributors: list[str]


def why_view(view: DiffView) -> WhyView:
    d = view.diff
    s = d.step
    if s is None:
        return WhyView([view.headline, *view.summary], None, [])
    headers, _ = waterfall_table(s)
    keys = [k for k, v in s.families if v.delta]
    rows = [{"phase": p.phase, "total": p.op_ns.delta, **{k: p.family_ns[k].delta for k in keys}} for p in s.phases]
    rows.append({"phase": "step", "total": s.op_ns.delta, **{k: v.delta for k, v in s.families if v.delta}})
    frame = pd.DataFrame(rows, columns=["phase", "total", *keys])
    cols = [Column("phase", "Phase", 12, "left", text=True, md_header="Phase", priority=11),
            Column("total", "Δ total", 10, fmt=signed_duration, priority=10, md_header="Δ total (ns)")]
    for i, (key, header) in enumerate(zip(keys, headers[2:])):  # narrow screens keep the largest Δ
        cols.append(Column(key, short_family(key), 10, fmt=signed_duration, priority=max(9 - i, 1),
                           md_header=f"{header} Δ (ns)"))
    labels = kernel_labels(d.kernels.kernels)
    top = [f"{signed_duration(k.time_ns.delta):>10}  {STATUS.get(k.status, ''):7}  {labels[k.name]}"
           for k in s.top_kernels[:TOP]]
    top += [f"{signed_duration(r.kernel_ns.delta):>10}  {STATUS.get(r.status, ''):7}  {r.path_text}"
            for r in s.top_ranges[:TOP]]
    step, busy = s.step_ns, s.busy_ns  # idle = step not covered by GPU work; missing on either side: none
    idle = (None if step.a is None or step.b is None or busy.a is None or busy.b is None
            else (step.b - busy.b) - (step.a - busy.a))
    lines = [view.headline,
             f"GPU busy/step {numbers.duration(s.busy_ns.a)} → {numbers.duration(s.busy_ns.b)} ({signed_duration(s.busy_ns.delta)}); "
             f"step not covered by GPU work {signed_duration(idle)}",
             f"GPU op time/step {numbers.duration(s.op_ns.a)} → {numbers.duration(s.op_ns.b)} ({signed_duration(s.op_ns.delta)})"]
    return WhyView(lines, TableModel(frame, cols), top)
