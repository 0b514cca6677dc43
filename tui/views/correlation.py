"""One correlation ID: the CUDA API call (cudaLaunchKernel, graph launch, memcpy...), the GPU
operations it started, and the NVTX ranges open around it."""
from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.safe import visible
from nsight_tui.tui.messages import CorrelationReady
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.correlation import CorrelationView, op_columns
from nsight_tui.tui.viewmodels.timeline import target_for_op
from nsight_tui.tui.views.base import TableScreen, literal


class CorrelationScreen(TableScreen):
    empty_text = "looking up…"

    def __init__(self, session, corr: int, gpid: int | None = None, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.corr, self.gpid = corr, gpid
        self.view: CorrelationView | None = None

    @property
    def view_name(self) -> str:  # type: ignore[override]
        return f"corr_{self.corr}"

    def crumb(self) -> str:
        return f"correlation ID {self.corr}"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="corr-detail")
        yield from super().compose_body()

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(CorrelationReady(self.session.correlation(self.corr, self.gpid)))

    def on_correlation_ready(self, message: CorrelationReady) -> None:
        self.view = view = message.view
        detail = self.query_one("#corr-detail", Static)
        if view.found is None:
            detail.update(literal(view.missing_text, style="bold red"))
            self.grid.empty_text = ""
            self.grid.data_changed()
            self.set_status(view.missing_text)
            return
        detail.update(self._detail_text(view))
        self.grid.empty_text = "this call started no GPU operation"
        self.show_table(TableModel(view.ops, op_columns()))

    @staticmethod
    def _detail_text(view: CorrelationView) -> Text:
        text = Text()
        for i, (k, v) in enumerate(view.lines):
            if i:
                text.append("\n")
            text.append(f"{visible(k)}: ", style="bold")
            text.append(visible(v))
        return text

    def timeline_target(self):
        """`t`: centred on the first GPU op this call started."""
        if self.view is None or self.view.found is None or not len(self.view.ops):
            return None
        op, model = int(self.view.ops.sort_values("start")["op"].iat[0]), self.session.model
        return lambda tl: target_for_op(tl, op, model)

    def export_view(self) -> ViewText | None:
        view = self.view
        if view is None or view.found is None:
            return None
        rows = [[k, v] for k, v in [("correlation ID", str(view.corr)), *view.lines]]
        body = md_table(["Field", "Value"], rows, title=f"Correlation ID {view.corr}")
        if self.table is not None:
            body += "\n" + self.export_table("GPU operations it started")
        return ViewText(self.view_name, self.export_header(), body)
