"""Several files side by side (one row per run; enter opens one), and the sweep's question
tables (`t`), where every file opened has a row."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Static

from nsight_tui.render.sweep import COMPARE_BASIS, COMPARE_HEADERS, SweepTable, tables
from nsight_tui.tui.messages import FilesListed, FilesProgress, FilesReady, FilesRow, Navigation
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.files import (
    FilesView, compare, file_columns, files_frame, listed, one_runs_ranks, oom_export, question_frame, waiting_row,
)
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class FilesScreen(TableScreen):
    @dataclass
    class FileChosen(Navigation):
        """enter on a run: open its file."""

        path: Path

    @dataclass
    class QuestionsAsked(Navigation):
        """`t`: the sweep's question tables over the runs."""

        tables: list[SweepTable]
        attribution: str

    @dataclass
    class RanksAsOne(Navigation):
        """`a`: the files, one run's ranks, opened as one trace on one clock (read.rank_merge)."""

        folder: Path
        files: list[Path]

    @dataclass
    class DiffAsked(Navigation):
        """`d`: run `b` against the baseline `a`."""

        a: Path
        b: Path
        attribution: str

    BINDING_GROUP_TITLE = "Several files"
    BINDINGS = [
        Binding("t", "questions", "Question tables",
                tooltip="The sweep's answers, one table per question: rows model, columns ctx", id="files.questions"),
        Binding("b", "baseline", "Baseline", tooltip="Mark the file under the cursor as the diff's baseline (A)",
                id="files.baseline"),
        Binding("d", "diff", "Diff", tooltip="Diff the baseline (A; default the first file) against the file "
                "under the cursor (B): what changed, and why the step moved", id="files.diff"),
        Binding("a", "ranks_as_one", "All ranks as one",
                tooltip="The files, one run's per-rank exports, opened as one trace on one clock: every rank's lanes "
                "on one timeline, the straggler judged there, `w` replaying the ranks coupled through their "
                "collectives", id="files.ranks_as_one"),
    ]

    hint = "enter: open the file · t: question tables · b: diff baseline, d: diff · a: all ranks as one"
    view_name = "files"
    empty_text = "reading the files…"

    def __init__(self, paths: list[Path], attribution: str, build_when_shown: bool = False, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.paths = paths
        self.attribution = attribution
        self.view: FilesView | None = None
        self.runs: list = []  # the runs listed, in row order; the first `read` of them are read
        self.rows: list[list] = []
        self.read = 0
        self.reading = ""  # the file being read now
        self.baseline: Path | None = None  # the diff's A (`b`); default the first file
        # Under `--diff A B` this view starts beneath the diff: its analysis of every file (the
        # whole report of each) waits until it is shown, instead of loading both files a second
        # time beside the diff's own load and taking the cores (and the GIL) the app needs to
        # answer keys while the diff loads.
        self.build_when_shown = build_when_shown

    def crumb(self) -> str:
        return f"{len(self.paths)} files · {COMPARE_BASIS} · enter: open one"

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "back":  # the first view (a folder or several files opened): nothing to go back to
            stack = self.app.screen_stack if self.is_attached else []
            return self in stack and stack.index(self) > 1
        return super().check_action(action, parameters)

    def mounted(self) -> None:
        super().mounted()
        if not self.build_when_shown:
            self.build()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self.build_when_shown and self.app.screen is self:  # a resume while beneath the diff is not shown
            self.build_when_shown = False
            self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        """Every file a row at once, then each row filled in as its file is read (a folder of 51
        exports took 80 s to show a single row when the rows waited for the last file)."""
        runs = listed(self.paths)
        self.post_message(FilesListed(runs))

        def progress(fraction: float, text: str) -> None:
            self.post_message(FilesProgress(text))

        def row(index: int, cells: list) -> None:
            self.post_message(FilesRow(index, cells))

        self.post_message(FilesReady(compare(runs, self.attribution, progress=progress, row=row)))

    def on_files_listed(self, message: FilesListed) -> None:
        self.runs = message.runs
        self.rows = [waiting_row(run, reading=i == 0) for i, run in enumerate(self.runs)]
        self._show_rows()

    def on_files_progress(self, message: FilesProgress) -> None:
        self.reading = message.text
        if self.view is None and self.table is not None:
            self.set_status(self.describe())

    def on_files_row(self, message: FilesRow) -> None:
        self.read = message.index + 1
        self.rows[message.index] = message.cells
        if self.read < len(self.rows):
            self.rows[self.read] = waiting_row(self.runs[self.read], reading=True)
        self._show_rows()

    def on_files_ready(self, message: FilesReady) -> None:
        self.view = view = message.view
        self.read = len(view.runs)
        self._show_rows(view.frame)

    def _show_rows(self, frame=None) -> None:
        """The rows as they are now; the cursor, the sort and the filter kept as rows fill in."""
        before = self.table
        keep = self.selected_position()
        table = TableModel(files_frame(self.rows) if frame is None else frame, file_columns(COMPARE_HEADERS))
        if before is not None:
            table.apply_sort(before.sort)
            table.set_filter(before.filter_text)
        row = table.row_of_position(keep) if keep is not None else None
        self.show_table(table, row or 0)

    def describe(self) -> str:
        """The reading's progress first (a narrow screen cuts the line's end), then the table's."""
        text = super().describe()
        if self.view is None and self.runs:
            doing = f", reading {self.reading}" if self.reading and self.read < len(self.runs) else ""
            return f"read {self.read} of {len(self.runs)}{doing} · {text}"
        if self.view is not None:
            return f"{len(self.view.runs)} runs read · {text}"
        return text

    def _run_at(self, row: int):
        """The run under grid row `row`, once it has been read (else None)."""
        if self.table is None or not len(self.table):
            return None
        position = self.table.position(row)
        return self.runs[position] if position < self.read else None

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is None or not self.runs:
            return
        run = self._run_at(event.row)
        if run is None:
            self.notify(f"still reading the files ({self.read} of {len(self.runs)}): this one is not read yet",
                        severity="information", markup=False)
        elif run.status == "ok":
            self.post_message(self.FileChosen(run.path))
        elif (export := oom_export(run)) is not None:
            self.post_message(self.FileChosen(export))  # the run's one row: its record, and its export beside it
        else:
            self.notify(f"{run.path.name}: {run.message or run.status}", severity="warning", markup=False)

    def action_questions(self) -> None:
        if self.view is None:
            self.set_status(f"still reading the files ({self.read} of {len(self.runs)})…")
            return
        self.post_message(self.QuestionsAsked(tables(self.view.runs), self.attribution))

    def _cursor_path(self) -> Path:
        if self.table is None or not self.runs or not len(self.table):
            return self.paths[min(self.grid.cursor, len(self.paths) - 1)]
        return self.runs[self.table.position(self.grid.cursor)].path

    def action_ranks_as_one(self) -> None:
        ranks = one_runs_ranks(self.paths)
        if ranks is None:
            # whole within 80 columns: "a opens ... as one (...): these are not" read as a line cut short
            self.set_status("a: these are not one run's per-rank exports (NAME_rank0, NAME_rank1, ...)")
            return
        self.post_message(self.RanksAsOne(*ranks))

    def action_baseline(self) -> None:
        self.baseline = self._cursor_path()
        self.set_status(f"diff baseline (A): {self.baseline.name} · d on another file diffs against it")

    def action_diff(self) -> None:
        a = self.baseline or self.paths[0]
        b = self._cursor_path()
        if b == a:  # on the baseline itself: with two files the other one, else ask for a move
            others = [p for p in self.paths if p != a]
            if len(others) != 1:
                self.set_status("move to the file to compare with the baseline, then d")
                return
            b = others[0]
        self.post_message(self.DiffAsked(a, b, self.attribution))

    def export_view(self) -> ViewText | None:
        if self.table is None:
            return None
        head = [f"nsight-tui export: {len(self.paths)} files", f"attribution `{self.attribution}`",
                self.table.describe()]
        return ViewText("files", head, self.export_table("Files compared"))


class QuestionsScreen(TableScreen):
    """The sweep report's tables in the TUI: one question at a time, `[`/`]` to step."""

    BINDING_GROUP_TITLE = "Question tables (several files)"
    BINDINGS = [
        Binding("right_square_bracket", "step(1)", "Next question", tooltip="Show the next question's table",
                id="questions.next"),
        Binding("left_square_bracket", "step(-1)", "Previous question",
                tooltip="Show the previous question's table", id="questions.previous"),
    ]

    index: var[int] = var(0, init=False)

    hint = "[ / ]: previous / next question · e: export this table"
    view_name = "questions"

    def __init__(self, tables: list[SweepTable], attribution: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.tables = tables
        self.attribution = attribution

    def crumb(self) -> str:
        if not self.tables:
            return "no runs to tabulate"
        t = self.tables[self.index]
        return f"question {self.index + 1}/{len(self.tables)}: {t.title} — basis: {t.basis}"

    def compose_body(self) -> ComposeResult:
        yield from super().compose_body()
        yield Static("", id="qnotes")

    def mounted(self) -> None:
        super().mounted()
        self._show()

    def watch_index(self) -> None:
        self._show()

    def _show(self) -> None:
        self.show_crumb()
        if not self.tables:
            return
        t = self.tables[self.index]
        frame, cols = question_frame(t)
        self.show_table(TableModel(frame, cols))
        self.query_one("#qnotes", Static).update(literal("\n".join(t.notes)))

    def action_step(self, delta: int) -> None:
        if self.tables:
            self.index = (self.index + delta) % len(self.tables)

    def export_view(self) -> ViewText | None:
        if self.table is None or not self.tables:
            return None
        t = self.tables[self.index]
        head = [f"nsight-tui export: {t.title}", f"attribution `{self.attribution}` · basis: {t.basis}",
                self.table.describe(), *t.notes]
        return ViewText(f"question_{self.index + 1}", head, self.export_table(t.title))
