"""Several files side by side (render.sweep.compare_rows): one row per file; enter opens it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from textual import work
from textual.binding import Binding
from textual.widgets import Static

from nsight_tui.render.safe import rich_text
from nsight_tui.tui import fmt
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.views.base import TableScreen
from nsight_tui.tui.widgets.grid import DataGrid


def _value_fmt(v) -> str:
    if fmt.missing(v):
        return fmt.MISSING
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
    hint = "enter: open the file · t: question tables · b: diff baseline, d: diff"
    view_name = "files"
    empty_text = "reading the files…"

    BINDINGS = [Binding("t", "questions", "Question tables",
                        tooltip="The sweep's answers, one table per question: rows model, columns ctx"),
                Binding("b", "baseline", "Baseline", tooltip="Mark the file under the cursor as the diff's baseline (A)"),
                Binding("d", "diff", "Diff", tooltip="Diff the baseline (A; default the first file) against the file "
                        "under the cursor (B): what changed, and why the step moved")]

    def __init__(self, paths: list[Path], attribution: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.paths = paths
        self.attribution = attribution
        self.runs = None  # analysed once, for both the rows here and the question tables

    def crumb(self) -> str:
        return f"{len(self.paths)} files · enter: open one"

    def on_mount(self) -> None:
        super().on_mount()
        self._build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def _build(self) -> None:
        from nsight_tui.parsers import sweep
        from nsight_tui.render.sweep import COMPARE_HEADERS, compare_rows

        def progress(fraction, text):
            self.app.call_from_thread(self.set_status, f"reading {text} ({100 * fraction:.0f}%)")

        runs = sweep.analyse(sweep.runs_for(self.paths), self.attribution, progress=progress)
        headers, rows = COMPARE_HEADERS, compare_rows(runs)
        # numeric columns stay numeric (None -> NaN), so sorting compares numbers, not text
        frame = pd.DataFrame(rows, columns=[f"c{i}" for i in range(len(headers))])
        self.app.call_from_thread(self._built, headers, frame, runs)

    def _built(self, headers, frame, runs) -> None:
        self.headers = headers
        self.runs = runs
        self.show_table(TableModel(frame, file_columns(headers)))
        self.set_status(f"{len(runs)} runs · t: question tables")

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None or self.runs is None:
            return
        run = self.runs[self.table.position(event.row)]
        if run.status == "ok":
            self.app.open_file(run.path)
        else:
            self.notify(f"{run.path.name}: {run.message or run.status}", severity="warning")

    def action_questions(self) -> None:
        if self.runs is None:
            self.set_status("still reading the files…")
            return
        from nsight_tui.render.sweep import tables

        self.app.push_screen(QuestionsScreen(tables(self.runs), self.attribution))

    def _cursor_path(self) -> Path:
        if self.table is None or self.runs is None or not len(self.table):
            return self.paths[min(self.grid.cursor, len(self.paths) - 1)]
        return self.runs[self.table.position(self.grid.cursor)].path

    def action_baseline(self) -> None:
        self.baseline = self._cursor_path()
        self.set_status(f"diff baseline (A): {self.baseline.name} · d on another file diffs against it")

    def action_diff(self) -> None:
        from nsight_tui.tui.views.diff import DiffScreen

        a = getattr(self, "baseline", None) or self.paths[0]
        b = self._cursor_path()
        if b == a:  # on the baseline itself: with two files the other one, else ask for a move
            others = [p for p in self.paths if p != a]
            if len(others) != 1:
                self.set_status("move to the file to compare with the baseline, then d")
                return
            b = others[0]
        self.app.push_screen(DiffScreen(a, b, self.attribution))

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = [f"nsight-tui export: {len(self.paths)} files", f"attribution `{self.attribution}`",
                self.table.describe()]
        return ViewText("files", head, self.export_table("Files compared"))


class QuestionsScreen(TableScreen):
    """The sweep report's tables in the TUI: one question at a time, `[`/`]` to step."""

    hint = "[ / ]: previous / next question · e: export this table"
    view_name = "questions"

    BINDINGS = [
        Binding("right_square_bracket", "step(1)", "Next question",
                tooltip="Show the next question's table"),
        Binding("left_square_bracket", "step(-1)", "Previous question",
                tooltip="Show the previous question's table"),
    ]

    def __init__(self, tables, attribution: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.tables = tables
        self.attribution = attribution
        self.index = 0

    def crumb(self) -> str:
        if not self.tables:
            return "no {model}_ctx{N} runs to tabulate"
        t = self.tables[self.index]
        return f"question {self.index + 1}/{len(self.tables)}: {t.title} — basis: {t.basis}"

    def on_mount(self) -> None:
        super().on_mount()
        # after the base classes' own mount handlers (Textual runs each class's), which reset
        # the status line
        self.call_after_refresh(self._show)

    def _show(self) -> None:
        self.query_one("#crumb", Static).update(rich_text(self.crumb()))
        if not self.tables:
            return
        t = self.tables[self.index]
        frame = pd.DataFrame(t.rows, columns=[f"c{i}" for i in range(len(t.headers))], dtype=object)
        def width(i, h):  # as wide as the widest cell, within reason
            return min(44, max([len(h), *(len(str(r[i])) for r in t.rows)]))

        cols = [Column(f"c{i}", h, width(i, h), "left" if i == 0 else "right", text=True)
                for i, h in enumerate(t.headers)]
        self.show_table(TableModel(frame, cols))

    def action_step(self, delta: int) -> None:
        if self.tables:
            self.index = (self.index + delta) % len(self.tables)
            self._show()

    def export_view(self) -> ViewText | None:
        if self.table is None or not self.tables:
            return None
        t = self.tables[self.index]
        head = [f"nsight-tui export: {t.title}", f"attribution `{self.attribution}` · basis: {t.basis}",
                self.table.describe()]
        return ViewText(f"question_{self.index + 1}", head, self.export_table(t.title))
