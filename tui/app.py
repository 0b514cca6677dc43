"""The nsight-tui application: loads a file in a worker, then drills down
ranges -> kernels -> launches -> correlation, with exports at every level.

Screens form the drill-down stack (escape goes back). The app owns what spans views:
the open session, the attribution mode, exports, and the keys that work everywhere.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from textual import events, work
from textual.actions import ActionParseResult
from textual.app import App
from textual.dom import DOMNode
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.ids import PID_MASK, tid_of
from nsight_tui.parsers.read.load import TraceLoader
from nsight_tui.parsers.analyses.ranks import Rank, find_ranks, scoped_model
from nsight_tui.tui import export
from nsight_tui.tui.commands import NsightCommands
from nsight_tui.tui.messages import (
    ExportFailed, ExportReady, GpuLoaded, LoadFailed, LoadProgress, ModelFailed, ModelReady, TraceLoaded,
)
from nsight_tui.tui.session import Session, StagedLoad
from nsight_tui.tui.tree_source import node_key
from nsight_tui.tui.views.api import ApiScreen
from nsight_tui.tui.views.backward import BackwardPartsScreen
from nsight_tui.tui.views.base import TableScreen, ViewScreen
from nsight_tui.tui.views.correlation import CorrelationScreen
from nsight_tui.tui.views.diff import DiffKernelsScreen, DiffScreen
from nsight_tui.tui.views.files import FilesScreen, QuestionsScreen
from nsight_tui.tui.views.findings import FindingsScreen
from nsight_tui.tui.views.help import HelpScreen, binding_rows
from nsight_tui.tui.views.kernels import KernelsScreen
from nsight_tui.tui.views.launches import LaunchesScreen
from nsight_tui.tui.views.loading import LoadingScreen
from nsight_tui.tui.views.modals import CorrelationPrompt, ExportConflict
from nsight_tui.tui.views.ranges import RangesScreen, RangeTree
from nsight_tui.tui.views.pace import PaceScreen
from nsight_tui.tui.views.ranks import RanksScreen
from nsight_tui.tui.views.timeline import TimelineScreen, open_target
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.prompt_bar import PromptBar


class NsightApp(App[int]):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))  # absolute: subclasses live elsewhere
    TITLE = "nsight-tui"
    COMMANDS = App.COMMANDS | {NsightCommands}

    BINDING_GROUP_TITLE = "Everywhere"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        # People press ctrl+c first to leave: it quits on every screen (an Input's copy included).
        # During the load it is an interruption, and says so (exit 130, as a shell's ctrl+c).
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, id="app.quit-ctrl-c"),
        Binding("question_mark", "help", "Help", tooltip="This help: every key, the file and the attribution in full",
                id="app.help"),
        Binding("e", "export", "Export",
                tooltip="Export the view on screen (its filter, sort, selection) to nsight-tui_<view>.md here; "
                "also copied to the clipboard (OSC 52)", id="app.export"),
        Binding("m", "switch_attribution", "Attribution",
                tooltip="Switch attribution: process-wide (autograd-thread kernels count for the main thread's "
                "ranges) or nsys's launching-thread rule", id="app.attribution"),
        Binding("c", "ask_correlation", "Corr ID", tooltip="Jump to a correlation ID: its API call, GPU work, NVTX stack",
                id="app.correlation"),
        Binding("t", "timeline", "Timeline", show=False, id="app.timeline",
                tooltip="Timeline of the selection (a range: its median instance; a launch: centred on it): "
                "lanes, GPU idle by cause, the CPU's lead"),
        Binding("1", "view_ranges", "Ranges", show=False, tooltip="View: NVTX range tree (home)", id="app.view-ranges"),
        Binding("2", "view_kernels", "All kernels", show=False, tooltip="View: kernel summary of the whole trace",
                id="app.view-kernels"),
        Binding("3", "view_api", "API summary", show=False, tooltip="View: CUDA API summary (nsys cuda_api_sum)",
                id="app.view-api"),
        Binding("4", "view_files", "Files", show=False, tooltip="View: the files side by side (several files open)",
                id="app.view-files"),
        Binding("F", "view_findings", "What to fix first", show=False, id="app.view-findings",
                tooltip="View: what to fix first: the causes found in the steady-state steps, ranked by the step "
                "time their fix would save, with the evidence and the fix; enter jumps to the evidence"),
        Binding("p", "view_pace", "Pace", show=False, id="app.view-pace",
                tooltip="View: the pace of the iterations: each one's CPU span and GPU time in order, outliers marked"),
        Binding("u", "view_memory", "GPU memory", show=False, id="app.view-memory",
                tooltip="View: GPU memory: the peak in use and where, per phase, an out-of-memory run's failed allocation"),
        Binding("5", "view_ranks", "Ranks", show=False, id="app.view-ranks",
                tooltip="View: the ranks side by side (step time, straggler, communication vs compute, per phase)"),
        Binding("R", "cycle_rank", "Rank filter", show=False, id="app.rank",
                tooltip="Rank filter: every rank (totals sum them) -> rank 0 -> rank 1 ...: the tree shows that "
                "rank's process, GPU columns and kernel tables count its GPU only"),
        Binding("6", "view_ncu", "Nsight Compute", show=False, id="app.view-ncu",
                tooltip="View: Nsight Compute's figures per kernel name within a range (--ncu FILE.ncu-rep)"),
        Binding("r", "view_roofline", "Roofline", show=False,
                tooltip="View: ranges (or a range's kernel families) against the GPU's compute and memory roofs",
                id="app.view-roofline"),
        Binding("ctrl+p", "command_palette", "Commands", show=False,
                tooltip="Command palette: views, actions, jump to any range or kernel by name", id="app.palette"),
    ]

    def __init__(self, paths: Sequence[str | Path], attribution: str = "process", export_dir: str | Path | None = None,
                 diff: bool = False, main_thread: str | None = None):
        super().__init__()
        self.paths = [Path(p) for p in paths]
        self.open_diff = diff  # start on the diff of the two files (over the files view)
        self.attribution = attribution
        self.main_thread = main_thread  # --main-thread: a thread id or name, for every file opened
        self.export_dir = Path(export_dir) if export_dir is not None else None
        self.session: Session | None = None
        self.error_message = ""
        self.loaded = False  # true once a file is on screen (tests and the benchmark wait on it)
        self._load_started = 0.0
        self._mode_switching = False
        self._sessions: dict[Path, Session] = {}  # reopening from the files view is instant
        self._spares: list[ViewScreen] = []  # views composed ahead (_prepare_spare)
        self._spare_timer: Timer | None = None
        self._last_key = 0.0
        self.roofline_options: dict = {}  # --flops/--peak-* (tui.launch), for the roofline view
        self.ncu_file: str | None = None  # --ncu FILE.ncu-rep: measured points in the roofline view
        # The one file's loader, opened before the app started (tui.launch.open_early); the
        # first load takes it.
        self.opened: Callable[[], TraceLoader] | None = None

    # -- start-up and loading -------------------------------------------------------------------
    @property
    def multi(self) -> bool:
        return len(self.paths) > 1

    def on_mount(self) -> None:
        if self.multi:
            self.push_screen(FilesScreen(self.paths, self.attribution, build_when_shown=self.open_diff))
            if self.open_diff:
                self.push_screen(DiffScreen(self.paths[0], self.paths[1], self.attribution))
        else:
            self.open_file(self.paths[0])

    def open_file(self, path: Path) -> None:
        cached = self._sessions.get(path)
        if cached is not None:  # back from the files view to a file already loaded
            self.session = cached
            self.push_screen(RangesScreen(cached))
            return
        self.loaded = False
        self._load_started = self.clock()
        self.push_screen(LoadingScreen(path))
        self._load(path, self.attribution)

    def clock(self) -> float:
        return time.perf_counter()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load")
    def _load(self, path: Path, attribution: str) -> None:
        worker = get_current_worker()

        def progress(fraction: float, text: str) -> None:
            self.post_message(LoadProgress(path, fraction, text))

        first = None
        try:
            opened, self.opened = self.opened, None
            load = StagedLoad(path, attribution, self.main_thread, progress, clock=self.clock,
                              started=self._load_started, opened=opened)
            # Stage 1: the NVTX tree with CPU times, on screen while the GPU work is read.
            first = load.tree()
            if first is not None and not worker.is_cancelled:
                first.prepare()  # the header's nesting note, here, not on the UI thread
                self.post_message(TraceLoaded(first))
            # Stage 2: GPU ops and API calls, attributed; the tree's nodes are taken over.
            trace, seconds = load.finish()
        except TraceError as exc:
            self.post_message(LoadFailed(path, str(exc), exc.exit_code))
            return
        except Exception as exc:  # a bug or an export we did not foresee: one line, not a traceback
            self.post_message(LoadFailed(path, f"internal error: {type(exc).__name__}: {exc}", 70))
            return
        if worker.is_cancelled:
            return
        # The header's rank badge reads the ranks: found here, not on the UI thread.
        if first is None:
            session = Session(path, trace, attribution, seconds, main_thread=self.main_thread)
            session.ranks()
            session.prepare()  # the header's slow parts too, here, not on the UI thread
            self.post_message(TraceLoaded(session))
        else:
            # the header's slow parts on a Session of the full trace; the first stage's takes them over
            ready = Session(path, trace, attribution, seconds, main_thread=self.main_thread)
            ranks = find_ranks(trace)
            self.post_message(GpuLoaded(first, trace, seconds, ranks, ready.prepare()))

    def on_load_progress(self, message: LoadProgress) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.progress(message.fraction, message.text)
            return
        session = self._sessions.get(message.path)
        if session is not None and session.pending:  # the tree is up; the GPU work is coming
            session.loading(message.fraction, message.text)
            if isinstance(self.screen, ViewScreen) and self.screen.session is session:
                self.screen.refresh_info()

    def _loading_screen(self, path: Path) -> LoadingScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, LoadingScreen) and s.path == path), None)

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        session = message.session
        self._sessions[session.path] = session
        session.roofline_options = self.roofline_options
        session.ncu_file = self.ncu_file
        if not session.pending:
            self._settle(session)
        loading = self._loading_screen(session.path)
        if loading is None:
            return  # the user left the loading screen: the file stays cached for later
        if self.screen is loading:
            self._show_loaded(session)
        else:  # help or the palette is on top: finish when the loading screen is back in front
            loading.when_resumed(lambda: self._show_loaded(session))

    def _show_loaded(self, session: Session) -> None:
        self.session = session
        self.loaded = not session.pending  # tests and the benchmark wait for the GPU columns
        self.switch_screen(RangesScreen(session))

    def _settle(self, session: Session) -> None:
        self._warm(session)
        self._spare_later()  # the first screen drawn first

    def on_gpu_loaded(self, message: GpuLoaded) -> None:
        """The load's second stage: the GPU columns fill in, in place (the cursor stays)."""
        session = message.session
        session.gpu_loaded(message.trace, message.load_seconds, message.ranks, message.prepared)
        self._settle(session)
        for screen in self.screen_stack:
            if isinstance(screen, RangesScreen) and screen.session is session:
                screen.rebuild(screen.kept_key())
                screen.refresh_info()
                screen.refresh_bindings()
        if self.session is session:
            self.loaded = True

    @work(thread=True, exclusive=True, exit_on_error=False, group="warm")
    def _warm(self, session: Session) -> None:
        """Compute the global views while the user reads the tree, so `2` and `3` open at once."""
        worker = get_current_worker()
        # Millions of long-lived objects now: keep the cyclic GC from rescanning them on every
        # full collection (those pauses showed up as 50-100 ms keystrokes). Here, not before the
        # first screen: the collection takes ~0.1 s at 600k kernels.
        gc.collect()
        gc.freeze()
        session.warm(cancelled=lambda: worker.is_cancelled)
        # The warm-up's own ~150k long-lived objects (the instance tree, kernel tables) too:
        # unfrozen, every full collection walked them (a 60 ms pause in some keystroke).
        gc.freeze()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The app's own background work (warming the global views) failed: the views will
        compute on demand and report there; say it once here, never crash."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="background work failed", severity="warning",
                        markup=False)

    def on_load_failed(self, message: LoadFailed) -> None:
        if not self.multi:
            self.error_message = message.message
            self.exit(return_code=message.exit_code)
            return
        loading = self._loading_screen(message.path)
        if loading is self.screen:
            self.pop_screen()
        elif loading is not None:
            loading.when_resumed(self.pop_screen)
        self.notify(message.message, title="cannot open", severity="error", timeout=8, markup=False)

    # -- navigation -----------------------------------------------------------------------------
    def _base_index(self) -> int | None:
        """Index in the screen stack of the open file's range tree."""
        for i, screen in enumerate(self.screen_stack):
            if isinstance(screen, RangesScreen):
                return i
        return None

    def go_back(self, screen) -> None:
        base = self._base_index()
        index = self.screen_stack.index(screen) if screen in self.screen_stack else -1
        if base is not None and index == base and not self.multi:
            return  # the range tree of the only file is home
        if len(self.screen_stack) > 2:
            self.pop_screen()
            if base is not None and index == base:
                self.session = None

    async def _to_base(self):
        """Pop down to the range tree; returns it (None when no file is open)."""
        base = self._base_index()
        if base is None:
            return None
        while len(self.screen_stack) - 1 > base:
            await self.pop_screen()
        return self.screen_stack[base]

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Notices go on the view's status line, where they hide nothing (a toast covered tree
        rows for seconds); an error is a toast as well, so it is not missed."""
        screen = self.screen if self.screen_stack else None
        if isinstance(screen, ViewScreen) and screen.is_mounted:
            from rich.text import Text

            text = Text(f"{title}: {message}" if title else str(message),
                        style={"warning": "bold", "error": "bold red"}.get(severity, ""))
            try:
                screen.set_status(text)
            except Exception:  # a view without a status line
                pass
            else:
                if severity != "error":
                    return
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def open_kernels(self, node=None, select_name: str | None = None) -> None:
        if not self._need_session():
            return
        spare = self._take_spare(KernelsScreen)
        if spare is not None:
            self.push_screen(spare)  # then filled in: its resume lays it out once, with the data
            spare.retarget(self.session, node, select_name)
        else:
            self.push_screen(KernelsScreen(self.session, node, select_name))

    def open_op_kernels(self, title: str, positions, where: str = "") -> None:
        """The kernels of a set of ops that is no range (a backward part's, from `b`); `where`
        names them in full under the table."""
        if self._need_session():
            self.push_screen(KernelsScreen(self.session, None, None, ops=(title, positions, where)))

    def open_launches(self, node, name: str, short: str, positions) -> None:
        spare = self._take_spare(LaunchesScreen)
        if spare is not None:
            self.push_screen(spare)
            spare.retarget(self.session, node, name, short, positions)
        else:
            self.push_screen(LaunchesScreen(self.session, node, name, short, positions))

    def open_api(self) -> None:
        spare = self._take_spare(ApiScreen)
        if spare is not None:
            self.push_screen(spare)
            spare.retarget(self.session)
        else:
            self.push_screen(ApiScreen(self.session))

    # -- spare screens: the next kernel table (launches, API summary) composed before it is asked
    # for. Composing, mounting and styling a view's widgets was ~30 ms of the ~100 ms a kernel
    # table took to open at 120x40 (2 cores). Spares are made off screen, one at a time, only
    # when no key came for SPARE_IDLE seconds (after the load, after one is used): a person
    # reading the screen, never in the middle of typing.
    SPARE_DELAY = 0.25
    SPARE_IDLE = 0.4
    # In the order they are made. Two kernel tables: the most opened view, often twice in a row
    # (a range's, then another's or every kernel's) before a pause lets a spare be made again.
    SPARES = (KernelsScreen, ApiScreen, LaunchesScreen, KernelsScreen)

    def _spare_later(self) -> None:
        if self._spare_timer is None:
            self._spare_timer = self.set_timer(self.SPARE_DELAY, self._prepare_spare)

    def _prepare_spare(self) -> None:
        self._spare_timer = None
        session = self.session
        start = getattr(self, "_get_screen", None)  # Textual's start of a screen before it is pushed
        if session is None or session.pending or start is None:
            return  # (another Textual without it: views are composed when opened, as before)
        have = [type(screen) for screen in self._spares]
        missing = []
        for cls in self.SPARES:
            if cls in have:
                have.remove(cls)
            else:
                missing.append(cls)
        if not missing:
            return
        if time.monotonic() - self._last_key < self.SPARE_IDLE:
            self._spare_later()  # keys are coming: later
            return
        cls = missing[0]
        spare: ViewScreen
        if cls is LaunchesScreen:
            spare = LaunchesScreen(session, None, "", "", np.empty(0, np.int64), spare=True)
        elif cls is ApiScreen:
            spare = ApiScreen(session, spare=True)
        else:
            spare = KernelsScreen(session, spare=True)
        self._spares.append(spare)
        start(spare)
        if len(missing) > 1:
            self._spare_later()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self._last_key = time.monotonic()  # spares are made between keys, not during them
        await super().on_event(event)

    def spares(self) -> dict[type, ViewScreen]:
        """The spare screen each view class will use next, once composed (tests wait on them)."""
        out: dict[type, ViewScreen] = {}
        for screen in self._spares:
            out.setdefault(type(screen), screen)
        return {cls: screen for cls, screen in out.items() if screen.is_mounted}

    def _take_spare(self, cls):
        spare = next((screen for screen in self._spares if type(screen) is cls), None)
        if spare is not None:
            self._spares.remove(spare)
            if not spare.is_running:
                spare = None
        self._spare_later()
        return spare

    def open_correlation(self, corr: int, gpid: int | None = None) -> None:
        self.push_screen(CorrelationScreen(self.session, corr, gpid))

    def _need_session(self) -> bool:
        if self.session is None:
            still = isinstance(self.screen, LoadingScreen)
            self.notify("still loading…" if still else "open a file first (enter on a row)", severity="warning")
            return False
        if self.session.pending:
            self.notify("the GPU work is still loading: the tree shows CPU times until then", severity="warning")
            return False
        return True

    async def action_view_ranges(self) -> None:
        if self._need_session():
            await self._to_base()

    async def action_view_kernels(self) -> None:
        if self._need_session():
            await self._to_base()
            self.open_kernels(None)

    async def action_view_api(self) -> None:
        if self._need_session():
            await self._to_base()
            self.open_api()

    async def action_view_findings(self) -> None:
        if self._need_session() and not isinstance(self.screen, FindingsScreen):
            await self._to_base()
            self.push_screen(FindingsScreen(self.session))
    async def action_view_pace(self) -> None:
        if self._need_session() and not isinstance(self.screen, PaceScreen):
            await self._to_base()
            self.push_screen(PaceScreen(self.session))

    async def action_view_memory(self) -> None:
        from nsight_tui.tui.views.memory import MemoryScreen

        if self._need_session() and not isinstance(self.screen, MemoryScreen):
            await self._to_base()
            self.push_screen(MemoryScreen(self.session))

    async def action_view_ncu(self) -> None:
        from nsight_tui.tui.views.ncu import NcuScreen

        if not self._need_session() or isinstance(self.screen, NcuScreen):
            return
        if self.session is None or not self.session.ncu_file:
            self.notify("no Nsight Compute report: start with --ncu FILE.ncu-rep (nsight-tui capture --ncu makes one)")
            return
        await self._to_base()
        self.push_screen(NcuScreen(self.session))

    async def action_view_ranks(self) -> None:
        if self._need_session():
            await self._to_base()
            self.push_screen(RanksScreen(self.session))

    def action_view_roofline(self) -> None:
        if self._need_session():
            from nsight_tui.tui.views.roofline import RooflineScreen

            node = getattr(self.screen, "node", None)  # from a range's kernels: that range's families
            self.push_screen(RooflineScreen(self.session, node))

    async def action_view_files(self) -> None:
        if not self.multi:
            self.notify("one file open: start with several files or a directory to compare them")
            return
        while not isinstance(self.screen, FilesScreen):
            await self.pop_screen()
        self.session = None

    async def jump_to_range(self, gtid: int, key: tuple[str, ...]) -> None:
        ranges = await self._to_base()
        if ranges is not None and not ranges.select_key(gtid, key):
            self.notify(f"{'/'.join(key)}: not in this view", severity="warning", markup=False)

    async def jump_to_kernel(self, name: str) -> None:
        await self._to_base()
        self.open_kernels(None, select_name=name)

    def action_ask_correlation(self) -> None:
        if not self._need_session():
            return

        def go(corr: int | None) -> None:
            if corr is not None:
                self.open_correlation(corr)

        self.push_screen(CorrelationPrompt(), go)

    def action_timeline(self) -> None:
        if self._need_session() and not isinstance(self.screen, TimelineScreen):
            self.open_timeline(open_target(self.screen))

    def open_timeline(self, target=None) -> None:
        """The timeline on `target` (a TimelineTarget, or a function of the lanes; None: the whole trace)."""
        self.push_screen(TimelineScreen(self.session, target))

    def action_help(self) -> None:
        about = self.session.header().full_lines() if self.session is not None else []
        self.push_screen(HelpScreen(help_sections(), about))

    async def run_action(self, action: str | ActionParseResult, default_namespace: DOMNode | None = None,
                         namespaces: Mapping[str, DOMNode] | None = None) -> bool:
        """No action once the app is exiting: a key typed right after `q` (`qu`) opened a view
        on an app shutting down, whose screen was never composed (NoMatches traceback, exit 1)."""
        if self._exit:
            return True  # handled: the app is going
        return await super().run_action(action, default_namespace, namespaces)

    async def action_quit(self) -> None:
        self.exit(return_code=0)

    async def action_interrupt(self) -> None:
        """ctrl+c: quit; while a file is still loading, an interrupted run (130), not a success."""
        loading = not self.loaded and any(w.group == "load" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
                                          for w in self.workers)
        self.exit(return_code=130 if loading else 0)

    # -- attribution mode -----------------------------------------------------------------------
    def action_switch_attribution(self) -> None:
        if self.session is None or not self._need_session() or self._mode_switching:
            return
        new = "nsys" if self.session.attribution == "process" else "process"
        self._mode_switching = True
        self._say(self.screen, f"building the {new} attribution…", notify=False)
        self.notify(f"building the {new} attribution…", timeout=2)
        self._build_mode(self.session, new, self.session.main_thread, self.session.rank)

    # -- the rank filter ------------------------------------------------------------------------
    def action_cycle_rank(self) -> None:
        """`R`: every rank -> rank 0 -> rank 1 ... -> every rank."""
        if self.session is None or not self._need_session() or self._mode_switching:
            return
        if len(self.session.ranks()) < 2:
            self._say(self.screen, "one rank (process × GPU) in this export: nothing to filter")
            return
        self.set_rank(self.session.next_rank())

    def set_rank(self, rank: Rank | None) -> None:
        """Show one rank's ranges and GPU work (None: every rank); built in a worker."""
        session = self.session
        if session is None or self._mode_switching:
            return
        self._mode_switching = True
        self._say(self.screen, f"rank filter: {rank.label if rank is not None else 'every rank'}…", notify=False)
        self._build_mode(session, session.attribution, session.main_thread, rank)

    def pick_main_thread(self, gtid: int) -> None:
        """Make thread `gtid` its process's main thread (`t` in the range tree); on the main
        thread the user picked, go back to the automatic choice."""
        if self.session is None or not self._need_session() or self._mode_switching:
            return
        session = self.session
        info = session.model.main_info.get(gtid & PID_MASK)
        new: str | None
        if info is not None and info.gtid == gtid:
            if session.main_thread is None:
                self.notify(f"{session.trace.thread_label(gtid)} is already the main thread", markup=False)
                return
            new = None
        else:
            new = str(tid_of(gtid))
        self._mode_switching = True
        label = "the automatic choice" if new is None else session.trace.thread_label(gtid)
        self._say(self.screen, f"main thread: {label}; attributing…", notify=False)
        self._build_mode(session, session.attribution, new, session.rank)

    @work(thread=True, exclusive=True, exit_on_error=False, group="mode")
    def _build_mode(self, session: Session, attribution: str, main_thread: str | None = None,
                    rank: Rank | None = None) -> None:
        # The build holds the GIL for long stretches: let the UI paint the notice first.
        time.sleep(0.05)
        try:
            model = scoped_model(session.trace, attribution, main_thread, rank)
            model.aggregated_groups  # noqa: B018
        except Exception as exc:  # keep the session usable under the mode it had
            self.post_message(ModelFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(ModelReady(session, attribution, main_thread, rank))

    def on_model_failed(self, message: ModelFailed) -> None:
        self._mode_switching = False
        self.notify(message.message, title="attribution switch failed", severity="error", markup=False)

    async def on_model_ready(self, message: ModelReady) -> None:
        self._mode_switching = False
        session = message.session
        if session is not self.session:
            return
        # What was open: the range tree's cursor, and the range whose kernels were shown.
        base = self._base_index()
        ranges = self.screen_stack[base] if base is not None else None
        if base is None or not isinstance(ranges, RangesScreen):
            return
        keep = ranges.current_key()
        old_node = next((s.node for s in self.screen_stack[base + 1:]
                         if isinstance(s, KernelsScreen) and s.node is not None), None)
        rank_changed = message.rank != session.rank
        # a new rank on a trace-wide view (2 all kernels, 3 API summary): that view again, of the new rank
        all_kernels = rank_changed and isinstance(self.screen, KernelsScreen) and self.screen.node is None
        api_summary = rank_changed and isinstance(self.screen, ApiScreen)
        await self._to_base()
        session.attribution = message.attribution
        session.main_thread = message.main_thread
        session.rank = message.rank
        self.attribution = message.attribution
        gc.freeze()  # the new model's objects are long-lived too
        ranges.rebuild(keep)
        ranges.refresh_info()
        if rank_changed:
            self.notify(session.rank_help() or "rank filter: every rank", timeout=6, markup=False)
            if all_kernels:
                self.open_kernels(None)
            elif api_summary:
                self.push_screen(ApiScreen(session))
            else:
                self._same_path_in_rank(ranges, keep, old_node)
            return
        if old_node is not None:
            # The same ranges under the new mode: range positions do not depend on the mode
            # (a name path would find the first instance, not the one that was open).
            node = next((n for n in ranges.grid.ranges.all_nodes() if np.array_equal(n.ids, old_node.ids)), None)
            if node is not None:
                ranges.select_node(node)
                self.open_kernels(node)
        main = session.header().main_thread
        self.notify(f"attribution: {session.attribution} — {session.model.mode_help}" + (f"; {main}" if main else ""),
                    timeout=6, markup=False)

    def _same_path_in_rank(self, ranges: RangesScreen, keep: tuple | None, old_node) -> None:
        """After a rank change: the cursor (and the open range's kernels) on the same name path,
        on the same thread where the new tree still has it, else on the new rank's main thread
        (its process has its own ranges, at other positions)."""
        tree = ranges.grid.ranges
        here = [g.gtid for g in tree.groups]
        threads = [keep[0]] if keep is not None and keep[0] in here else []
        threads += [g.gtid for g in tree.groups if g.is_main and g.gtid not in threads]
        if keep is not None:
            for gtid in threads:
                if ranges.select_key(gtid, keep[1]):
                    break
        if old_node is not None:
            key = node_key(old_node)
            node = next((n for n in (tree.find_key(gtid, key) for gtid in threads) if n is not None), None)
            if node is not None:
                ranges.select_node(node)
                self.open_kernels(node)

    # -- export ---------------------------------------------------------------------------------
    def action_export(self) -> None:
        screen = self.screen
        maker = getattr(screen, "export_view", None)
        if maker is None:
            self.notify("nothing to export on this screen", severity="warning")
            return
        self._say(screen, "exporting…", notify=False)
        self._export_worker(screen, maker)

    @work(thread=True, exclusive=True, exit_on_error=False, group="export")
    def _export_worker(self, screen, maker) -> None:
        """Building the text reads every row of the view (and, for launches, grid/block
        from the file): off the UI thread. The file is written on the UI thread, so a signal
        (handled on the event loop) never lands halfway through a write."""
        try:
            view = maker()
            text = export.render(view) if view is not None else ""
        except Exception as exc:  # never lose the session over an export
            self.post_message(ExportFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(ExportReady(screen, view, text))

    def on_export_failed(self, message: ExportFailed) -> None:
        self.notify(message.message, title="export failed", severity="error", markup=False)

    def on_export_ready(self, message: ExportReady) -> None:
        screen, view, text = message.screen, message.view, message.text
        if view is None:
            self._say(screen, "nothing to export here yet")
            return
        path = export.target(self.export_dir or Path.cwd(), view)
        if not path.exists():
            self._write_export(screen, path, text, overwrite=False)
            return

        def decide(choice: str | None) -> None:
            if choice == "overwrite":
                self._write_export(screen, path, text, overwrite=True)
            elif choice == "new":
                self._write_export(screen, export.free_name(path), text, overwrite=False)
            else:
                self._say(screen, "export cancelled")

        self.push_screen(ExportConflict(path, export.free_name(path)), decide)

    def _write_export(self, screen, path: Path, text: str, overwrite: bool) -> None:
        try:
            written = export.write(path, text, overwrite=overwrite, inputs=self.paths)
        except (TraceError, OSError) as exc:
            self.notify(str(exc), title="export failed", severity="error", markup=False)
            return
        clip = ""
        if len(text) <= export.CLIPBOARD_LIMIT:
            self.copy_to_clipboard(text)
            clip = " (and copied to the clipboard)"
        try:
            shown = f"./{written.relative_to(Path.cwd())}"
        except ValueError:
            shown = str(written)
        self._say(screen, f"exported {written.name}{clip}: {shown}")

    def _say(self, screen, text: str, notify: bool = True) -> None:
        setter = getattr(screen, "set_status", None)
        if setter and screen.is_mounted:
            setter(text)
        if notify:
            self.notify(text, timeout=4, markup=False)


# The help screen's sections, in order: each class's BINDING_GROUP_TITLE and its keys.
HELP_CLASSES = (NsightApp, ViewScreen, DataGrid, RangesScreen, RangeTree, TableScreen, KernelsScreen, TimelineScreen,
                FindingsScreen, BackwardPartsScreen, PaceScreen, RanksScreen, FilesScreen, QuestionsScreen, DiffScreen, DiffKernelsScreen,
                PromptBar, ExportConflict)


def help_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    from nsight_tui.tui.views.roofline import RooflineScreen  # Plotext: imported when asked for

    sections: dict[str, list[tuple[str, str]]] = {}
    for cls in (*HELP_CLASSES, RooflineScreen):
        rows = binding_rows([cls])
        if cls is PromptBar:
            rows.append(("enter", "Apply"))
        sections.setdefault(cls.BINDING_GROUP_TITLE or cls.__name__, []).extend(rows)
    return list(sections.items())
