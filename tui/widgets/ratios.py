"""The ratios beside a range's kernel table: the family shares under one caption that says
what they divide by, then the other ratios (GPU busy vs CPU, launch overhead, queue delay,
phase ratios). Wide screens give each of those its basis; narrow ones a compact flow."""
from __future__ import annotations

from rich.text import Text
from textual.css.scalar import Unit
from textual.widgets import Static

from nsight_tui.render.numbers import quantity
from nsight_tui.render.safe import visible
from nsight_tui.tui.viewmodels.ratios import RatioPanelView, short_label


MAX_LINES = 5  # the panel's height on narrow screens (app.tcss #ratios max-height)


class RatioPanel(Static):
    DEFAULT_CSS = """
    RatioPanel { height: auto; padding: 0 1; background: $panel; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = RatioPanelView()
        self._compact = True
        self._drawn: Text | None = None

    @property
    def compact(self) -> bool:
        return self._compact

    @compact.setter
    def compact(self, value: bool) -> None:
        if value != self._compact:
            self._compact = value
            self._draw()

    def on_resize(self) -> None:
        self._draw()

    def show(self, view: RatioPanelView) -> None:
        self.view = view
        self._draw()

    def _draw(self) -> None:
        text = Text() if self.view.empty else self._flow() if self._compact else self._table()
        if text == self._drawn:
            return  # a resize that changes nothing: no update, no layout, no repaint
        # Beside the table (wide) the panel's height is the table's: its text never moves the
        # layout. Under it (compact), a new line count does.
        layout = self._drawn is None or (self._compact and text.plain.count("\n") != self._drawn.plain.count("\n"))
        self._drawn = text
        self.update(text, layout=layout)

    def _width(self) -> int:
        """The text's width: the laid-out one, or before the first layout the one it will get
        (app.tcss: a fixed width beside the table, the screen's width under it), so the first
        frame is drawn at its real width and not drawn again when the layout comes."""
        if self.content_size.width:
            return self.content_size.width
        width = self.styles.width
        total = int(width.value) if width is not None and width.unit == Unit.CELLS else self.app.size.width
        return total - self.styles.gutter.width

    def _flow(self) -> Text:
        """`label value` pairs packed into lines of the panel's width; a pair is never split
        across lines, and what does not fit in MAX_LINES is counted, not dropped silently."""
        width = max(self._width(), 20)
        v = self.view
        lines: list[list[tuple[str, str]]] = []  # per line: (text, style) parts
        pairs: list[int] = []  # pairs on each line
        used = 0

        def newline() -> None:
            nonlocal used
            lines.append([])
            pairs.append(0)
            used = 0

        def put(label: str, value: str, sep: str) -> None:
            nonlocal used
            size = len(label) + 1 + len(value)
            if used and used + len(sep) + size > width:
                newline()
            elif used:
                lines[-1].append((sep, "dim"))
                used += len(sep)
            lines[-1] += [(f"{label} ", ""), (value, "bold")]
            pairs[-1] += 1
            used += size

        newline()
        if v.shared:
            caption = f"{visible(v.caption)}:"
            lines[-1].append((caption, "dim"))
            used = len(caption)
            for r in v.shared:
                put(visible(short_label(r.label)), quantity(r.value, r.unit), "  ")
            if v.own:
                newline()
        for r in v.own:
            put(visible(short_label(r.label)), quantity(r.value, r.unit), "  ·  ")
        if len(lines) > MAX_LINES:
            hidden = sum(pairs[MAX_LINES - 1:])
            lines = lines[:MAX_LINES - 1] + [[(f"+{hidden} more: a wider screen shows them, e exports them", "dim")]]
        text = Text()
        for i, parts in enumerate(lines):
            if i:
                text.append("\n")
            for part, style in parts:
                text.append(part, style=style)
        return text

    def _table(self) -> Text:
        """The caption, the shares as `label ... value`, then each other ratio with its basis
        dimmed and wrapping under it."""
        width = max(self._width(), 30)
        text = Text()

        def row(label: str, value: str) -> None:
            room = max(width - len(value) - 1, 8)
            label = label if len(label) <= room else label[: room - 1] + "…"
            text.append(label.ljust(room) + " ")
            text.append(value, style="bold")

        v = self.view
        if v.shared:
            text.append(visible(v.caption[:1].upper() + v.caption[1:]), style="dim italic")
            for r in v.shared:
                text.append("\n")
                row(visible(short_label(r.label)), quantity(r.value, r.unit))
            if v.own:
                text.append("\n")
        for i, r in enumerate(v.own):
            text.append("\n" if i or v.shared else "")
            row(visible(r.label), quantity(r.value, r.unit))
            text.append(f"\n  {visible(r.basis)}", style="dim")
        return text
