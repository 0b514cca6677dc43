"""Kernel tables: the kernels of one range (with its ratios panel), or of the whole trace."""
from __future__ import annotations

import numpy as np
import pandas as pd
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.widgets import Static
from textual.worker import get_current_worker

from nsight_tui.parsers import families
from nsight_tui.parsers.analysis import Ratio, family_shares, ratio_panel
from nsight_tui.render.markdown import table as md_table
from nsight_tui.render.numbers import quantity
from nsight_tui.tui import fmt
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.viewmodels.timeline import target_for_node
from nsight_tui.tui.tree_source import path_text
from nsight_tui.tui.views.base import TableScreen
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.ratios import RatioPanel

WIDE = 120  # from this width the ratios sit beside the table, with their bases


def family_labels(names: pd.Series) -> list[str]:
    """The family label of each kernel name."""
    keys = families.family_codes(names.reset_index(drop=True)).astype(str)
    labels = {f.key: f.label for f in families.FAMILIES}
    return [labels.get(k, k) for k in keys]


def add_labels(summary: pd.DataFrame) -> pd.DataFrame:
    summary["family"] = family_labels(summary["name"])
    summary["label"] = [display_kernel_name(n) for n in summary["name"]]
    return summary


def kernel_columns(demangled: bool) -> list[Column]:
    return [
        Column("name" if demangled else "label", "Kernel", None, "left", text=True, min_width=30,
               md_header="Kernel (demangled)" if demangled else "Kernel"),
        Column("family", "Family", 13, "left", text=True, priority=6, md_header="Family"),
        Column("instances", "Count", 7, fmt=fmt.count, priority=8, md_header="Instances"),
        Column("total_ns", "Total", 9, fmt=fmt.duration, priority=9, md_header="Total (ns)"),
        Column("avg_ns", "Avg", 9, fmt=fmt.duration, priority=4, md_header="Avg (ns)"),
        Column("min_ns", "Min", 9, fmt=fmt.duration, priority=2, md_header="Min (ns)"),
        Column("max_ns", "Max", 9, fmt=fmt.duration, priority=3, md_header="Max (ns)"),
        Column("share", "%", 6, fmt=fmt.percent, priority=7, md_header="Share of range GPU time",
               md_fmt=lambda v: round(float(v), 4)),
        Column("label" if demangled else "name", "", show=False, text=True,
               md_header="Kernel" if demangled else "Kernel (demangled)"),
        Column("short", "", show=False, text=True, md_header="Short name (nsys)"),
        Column("kind", "", show=False, md_header="Kind", text=True),
        Column("med_ns", "", show=False, md_header="Median (ns)"),
    ]


