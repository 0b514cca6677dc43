"""Backward by forward part: per forward part, forward and backward kernel time and bwd/fwd
(parsers.backward_parts), with what could not be mapped underneath."""
from __future__ import annotations

import pandas as pd
from nsight_tui.parsers.backward_parts import backward_parts
from nsight_tui.tui import fmt
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.messages import BackwardPartsReady
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from nsight_tui.render import backward_parts as text


def ratio(x) -> str:
    return "" if fmt.missing(x) else f"{x:.2f}x"


COLUMNS = [
    Column("label", "Forward part", None, "left", text=True, min_width=20, md_header="Forward part"),
    Column("fwd", "Fwd", 9, fmt=fmt.duration, priority=9, md_header="Forward kernel time (ns)"),
    Column("bwd", "Bwd", 9, fmt=fmt.duration, priority=9, md_header="Backward kernel time (ns)"),
    Column("ratio", "Bwd/fwd", 8, fmt=ratio, priority=8, md_header="Bwd/fwd", md_fmt=lambda v: round(float(v), 4)),
    Column("fwd_self", "Fwd self", 9, fmt=fmt.duration, priority=4, md_header="Forward self (ns)"),
    Column("bwd_self", "Bwd self", 9, fmt=fmt.duration, priority=4, md_header="Backward self (ns)"),
    Column("self_ratio", "Self b/f", 8, fmt=ratio, priority=5, md_header="Self bwd/fwd",
           md_fmt=lambda v: round(float(v), 4)),
    Column("path", "", show=False, text=True, md_header="Path"),
]


class BackwardPartsScreen(TableScreen):
    DEFAULT_CSS = """
    BackwardPartsScreen #table { height: 1fr; }
    BackwardPartsScreen #bdetail { height: auto; max-height: 5; padding: 0 1; background: $panel; }
    """
    view_name = "backward_parts"
    empty_text = "mapping backward onto the forward's parts…"

    BINDING_GROUP_TITLE = "Backward by forward part (b)"
    BINDINGS = [Binding("v", "other_mapping", "Other mapping", id="backward_parts.other_mapping",
                        tooltip="Switch between the mappings this trace allows: by sequence number "
                        "(op ranges) / by name (backward:<part> ranges)")]

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.tables: list = []
        self.index = 0

    def crumb(self) -> str:
        if not self.tables:
            return "backward by forward part"
        return f"backward by forward part · by {self.tables[self.index].method}"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="bdetail")

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(BackwardPartsReady(backward_parts(self.session.model)))

    def on_backward_parts_ready(self, message: BackwardPartsReady) -> None:
        self.tables = message.tables
        self.grid.empty_text = ("no backward-to-forward mapping: capture with --autograd-nvtx / --emit-nvtx or "
                                "--backward-ranges, with forward and backward ranges")
        self._show()

    def _show(self) -> None:
        if not self.tables:
            self.show_table(TableModel(pd.DataFrame({c.key: [] for c in COLUMNS}), COLUMNS))
            self.query_one("#bdetail", Static).update("")
            return
        t = self.tables[self.index]
        frame = pd.DataFrame([{
            "label": "  " * (len(p.path) - 1) + p.path[-1], "path": "/".join(p.path),
            "fwd": p.forward_kernel_ns, "bwd": p.backward_kernel_ns, "ratio": p.ratio,
            "fwd_self": p.forward_self_ns, "bwd_self": p.backward_self_ns, "self_ratio": p.self_ratio,
        } for p in t.parts])
        self.show_table(TableModel(frame, COLUMNS))
        self.show_crumb()
        self.query_one("#bdetail", Static).update(literal("\n".join(text.notes(t.to_json())[1:])))

    def action_other_mapping(self) -> None:
        if len(self.tables) > 1:
            self.index = (self.index + 1) % len(self.tables)
            self._show()
        else:
            self.set_status("this trace allows one mapping only")

    def export_view(self) -> ViewText | None:
        if not self.tables:
            return None
        t = self.tables[self.index]
        head = self.export_header(self.table.describe(), *text.notes(t.to_json()))
        return ViewText(self.view_name, head, self.export_table(f"Backward by forward part (by {t.method})"))
