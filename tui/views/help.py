"""`?`: every key, gathered from the Binding lists themselves (so it cannot go stale)."""
from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from nsight_tui.render.safe import rich_text
from nsight_tui.tui.widgets.key_bar import key_text

def binding_rows(classes) -> list[tuple[str, str]]:
    rows, seen = [], set()
    for cls in classes:
        for b in getattr(cls, "BINDINGS", []):
            if not isinstance(b, Binding) or b.system or not b.description:
                continue
            if b.key in seen:
                continue
            seen.add(b.key)
            rows.append((key_text(b.key), b.tooltip or b.description))
    return rows


class HelpScreen(ModalScreen):
    BINDING_GROUP_TITLE = "Help"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close help", id="help.close"),
        Binding("j,down", "scroll(1)", "Scroll down", show=False, id="help.down"),
        Binding("k,up", "scroll(-1)", "Scroll up", show=False, id="help.up"),
    ]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]], about: list[str] | None = None,
                 leading: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sections = sections
        self.about = about or []  # the open file and the attribution in force, in full
        self.leading = leading  # the first sections are the keys of the view in front: before every other key

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self._help_table())

    def _help_table(self) -> Group:
        parts: list[RenderableType] = [Text.assemble(("nsight-tui keys", "bold underline"), "   esc or ? closes this; j/k scroll")]
        if self.about:
            parts += [Text(""), Text("This file", style="bold yellow")]
            parts += [rich_text(line) for line in self.about]
        for i, (title, rows) in enumerate(self.sections):
            if i == self.leading and self.leading:
                parts += [Text(""), Text("Every other key", style="bold underline")]
            table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
            table.add_column("keys", style="bold", no_wrap=True, width=14)
            table.add_column("what", ratio=1)
            for keys, what in rows:
                table.add_row(keys, what)
            heading = f"This view: {title}" if i < self.leading else title
            parts += [Text(""), Text(heading, style="bold yellow"), table]
        return Group(*parts)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        body = self.query_one("#help-body")
        body.scroll_relative(y=lines, animate=False)
