"""Messages that workers post back to the UI thread (post_message is thread-safe)."""
from __future__ import annotations

from pathlib import Path

from textual.message import Message


class LoadProgress(Message):
    def __init__(self, path: Path, fraction: float, text: str) -> None:
        super().__init__()
        self.path, self.fraction, self.text = path, fraction, text


class TraceLoaded(Message):
    def __init__(self, session) -> None:
        super().__init__()
        self.session = session


class LoadFailed(Message):
    def __init__(self, path: Path, message: str, exit_code: int = 2) -> None:
        super().__init__()
        self.path, self.message, self.exit_code = path, message, exit_code


class ModelReady(Message):
    """The model for `attribution` (and main-thread pick) is built; the app may switch to it.
    With `trace`: the load's second stage, the session's trace with its GPU work (the tree
    was shown first)."""

    def __init__(self, session, attribution: str, main_thread: str | None = None, trace=None,
                 load_seconds: float = 0.0) -> None:
        super().__init__()
        self.session, self.attribution, self.main_thread = session, attribution, main_thread
        self.trace, self.load_seconds = trace, load_seconds


# -- the diff views (posted by their workers to the screen itself) ---------------------------------
class DiffReady(Message):
    def __init__(self, view) -> None:  # a tui.viewmodels.diff.DiffView
        super().__init__()
        self.view = view


class DiffFailed(Message):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


class DiffProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ScopeReady(Message):
    def __init__(self, view) -> None:  # a tui.viewmodels.diff.ScopeView
        super().__init__()
        self.view = view
