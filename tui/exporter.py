"""`e`: the view on screen to a Markdown file. The text is built in a worker (it reads every row
of the view, and for launches grid/block from the file); the file is written on the UI thread,
so a signal (handled on the event loop) never lands halfway through a write. An existing file
is never overwritten without asking (tui/export.py: names, rendering, the atomic write).
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.screen import Screen

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.tui import export
from nsight_tui.tui.messages import ExportFailed, ExportReady
from nsight_tui.tui.state import AppState


class Exporter:
    def __init__(self, app: AppState) -> None:
        self.app = app

    def export(self) -> None:
        app = self.app
        screen = app.screen
        maker = getattr(screen, "export_view", None)
        if maker is None:
            app.notify("nothing to export on this screen", severity="warning")
            return
        app.say(screen, "exporting…", notify=False)
        app.run_worker(partial(self._build, screen, maker), name="export", group="export", thread=True,
                       exclusive=True, exit_on_error=False)

    def _build(self, screen: Screen, maker) -> None:
        try:
            view = maker()
            text = export.render(view) if view is not None else ""
        except Exception as exc:  # never lose the session over an export
            self.app.post_message(ExportFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.app.post_message(ExportReady(screen, view, text))

    # -- what the worker posted (the app hands it here) ---------------------------------------
    def failed(self, message: ExportFailed) -> None:
        self.app.notify(message.message, title="export failed", severity="error", markup=False)

    def ready(self, message: ExportReady) -> None:
        screen, view, text = message.screen, message.view, message.text
        assert isinstance(screen, Screen)
        if view is None:
            self.app.say(screen, "nothing to export here yet")
            return
        path = export.target(self.app.export_dir or Path.cwd(), view)
        if not path.exists():
            self._write(screen, path, text, overwrite=False)
            return

        def decide(choice: str | None) -> None:
            if choice == "overwrite":
                self._write(screen, path, text, overwrite=True)
            elif choice == "new":
                self._write(screen, export.free_name(path), text, overwrite=False)
            else:
                self.app.say(screen, "export cancelled")

        from nsight_tui.tui.views.modals import ExportConflict

        self.app.push_screen(ExportConflict(path, export.free_name(path)), decide)

    def _write(self, screen: Screen, path: Path, text: str, overwrite: bool) -> None:
        app = self.app
        try:
            written = export.write(path, text, overwrite=overwrite, inputs=app.paths)
        except (TraceError, OSError) as exc:
            app.notify(str(exc), title="export failed", severity="error", markup=False)
            return
        clip = ""
        if len(text) <= export.CLIPBOARD_LIMIT:
            app.copy_to_clipboard(text)
            clip = " (and copied to the clipboard)"
        try:
            shown = f"./{written.relative_to(Path.cwd())}"
        except ValueError:
            shown = str(written)
        app.say(screen, f"exported {written.name}{clip}: {shown}")
