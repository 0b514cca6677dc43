"""`6`: Nsight Compute's figures per kernel name within a range of the profiled step (data:
Session.ncu_view, viewmodels/ncu.py; --ncu FILE.ncu-rep)."""
from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from nsight_tui.tui.messages import NcuReady
from nsight_tui.tui.table_model import SortState, TableModel, ViewText
from nsight_tui.tui.viewmodels.ncu import COLUMNS, NcuView
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class NcuScreen(TableScreen):
    DEFAULT_CSS = """
    NcuScreen #table { height: 1fr; }
    NcuScreen #ncu-note { height: auto; max-height: 3; padding: 0 1; background: $panel; }
    NcuScreen #ncu-warning { height: auto; max-height: 4; padding: 0 1; background: $warning 30%; display: none; }
    """
    view_name = "ncu"
    empty_text = "reading the Nsight Compute report…"
    hint = "ncu: Nsight Compute's replay of one step · Occ: theoretical / achieved %"

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.view: NcuView | None = None

    def crumb(self) -> str:
        return "Nsight Compute: per kernel name within a range (mean over its profiled instances)"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="ncu-warning")  # above the table: read before any figure
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="ncu-note")

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(NcuReady(self.session.ncu_view()))

    def on_ncu_ready(self, message: NcuReady) -> None:
        view = message.view
        assert isinstance(view, NcuView)
        self.view = view
        self.grid.empty_text = "no profiled kernel"
        # the analysis's order, by the total (mean × instances), said as the sort in force
        self.show_table(TableModel(view.frame, COLUMNS, SortState("total_us", True)))
        self.query_one("#ncu-note", Static).update(literal(view.summary))
        warning = self.query_one("#ncu-warning", Static)
        warning.update(literal(view.warning))
        warning.display = bool(view.warning)

    def export_view(self) -> ViewText | None:
        if self.view is None or self.table is None:
            return None
        head = self.export_header(self.table.describe(), "\n".join(filter(None, [self.view.warning, self.view.summary])))
        return ViewText(self.view_name, head, self.export_table("Nsight Compute per kernel name within a range"))
