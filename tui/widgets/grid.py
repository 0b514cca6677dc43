"""A virtual table: draws only the rows in view, whatever the row count.

Textual's DataTable builds every row up front (12 s for 100k rows here, UI frozen; NOTES.md),
so tables come from a source object instead: `len(source)`, `source.columns` and
`source.cell(row, column)`. A 600k-row table costs the same per keystroke as a 20-row one.

Numbers are never cut: a right-aligned (number) column is as wide as the widest value in
view, or not drawn at all; narrow screens drop whole columns, least important first, and
shorten only the text column(s). `cell` must be cheap and never read a file (sources with
lazy data read it in a worker when `WindowChanged` says which rows are in view).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Protocol

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from nsight_tui.render.safe import visible
from nsight_tui.tui.table_model import Column


class GridSource(Protocol):
    columns: list[Column]

    def __len__(self) -> int: ...

    def cell(self, row: int, column: Column) -> str: ...


class EmptySource:
    columns: list[Column] = []

    def __len__(self) -> int:
        return 0

    def cell(self, row: int, column: Column) -> str:
        return ""


MIN_TEXT_WIDTH = 6  # a text column squeezed further than this is dropped instead


def fit(text: str, width: int, align: str) -> str:
    if len(text) > width:
        return text[: max(width - 1, 0)] + "…" if width > 0 else ""
    return text.rjust(width) if align == "right" else text.ljust(width)


class DataGrid(ScrollView, can_focus=True):
    """Rows from a GridSource; a fixed header line; a cursor row."""

    BINDING_GROUP_TITLE = "Moving around (range tree and every table)"
    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", show=False, id="grid.down"),
        Binding("k,up", "cursor_up", "Up", show=False, id="grid.up"),
        Binding("g,home", "cursor_first", "First row", show=False, id="grid.first"),
        Binding("G,end", "cursor_last", "Last row", show=False, id="grid.last"),
        Binding("ctrl+d,pagedown", "page_down", "Page down", show=False, id="grid.page-down"),
        Binding("ctrl+u,pageup", "page_up", "Page up", show=False, id="grid.page-up"),
        Binding("enter", "select", "Open", tooltip="Open the row: range -> kernels -> launches -> correlation",
                id="grid.open"),
    ]

    COMPONENT_CLASSES = {
        "datagrid--header",
        "datagrid--cursor",
        "datagrid--cursor-blur",
        "datagrid--group",
        "datagrid--dim",
    }

    DEFAULT_CSS = """
    DataGrid {
        height: 1fr;
        background: $surface;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    DataGrid > .datagrid--header { text-style: bold; color: $text-accent; background: $panel; }
    DataGrid > .datagrid--cursor { background: $accent; color: $text; text-style: bold; }
    DataGrid > .datagrid--cursor-blur { background: $accent 40%; }
    DataGrid > .datagrid--group { text-style: bold; color: $text-warning; }
    DataGrid > .datagrid--dim { color: $text-muted; }
    """

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    @dataclass
    class _RowMessage(Message):
        grid: "DataGrid"
        row: int

        @property
        def control(self) -> "DataGrid":
            return self.grid

    class Highlighted(_RowMessage):
        """The cursor moved to `row`."""

    class Selected(_RowMessage):
        """Enter on `row`."""

    @dataclass
    class WindowChanged(Message):
        """Rows [first, last) are in view now (scrolled, resized or new data)."""

        grid: "DataGrid"
        first: int
        last: int

        @property
        def control(self) -> "DataGrid":
            return self.grid

    def __init__(self, source: GridSource | None = None, *, empty_text: str = "(no rows)", **kwargs) -> None:
        super().__init__(**kwargs)
        self.source: GridSource = source or EmptySource()
        self.empty_text = empty_text
        self._was_empty = len(self.source) == 0  # enter's state in the footer (check_action)
        self.sort_key: str | None = None
        self.sort_descending = False
        self._layout: list[tuple[Column, int]] = []
        self._layout_width = -1
        self._cache: dict[tuple, Strip] = {}
        self._seen: dict[str, int] = {}  # widest value drawn so far per number column
        self._window = (-1, -1)

    # -- data --------------------------------------------------------------------------------
    def set_source(self, source: GridSource, cursor: int = 0) -> None:
        self.source = source
        self._layout_width = -1
        self._seen = {}
        self.data_changed(cursor)

    def data_changed(self, cursor: int | None = None) -> None:
        """The source's rows changed (sort, filter, expand, values read): re-measure and repaint."""
        self._cache.clear()
        self.virtual_size = Size(0, len(self.source) + 1)
        if len(self.source) + 1 > self.app.size.height and not self.show_vertical_scrollbar:
            # Taller than the terminal: it scrolls whatever the layout. Say so now, not when
            # the layout finds out: that made a second layout and full repaint of the screen.
            self.show_vertical_scrollbar = True
            self.vertical_scrollbar.display = True  # made (mounted) now, not by the layout
        if (len(self.source) == 0) != self._was_empty:
            self._was_empty = len(self.source) == 0
            self.refresh_bindings()  # enter opens a row only where there is one (the footer dims it)
        target = self.cursor if cursor is None else cursor
        self.cursor = max(0, min(target, len(self.source) - 1))
        self._window = (-1, -1)
        self._window_changed()
        self.refresh()

    def _window_changed(self) -> None:
        """Measure the number cells now in view (widening their columns so none is cut),
        and tell the screen which rows those are."""
        first = int(self.scroll_offset.y)
        last = min(first + self.page_rows, len(self.source))
        if (first, last) == self._window:
            return
        self._window = (first, last)
        if self._measure(first, last):
            self._layout_width = -1
            self._cache.clear()
        if last > first:
            self.post_message(self.WindowChanged(self, first, last))

    def _measure(self, first: int, last: int) -> bool:
        """True when a number in rows [first, last) is wider than its column was."""
        grew = False
        spans = getattr(self.source, "spans", None)
        for col in self.source.columns:
            if not col.show or col.align != "right":
                continue
            widest = self._seen.get(col.key, 0)
            for row in range(first, last):
                if spans is not None and spans(row):
                    continue
                n = len(self.source.cell(row, col))
                if n > widest:
                    widest = n
            if widest > self._seen.get(col.key, 0):
                self._seen[col.key] = widest
                grew = grew or widest > (col.width or 0)
        return grew

    def _relayout(self) -> None:
        self._layout_width = -1
        self._cache.clear()
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._window_changed()

    @property
    def row_count(self) -> int:
        return len(self.source)

    # -- geometry ----------------------------------------------------------------------------
    def _width_of(self, col: Column) -> int:
        """A fixed column's width: its own, or wider when a number in it needs more."""
        return max(col.width or 0, self._seen.get(col.key, 0) if col.align == "right" else 0)

    def _columns_for(self, width: int) -> list[tuple[Column, int]]:
        if width == self._layout_width and self._layout:
            return self._layout
        cols = [c for c in self.source.columns if c.show]

        def need(cols: list[Column], text_min: int | None = None) -> int:
            gaps = max(len(cols) - 1, 0)
            return gaps + sum(self._width_of(c) if c.width else (text_min or c.min_width) for c in cols)

        # Drop the least important fixed columns until the text column keeps its minimum;
        # then let it shrink to MIN_TEXT_WIDTH before dropping more (a number is never cut).
        while need(cols) > width and len([c for c in cols if c.width]) > 1:
            cols.remove(min((c for c in cols if c.width), key=lambda c: c.priority))
        while need(cols, MIN_TEXT_WIDTH) > width and any(c.width for c in cols):
            cols.remove(min((c for c in cols if c.width), key=lambda c: c.priority))
        fixed = sum(self._width_of(c) for c in cols if c.width) + max(len(cols) - 1, 0)
        flex = [c for c in cols if not c.width]
        spare = max(width - fixed, 0)
        layout = []
        for c in cols:
            if c.width:
                layout.append((c, self._width_of(c)))
            else:
                layout.append((c, max(spare // max(len(flex), 1), 1)))
        self._layout, self._layout_width = layout, width
        return layout

    def on_mount(self) -> None:
        # The scrollbar made with the grid, hidden: a table that scrolls (data_changed) shows it
        # without mounting a widget then (that cost a layout of the screen after its first frame).
        self.vertical_scrollbar  # noqa: B018

    def on_resize(self) -> None:
        self._layout_width = -1
        self._cache.clear()
        self.virtual_size = Size(0, len(self.source) + 1)
        self._scroll_cursor_into_view()
        self._window = (-1, -1)
        self._window_changed()

    @property
    def page_rows(self) -> int:
        return max(self.size.height - 1, 1)

    # -- rendering -------------------------------------------------------------------------
    def _header_strip(self, width: int) -> Strip:
        style = self.get_component_rich_style("datagrid--header")
        parts = []
        for col, w in self._columns_for(width):
            label = col.header
            if col.key == self.sort_key:
                label = f"{label}{'▼' if self.sort_descending else '▲'}"
            parts.append(fit(label, w, col.align))
        return Strip([Segment(fit(" ".join(parts), width, "left"), style)], width)

    @property
    def line_width(self) -> int:
        return self.scrollable_content_region.width

    def render_line(self, y: int) -> Strip:
        width = self.line_width
        if width <= 0:
            return Strip.blank(0)
        if y == 0:
            return self._header_strip(width)
        n = len(self.source)
        row = int(self.scroll_offset.y) + y - 1
        base = self.rich_style
        if n == 0:
            # the why of an empty table wraps (it often says what capture would fill it: cut at 80
            # columns, it lost the flags it named)
            lines = textwrap.wrap(self.empty_text, width) or [""]
            if 1 <= y <= len(lines):
                dim = self.get_component_rich_style("datagrid--dim")
                return Strip([Segment(fit(lines[y - 1], width, "left"), dim)], width)
            return Strip.blank(width, base)
        if row >= n:
            return Strip.blank(width, base)
        is_cursor = row == self.cursor
        key = (row, width, is_cursor, is_cursor and self.has_focus)  # focus shows on the cursor row only
        strip = self._cache.get(key)
        if strip is None:
            strip = self._row_strip(row, width, is_cursor, base)
            if len(self._cache) > 2000:
                self._cache.clear()
            self._cache[key] = strip
        return strip

    def row_style(self, row: int) -> str | None:
        """A component class for the whole row (group rows in the tree)."""
        getter = getattr(self.source, "row_class", None)
        return getter(row) if getter else None

    def _row_strip(self, row: int, width: int, is_cursor: bool, base: Style) -> Strip:
        spans = getattr(self.source, "spans", None)
        layout = self._columns_for(width)
        if spans is not None and spans(row) and layout:
            line = fit(visible(self.source.cell(row, layout[0][0])), width, "left")  # a heading row: one cell
        else:
            cells = [(visible(self.source.cell(row, col)), col, w) for col, w in layout]  # names are data
            for text, col, w in cells:
                if col.align == "right" and len(text) > w:  # not measured yet: widen, draw again
                    self._seen[col.key] = max(self._seen.get(col.key, 0), len(text))
                    self.call_later(self._relayout)
            line = fit(" ".join(fit(text, w, col.align) for text, col, w in cells), width, "left")
        style = base
        extra = self.row_style(row)
        if extra:
            style = style + self.get_component_rich_style(extra)
        if is_cursor:
            style = style + self.get_component_rich_style(
                "datagrid--cursor" if self.has_focus else "datagrid--cursor-blur")
        return Strip([Segment(line, style)], width)

    # -- cursor ----------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self._refresh_row(old)
        self._refresh_row(new)
        if len(self.source):
            self.post_message(self.Highlighted(self, new))

    def _refresh_row(self, row: int) -> None:
        if 0 <= row < len(self.source):
            self.refresh_line(row + 1)  # virtual y: the header takes line 0

    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_offset.y)
        rows = self.page_rows
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)

    def watch_has_focus(self, value: bool) -> None:
        self._refresh_row(self.cursor)

    def move_to(self, row: int) -> None:
        if len(self.source):
            self.cursor = max(0, min(row, len(self.source) - 1))

    def action_cursor_down(self) -> None:
        self.move_to(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self.move_to(self.cursor - 1)

    def action_cursor_first(self) -> None:
        self.move_to(0)

    def action_cursor_last(self) -> None:
        self.move_to(len(self.source) - 1)

    def action_page_down(self) -> None:
        self.move_to(self.cursor + self.page_rows)

    def action_page_up(self) -> None:
        self.move_to(self.cursor - self.page_rows)

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "select" and not len(self.source):
            return None  # no row to open: shown, dimmed
        return True

    def action_select(self) -> None:
        if len(self.source):
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event) -> None:
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.source):
            if row == self.cursor and event.chain >= 2:
                self.action_select()
            self.move_to(row)
