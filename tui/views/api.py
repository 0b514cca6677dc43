"""The CUDA API summary (nsys's cuda_api_sum, value for value)."""
from __future__ import annotations

import pandas as pd
from textual import work

from nsight_tui.parsers.nsys_reports import build_report
from nsight_tui.tui import fmt
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.views.base import TableScreen

KEYS = ["pct", "total", "calls", "avg", "med", "min", "max", "std", "name"]


def api_columns(headers: list[str]) -> list[Column]:
    h = dict(zip(KEYS, headers))
    return [
        Column("name", "API call", None, "left", text=True, min_width=18, md_header=h["name"]),
        Column("pct", "Time %", 7, fmt=fmt.plain_percent, priority=8, md_header=h["pct"]),
        Column("total", "Total", 9, fmt=fmt.duration, priority=9, md_header=h["total"]),
        Column("calls", "Calls", 8, fmt=fmt.count, priority=8, md_header=h["calls"]),
        Column("avg", "Avg", 9, fmt=fmt.duration, priority=6, md_header=h["avg"]),
        Column("med", "Med", 9, fmt=fmt.duration, priority=3, md_header=h["med"]),
        Column("min", "Min", 9, fmt=fmt.duration, priority=2, md_header=h["min"]),
        Column("max", "Max", 9, fmt=fmt.duration, priority=2, md_header=h["max"]),
        Column("std", "StdDev", 9, fmt=fmt.duration, priority=1, md_header=h["std"]),
    ]


class ApiScreen(TableScreen):
    view_name = "api"

    def crumb(self) -> str:
        return "CUDA API summary (as nsys stats -r cuda_api_sum)"

    def on_mount(self) -> None:
        super().on_mount()
        self._build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def _build(self) -> None:
        report = api_report(self.session)
        frame = pd.DataFrame(report.rows, columns=KEYS) if report.rows else pd.DataFrame({k: [] for k in KEYS})
        self.app.call_from_thread(self._built, report, frame)

    def _built(self, report, frame) -> None:
        self.grid.empty_text = report.message or "no CUDA API calls"
        self.show_table(TableModel(frame, api_columns(report.headers)))

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        return ViewText("api", self.export_header(self.table.describe()), self.export_table("CUDA API summary"))


def api_report(session):
    """nsys's cuda_api_sum for the session, computed once (warmed in the background)."""
    report = session.cache.get("api_report")
    if report is None:
        report = session.cache["api_report"] = build_report(session.trace, "cuda_api_sum", session.attribution)
    return report
