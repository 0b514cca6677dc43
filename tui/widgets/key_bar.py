"""The footer: the keys that work right now, as one line of text.

Textual's Footer recomposes a widget per key on every screen change (about 60 ms a
screen switch here, see NOTES.md); this draws the same information as a single Static.
"""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

# How a Textual key name reads on screen (the footer and the help screen, `?`).
KEY_NAMES = {
    "slash": "/", "question_mark": "?", "escape": "esc", "down": "↓", "up": "↑", "left": "←", "right": "→",
    "pagedown": "PgDn", "pageup": "PgUp", "enter": "enter", "space": "space", "home": "Home", "end": "End",
    "left_square_bracket": "[", "right_square_bracket": "]", "plus": "+", "minus": "-", "equals_sign": "=",
}


def key_text(keys: str) -> str:
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $panel;
        color: $text;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    _drawn: Text | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._changed)
        self.call_after_refresh(self.redraw)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _changed(self, screen) -> None:
        if self.is_attached and screen is self.screen:
            self.redraw()

    def redraw(self) -> None:
        text = Text()
        seen = set()
        for _ns, binding, enabled, _tip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            text.append(f" {key_text(binding.key.split(',')[0])} ", style="bold reverse" if enabled else "dim reverse")
            text.append(f" {binding.description} ", style="" if enabled else "dim")
        if text == self._drawn:
            return  # the same keys (a focus change within the view): no repaint
        self._drawn = text
        self.update(text, layout=False)  # always one row: no layout pass
