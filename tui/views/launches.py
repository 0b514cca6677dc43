"""Individual launches of one kernel (within a range or the whole trace), each with its
launching API call, thread and launch latency."""
from __future__ import annotations

import numpy as np
from textual import work
from textual.worker import get_current_worker

from nsight_tui.tui import fmt
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.viewmodels.timeline import target_for_op
from nsight_tui.tui.tree_source import path_text
from nsight_tui.tui.views.base import TableScreen
from nsight_tui.tui.widgets.grid import DataGrid


def launch_columns() -> list[Column]:
    return [
        Column("start", "Start (s)", 12, fmt=fmt.seconds, priority=4, md_header="Start (ns)"),
        Column("duration", "Duration", 9, fmt=fmt.duration, priority=9, md_header="Duration (ns)"),
        Column("corr", "Corr ID", 9, fmt=fmt.text, priority=10, md_header="Correlation ID"),
        Column("api_name", "API call", None, "left", fmt=fmt.api_name, text=True, min_width=18, md_header="API call"),
        Column("latency", "Latency", 9, fmt=fmt.duration, priority=8, md_header="Launch latency (ns)"),
        Column("thread", "Thread", 20, "left", text=True, priority=6, md_header="Thread"),
        Column("grid", "Grid", 10, "left", priority=3, md_header="Grid"),
        Column("block", "Block", 9, "left", priority=3, md_header="Block"),
        Column("device", "Dev", 3, priority=2, md_header="Device"),
        Column("stream", "Strm", 4, priority=2, md_header="Stream"),
        Column("api_start", "", show=False, md_header="API call start (ns)"),
        Column("name", "", show=False, text=True, md_header="Kernel (demangled)"),
    ]


class LaunchTable(TableModel):
    """Launches, with grid/block read from the file only for rows that are drawn
    (or exported): the model keeps them out of memory for 10^6-kernel traces."""

    LAZY = ("grid", "block")
    WINDOW = 64

    def __init__(self, frame, columns, trace) -> None:
        super().__init__(frame, columns)
        self.trace = trace
        self._ops = self.frame["op"].to_numpy()
        self._details: dict[int, tuple[str, str]] = {}

    def value(self, row: int, key: str):
        if key not in self.LAZY:
            return super().value(row, key)
        op = int(self._ops[self.order[row]])
        if op not in self._details:
            self._fetch(self._ops[self.order[row:row + self.WINDOW]])
        grid, block = self._details.get(op, ("", ""))
        return grid if key == "grid" else block

    def _fetch(self, ops) -> None:
        missing = np.unique([o for o in np.asarray(ops).tolist() if o not in self._details])
        if len(missing) == 0:
            return
        details = self.trace.op_details(missing)
        for op, grid, block in zip(details.index.tolist(), details["grid"], details["block"]):
            self._details[int(op)] = (grid or "", block or "")

    def export_rows(self):
        self._fetch(self._ops)
        pairs = [self._details.get(int(o), ("", "")) for o in self._ops]
        self.frame["grid"] = [p[0] for p in pairs]
        self.frame["block"] = [p[1] for p in pairs]
        return super().export_rows()


class LaunchesScreen(TableScreen):
    hint = "enter: its API call and NVTX stack"
    empty_text = "collecting launches…"

    def __init__(self, session, node, name: str, short: str, positions: np.ndarray, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.node, self.kernel, self.short, self.positions = node, name, short, positions

    @property
    def view_name(self) -> str:  # type: ignore[override]
        scope = "" if self.node is None else f"{self.node.label}_"
        return f"{scope}launches"

    def crumb(self) -> str:
        scope = "the whole trace" if self.node is None else path_text(self.node)
        return f"launches of {self.short} in {scope} · enter: correlation detail"

    def on_mount(self) -> None:
        super().on_mount()
        self._build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def _build(self) -> None:
        frame = self.session.model.launches(self.positions, self.kernel)
        table = LaunchTable(frame, launch_columns(), self.session.trace)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._built, table)

    def _built(self, table: TableModel) -> None:
        self.grid.empty_text = "no launches"
        self.show_table(table)

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None:
            return
        rec = self.table.record(event.row)
        gpid = int(self.session.trace.ops["gpid"].iat[int(rec["op"])])
        self.app.open_correlation(int(rec["corr"]), gpid if gpid >= 0 else None)

    def timeline_target(self):
        """`t`: centred on the launch under the cursor; `0` fits its instance of the range."""
        pos = self.selected_position()
        if pos is None:
            return None
        op, node, model = int(self.table.frame["op"].iat[pos]), self.node, self.session.model
        return lambda tl: target_for_op(tl, op, model, node)

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = self.export_header(f"kernel: `{self.kernel}`", self.table.describe())
        return ViewText(self.view_name, head, self.export_table(f"Launches of {self.short}"))
