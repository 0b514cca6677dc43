"""The nsight-tui application: one file (or several, side by side) drilled down
ranges -> kernels -> launches -> correlation, with exports at every level.

The app holds what spans views (tui/state.py: the open session, the files loaded, the options),
owns the keys that work everywhere, and hands the rest to its parts, none of which imports it:
- `Loader` (tui/loader.py): a file's staged load in a worker, the tree first, then its GPU work;
- `Navigator` (tui/navigator.py): which screen comes next, for every view's choice
  (messages.Navigation, bubbling up from the views) and every view key;
- `Spares` (tui/spares.py): the next kernel tables composed before they are asked for;
- `Modes` (tui/modes.py): the attribution, the rank filter and the main-thread pick;
- `Exporter` (tui/exporter.py): `e`, the view on screen as a Markdown file.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on
from textual.actions import ActionParseResult
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerState

from nsight_tui.tui.commands import NsightCommands
from nsight_tui.tui.exporter import Exporter
from nsight_tui.tui.host import Host
from nsight_tui.tui.loader import Loader
from nsight_tui.tui.messages import (
    ExportFailed, ExportReady, GpuLoaded, LoadFailed, LoadProgress, ModelFailed, ModelReady, Navigation, TraceLoaded,
)
from nsight_tui.tui.modes import Modes
from nsight_tui.tui.navigator import Navigator
from nsight_tui.tui.spares import Spares
from nsight_tui.tui.state import AppState
from nsight_tui.tui.views.base import ViewScreen

if TYPE_CHECKING:
    from nsight_tui.tui.views.ranges import RangesScreen
    from nsight_tui.tui.views.ranks import RanksScreen

# The views not on the first screen (the range tree) are imported when first shown, or by the
# loader's warm-up once the first screen is up (tui/loader.py): every view and the analyses
# behind them cost ~0.3 s of imports, which the first screen would wait for.


class NsightApp(AppState):
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
        super().__init__(paths, attribution, export_dir, diff, main_thread)
        self.spare_screens = Spares(self)
        self.loader = Loader(self, self.spare_screens)
        self.navigator = Navigator(self, self.spare_screens, self.loader.open_file)
        self.modes = Modes(self, self.navigator)
        self.exporter = Exporter(self)

    def get_driver_class(self):
        """On a Linux terminal, Textual's driver with a lone esc reported when its delay is up
        (tui/terminal_input.py), not at the input thread's next 0.1 s poll."""
        from textual import constants

        driver = super().get_driver_class()
        if constants.DRIVER is None and driver.__module__ == "textual.drivers.linux_driver" \
                and driver.__name__ == "LinuxDriver":  # $TEXTUAL_DRIVER, when set, is the user's choice
            try:
                from nsight_tui.tui.terminal_input import PromptEscapeDriver
            except ImportError:  # a Textual without the parts it builds on: Textual's own driver
                return driver
            return PromptEscapeDriver
        return driver

    def on_mount(self) -> None:
        if self.multi:
            from nsight_tui.tui.views.diff import DiffScreen
            from nsight_tui.tui.views.files import FilesScreen

            self.push_screen(FilesScreen(self.paths, self.attribution, build_when_shown=self.open_diff))
            if self.open_diff:
                self.push_screen(DiffScreen(self.paths[0], self.paths[1], self.attribution))
        else:
            self.loader.open_file(self.paths[0])

    # -- what the views and workers say, handed to the part that deals with it ---------------
    @on(Navigation)
    async def _navigate(self, message: Navigation) -> None:
        await self.navigator.follow(message)

    def on_ranks_screen_rank_chosen(self, message: RanksScreen.RankChosen) -> None:
        self.modes.set_rank(message.rank)

    def on_ranges_screen_thread_picked(self, message: RangesScreen.ThreadPicked) -> None:
        self.modes.pick_main_thread(message.gtid)

    def on_load_progress(self, message: LoadProgress) -> None:
        self.loader.progress(message)

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        self.loader.tree_loaded(message)

    def on_gpu_loaded(self, message: GpuLoaded) -> None:
        self.loader.gpu_loaded(message)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.loader.failed(message)

    def on_model_failed(self, message: ModelFailed) -> None:
        self.modes.failed(message)

    async def on_model_ready(self, message: ModelReady) -> None:
        await self.modes.ready(message)

    def on_export_failed(self, message: ExportFailed) -> None:
        self.exporter.failed(message)

    def on_export_ready(self, message: ExportReady) -> None:
        self.exporter.ready(message)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The app's own background work (warming the global views) failed: the views will
        compute on demand and report there; say it once here, never crash."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="background work failed", severity="warning",
                        markup=False)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self.spare_screens.key_pressed()
        await super().on_event(event)

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

    # -- the keys that work everywhere --------------------------------------------------------
    async def action_view_ranges(self) -> None:
        await self.navigator.view_ranges()

    async def action_view_kernels(self) -> None:
        await self.navigator.view_kernels()

    async def action_view_api(self) -> None:
        await self.navigator.view_api()

    async def action_view_findings(self) -> None:
        await self.navigator.view_findings()

    async def action_view_pace(self) -> None:
        await self.navigator.view_pace()

    async def action_view_memory(self) -> None:
        await self.navigator.view_memory()

    async def action_view_ncu(self) -> None:
        await self.navigator.view_ncu()

    async def action_view_ranks(self) -> None:
        await self.navigator.view_ranks()

    def action_view_roofline(self) -> None:
        self.navigator.view_roofline()

    async def action_view_files(self) -> None:
        await self.navigator.view_files()

    def action_ask_correlation(self) -> None:
        self.navigator.ask_correlation()

    def action_timeline(self) -> None:
        self.navigator.timeline()

    def action_switch_attribution(self) -> None:
        self.modes.switch_attribution()

    def action_cycle_rank(self) -> None:
        self.modes.cycle_rank()

    def action_export(self) -> None:
        self.exporter.export()

    def action_help(self) -> None:
        from nsight_tui.tui.views.help import HelpScreen

        about = self.session.header().full_lines() if self.session is not None else []
        # the keys of the view in front (and its focused widget) first, then the file, then the rest
        front = [type(self.screen), *([type(self.focused)] if self.focused is not None else [])]
        self.push_screen(HelpScreen(help_sections(front), about, leading=len(front_titles(front))))

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

    # -- for tests and the benchmark ----------------------------------------------------------
    def open_kernels(self, node=None, select_name: str | None = None) -> None:
        """A range's kernels (None: every kernel) over the screen on top."""
        self.navigator.open_kernels(node, select_name)

    def spares(self) -> dict[type, ViewScreen]:
        """The spare screen each view class will use next, once composed (tests wait on them)."""
        return self.spare_screens.ready()

    @property
    def _mode_switching(self) -> bool:
        return self.modes.switching


