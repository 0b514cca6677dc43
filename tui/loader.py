"""Loading a file, in stages, off the UI thread.

`open_file` shows the loading screen and starts the load worker, which runs
`session.StagedLoad` (no Textual) and posts what it has: `TraceLoaded` (the NVTX tree with CPU
times, `session.pending`), `LoadProgress`, then `GpuLoaded` (the GPU work: the range tree fills
in, in place) or `LoadFailed`. The app hands those messages back here. Once a file's GPU work is
in, the global views are warmed in the background and the spare screens made.
"""
from __future__ import annotations

import gc
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from nsight_tui.parsers.analyses.ranks import find_ranks
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.tui.messages import GpuLoaded, LoadFailed, LoadProgress, TraceLoaded
from nsight_tui.tui.session import Session, StagedLoad
from nsight_tui.tui.spares import Spares
from nsight_tui.tui.state import AppState
from nsight_tui.tui.views import import_after_first_screen
from nsight_tui.tui.views.base import ViewScreen
from nsight_tui.tui.views.loading import LoadingScreen
from nsight_tui.tui.views.ranges import RangesScreen

if TYPE_CHECKING:
    from nsight_tui.parsers.read.load import Trace


class Loader:
    def __init__(self, app: AppState, spares: Spares) -> None:
        self.app = app
        self.spares = spares
        self._started = 0.0

    def open_file(self, path: Path, members: list[Path] | None = None) -> None:
        """Open `path` (or, with `members`, those per-rank exports as one trace named `path`)."""
        app = self.app
        cached = app.sessions.get(path)
        if cached is not None:  # back from the files view to a file already loaded
            app.session = cached
            app.push_screen(RangesScreen(cached))
            return
        app.loaded = False
        self._started = app.clock()
        app.push_screen(LoadingScreen(path))
        app.run_worker(partial(self._load, path, app.attribution, members), name="load", group="load", thread=True,
                       exclusive=True, exit_on_error=False)

    def _load(self, path: Path, attribution: str, members: list[Path] | None = None) -> None:
        """The worker: both stages, each posted as it is ready (per-rank files as one: one stage)."""
        app = self.app
        worker = get_current_worker()

        def progress(fraction: float, text: str) -> None:
            app.post_message(LoadProgress(path, fraction, text))

        first = None
        trace: Trace
        try:
            if members:
                from nsight_tui.parsers.read.rank_merge import load_rank_files

                trace = load_rank_files(members, path, progress)
                seconds = app.clock() - self._started
            else:
                opened, app.opened = app.opened, None
                load = StagedLoad(path, attribution, app.main_thread, progress, clock=app.clock,
                                  started=self._started, opened=opened)
                # Stage 1: the NVTX tree with CPU times, on screen while the GPU work is read.
                first = load.tree()
                if first is not None and not worker.is_cancelled:
                    first.prepare()  # the header's nesting note, here, not on the UI thread
                    app.post_message(TraceLoaded(first))
                # Stage 2: GPU ops and API calls, attributed; the tree's nodes are taken over.
                trace, seconds = load.finish()
        except TraceError as exc:
            app.post_message(LoadFailed(path, str(exc), exc.exit_code))
            return
        except Exception as exc:  # a bug or an export we did not foresee: one line, not a traceback
            app.post_message(LoadFailed(path, f"internal error: {type(exc).__name__}: {exc}", 70))
            return
        if worker.is_cancelled:
            return
        # The header's rank badge reads the ranks: found here, not on the UI thread.
        if first is None:
            session = Session(path, trace, attribution, seconds, main_thread=app.main_thread)
            session.ranks()
            session.prepare()  # the header's slow parts too, here, not on the UI thread
            app.post_message(TraceLoaded(session))
        else:
            # the header's slow parts on a Session of the full trace; the first stage's takes them over
            ready = Session(path, trace, attribution, seconds, main_thread=app.main_thread)
            ranks = find_ranks(trace)
            app.post_message(GpuLoaded(first, trace, seconds, ranks, ready.prepare()))

    # -- what the worker posted (the app hands it here) ---------------------------------------
    def progress(self, message: LoadProgress) -> None:
        app = self.app
        if isinstance(app.screen, LoadingScreen):
            app.screen.progress(message.fraction, message.text)
            return
        session = app.sessions.get(message.path)
        if session is not None and session.pending:  # the tree is up; the GPU work is coming
            session.loading(message.fraction, message.text)
            if isinstance(app.screen, ViewScreen) and app.screen.session is session:
                app.screen.refresh_info()

    def _loading_screen(self, path: Path) -> LoadingScreen | None:
        return next((s for s in self.app.screen_stack if isinstance(s, LoadingScreen) and s.path == path), None)

    def tree_loaded(self, message: TraceLoaded) -> None:
        app = self.app
        session = message.session
        app.sessions[session.path] = session
        session.roofline_options = app.roofline_options
        session.ncu_file = app.ncu_file
        if not session.pending:
            app.call_after_refresh(self._settle, session)  # the first screen drawn first
        loading = self._loading_screen(session.path)
        if loading is None:
            return  # the user left the loading screen: the file stays cached for later
        if app.screen is loading:
            self._show(session)
        else:  # help or the palette is on top: finish when the loading screen is back in front
            loading.when_resumed(lambda: self._show(session))

    def _show(self, session: Session) -> None:
        app = self.app
        app.session = session
        app.loaded = not session.pending  # tests and the benchmark wait for the GPU columns
        app.switch_screen(RangesScreen(session))

    def _settle(self, session: Session) -> None:
        self._warm(session)
        self.spares.later()  # the first screen drawn first

    def gpu_loaded(self, message: GpuLoaded) -> None:
        """The load's second stage: the GPU columns fill in, in place (the cursor stays)."""
        app = self.app
        session = message.session
        session.gpu_loaded(message.trace, message.load_seconds, message.ranks, message.prepared)
        app.call_after_refresh(self._settle, session)  # the GPU columns drawn first
        for screen in app.screen_stack:
            if isinstance(screen, RangesScreen) and screen.session is session:
                screen.rebuild(screen.kept_key())
                screen.refresh_info()
                screen.refresh_bindings()
        if app.session is session:
            app.loaded = True

    def _warm(self, session: Session) -> None:
        self.app.run_worker(partial(self._warm_up, session), name="warm", group="warm", thread=True, exclusive=True,
                            exit_on_error=False)

    def _warm_up(self, session: Session) -> None:
        """Compute the global views while the user reads the tree, so `2` and `3` open at once."""
        worker = get_current_worker()
        import_after_first_screen()  # so no key waits for its view's import
        # Millions of long-lived objects now: keep the cyclic GC from rescanning them on every
        # full collection (those pauses showed up as 50-100 ms keystrokes). Here, not before the
        # first screen: the collection takes ~0.1 s at 600k kernels.
        gc.collect()
        gc.freeze()
        session.warm(cancelled=lambda: worker.is_cancelled)
        # The warm-up's own ~150k long-lived objects (the instance tree, kernel tables) too:
        # unfrozen, every full collection walked them (a 60 ms pause in some keystroke).
        gc.freeze()

    def failed(self, message: LoadFailed) -> None:
        app = self.app
        if not app.multi:
            app.error_message = message.message
            app.exit(return_code=message.exit_code)
            return
        loading = self._loading_screen(message.path)
        if loading is app.screen:
            app.pop_screen()
        elif loading is not None:
            loading.when_resumed(app.pop_screen)
        app.notify(message.message, title="cannot open", severity="error", timeout=8, markup=False)
