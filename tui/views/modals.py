"""Small dialogs: the correlation ID prompt and the export-file-exists question."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class CorrelationPrompt(ModalScreen[int | None]):
    BINDING_GROUP_TITLE = "Correlation ID prompt"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="corr-prompt.cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Jump to correlation ID (enter to go, escape to cancel)")
            yield Input(placeholder="e.g. 8851", type="integer", id="corr-input")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        self.dismiss(int(text) if text.lstrip("-").isdigit() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportConflict(ModalScreen[str]):
    """The export file exists: overwrite it, write under a new name, or cancel."""

    BINDING_GROUP_TITLE = "Export: the file exists"
    BINDINGS = [
        Binding("o", "choose('overwrite')", "Overwrite", id="export-conflict.overwrite"),
        Binding("n", "choose('new')", "New name", id="export-conflict.new-name"),
        Binding("c,escape", "choose('cancel')", "Cancel", id="export-conflict.cancel"),
    ]

    def __init__(self, path: Path, new_path: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.path, self.new_path = path, new_path

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(f"{self.path.name} exists in {self.path.parent}."))
            yield Static(Text.assemble(("o", "bold"), " overwrite   ", ("n", "bold"), f" write {self.new_path.name}   ",
                                       ("c", "bold"), " cancel"))

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)


class TextPanel(ModalScreen[None]):
    """A panel of lines shown whole (a GPU gap's detail), scrolled when taller than the screen;
    escape, enter or q closes it."""

    BINDING_GROUP_TITLE = "Detail panel"
    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="text-panel.close")]
    DEFAULT_CSS = """
    TextPanel { align: center middle; }
    TextPanel > VerticalScroll { width: 95%; height: auto; max-height: 90%; border: round $accent;
                                 background: $panel; padding: 0 1; }
    """

    def __init__(self, title: str, lines: list[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.title_text, self.lines = title, lines

    def compose(self) -> ComposeResult:
        from textual.containers import VerticalScroll

        with VerticalScroll() as box:
            box.border_title = self.title_text
            box.border_subtitle = "esc close"
            yield Static(Text("\n".join(self.lines)), id="panel-text")

    def action_close(self) -> None:
        self.dismiss(None)
