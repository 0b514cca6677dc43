"""What every view shares: the header, a breadcrumb, a status line, the key bar, the
search/filter prompt; and for table views, sort/filter/search over a TableModel.

The pattern every view follows (see ARCHITECTURE in tui/NOTES.md):
- `mounted()` starts the view's work; ViewScreen.on_mount runs the shared setup once, then it.
  (Never define `on_mount` in a view: Textual calls every class's handler in the MRO.)
- Data comes from the Session in a `@work(thread=True, exclusive=True, exit_on_error=False)`
  worker that posts a typed message (tui/messages.py); the `on_<message>` handler renders it.
- What the user chose (a range, a kernel, a launch) is a `Navigation` nested in the view's class,
  posted to itself: the navigator (tui/navigator.py) decides where it leads.
- View state (sort, filter, search, modes) lives in `var`s with `watch_` methods.
- Every key is a Binding with a description and an id; BINDING_GROUP_TITLE names its help section.
- Text from the user or the profile is shown with `literal()`, never parsed as markup.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState, get_current_worker

from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.safe import visible
from nsight_tui.tui.host import Host
from nsight_tui.tui.messages import Navigation, TableChanged
from nsight_tui.tui.table_model import SortState, TableModel, ViewText
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.info_bar import InfoBar
from nsight_tui.tui.widgets.key_bar import KeyBar
from nsight_tui.tui.widgets.prompt_bar import PromptBar

# Above this many rows, sort and filter run in a worker instead of inside the key handler.
BIG_TABLE = 20_000


def literal(text: str, style: str = "") -> Text:
    """User or profile text as it is: brackets are characters, not markup, and control
    characters show as escapes (render.safe.visible); line breaks stay line breaks."""
    return Text("\n".join(visible(line) for line in text.split("\n")), style=style)


class ViewScreen(Screen):
    """A full-screen view of one file (or of several, for the files view)."""

    BINDING_GROUP_TITLE = "Every view"
    BINDINGS = [Binding("escape", "back", "Back", tooltip="Back to the previous view (or close the prompt)",
                        id="view.back")]

    view_name = "view"  # for the export file name and the command palette

    @dataclass
    class BackAsked(Navigation):
        """escape: back from `view` (the navigator knows what is home)."""

        view: ViewScreen

    def __init__(self, session=None, *, spare: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session
        # Composed ahead of time, off screen (tui/spares.py): its widgets exist before
        # it is asked for; the view starts (`start()`) when the app gives it what to show.
        self.spare = spare

    def focus_after_prompt(self, widget) -> None:
        """The prompt bar closed: `widget` takes the focus now (Widget.focus waits for a refresh), so a
        key typed as the prompt closes is the widget's, not the closed prompt's."""
        self.set_focus(widget)

    @property
    def host(self) -> Host:
        """What a view may read of the app (a Protocol: views never import the app, and open
        nothing themselves: they post a Navigation)."""
        return cast("Host", self.app)

    def compose(self) -> ComposeResult:
        yield InfoBar(id="info")
        yield Static("", id="crumb")
        yield from self.compose_body()
        yield PromptBar(id="prompt")
        yield Static("", id="status")
        yield KeyBar()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self._mount_seen = True
        if not self.spare:
            self.start()

    def start(self) -> None:
        """The view's start: the shared chrome, then its own `mounted()`. On mount for a view
        made when asked for; for a spare one when the app hands it its target."""
        self.spare = False
        self.refresh_info()
        self.show_crumb()
        self.mounted()

    def start_spare(self, session) -> None:
        """A spare screen is asked for (its target set by the caller): it starts now, or on its
        mount when it is still being composed."""
        self.session = session
        if getattr(self, "_mount_seen", False):
            self.start()
        else:
            self.spare = False  # on_mount starts it

    def mounted(self) -> None:
        """The view's own start (build its data); runs once, after the shared setup."""

    def on_screen_resume(self) -> None:
        self.refresh_info()

    def refresh_info(self) -> None:
        self.query_one(InfoBar).show(self.session.header() if self.session is not None else None)

    def crumb(self) -> str:
        return self.view_name

    def show_crumb(self) -> None:
        # One row whatever the text: no layout pass (a layout re-renders the whole screen).
        self.query_one("#crumb", Static).update(literal(self.crumb()), layout=False)

    def set_status(self, text: str | Text) -> None:
        """One line under the view; a str is shown literally, a Text as styled by its maker."""
        self.query_one("#status", Static).update(text if isinstance(text, Text) else literal(text), layout=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A view's worker failed: say so in one line and keep the session (never a traceback)."""
        if event.state != WorkerState.ERROR:
            return
        self.worker_failed(event.worker)
        error = event.worker.error
        message = f"{type(error).__name__}: {error}"
        self.set_status(f"failed: {message}")
        self.app.notify(message, title=f"{self.view_name}: could not build the view", severity="error",
                        markup=False)

    def worker_failed(self, worker: Worker) -> None:
        """Undo a view's busy state after one of its workers failed."""

    @property
    def prompt(self) -> PromptBar:
        return self.query_one(PromptBar)

    def action_back(self) -> None:
        if self.prompt.is_open:
            self.prompt.action_cancel()
            return
        self.post_message(self.BackAsked(self))

    def export_view(self) -> ViewText | None:
        """What `e` writes (called in a worker); None when there is nothing to export yet."""
        return None

    def export_header(self, *lines: str) -> list[str]:
        head = [f"nsight-tui export: {self.crumb()}"]
        if self.session is not None:
            head.append(self.session.export_header())
        return head + [line for line in lines if line]


class TableScreen(ViewScreen):
    """A view whose body is one DataGrid over a TableModel."""

    BINDING_GROUP_TITLE = "Tables (kernels, launches, correlation, API, files)"
    BINDINGS = [
        Binding("s", "sort_next", "Sort", tooltip="Sort by the next column (numbers largest first)",
                id="table.sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, id="table.sort-reverse"),
        Binding("f", "filter", "Filter", tooltip="Filter rows by text (any text column; enter keeps, esc undoes)",
                id="table.filter"),
        Binding("slash", "search", "Search", tooltip="Search rows by text; n/N next/previous match",
                id="table.search"),
        Binding("n", "search_next", "Next match", show=False, id="table.search-next"),
        Binding("N", "search_prev", "Previous match", show=False, id="table.search-prev"),
    ]

    # View state. The TableModel holds the applied sort/filter; these say what is asked for.
    sort: var[SortState] = var(SortState(), init=False)
    filter_text: var[str] = var("", init=False)
    search_text: var[str] = var("", init=False, always_update=True)

    empty_text = "computing…"
    hint = ""  # what enter does here, after the row count on the status line

    def __init__(self, session=None, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.table: TableModel | None = None
        self._busy = False

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)

    @property
    def grid(self) -> DataGrid:
        return self.query_one("#table", DataGrid)

    def mounted(self) -> None:
        # Focus now, not on the next loop turn (Widget.focus): the first frame is drawn focused,
        # not drawn and then the table again with its focused cursor.
        self.set_focus(self.grid, scroll_visible=False)
        self.set_status(self.empty_text)

    def worker_failed(self, worker: Worker) -> None:
        self._busy = False

    # -- showing a table ------------------------------------------------------------------------
    def show_table(self, table: TableModel, cursor: int = 0) -> None:
        self.table = table
        self.set_reactive(TableScreen.sort, table.sort)
        self.set_reactive(TableScreen.filter_text, table.filter_text)
        self._sync_grid(cursor)

    def _sync_grid(self, cursor: int | None = None) -> None:
        grid, table = self.grid, self.table
        assert table is not None
        grid.sort_key = table.sort.key
        grid.sort_descending = table.sort.descending
        if grid.source is not table:
            grid.set_source(table, cursor or 0)
        else:
            grid.data_changed(cursor)
        self.set_status(self.describe())

    def describe(self) -> str:
        text = self.table.describe() if self.table is not None else ""
        if self.search_text:
            text += f" · search '{self.search_text}' (n/N)"
        if self.hint and self.table is not None and len(self.table):
            text += f" · {self.hint}"
        return text

    def selected_position(self) -> int | None:
        """Frame position of the cursor row."""
        if self.table is None or len(self.table) == 0:
            return None
        return self.table.position(self.grid.cursor)

    # -- sort and filter: watchers apply the state, in a worker when the table is big ----------
    def watch_sort(self, sort: SortState) -> None:
        if self.table is not None and self.table.sort != sort:
            table = self.table
            self._change("sorting", lambda: table.apply_sort(sort))

    def watch_filter_text(self, text: str) -> None:
        if self.table is not None and self.table.filter_text != text.strip():
            table = self.table
            self._change("filtering", lambda: table.set_filter(text))

    def watch_search_text(self, text: str) -> None:
        self._search(backwards=False, include_current=True)

    def _change(self, what: str, fn) -> None:
        if self.table is None:
            return
        keep = self.selected_position()
        if len(self.table.frame) <= BIG_TABLE:
            fn()
            self._after_change(keep)
        else:
            self._busy = True
            self.set_status(f"{what}…")
            self._change_in_worker(fn, keep)

    @work(thread=True, exclusive=True, exit_on_error=False, group="table")
    def _change_in_worker(self, fn, keep) -> None:
        fn()
        if not get_current_worker().is_cancelled:
            self.post_message(TableChanged(keep))

    def on_table_changed(self, message: TableChanged) -> None:
        self._after_change(message.keep)

    def _after_change(self, keep: int | None) -> None:
        self._busy = False
        if self.table is None:
            return
        row = self.table.row_of_position(keep) if keep is not None else None
        self._sync_grid(row if row is not None else 0)

    def action_sort_next(self) -> None:
        if self.table is not None and not self._busy:
            self.sort = self.table.next_sort()

    def action_sort_reverse(self) -> None:
        if self.table is not None and not self._busy:
            self.sort = self.table.reversed_sort()

    def action_filter(self) -> None:
        if self.table is not None:
            self.prompt.open("filter", "filter:", self.table.filter_text)

    def action_search(self) -> None:
        self.prompt.open("search", "/", self.search_text)

    def on_prompt_bar_changed(self, event: PromptBar.Changed) -> None:
        """Small tables filter as you type; big ones when enter is pressed."""
        if event.kind == "filter" and self.table is not None and len(self.table.frame) <= BIG_TABLE:
            self.filter_text = event.value

    def on_prompt_bar_submitted(self, event: PromptBar.Submitted) -> None:
        self.focus_after_prompt(self.grid)
        if event.kind == "filter":
            self.filter_text = event.value
        elif event.kind == "search":
            self.search_text = event.value.strip()

    def on_prompt_bar_cancelled(self, event: PromptBar.Cancelled) -> None:
        self.focus_after_prompt(self.grid)
        if event.kind == "filter":
            self.filter_text = event.before

    def action_search_next(self) -> None:
        self._search(backwards=False)

    def action_search_prev(self) -> None:
        self._search(backwards=True)

    def _search(self, backwards: bool, include_current: bool = False) -> None:
        if self.table is None or not self.search_text:
            return
        start = self.grid.cursor - (1 if include_current else 0)
        row = self.table.find(self.search_text, start, backwards=backwards)
        if row is None:
            self.set_status(f"no match for '{self.search_text}'")
            self.app.bell()
            return
        self.grid.move_to(row)
        self.set_status(self.describe())

    # -- export -------------------------------------------------------------------------------
    def export_table(self, title: str) -> str:
        assert self.table is not None
        headers, rows = self.table.export_rows()
        return md_table(headers, rows, title=title)
