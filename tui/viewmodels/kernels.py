"""Kernel tables: the kernels of one range (with its ratios), or of the whole trace."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.kernels import families, occupancy
from nsight_tui.parsers.analyses.ratios import Ratio, family_shares, ratio_panel
from nsight_tui.parsers.kernels.families import describe_kernel
from nsight_tui.parsers.kernels.kernel_names import decode_gemm, distinct_labels, gemm_summary
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column
from nsight_tui.tui.tree_source import path_text
from nsight_tui.tui.viewmodels.ratios import RatioPanelView, panel

WHOLE_TRACE_BASIS = "GPU op time in the whole trace"


@dataclass(frozen=True)
class KernelsView:
    """The kernels of `node` (None: every GPU op of the trace), one row per op name."""

    node: RangeNode | None
    positions: np.ndarray  # the ops in scope (frame positions in trace.ops)
    summary: pd.DataFrame  # model.kernel_summary + family and readable label
    ratios: RatioPanelView
    ranks: str = ""  # which ranks the figures count, where the export has several ("" when one)
    title: str = ""  # what the ops are when they are neither a range's nor the trace's
    # built with the view, in its worker (`indexed`): "by_name" (trace, the ops' name codes
    # sorted, their positions in that order) and "details" (name -> the first row's detail lines)
    index: dict = field(default_factory=dict, compare=False, repr=False)

    def positions_named(self, model: RangeModel, name: str) -> np.ndarray:
        """Positions among `positions` of the ops called `name`: a slice of the index by name
        (a pass over the view's 10^6 ops took 50-100 ms a highlight on the UI thread)."""
        by_name = self.index.get("by_name")
        if by_name is None or by_name[0] is not model.trace:
            return _named(model, self.positions, name)
        _, codes, pos = by_name
        parts = [pos[np.searchsorted(codes, c, "left"):np.searchsorted(codes, c, "right")]
                 for c in _codes_of(model, name)]
        return np.concatenate(parts) if parts else pos[:0]

    def details(self, model: RangeModel, name: str) -> tuple[str, str]:
        """The highlighted kernel's duration distribution and occupancy lines."""
        kept = self.index.get("details", {}).get(name)
        if kept is not None and kept[0] is model.trace:
            return kept[1]
        pos = self.positions_named(model, name)
        return distribution_line(durations(model, pos, name)), occupancy_line(model, pos, name)

    @property
    def scope(self) -> str:
        where = self.title or ("the whole trace" if self.node is None else path_text(self.node))
        return f"{where} ({self.ranks})" if self.ranks else where

    def row_of(self, name: str | None) -> int:
        """Frame row of the kernel called `name` (0 when absent)."""
        if name is None:
            return 0
        hits = np.flatnonzero(self.summary["name"].to_numpy() == name)
        return int(hits[0]) if len(hits) else 0


def indexed(model: RangeModel, view: KernelsView) -> KernelsView:
    """`view` with its index by kernel name and its first row's detail lines, computed now
    (in the worker that builds the view): a highlight then slices instead of scanning."""
    pos = np.asarray(view.positions, dtype=np.int64)
    codes = model.trace.ops["name"].to_numpy()[pos]
    order = np.argsort(codes, kind="stable")
    view.index["by_name"] = (model.trace, codes[order], pos[order])
    if len(view.summary):
        name = view.summary["name"].iloc[view.row_of(None)]
        view.index["details"] = {name: (model.trace, view.details(model, name))}
    return view


def _codes_of(model: RangeModel, name: str) -> list[int]:
    return [i for i, n in enumerate(model.trace.op_names) if n == name]  # one, unless a name repeats


def _named(model: RangeModel, positions: np.ndarray, name: str) -> np.ndarray:
    pos = np.asarray(positions, dtype=np.int64)
    return pos[np.isin(model.trace.ops["name"].to_numpy()[pos], _codes_of(model, name))]


def family_labels(names: pd.Series) -> list[str]:
    """The family label of each kernel name."""
    keys = families.family_codes(names.reset_index(drop=True)).astype(str)
    labels = {f.key: f.label for f in families.FAMILIES}
    return [labels.get(k, k) for k in keys]


def _with_labels(summary: pd.DataFrame) -> pd.DataFrame:
    summary["family"] = family_labels(summary["name"])
    # One table's labels are distinct: kernels that would share one get what tells them apart.
    labels, notes = distinct_labels(summary["name"].tolist())
    summary["label"] = labels
    summary["label_note"] = notes
    return summary


def _with_occupancy(model: RangeModel, positions: np.ndarray, summary: pd.DataFrame) -> pd.DataFrame:
    """Each kernel's theoretical occupancy (its launch configuration with the most GPU time
    among `positions`) and limiter; blank for memory ops and where the GPU's limits are unknown."""
    per = occupancy.by_kernel_name(model.trace, positions)
    names = summary["name"]
    summary["occ_pct"] = names.map(per["occupancy_pct"]).astype(float).to_numpy() if len(per) else np.nan
    summary["occ_limiter"] = names.map(per["limiter"]).fillna("").to_numpy() if len(per) else ""
    summary["occ_configs"] = names.map(per["configs"]).fillna(0).astype(int).to_numpy() if len(per) else 0
    return summary


def occ_text(v) -> str:
    """Theoretical occupancy in percent: `50%`, `12.5%`."""
    if numbers.missing(v):
        return numbers.MISSING
    v = float(v)
    return f"{v:.0f}%" if v == round(v) else f"{v:.1f}%"


OCC_HEADER = "Theoretical occupancy % (from launch configuration)"
# nsys's Time% (cuda_gpu_kern_sum) is of kernel time alone; this share counts memcpy/memset too
SHARE_HEADER = "Share of GPU op time (kernels + memcpy/memset; nsys Time% is of kernels alone)"
SHARE_CAPTION = "%ops: of kernel + memcpy/memset time"


def kernel_columns(demangled: bool) -> list[Column]:
    return [
        Column("name" if demangled else "label", "Kernel", None, "left", text=True, min_width=26,
               md_header="Kernel (demangled)" if demangled else "Kernel"),
        Column("family", "Family", 13, "left", text=True, priority=6, md_header="Family"),
        Column("instances", "Count", 7, fmt=numbers.count, priority=8, md_header="Instances"),
        Column("total_ns", "Total", 9, fmt=numbers.duration, priority=9, md_header="Total (ns)"),
        Column("avg_ns", "Avg", 9, fmt=numbers.duration, priority=4, md_header="Avg (ns)"),
        Column("min_ns", "Min", 9, fmt=numbers.duration, priority=2, md_header="Min (ns)"),
        Column("max_ns", "Max", 9, fmt=numbers.duration, priority=3, md_header="Max (ns)"),
        Column("occ_pct", "Occ", 6, fmt=occ_text, priority=5, md_header=OCC_HEADER),
        Column("occ_limiter", "", show=False, text=True, md_header="Occupancy limiter"),
        Column("share", "%ops", 6, fmt=numbers.percent, priority=7, md_header=SHARE_HEADER,
               md_fmt=lambda v: round(float(v), 4)),
        Column("label" if demangled else "name", "", show=False, text=True,
               md_header="Kernel" if demangled else "Kernel (demangled)"),
        Column("short", "", show=False, text=True, md_header="Short name (nsys)"),
        Column("kind", "", show=False, md_header="Kind", text=True),
        Column("label_note", "", show=False, text=True, md_header="How it differs from a kernel of the same label"),
        Column("med_ns", "", show=False, md_header="Median (ns)"),
    ]


OPTIMIZER_RANGES = ("optimizer",)  # the phase; PyTorch's record_function ranges start `Optimizer.`


def in_optimizer(node: RangeNode) -> bool:
    """Whether the range is the optimizer step or inside it (by its name path)."""
    cur: RangeNode | None = node
    while cur is not None:
        text = cur.name.split(":", 1)[1] if ":" in cur.name else cur.name
        if text in OPTIMIZER_RANGES or text.startswith("Optimizer."):
            return True
        cur = cur.parent
    return False


def _by_range(ratios: list[Ratio], node: RangeNode) -> list[Ratio]:
    """In the optimizer step, families by name miss what the kernels are for (AdamW with
    foreach=False is 100% "Elementwise", with foreach "Optimizer"): the shares say both, the
    optimizer's by range first."""
    if not in_optimizer(node):
        return ratios
    shares = [r for r in ratios if r.label.endswith(" share") and r.basis == "kernel + memory op time in range"]
    if not shares or any(r.label.startswith("Optimizer") and isinstance(r.value, float) and r.value >= 0.999
                          for r in shares):
        return ratios
    by_range = Ratio("Optimizer by range share", 1.0, "fraction", shares[0].basis)
    at = ratios.index(shares[0])
    return [*ratios[:at], by_range, *ratios[at:]]


def range_kernels(model: RangeModel, node: RangeNode, extra_ratios: list[Ratio] | None = None,
                  ranks: str = "") -> KernelsView:
    positions = node.op_positions()
    summary = _with_occupancy(model, positions, _with_labels(model.kernel_summary(positions)))
    if in_optimizer(node):  # the family by name, and the optimizer's by range (the detail says so)
        summary["label_note"] = [
            (n + "\n" if n else "") + (f"in the optimizer step: family Optimizer by range ({f} by name)"
                                        if not f.startswith("Optimizer") else "")
            for n, f in zip(summary["label_note"], summary["family"])]
        summary["label_note"] = summary["label_note"].str.strip()
    return indexed(model, KernelsView(node, positions, summary,
                                      panel(_by_range(ratio_panel(model, node), node) + list(extra_ratios or [])), ranks))


def trace_kernels(model: RangeModel, ranks: str = "") -> KernelsView:
    """Every GPU op in the model's scope (the trace, or one rank's); `ranks` says which ranks
    that is when the export has several (the basis of the shares says it too)."""
    positions = model.scope_op_positions()
    shares = family_shares(model, positions)
    basis = f"{WHOLE_TRACE_BASIS} ({ranks})" if ranks else WHOLE_TRACE_BASIS
    ratios = [Ratio(f"{r.label} share", r.share, "fraction", basis) for r in shares.itertuples() if r.total_ns]
    return indexed(model, KernelsView(None, positions,
                                      _with_occupancy(model, positions, _with_labels(model.kernel_summary(positions))),
                                      panel(ratios), ranks))


def op_kernels(model: RangeModel, positions: np.ndarray, title: str, basis: str) -> KernelsView:
    """The kernels of a set of ops (a backward part's, from `b`), shares of their own time."""
    positions = np.asarray(positions, dtype=np.int64)
    shares = family_shares(model, positions)
    ratios = [Ratio(f"{r.label} share", r.share, "fraction", basis) for r in shares.itertuples() if r.total_ns]
    return indexed(model, KernelsView(None, positions,
                                      _with_occupancy(model, positions, _with_labels(model.kernel_summary(positions))),
                                      panel(ratios), title=title))


SPARK = "▁▂▃▄▅▆▇█"
HIST_BINS = 8


def nearest_rank(sorted_values: np.ndarray, p: float) -> int:
    """The p-th percentile by nearest rank: the smallest value with at least p% of the values at
    or below it (the sorted value at index ceil(p/100 · n) − 1)."""
    n = len(sorted_values)
    return int(sorted_values[max(0, min(n - 1, int(np.ceil(p / 100 * n)) - 1))])


def durations(model: RangeModel, positions: np.ndarray, name: str) -> np.ndarray:
    """The durations (ns) of the ops called `name` among `positions`, sorted."""
    t = model.trace
    pos = _named(model, positions, name)
    return np.sort(t.ops["end"].to_numpy()[pos] - t.ops["start"].to_numpy()[pos])


def distribution_line(d: np.ndarray) -> str:
    """`72 launches: p50 66.0 µs · p90 70.1 µs · p99 72.0 µs · 60.0 µs ▁▃█▆▂▁ 80.0 µs`: the
    launches' durations by nearest rank, and a histogram over 8 log-spaced bins from the
    shortest to the longest (what nsys's cuda_gpu_kern_hist recipe gives)."""
    if len(d) == 0:
        return ""
    head = (f"{len(d):,} launches: p50 {numbers.duration(nearest_rank(d, 50))} · "
            f"p90 {numbers.duration(nearest_rank(d, 90))} · p99 {numbers.duration(nearest_rank(d, 99))}")
    lo, hi = int(d[0]), int(d[-1])
    if len(d) < 2 or hi <= lo:
        return head
    edges = np.geomspace(max(lo, 1), hi, HIST_BINS + 1)
    counts, _ = np.histogram(np.clip(d, max(lo, 1), hi), bins=edges)
    top = counts.max()
    spark = "".join(" " if c == 0 else SPARK[min(len(SPARK) - 1, int((len(SPARK) - 1) * c / top + 0.5))] for c in counts)
    return f"{head} · {numbers.duration(lo)} {spark} {numbers.duration(hi)}"


def occupancy_line(model: RangeModel, positions: np.ndarray, name: str) -> str:
    """`Theoretical occupancy (from launch configuration) 25%, limited by registers: 128 regs × 128
    threads, 13,056 B shared (132 KB carve-out); blocks/SM by warps 16, regs 4, shared 9,
    max 32`: the kernel's launch configuration with the most GPU time among `positions`
    (and, when it ran with several, the range over them)."""
    trace = model.trace
    codes = [i for i, n in enumerate(trace.op_names) if n == name]
    if not codes:
        return ""
    pos = np.asarray(positions, dtype=np.int64)
    pos = pos[np.isin(trace.ops["name"].to_numpy()[pos], codes)]
    per = occupancy.name_configs(trace, pos)
    if per.empty:
        note = occupancy.trace_occupancy(trace).note
        return f"Occupancy: {note}" if note and (trace.ops["kind"].to_numpy()[pos] == 0).any() else ""
    top = per.iloc[0]
    shared = int(top["smem_static"]) + int(top["smem_dynamic"])
    carve = int(top["smem_config"])
    line = (f"Theoretical occupancy (from launch configuration) {occ_text(top['occupancy_pct'])}, limited by "
            f"{top['limiter']}: {int(top['regs'])} regs × {int(top['threads']):,} threads, {shared:,} B shared"
            + (f" ({carve // 1024} KB carve-out)" if carve else "")
            + f"; blocks/SM by warps {int(top['by_warps'])}, regs {_limit(top['by_registers'])}, "
            f"shared {_limit(top['by_shared'])}, max {int(top['by_blocks'])}")
    if len(per) > 1:
        lo, hi = per["occupancy_pct"].min(), per["occupancy_pct"].max()
        line += (f" (the most GPU time of {len(per)} configurations: {occ_text(lo)}–{occ_text(hi)})" if lo != hi
                 else f" (all {len(per)} configurations)")
    return line


def _limit(v) -> str:
    return "–" if int(v) >= occupancy.UNLIMITED else str(int(v))


def kernel_detail(name: str, note: str = "", distribution: str = "", occupancy_text: str = "") -> str:
    """One or two lines about a kernel: what it does (its family's description when nothing
    more specific is known) and, for cuBLAS/CUTLASS GEMMs, the decoded name; `note`: how it
    differs from a kernel of the same label in its table."""
    lines = [describe_kernel(name), note, distribution, occupancy_text]
    decoded = decode_gemm(name)
    if decoded:
        lines.append(gemm_summary(decoded))
    return "\n".join(line for line in lines if line)
