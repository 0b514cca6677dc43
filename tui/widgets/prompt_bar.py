"""The one-line input at the bottom of a view, for `/` search and `f` filter."""
from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Label


class PromptBar(Horizontal):
    """Hidden, not undisplayed, while closed: it keeps its place in the layout (app.tcss docks it
    over the key bar), so opening it repaints one row instead of laying out the whole screen."""

    DEFAULT_CSS = """
    PromptBar { height: 1; visibility: hidden; background: $boost; }
    PromptBar.-open { visibility: visible; }
    PromptBar > Label { width: auto; padding: 0 1; color: $text-accent; text-style: bold; }
    PromptBar > Input { width: 1fr; height: 1; border: none; padding: 0; background: $boost; }
    PromptBar > Input:focus { border: none; }
    """

    BINDING_GROUP_TITLE = "Search / filter prompt"
    BINDINGS = [Binding("escape", "cancel", "Cancel", show=True, id="prompt.cancel")]

    @dataclass
    class Changed(Message):
        kind: str  # "search" | "filter"
        value: str

    @dataclass
    class Submitted(Message):
        kind: str
        value: str

    @dataclass
    class Cancelled(Message):
        kind: str
        before: str  # the value when the prompt opened

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind = ""
        self._before = ""

    def compose(self) -> ComposeResult:
        # Made with the view (spare screens compose them ahead): made on first use instead,
        # they cost the first `/` or `f` their mount (5-8 ms on 2 busy cores).
        yield Label("")
        yield Input()

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, kind: str, prompt: str, value: str = "") -> None:
        self.kind, self._before = kind, value
        label, inp = self.query_one(Label), self.query_one(Input)
        if label.content != prompt:
            label.update(prompt)
        with inp.prevent(Input.Changed):
            inp.value = value
        inp.cursor_position = len(value)
        self.add_class("-open")
        inp.focus()

    def close(self) -> None:
        self.remove_class("-open")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.is_open:
            self.post_message(self.Changed(self.kind, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close()
        self.post_message(self.Submitted(self.kind, event.value))

    def action_cancel(self) -> None:
        self.close()
        self.post_message(self.Cancelled(self.kind, self._before))
