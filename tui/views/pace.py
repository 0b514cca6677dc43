"""`p`: the pace of the iterations (data: Session.pace, viewmodels/pace.py): each iteration's
CPU span and GPU time in order, a bar, the distance from the steps' median and outliers
marked. enter on an iteration: its kernels; t: its timeline."""
from __future__ import annotations

from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.tui.messages import Navigation, PaceReady
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.pace import PaceView
from nsight_tui.tui.viewmodels.timeline import target_for_node
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class PaceScreen(TableScreen):
    DEFAULT_CSS = """
    PaceScreen #table { height: 1fr; }
    PaceScreen #pace-note { height: auto; max-height: 4; padding: 0 1; background: $panel; }
    """
    view_name = "pace"

    @dataclass
    class IterationChosen(Navigation):
        """enter on an iteration: its kernels."""

        node: RangeNode
    empty_text = "pacing the iterations…"
    hint = "enter: the iteration's kernels · t: its timeline"
    BINDING_GROUP_TITLE = "Pace of the iterations (p)"

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.view: PaceView | None = None

    def crumb(self) -> str:
        return "pace: every iteration in order · CPU span (range start to end) · GPU time (projection)"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="pace-note")

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(PaceReady(self.session.pace()))

    def on_pace_ready(self, message: PaceReady) -> None:
        self.view = message.view
        self.grid.empty_text = "no step_N / warmup_N ranges in this trace"
        self.show_table(TableModel(message.view.frame, message.view.columns))
        self.query_one("#pace-note", Static).update(literal(message.view.summary()))

    def _node(self, row: int):
        if self.table is None or not len(self.table):
            return None
        return self.session.instance_node(int(self.table.record(row)["rid"]))

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        node = self._node(event.row)
        if node is not None:
            self.post_message(self.IterationChosen(node))

    def timeline_target(self):
        node = self._node(self.grid.cursor)
        return None if node is None else target_for_node(self.session.model, node)

    def export_view(self) -> ViewText | None:
        if self.view is None or self.table is None:
            return None
        head = self.export_header(self.table.describe(), self.view.summary())
        return ViewText(self.view_name, head, self.export_table("Pace of the iterations"))
