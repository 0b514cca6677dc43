"""The lines at the top of every view: the file, its GPUs and counts, the attribution mode."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class InfoBar(Static):
    DEFAULT_CSS = """
    InfoBar {
        height: auto;
        max-height: 4;
        background: $boost;
        color: $text;
        padding: 0 1;
    }
    """

    def show(self, session) -> None:
        self.display = session is not None
        if session is None:
            return
        lines = session.info_lines()
        text = Text(lines[0], style="bold")
        text.append("\n")
        mode, _, rest = lines[1].partition(" — ")
        text.append(mode, style="bold")
        text.append(f" — {rest}", style="italic")
        for note in lines[2:]:
            text.append("\n" + note, style="yellow")
        self.update(text)
