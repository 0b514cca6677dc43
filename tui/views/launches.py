"""Individual launches of one kernel (within a range or the whole trace), each with its
launching API call, thread, launch overhead and queue delay."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual import work

from nsight_tui.tui.messages import DetailsRead, LaunchesReady, Navigation
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.tree_source import path_text
from nsight_tui.tui.viewmodels.launches import OVERHEAD_HELP, QUEUE_HELP, LaunchTable
from nsight_tui.tui.viewmodels.timeline import target_for_op
from nsight_tui.tui.views.base import TableScreen
from nsight_tui.tui.widgets.grid import DataGrid


class LaunchesScreen(TableScreen):
    @dataclass
    class LaunchChosen(Navigation):
        """enter on a launch: its correlation ID (its API call, GPU work, NVTX stack) on GPU `gpid`."""

        corr: int
        gpid: int | None

    hint = f"enter: its API call · {OVERHEAD_HELP} · {QUEUE_HELP}"
    empty_text = "collecting launches…"

    def __init__(self, session, node, name: str, short: str, positions: np.ndarray, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.node, self.kernel, self.short, self.positions = node, name, short, positions

    def retarget(self, session, node, name: str, short: str, positions: np.ndarray) -> None:
        """A spare screen (composed ahead) becomes the launches of kernel `name` and starts."""
        self.node, self.kernel, self.short, self.positions = node, name, short, positions
        self.start_spare(session)

    @property
    def view_name(self) -> str:  # type: ignore[override]
        scope = "" if self.node is None else f"{self.node.label}_"
        return f"{scope}launches"

    def crumb(self) -> str:
        scope = "the whole trace" if self.node is None else path_text(self.node)
        return f"launches of {self.short} in {scope}"

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        table = self.session.launches(self.positions, self.kernel)
        # The first screenful's grid/block read here as well: the table's first frame shows them
        # (read after it was drawn, the table was drawn twice). The rest: read_details, per window.
        error = ""
        try:
            table.read_details(table.missing(0, self.app.size.height))
        except Exception as exc:  # the file changed underneath: one status line, as read_details
            error = f"{type(exc).__name__}: {exc}"
        self.post_message(LaunchesReady(table))
        if error:
            self.post_message(DetailsRead(error))

    def on_launches_ready(self, message: LaunchesReady) -> None:
        self.grid.empty_text = "no launches"
        self.show_table(message.table)

    # -- grid/block: read for the rows in view, in a worker, never while drawing ---------------
    def on_data_grid_window_changed(self, event: DataGrid.WindowChanged) -> None:
        table = self.table
        if isinstance(table, LaunchTable):
            ops = table.missing(event.first, event.last)
            if len(ops):
                self.read_details(table, ops)

    @work(thread=True, exclusive=True, exit_on_error=False, group="details")
    def read_details(self, table: LaunchTable, ops: np.ndarray) -> None:
        try:
            table.read_details(ops)
        except Exception as exc:  # the file changed underneath: one line, the app stays
            self.post_message(DetailsRead(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(DetailsRead())

    def on_details_read(self, message: DetailsRead) -> None:
        self.grid.data_changed()  # read cells show their values, unreadable ones `?`
        if message.error:
            self.set_status(f"could not read grid/block from the file: {message.error}")

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None:
            return
        rec = self.table.record(event.row)
        gpid = int(self.session.trace.ops["gpid"].iat[int(rec["op"])])
        self.post_message(self.LaunchChosen(int(rec["corr"]), gpid if gpid >= 0 else None))

    def timeline_target(self):
        """`t`: centred on the launch under the cursor; `0` fits its instance of the range."""
        pos = self.selected_position()
        if pos is None or self.table is None:
            return None
        op, node, model = int(self.table.frame["op"].iat[pos]), self.node, self.session.model
        return lambda tl: target_for_op(tl, op, model, node)

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = self.export_header(f"kernel: `{self.kernel}`", self.table.describe(), f"{OVERHEAD_HELP}; {QUEUE_HELP}")
        return ViewText(self.view_name, head, self.export_table(f"Launches of {self.short}"))
