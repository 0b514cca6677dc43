"""Shown while a file loads in a worker: which stage, and how far."""
from __future__ import annotations

import time
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.screen import Screen

from textual.widgets import ProgressBar, Static

from nsight_tui.tui.widgets.key_bar import KeyBar


class LoadingScreen(Screen):
    def __init__(self, path: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.path = path
        self._on_resume = None

    def when_resumed(self, action) -> None:
        """Run `action` once this screen is in front again (the load ended under the help
        screen or the palette)."""
        self._on_resume = action

    def on_screen_resume(self) -> None:
        action, self._on_resume = self._on_resume, None
        if action is not None:
            self.call_later(action)

    def compose(self) -> ComposeResult:
        with Middle():
            with Center():
                yield Static(f"loading {self.path.name}", id="loading-title")
            with Center():
                yield ProgressBar(total=100, show_eta=False, id="loading-bar")
            with Center():
                yield Static("opening read-only…", id="loading-step")
        yield KeyBar()

    def on_mount(self) -> None:
        self._started = time.monotonic()
        self._step = "opening read-only"
        self.set_interval(0.1, self._tick)  # a stage can take seconds on big files: show it is alive

    def _tick(self) -> None:
        self.query_one("#loading-step", Static).update(f"{self._step}… {time.monotonic() - self._started:.1f} s")

    def progress(self, fraction: float, text: str) -> None:
        self.query_one(ProgressBar).update(progress=round(100 * fraction))
        self._step = text
        self._tick()
