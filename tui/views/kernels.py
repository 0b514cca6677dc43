"""Kernel tables: the kernels of one range (with its ratios panel), or of the whole trace."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.reactive import var
from textual.widgets import Static

from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.numbers import quantity
from nsight_tui.tui.messages import KernelsReady, Navigation
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.tree_source import path_text
from nsight_tui.tui.viewmodels.kernels import (
    SHARE_CAPTION,
    KernelsView,
    kernel_columns,
    kernel_detail,
)
from nsight_tui.tui.viewmodels.timeline import target_for_node
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.ratios import RatioPanel

WIDE = 120  # from this width the ratios sit beside the table, with their bases


class KernelsScreen(TableScreen):
    """`node` None: every GPU op of the trace (the global kernel summary)."""

    @dataclass
    class KernelChosen(Navigation):
        """enter on a kernel: its launches (`positions`: its ops, in the model's op order)."""

        node: RangeNode | None
        name: str
        short: str
        positions: np.ndarray

    BINDING_GROUP_TITLE = "Kernel tables"
    BINDINGS = [Binding("d", "toggle_names", "Full names",
                        tooltip="Kernel names: readable short form / full demangled name", id="kernels.names")]

    demangled: var[bool] = var(False, init=False)

    hint = "enter: its launches · d: full names"

    def __init__(self, session, node=None, select_name: str | None = None, ops=None, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.node = node
        self.select_name = select_name
        self.ops = ops  # (title, positions): a set of ops that is no range (a backward part's)
        self.view: KernelsView | None = None
        self._detail: str | None = None  # the highlighted kernel's detail as shown
        self._distributions: dict[str, str] = {}
        self._occupancy: dict[str, str] = {}  # the kernel's theoretical occupancy line, per name
        # Wide or narrow from the start: setting the class after mounting restyles every widget.
        self.set_class(self.app.size.width >= WIDE, "-wide")

    def retarget(self, session, node=None, select_name: str | None = None) -> None:
        """A spare screen (composed ahead) becomes the kernels of `node` and starts."""
        self.node, self.select_name, self.ops = node, select_name, None
        self.start_spare(session)

    @property
    def view_name(self) -> str:  # type: ignore[override]
        if self.ops is not None:
            return "backward_part_kernels"
        return "kernels" if self.node is None else f"{self.node.label}_kernels"

    def crumb(self) -> str:
        if self.ops is not None:
            return f"kernels of {self.ops[0]} · {len(self.ops[1]):,} kernels"
        if self.node is None:
            scope = self.session.scope_text()
            # the share's basis first: nsys's Time% (kernels alone) is what users compare it with
            return f"kernel summary · {SHARE_CAPTION} · every GPU operation in the trace" + (f" · {scope}" if scope else "")
        n = self.node
        times = f" ×{n.instances}" if n.instances > 1 else ""
        scope = self.session.node_scope_text(n)
        return (f"kernels of {path_text(n)}{times} · {n.kernels:,} kernels" + (f" · {scope}" if scope else "")
                + f" · {SHARE_CAPTION}")

    def compose_body(self) -> ComposeResult:
        with Container(id="kbody"):
            yield DataGrid(id="table", empty_text=self.empty_text)
            yield RatioPanel(id="ratios")
        yield Static("", id="kdetail")

    def mounted(self) -> None:
        super().mounted()
        self._layout_for(self.app.size.width)  # (a spare screen was never laid out: no size of its own)
        # Computed already (warm-up, an earlier opening): on screen with the first frame, no
        # worker and no second layout; else computed in the worker.
        session = self.session
        if self.ops is not None:
            view = None
        else:
            view = session.trace_kernels_kept() if self.node is None else session.range_kernels_kept(self.node)
        if view is not None:
            self.show_view(view)
        else:
            self.build()

    def on_resize(self, event) -> None:
        self._layout_for(event.size.width)

    def _layout_for(self, width: int) -> None:
        wide = width >= WIDE
        self.set_class(wide, "-wide")
        self.query_one(RatioPanel).compact = not wide

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        session = self.session
        if self.ops is not None:
            view = session.part_kernels(*self.ops)
        else:
            view = session.trace_kernels() if self.node is None else session.range_kernels(self.node)
        self.post_message(KernelsReady(view))

    def on_kernels_ready(self, message: KernelsReady) -> None:
        self.show_view(message.view)

    def show_view(self, view: KernelsView) -> None:
        self.view = view
        self._distributions = {}
        self._occupancy = {}
        self.grid.empty_text = "no GPU work attributed to this range" if self.node is not None or self.ops else "no GPU work"
        cursor = view.row_of(self.select_name)
        self.show_table(TableModel(view.summary, kernel_columns(self.demangled)), cursor)
        self.query_one(RatioPanel).show(view.ratios)
        self._show_detail(cursor)

    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        self._show_detail(event.row)

    def _show_detail(self, row: int | None) -> None:
        """What the highlighted kernel is: a plain-language line, and a GEMM's decoded name."""
        if self.table is None or not len(self.table) or row is None or row >= len(self.table):
            text = ""
        else:
            rec = self.table.record(row)
            text = kernel_detail(rec["name"], rec.get("label_note") or "", self._distribution(rec["name"]),
                                 self._occupancy.get(rec["name"], ""))
        if text == self._detail:
            return  # the cursor's kernel again (the first highlight, a sort): no layout, no repaint
        lines = text.count("\n")
        layout = self._detail is None or lines != self._detail.count("\n")  # a new height (auto)
        self._detail = text
        self.query_one("#kdetail", Static).update(literal(text), layout=layout)

    def _distribution(self, name: str) -> str:
        """The highlighted kernel's duration percentiles and histogram (kept per name: the
        cursor comes back to a row without recomputing)."""
        if self.view is None:
            return ""
        kept = self._distributions.get(name)
        if kept is None:
            kept, self._occupancy[name] = self.view.details(self.session.model, name)
            self._distributions[name] = kept
        return kept

    def action_toggle_names(self) -> None:
        if self.table is not None:
            self.demangled = not self.demangled

    def watch_demangled(self, demangled: bool) -> None:
        if self.table is None:
            return
        keep = self.selected_position()
        old = self.table
        table = TableModel(old.frame, kernel_columns(demangled), old.sort)
        table.set_filter(old.filter_text)
        row = table.row_of_position(keep) if keep is not None else 0
        self.show_table(table, row or 0)

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None or self.view is None:
            return
        rec = self.table.record(event.row)
        # the kernel's own ops, a slice of the view's index by name (not the table's 10^6 ops,
        # each tested for its name in the launches' worker)
        named = self.view.positions_named(self.session.model, rec["name"])
        self.post_message(self.KernelChosen(self.node, rec["name"], rec["label"], named))

    def timeline_target(self):
        """`t`: the range these kernels belong to (its median instance); the whole trace for `2`."""
        return None if self.node is None or self.ops is not None else target_for_node(self.session.model, self.node)

    def export_view(self) -> ViewText | None:
        if self.table is None or self.view is None:
            return None
        head = self.export_header(self.table.describe())
        body = self.export_table(f"Kernels of {self.view.scope}")
        ratios = self.view.ratios
        if not ratios.empty:
            rows = [[r.label, quantity(r.value, r.unit), r.basis] for r in ratios.all]
            body += "\n" + md_table(["Ratio", "Value", "Basis"], rows, title="Ratios")
        return ViewText(self.view_name, head, body)
