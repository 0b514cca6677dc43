"""The header at the top of every view: one row (two when the file name is long) saying what
the file is, with the attribution in force as a badge. `?` shows it all in full."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from nsight_tui.render.safe import visible
from nsight_tui.tui.viewmodels.header import HeaderInfo, fit


class InfoBar(Static):
    DEFAULT_CSS = """
    InfoBar {
        height: auto;
        max-height: 2;
        background: $boost;
        color: $text;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.info: HeaderInfo | None = None
        self._drawn: Text | None = None

    def show(self, info: HeaderInfo | None) -> None:
        self.display = info is not None
        self.info = info
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self.info is None:
            return
        width = self.content_size.width or (self.app.size.width - 2)
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, row in enumerate(fit(self.info, width)):
            if i:
                text.append("\n")
            text.append(visible(row.text), style="bold" if i == 0 else "")
            if row.badge:
                gap = max(width - len(row.text) - len(row.badge), 1)
                text.append(" " * gap)
                text.append(row.badge, style="reverse")
        if text == self._drawn:
            return  # a resize or a refresh that changes nothing: no layout, no repaint
        # one row or two: a layout only when that changes (or for the first text)
        layout = self._drawn is None or text.plain.count("\n") != self._drawn.plain.count("\n")
        self._drawn = text
        self.update(text, layout=layout)
