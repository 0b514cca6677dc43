"""`w` on a finding: its what-if. The finding's fix replayed (parsers.replay, through the
Session): the step predicted with the fix, its range and the assumption behind it, the saving
per step beside the rule's estimate, and what holds the step after the fix. The replay runs in a
thread worker that says how far it is; the screen stays responsive meanwhile (escape leaves it).
`l` opens the timeline with the replay's lanes under the measured ones.

Data: Session.whatif (tui/viewmodels/whatif.py)."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import ProgressBar, Static
from textual.worker import get_current_worker

from nsight_tui.render.safe import markdown as md_text
from nsight_tui.tui.messages import Navigation
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.viewmodels.whatif import WhatIf, WhatIfView
from nsight_tui.tui.views.base import ViewScreen, literal


@dataclass
class WhatIfProgress(Message):
    fraction: float
    text: str


@dataclass
class WhatIfReady(Message):
    view: WhatIfView


class WhatIfScreen(ViewScreen):
    DEFAULT_CSS = """
    WhatIfScreen #wi-progress { height: 1; margin: 0 1; }
    WhatIfScreen #wi-scroll { height: 1fr; padding: 0 1; }
    """
    view_name = "whatif"
    BINDING_GROUP_TITLE = "What if (w on a finding)"
    BINDINGS = [Binding("l", "lanes", "Replayed lanes", id="whatif.lanes",
                        tooltip="The timeline with this replay's lanes (≈, the model) under the measured ones, "
                        "on its first steady-state step"),
                # the page is taller than an 80x24 screen (the GPU's idle split last): the keys every
                # table moves with scroll it
                Binding("j,down", "scroll(1)", "Scroll down", show=False, id="whatif.down"),
                Binding("k,up", "scroll(-1)", "Scroll up", show=False, id="whatif.up"),
                Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False, id="whatif.page-down"),
                Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False, id="whatif.page-up"),
                Binding("g,home", "ends(0)", "Top", show=False, id="whatif.top"),
                Binding("G,end", "ends(1)", "Bottom", show=False, id="whatif.bottom")]

    @dataclass
    class LanesChosen(Navigation):
        """`l`: the timeline with the lanes of the replay with `edits` beside the measured ones."""

        edits: tuple[str, ...]
        title: str

    def __init__(self, session, ask: WhatIf, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.ask = ask
        self.view: WhatIfView | None = None
        self.progress_seen: list[str] = []  # the stages said, in order (tests wait on them)

    def crumb(self) -> str:
        return f"what if · {self.ask.title}"

    def compose_body(self) -> ComposeResult:
        yield ProgressBar(total=1.0, show_eta=False, id="wi-progress")
        with VerticalScroll(id="wi-scroll"):
            yield Static("", id="wi-text")

    def mounted(self) -> None:
        self.set_status("replaying…")
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="whatif")
    def build(self) -> None:
        worker = get_current_worker()

        def progress(fraction: float, text: str) -> None:
            if not worker.is_cancelled:
                self.post_message(WhatIfProgress(fraction, text))

        view = self.session.whatif(self.ask, progress)
        if not worker.is_cancelled:
            self.post_message(WhatIfReady(view))

    def on_what_if_progress(self, message: WhatIfProgress) -> None:
        self.progress_seen.append(message.text)
        self.query_one(ProgressBar).update(progress=message.fraction)
        self.set_status(f"{message.text}…" if message.fraction < 1 else message.text)

    def on_what_if_ready(self, message: WhatIfReady) -> None:
        self.view = message.view
        self.query_one(ProgressBar).display = False
        text = Text()
        for label, line in message.view.lines:
            if text:
                text.append("\n")
            text.append(f"{label}: " if label else "  ", style="bold")
            text.append_text(literal(line))
        self.query_one("#wi-text", Static).update(text)
        self.set_status("j/k scroll · l: the replayed lanes on the timeline · escape: back to the findings")

    def worker_failed(self, worker) -> None:
        self.query_one(ProgressBar).display = False

    def action_scroll(self, lines: int) -> None:
        self.query_one("#wi-scroll").scroll_relative(y=lines, animate=False)

    def action_page(self, direction: int) -> None:
        scroll = self.query_one("#wi-scroll")
        scroll.scroll_relative(y=direction * max(1, scroll.scrollable_content_region.height - 1), animate=False)

    def action_ends(self, bottom: int) -> None:
        scroll = self.query_one("#wi-scroll")
        if bottom:
            scroll.scroll_end(animate=False)
        else:
            scroll.scroll_home(animate=False)

    def action_lanes(self) -> None:
        self.post_message(self.LanesChosen(self.ask.edits, self.ask.title))

    def export_view(self) -> ViewText | None:
        view = self.view
        if view is None:
            return None
        head = self.export_header(f"what if: {view.ask.title}")
        body = "\n".join(f"- {label + ': ' if label else ''}{md_text(line)}" for label, line in view.lines) + "\n"
        return ViewText(self.view_name, head, body)