def host_of(app: NsightApp) -> Host:
    """The app is what views may read of it (checked by mypy: views never import the app)."""
    return app


def help_classes() -> tuple[type, ...]:
    """The help screen's sections, in order: each class's BINDING_GROUP_TITLE and its keys."""
    from nsight_tui.tui.views.backward import BackwardPartsScreen
    from nsight_tui.tui.views.base import TableScreen
    from nsight_tui.tui.views.diff import DiffKernelsScreen, DiffScreen
    from nsight_tui.tui.views.files import FilesScreen, QuestionsScreen
    from nsight_tui.tui.views.findings import FindingsScreen
    from nsight_tui.tui.views.kernels import KernelsScreen
    from nsight_tui.tui.views.modals import ExportConflict
    from nsight_tui.tui.views.pace import PaceScreen
    from nsight_tui.tui.views.ranges import RangesScreen, RangeTree
    from nsight_tui.tui.views.ranks import RanksScreen
    from nsight_tui.tui.views.timeline import TimelineScreen
    from nsight_tui.tui.views.whatif import WhatIfScreen
    from nsight_tui.tui.widgets.grid import DataGrid
    from nsight_tui.tui.widgets.prompt_bar import PromptBar

    return (NsightApp, ViewScreen, DataGrid, RangesScreen, RangeTree, TableScreen, KernelsScreen, TimelineScreen,
            FindingsScreen, WhatIfScreen, BackwardPartsScreen, PaceScreen, RanksScreen, FilesScreen, QuestionsScreen,
            DiffScreen, DiffKernelsScreen, PromptBar, ExportConflict)


def _sections() -> dict[str, list[tuple[str, str]]]:
    from nsight_tui.tui.views.help import binding_rows
    from nsight_tui.tui.views.roofline import RooflineScreen  # Plotext: imported when asked for
    from nsight_tui.tui.widgets.prompt_bar import PromptBar

    sections: dict[str, list[tuple[str, str]]] = {}
    for cls in (*help_classes(), RooflineScreen):
        rows = binding_rows([cls])
        if cls is PromptBar:
            rows.append(("enter", "Apply"))
        sections.setdefault(getattr(cls, "BINDING_GROUP_TITLE", None) or cls.__name__, []).extend(rows)
    return sections


def front_titles(front: list[type]) -> list[str]:
    """The sections of the classes in `front` (the view in front and its focused widget, with their
    bases), most specific first; the app's own keys (Everywhere) stay in their place."""
    from nsight_tui.tui.views.roofline import RooflineScreen

    classes, sections = (*help_classes(), RooflineScreen), _sections()
    lead: list[str] = []
    for f in front:
        for base in f.__mro__:
            if base not in classes or base is NsightApp:
                continue
            title = getattr(base, "BINDING_GROUP_TITLE", None) or base.__name__
            if sections.get(title) and title not in lead:
                lead.append(title)
    return lead


def help_sections(front: list[type] | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """`?`'s sections: those of the view in front first (front_titles), then every other in order."""
    sections = _sections()
    lead = front_titles(front or [])
    return [(t, sections[t]) for t in lead] + [(t, rows) for t, rows in sections.items() if t not in lead]
