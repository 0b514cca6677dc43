"""`u`: GPU memory (data: Session.memory, viewmodels/memory.py): the peak in use and
where, by kind, torch's figures beside nsys's, per phase over the steady-state steps, and an
out-of-memory run's failed allocation."""
from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from nsight_tui.tui.messages import MemoryReady
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.memory import MemoryView, columns
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class MemoryScreen(TableScreen):
    DEFAULT_CSS = """
    MemoryScreen #table { height: 1fr; }
    MemoryScreen #memory-note { height: auto; max-height: 3; padding: 0 1; background: $panel; }
    MemoryScreen #memory-row { height: auto; max-height: 3; padding: 0 1; }
    """
    view_name = "memory"
    empty_text = "reading the GPU memory events…"
    hint = "nsys: in use (cudaMalloc'd) · torch: reserved (segments) / allocated (tensors)"

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.view: MemoryView | None = None

    def crumb(self) -> str:
        return "GPU memory: peak in use and where · per phase (steady state) · out of memory"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="memory-row")  # the cursor's row said whole: a narrow screen cuts its Where
        yield Static("", id="memory-note")

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(MemoryReady(self.session.memory()))

    def on_memory_ready(self, message: MemoryReady) -> None:
        view = message.view
        assert isinstance(view, MemoryView)
        self.view = view
        self.grid.empty_text = "no GPU memory events and no memory in the step marks"
        self.show_table(TableModel(view.frame, columns(view.frame)))
        self.query_one("#memory-note", Static).update(literal(view.summary()))

    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        position = self.selected_position()
        if self.view is not None and position is not None:
            self.query_one("#memory-row", Static).update(literal(self.view.row_text(position)))

    def export_view(self) -> ViewText | None:
        if self.view is None or self.table is None:
            return None
        head = self.export_header(self.table.describe(), self.view.summary())
        return ViewText(self.view_name, head, self.export_table("GPU memory"))
