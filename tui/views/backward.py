"""Backward by forward part: per forward part, forward and backward kernel time and bwd/fwd,
with what could not be mapped underneath (data: Session.backward_parts)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Static

from nsight_tui.tui.messages import BackwardPartsReady, Navigation
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.viewmodels.backward_parts import NO_MAPPING, Mapping, empty_table
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class BackwardPartsScreen(TableScreen):
    DEFAULT_CSS = """
    BackwardPartsScreen #table { height: 1fr; }
    BackwardPartsScreen #bdetail { height: auto; max-height: 5; padding: 0 1; background: $panel; }
    """
    view_name = "backward_parts"

    @dataclass
    class PartChosen(Navigation):
        """enter on a forward part: the backward kernels mapped to it (`where` names them in full)."""

        title: str
        positions: np.ndarray
        where: str
    empty_text = "mapping backward onto the forward's parts…"

    BINDING_GROUP_TITLE = "Backward by forward part (b)"
    BINDINGS = [Binding("v", "other_mapping", "Other mapping", id="backward_parts.other_mapping",
                        tooltip="Switch between the mappings this trace allows: by sequence number "
                        "(op ranges) / by name (backward:<part> ranges)")]

    mappings: var[list[Mapping]] = var(list, init=False)
    index: var[int] = var(0, init=False)

    def crumb(self) -> str:
        if not self.mappings:
            return "backward by forward part"
        m = self.mappings[self.index]
        return f"backward by forward part · by {m.method} · {m.basis}"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="bdetail")

    def mounted(self) -> None:
        super().mounted()  # the table's focus and the "mapping…" status
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(BackwardPartsReady(self.session.backward_parts()))

    def on_backward_parts_ready(self, message: BackwardPartsReady) -> None:
        self.grid.empty_text = NO_MAPPING
        self.mappings = message.mappings
        self.show_mapping()

    def watch_index(self) -> None:
        self.show_mapping()

    def show_mapping(self) -> None:
        detail = self.query_one("#bdetail", Static)
        if not self.mappings:
            self.show_table(empty_table())
            detail.update("")
            return
        m = self.mappings[self.index]
        self.show_table(m.table())
        self.show_crumb()
        detail.update(literal("\n".join(m.notes[1:])))

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        """enter: the backward kernels mapped to the part (its sub-parts' included)."""
        if not self.mappings or self.table is None:
            return
        m = self.mappings[self.index]
        path = str(self.table.record(event.row)["path"])
        ops = m.backward_ops(path)
        if ops is None or not len(ops):
            self.set_status(f"no backward kernel maps to {path}")
            return
        total = f" · total ×{m.iterations} iterations" if m.iterations > 1 else ""
        self.post_message(self.PartChosen(f"backward of {path.rsplit('/', 1)[-1]}{total}", ops, f"{path} (by {m.method})"))

    def action_other_mapping(self) -> None:
        if len(self.mappings) > 1:
            self.index = (self.index + 1) % len(self.mappings)
        else:
            self.set_status("this trace allows one mapping only")

    def export_view(self) -> ViewText | None:
        if not self.mappings or self.table is None:
            return None
        m = self.mappings[self.index]
        head = self.export_header(self.table.describe(), *m.notes)
        return ViewText(self.view_name, head, self.export_table(f"Backward by forward part (by {m.method})"))
