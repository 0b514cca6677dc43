"""Several files side by side (parsers.sweep.compare): one row per file; enter opens it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from textual import work

from tui import fmt
from tui.table_model import Column, TableModel, ViewText
from tui.views.base import TableScreen
from tui.widgets.grid import DataGrid


def _value_fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return fmt.text(v)


def file_columns(headers: list[str]) -> list[Column]:
    cols = []
    for i, h in enumerate(headers):
        key = f"c{i}"
        if i == 0:
            cols.append(Column(key, h, None, "left", text=True, min_width=26))
        elif "kernel" in h:
            cols.append(Column(key, h, 28, "left", fmt=fmt.text, text=True, priority=2))
        elif h == "status":
            cols.append(Column(key, h, 8, "left", text=True, priority=1))
        else:
            cols.append(Column(key, h, max(len(h), 9), fmt=_value_fmt, priority=6))
    return cols


class FilesScreen(TableScreen):
    hint = "enter: open the file"
    view_name = "files"
    empty_text = "reading the files…"

    def __init__(self, paths: list[Path], attribution: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.paths = paths
        self.attribution = attribution

    def crumb(self) -> str:
        return f"{len(self.paths)} files · enter: open one"

    def on_mount(self) -> None:
        super().on_mount()
        self._build()

    @work(thread=True, exclusive=True, group="build")
    def _build(self) -> None:
        def progress(fraction, text):
            self.app.call_from_thread(self.set_status, f"reading {text} ({100 * fraction:.0f}%)")

        try:
            from parsers.sweep import compare

            headers, rows = compare(self.paths, self.attribution, progress=progress)
        except ImportError:
            headers = ["file", "size (MB)"]
            rows = [[p.name, round(p.stat().st_size / 1e6, 1)] for p in self.paths]
        frame = pd.DataFrame(rows, columns=[f"c{i}" for i in range(len(headers))], dtype=object)
        self.app.call_from_thread(self._built, headers, frame)

    def _built(self, headers, frame) -> None:
        self.headers = headers
        self.show_table(TableModel(frame, file_columns(headers)))

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None:
            return
        self.app.open_file(self.paths[self.table.position(event.row)])

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = [f"nsight-tui export: {len(self.paths)} files", f"attribution `{self.attribution}`",
                self.table.describe()]
        return ViewText("files", head, self.export_table("Files compared"))
