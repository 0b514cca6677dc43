"""The navigator: the one place that decides which screen comes next.

Views say what the user chose (a `messages.Navigation` nested in the view's class,
`RangesScreen.RangeChosen`); the app hands each one to `follow`, which decides where it leads:
a range's kernels, a kernel's launches, a launch's correlation, a finding's evidence. The
app's own view keys (`1`-`6`, `F`, `p`, `u`, `r`, `t`, `c`) come here too.

The screens form a drill-down stack over the open file's range tree (its base): a view key
pops to the base first; escape goes back one (never past the only file's range tree).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.screen import Screen

from nsight_tui.tui.commands import NsightCommands
from nsight_tui.tui.messages import Navigation
from nsight_tui.tui.spares import Spares
from nsight_tui.tui.state import AppState
from nsight_tui.tui.views.base import ViewScreen
from nsight_tui.tui.views.loading import LoadingScreen
from nsight_tui.tui.views.ranges import RangesScreen

if TYPE_CHECKING:
    from nsight_tui.parsers.model.ranges import RangeNode
    from nsight_tui.tui.viewmodels.findings import Jump

# Every other view is imported where it is opened (and by the loader's warm-up once the first
# screen is up): the first screen does not wait for them.


class Navigator:
    def __init__(self, app: AppState, spares: Spares, open_file: Callable[..., None]) -> None:
        self.app = app
        self.spares = spares
        self.open_file = open_file  # the loader's: a file from the files view (or per-rank files as one)

    # -- where a view's choice leads ----------------------------------------------------------
    async def follow(self, request: Navigation) -> None:
        from nsight_tui.tui.views.backward import BackwardPartsScreen
        from nsight_tui.tui.views.diff import DiffScreen
        from nsight_tui.tui.views.files import FilesScreen, QuestionsScreen
        from nsight_tui.tui.views.findings import FindingsScreen
        from nsight_tui.tui.views.kernels import KernelsScreen
        from nsight_tui.tui.views.launches import LaunchesScreen
        from nsight_tui.tui.views.pace import PaceScreen
        from nsight_tui.tui.views.ranks import RanksScreen
        from nsight_tui.tui.views.timeline import TimelineScreen
        from nsight_tui.tui.views.whatif import WhatIfScreen

        app = self.app
        match request:
            case ViewScreen.BackAsked(view=view):
                self.go_back(view)
            case RangesScreen.RangeChosen(node=node) | PaceScreen.IterationChosen(node=node) | \
                    TimelineScreen.RangeChosen(node=node):
                self.open_kernels(node)
            case KernelsScreen.KernelChosen(node=node, name=name, short=short, positions=positions):
                self.open_launches(node, name, short, positions)
            case LaunchesScreen.LaunchChosen(corr=corr, gpid=gpid) | TimelineScreen.OpChosen(corr=corr, gpid=gpid):
                self.open_correlation(corr, gpid)
            case BackwardPartsScreen.PartChosen(title=title, positions=positions, where=where):
                self.open_op_kernels(title, positions, where)
            case RangesScreen.BackwardPartsAsked():
                app.push_screen(BackwardPartsScreen(app.session))
            case FindingsScreen.EvidenceChosen(jump=jump):
                await self.follow_evidence(jump)
            case FindingsScreen.WhatIfChosen(ask=ask) | RanksScreen.StragglerWhatIf(ask=ask):
                if self.need_session():
                    app.push_screen(WhatIfScreen(app.session, ask))
            case WhatIfScreen.LanesChosen(edits=edits, title=title):
                if self.need_session():
                    app.push_screen(TimelineScreen(app.session, None, replay=edits, replay_title=title))
            case FilesScreen.FileChosen(path=path):
                self.open_file(path)
            case FilesScreen.RanksAsOne(folder=folder, files=files):
                self.open_file(folder, files)
            case FilesScreen.QuestionsAsked(tables=tables, attribution=attribution):
                app.push_screen(QuestionsScreen(tables, attribution))
            case FilesScreen.DiffAsked(a=a, b=b, attribution=attribution):
                app.push_screen(DiffScreen(a, b, attribution))
            case NsightCommands.RangeNamed(gtid=gtid, key=key):
                await self.jump_to_range(gtid, key)
            case NsightCommands.KernelNamed(name=name):
                await self.jump_to_kernel(name)
            case _:
                raise TypeError(f"no route for {type(request).__name__}")

    async def follow_evidence(self, jump: Jump) -> None:
        """A finding's evidence: a range's kernels (on the kernel), the range in the tree, or
        the finding's window on the timeline."""
        from nsight_tui.tui.viewmodels.findings import KERNELS, RANGE, TIMELINE

        if jump.kind == KERNELS:
            self.open_kernels(jump.node, select_name=jump.kernel)
        elif jump.kind == RANGE and jump.gtid is not None:
            await self.jump_to_range(jump.gtid, jump.key)
        elif jump.kind == TIMELINE and jump.target is not None:
            self.open_timeline(jump.target)

    # -- the stack ----------------------------------------------------------------------------
    def base_index(self) -> int | None:
        """Index in the screen stack of the open file's range tree."""
        for i, screen in enumerate(self.app.screen_stack):
            if isinstance(screen, RangesScreen):
                return i
        return None

    def base(self) -> RangesScreen | None:
        base = self.base_index()
        screen = self.app.screen_stack[base] if base is not None else None
        return screen if isinstance(screen, RangesScreen) else None

    def go_back(self, screen: Screen) -> None:
        app = self.app
        base = self.base_index()
        index = app.screen_stack.index(screen) if screen in app.screen_stack else -1
        if base is not None and index == base and not app.multi:
            return  # the range tree of the only file is home
        if len(app.screen_stack) > 2:
            app.pop_screen()
            if base is not None and index == base:
                app.session = None

    async def to_base(self) -> RangesScreen | None:
        """Pop down to the range tree; returns it (None when no file is open)."""
        base = self.base_index()
        if base is None:
            return None
        while len(self.app.screen_stack) - 1 > base:
            await self.app.pop_screen()
        return self.base()

    def need_session(self) -> bool:
        """Whether a file's GPU work is on screen (else say why a view cannot open)."""
        app = self.app
        if app.session is None:
            still = isinstance(app.screen, LoadingScreen)
            app.notify("still loading…" if still else "open a file first (enter on a row)", severity="warning")
            return False
        if app.session.pending:
            app.notify("the GPU work is still loading: the tree shows CPU times until then", severity="warning")
            return False
        return True

    # -- opening a view over the one on screen ------------------------------------------------
    def open_kernels(self, node: RangeNode | None = None, select_name: str | None = None) -> None:
        from nsight_tui.tui.views.kernels import KernelsScreen

        if not self.need_session():
            return
        spare = self.spares.take(KernelsScreen)
        if spare is not None:
            self.app.push_screen(spare)  # then filled in: its resume lays it out once, with the data
            spare.retarget(self.app.session, node, select_name)
        else:
            self.app.push_screen(KernelsScreen(self.app.session, node, select_name))

    def open_op_kernels(self, title: str, positions, where: str = "") -> None:
        """The kernels of a set of ops that is no range (a backward part's, from `b`); `where`
        names them in full under the table."""
        from nsight_tui.tui.views.kernels import KernelsScreen

        if self.need_session():
            self.app.push_screen(KernelsScreen(self.app.session, None, None, ops=(title, positions, where)))

    def open_launches(self, node, name: str, short: str, positions) -> None:
        from nsight_tui.tui.views.launches import LaunchesScreen

        spare = self.spares.take(LaunchesScreen)
        if spare is not None:
            self.app.push_screen(spare)
            spare.retarget(self.app.session, node, name, short, positions)
        else:
            self.app.push_screen(LaunchesScreen(self.app.session, node, name, short, positions))

    def open_api(self) -> None:
        from nsight_tui.tui.views.api import ApiScreen

        spare = self.spares.take(ApiScreen)
        if spare is not None:
            self.app.push_screen(spare)
            spare.retarget(self.app.session)
        else:
            self.app.push_screen(ApiScreen(self.app.session))

    def open_correlation(self, corr: int, gpid: int | None = None) -> None:
        from nsight_tui.tui.views.correlation import CorrelationScreen

        self.app.push_screen(CorrelationScreen(self.app.session, corr, gpid))

    def open_timeline(self, target=None) -> None:
        """The timeline on `target` (a TimelineTarget, or a function of the lanes; None: the whole trace)."""
        from nsight_tui.tui.views.timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(self.app.session, target))

    def timeline(self) -> None:
        """`t`: the timeline of what is selected on screen."""
        from nsight_tui.tui.views.timeline import TimelineScreen, open_target

        if self.need_session() and not isinstance(self.app.screen, TimelineScreen):
            self.open_timeline(open_target(self.app.screen))

    def ask_correlation(self) -> None:
        """`c`: a correlation ID, asked for, then its view."""
        from nsight_tui.tui.views.modals import CorrelationPrompt

        if not self.need_session():
            return

        def go(corr: int | None) -> None:
            if corr is not None:
                self.open_correlation(corr)

        self.app.push_screen(CorrelationPrompt(), go)

    # -- the view keys: each view over the range tree -----------------------------------------
    async def view_ranges(self) -> None:
        if self.need_session():
            await self.to_base()

    async def view_kernels(self) -> None:
        if self.need_session():
            await self.to_base()
            self.open_kernels(None)

    async def view_api(self) -> None:
        if self.need_session():
            await self.to_base()
            self.open_api()

    async def view_findings(self) -> None:
        from nsight_tui.tui.views.findings import FindingsScreen

        if self.need_session() and not isinstance(self.app.screen, FindingsScreen):
            await self.to_base()
            self.app.push_screen(FindingsScreen(self.app.session))

    async def view_pace(self) -> None:
        from nsight_tui.tui.views.pace import PaceScreen

        if self.need_session() and not isinstance(self.app.screen, PaceScreen):
            await self.to_base()
            self.app.push_screen(PaceScreen(self.app.session))

    async def view_memory(self) -> None:
        from nsight_tui.tui.views.memory import MemoryScreen

        if self.need_session() and not isinstance(self.app.screen, MemoryScreen):
            await self.to_base()
            self.app.push_screen(MemoryScreen(self.app.session))

    async def view_ncu(self) -> None:
        from nsight_tui.tui.views.ncu import NcuScreen

        app = self.app
        if not self.need_session() or isinstance(app.screen, NcuScreen):
            return
        if app.session is None or not app.session.ncu_file:
            app.notify("no Nsight Compute report: start with --ncu FILE.ncu-rep (nsight-tui capture --ncu makes one)")
            return
        await self.to_base()
        app.push_screen(NcuScreen(app.session))

    async def view_ranks(self) -> None:
        from nsight_tui.tui.views.ranks import RanksScreen

        if self.need_session():
            await self.to_base()
            self.app.push_screen(RanksScreen(self.app.session))

    def view_roofline(self) -> None:
        if self.need_session():
            from nsight_tui.tui.views.roofline import RooflineScreen  # Plotext: imported when asked for

            node = getattr(self.app.screen, "node", None)  # from a range's kernels: that range's families
            self.app.push_screen(RooflineScreen(self.app.session, node))

    async def view_files(self) -> None:
        from nsight_tui.tui.views.files import FilesScreen

        app = self.app
        if not app.multi:
            app.notify("one file open: start with several files or a directory to compare them")
            return
        while not isinstance(app.screen, FilesScreen):
            await app.pop_screen()
        app.session = None

    async def jump_to_range(self, gtid: int, key: tuple[str, ...]) -> None:
        ranges = await self.to_base()
        if ranges is not None and not ranges.select_key(gtid, key):
            self.app.notify(f"{'/'.join(key)}: not in this view", severity="warning", markup=False)

    async def jump_to_kernel(self, name: str) -> None:
        await self.to_base()
        self.open_kernels(None, select_name=name)
