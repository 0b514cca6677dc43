"""The app's state, apart from what the app does: the files given, the open session, the files
loaded so far, the options. The app's parts (loader, navigator, spares, modes, exporter) work
on an AppState; the app (tui/app.py) is one, with the keys that work everywhere, and builds
those parts. None of them imports the app, nor does any view (tui/host.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from textual.app import App
from textual.screen import Screen

from nsight_tui.parsers.read.load import TraceLoader
from nsight_tui.tui.session import Session


class AppState(App[int]):
    def __init__(self, paths: Sequence[str | Path], attribution: str = "process", export_dir: str | Path | None = None,
                 diff: bool = False, main_thread: str | None = None):
        super().__init__()
        self.paths = [Path(p) for p in paths]
        self.open_diff = diff  # start on the diff of the two files (over the files view)
        self.attribution = attribution
        self.main_thread = main_thread  # --main-thread: a thread id or name, for every file opened
        self.export_dir = Path(export_dir) if export_dir is not None else None
        self.session: Session | None = None  # the file on screen
        self.sessions: dict[Path, Session] = {}  # every file loaded: reopening from the files view is instant
        self.error_message = ""
        self.loaded = False  # true once a file is on screen (tests and the benchmark wait on it)
        self.roofline_options: dict = {}  # --flops/--peak-* (tui.launch), for the roofline view
        self.ncu_file: str | None = None  # --ncu FILE.ncu-rep: measured points in the roofline view
        # The one file's loader, opened before the app started (tui.launch.open_early); the
        # first load takes it.
        self.opened: Callable[[], TraceLoader] | None = None

    @property
    def multi(self) -> bool:
        return len(self.paths) > 1

    def held_session(self, path: Path) -> Session | None:
        return self.sessions.get(path)

    def clock(self) -> float:
        """The load's clock (the header's `loaded in`; a snapshot test pins it)."""
        return time.perf_counter()

    def say(self, screen: Screen, text: str, notify: bool = True) -> None:
        """A line on `screen`'s status (where it has one), and a notice unless `notify` is off."""
        setter = getattr(screen, "set_status", None)
        if setter and screen.is_mounted:
            setter(text)
        if notify:
            self.notify(text, timeout=4, markup=False)