class KernelsScreen(TableScreen):
    """`node` None: every GPU op of the trace (the global kernel summary)."""

    hint = "enter: its launches · d: full names"

    BINDINGS = [Binding("d", "toggle_names", "Full names",
                        tooltip="Kernel names: readable short form / full demangled name")]

    def __init__(self, session, node=None, select_name: str | None = None, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.node = node
        self.select_name = select_name
        self.positions: np.ndarray | None = None
        self.ratios: list = []
        self.demangled = False

    @property
    def view_name(self) -> str:  # type: ignore[override]
        return "kernels" if self.node is None else f"{self.node.label}_kernels"

    def crumb(self) -> str:
        if self.node is None:
            return "kernel summary: every GPU operation in the trace"
        n = self.node
        times = f" ×{n.instances}" if n.instances > 1 else ""
        return f"kernels of {path_text(n)}{times} · {n.kernels:,} kernels"

    def compose_body(self) -> ComposeResult:
        with Container(id="kbody"):
            yield DataGrid(id="table", empty_text=self.empty_text)
            yield RatioPanel(id="ratios")
        yield Static("", id="kdetail")

    def on_mount(self) -> None:
        super().on_mount()
        self._layout_for(self.size.width)
        self._build()

    def on_resize(self, event) -> None:
        self._layout_for(event.size.width)

    def _layout_for(self, width: int) -> None:
        wide = width >= WIDE
        self.set_class(wide, "-wide")
        panel = self.query_one(RatioPanel)
        panel.show(panel.ratios, compact=not wide)

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def _build(self) -> None:
        session, node = self.session, self.node
        model = session.model
        if node is None:
            positions, summary, ratios = global_summary(session)
        else:
            positions = node.op_positions()
            summary = add_labels(model.kernel_summary(positions))
            ratios = range_ratios(model, node, session)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._built, positions, summary, ratios)

    def _built(self, positions, summary: pd.DataFrame, ratios: list) -> None:
        self.positions = positions
        self.ratios = ratios
        table = TableModel(summary, kernel_columns(self.demangled))
        cursor = 0
        if self.select_name is not None:
            hits = np.flatnonzero(summary["name"].to_numpy() == self.select_name)
            cursor = int(hits[0]) if len(hits) else 0
        self.grid.empty_text = "no GPU work attributed to this range" if self.node is not None else "no GPU work"
        self.show_table(table, cursor)
        self.query_one(RatioPanel).show(ratios, compact=self.size.width < WIDE)
        self._show_detail(cursor)

    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        self._show_detail(event.row)

    def _show_detail(self, row: int) -> None:
        """What the highlighted kernel is: a plain-language line, and a GEMM's decoded name."""
        detail = self.query_one("#kdetail", Static)
        if self.table is None or not len(self.table) or row is None or row >= len(self.table):
            detail.update("")
            return
        detail.update(kernel_detail(self.table.record(row)["name"]))

    def action_toggle_names(self) -> None:
        if self.table is None:
            return
        self.demangled = not self.demangled
        keep = self.selected_position()
        old = self.table
        table = TableModel(old.frame, kernel_columns(self.demangled), old.sort)
        table.set_filter(old.filter_text)
        self.table = table
        row = table.row_of_position(keep) if keep is not None else 0
        self.grid.set_source(table, row or 0)
        self._sync_grid()

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None or self.positions is None:
            return
        rec = self.table.record(event.row)
        self.app.open_launches(self.node, rec["name"], rec["label"], self.positions)

    def timeline_target(self):
        """`t`: the range these kernels belong to (its median instance); the whole trace for `2`."""
        return None if self.node is None else target_for_node(self.session.model, self.node)

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = self.export_header(self.table.describe())
        scope = "the whole trace" if self.node is None else path_text(self.node)
        body = self.export_table(f"Kernels of {scope}")
        if self.ratios:
            body += "\n" + md_table(["Ratio", "Value", "Basis"], [[r.label, quantity(r.value, r.unit), r.basis] for r in self.ratios],
                                    title="Ratios")
        return ViewText(self.view_name, head, body)


def kernel_detail(name: str) -> str:
    """One or two lines about a kernel: what it does (its family's description when nothing
    more specific is known) and, for cuBLAS/CUTLASS GEMMs, the decoded name."""
    from nsight_tui.parsers.families import describe_kernel
    from nsight_tui.parsers.kernel_names import decode_gemm, gemm_summary

    lines = [describe_kernel(name)]
    decoded = decode_gemm(name)
    if decoded:
        lines.append(gemm_summary(decoded))
    return "\n".join(line for line in lines if line)


def range_ratios(model, node, session=None) -> list:
    """The range's ratios, then its roofline figures (TFLOP/s, GB/s, verdict) when a session
    gives the counts and peaks."""
    from nsight_tui.tui.roofline_vm import ratios as roofline_ratios

    return ratio_panel(model, node) + (roofline_ratios(session, node) if session is not None else [])


def global_ratios(model, positions) -> list:
    shares = family_shares(model, positions)
    return [Ratio(f"{r.label} share", r.share, "fraction", "GPU op time in the whole trace")
            for r in shares.itertuples() if r.total_ns]


def global_summary(session) -> tuple:
    """All ops' kernel table and ratios, computed once per session (the app warms it in the
    background after loading, so the `2` view opens at once)."""
    cached = session.cache.get("global_kernels")
    if cached is None:
        model = session.model
        positions = np.arange(len(session.trace.ops), dtype=np.int64)
        summary = add_labels(model.kernel_summary(positions))
        cached = session.cache["global_kernels"] = (positions, summary, global_ratios(model, positions))
    return cached
