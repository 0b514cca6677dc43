"""The CUDA API summary (nsys's cuda_api_sum, value for value)."""
from __future__ import annotations

from textual import work

from nsight_tui.tui.messages import ApiReady
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.api import ApiView, api_columns
from nsight_tui.tui.views.base import TableScreen


class ApiScreen(TableScreen):
    view_name = "api"

    def crumb(self) -> str:
        scope = self.session.api_scope_text() if self.session is not None else ""
        return "CUDA API summary (as nsys stats -r cuda_api_sum)" + (f" · {scope}" if scope else "")

    def retarget(self, session) -> None:
        """A spare screen (composed ahead) starts as the API summary of `session`."""
        self.start_spare(session)

    def mounted(self) -> None:
        super().mounted()
        view = self.session.api_summary_kept()  # computed by the warm-up: shown with the first frame
        if view is not None:
            self.show_view(view)
        else:
            self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(ApiReady(self.session.api_summary()))

    def on_api_ready(self, message: ApiReady) -> None:
        self.show_view(message.view)

    def show_view(self, view: ApiView) -> None:
        self.grid.empty_text = view.empty_reason
        self.show_table(TableModel(view.frame, api_columns(view.headers)))

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        return ViewText("api", self.export_header(self.table.describe()), self.export_table("CUDA API summary"))
