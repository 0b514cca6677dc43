"""What the ranges are counted under: the attribution (`m`), the rank filter (`R`, or a rank
chosen in the ranks view) and the main-thread pick (`M` on a thread row). Each builds a new
model in a worker (`analyses.ranks.scoped_model`), then the range tree rebuilds with the cursor
kept and the view that was open (a range's kernels, every kernel, the API summary) opens again.
"""
from __future__ import annotations

import gc
import time
from functools import partial

import numpy as np

from nsight_tui.parsers.analyses.ranks import Rank, scoped_model
from nsight_tui.parsers.read.ids import PID_MASK, tid_of
from nsight_tui.tui.messages import ModelFailed, ModelReady
from nsight_tui.tui.navigator import Navigator
from nsight_tui.tui.session import Session
from nsight_tui.tui.state import AppState
from nsight_tui.tui.tree_source import node_key
from nsight_tui.tui.views.ranges import RangesScreen


class Modes:
    def __init__(self, app: AppState, navigator: Navigator) -> None:
        self.app = app
        self.navigator = navigator
        self.switching = False  # a model is being built (tests wait for the switch to end)

    def _ready(self) -> Session | None:
        session = self.app.session
        if session is None or not self.navigator.need_session() or self.switching:
            return None
        return session

    def switch_attribution(self) -> None:
        session = self._ready()
        if session is None:
            return
        new = "nsys" if session.attribution == "process" else "process"
        self.switching = True
        self.app.say(self.app.screen, f"building the {new} attribution…", notify=False)
        self.app.notify(f"building the {new} attribution…", timeout=2)
        self._build(session, new, session.main_thread, session.rank)

    def cycle_rank(self) -> None:
        """`R`: every rank -> rank 0 -> rank 1 ... -> every rank."""
        session = self._ready()
        if session is None:
            return
        if len(session.ranks()) < 2:
            self.app.say(self.app.screen, "one rank (process × GPU) in this export: nothing to filter")
            return
        self.set_rank(session.next_rank())

    def set_rank(self, rank: Rank | None) -> None:
        """Show one rank's ranges and GPU work (None: every rank); built in a worker."""
        session = self.app.session
        if session is None or self.switching:
            return
        self.switching = True
        self.app.say(self.app.screen, f"rank filter: {rank.label if rank is not None else 'every rank'}…", notify=False)
        self._build(session, session.attribution, session.main_thread, rank)

    def pick_main_thread(self, gtid: int) -> None:
        """Make thread `gtid` its process's main thread; on the main thread the user picked, go
        back to the automatic choice."""
        session = self._ready()
        if session is None:
            return
        info = session.model.main_info.get(gtid & PID_MASK)
        new: str | None
        if info is not None and info.gtid == gtid:
            if session.main_thread is None:
                self.app.notify(f"{session.trace.thread_label(gtid)} is already the main thread", markup=False)
                return
            new = None
        else:
            new = str(tid_of(gtid))
        self.switching = True
        label = "the automatic choice" if new is None else session.trace.thread_label(gtid)
        self.app.say(self.app.screen, f"main thread: {label}; attributing…", notify=False)
        self._build(session, session.attribution, new, session.rank)

    def _build(self, session: Session, attribution: str, main_thread: str | None, rank: Rank | None) -> None:
        self.app.run_worker(partial(self._build_model, session, attribution, main_thread, rank), name="mode",
                            group="mode", thread=True, exclusive=True, exit_on_error=False)

    def _build_model(self, session: Session, attribution: str, main_thread: str | None, rank: Rank | None) -> None:
        # The build holds the GIL for long stretches: let the UI paint the notice first.
        time.sleep(0.05)
        try:
            model = scoped_model(session.trace, attribution, main_thread, rank)
            model.aggregated_groups  # noqa: B018
        except Exception as exc:  # keep the session usable under the mode it had
            self.app.post_message(ModelFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.app.post_message(ModelReady(session, attribution, main_thread, rank))

    # -- what the worker posted (the app hands it here) ---------------------------------------
    def failed(self, message: ModelFailed) -> None:
        self.switching = False
        self.app.notify(message.message, title="attribution switch failed", severity="error", markup=False)

    async def ready(self, message: ModelReady) -> None:
        from nsight_tui.tui.views.api import ApiScreen
        from nsight_tui.tui.views.kernels import KernelsScreen

        app, nav = self.app, self.navigator
        self.switching = False
        session = message.session
        if session is not app.session:
            return
        # What was open: the range tree's cursor, and the range whose kernels were shown.
        base = nav.base_index()
        ranges = app.screen_stack[base] if base is not None else None
        if base is None or not isinstance(ranges, RangesScreen):
            return
        keep = ranges.current_key()
        old_node = next((s.node for s in app.screen_stack[base + 1:]
                         if isinstance(s, KernelsScreen) and s.node is not None), None)
        rank_changed = message.rank != session.rank
        # a new rank on a trace-wide view (2 all kernels, 3 API summary): that view again, of the new rank
        all_kernels = rank_changed and isinstance(app.screen, KernelsScreen) and app.screen.node is None
        api_summary = rank_changed and isinstance(app.screen, ApiScreen)
        await nav.to_base()
        session.attribution = message.attribution
        session.main_thread = message.main_thread
        session.rank = message.rank
        app.attribution = message.attribution
        gc.freeze()  # the new model's objects are long-lived too
        ranges.rebuild(keep)
        ranges.refresh_info()
        if rank_changed:
            app.notify(session.rank_help() or "rank filter: every rank", timeout=6, markup=False)
            if all_kernels:
                nav.open_kernels(None)
            elif api_summary:
                app.push_screen(ApiScreen(session))
            else:
                self._same_path_in_rank(ranges, keep, old_node)
            return
        if old_node is not None:
            # The same ranges under the new mode: range positions do not depend on the mode
            # (a name path would find the first instance, not the one that was open).
            node = next((n for n in ranges.grid.ranges.all_nodes() if np.array_equal(n.ids, old_node.ids)), None)
            if node is not None:
                ranges.select_node(node)
                nav.open_kernels(node)
        main = session.header().main_thread
        app.notify(f"attribution: {session.attribution} — {session.model.mode_help}" + (f"; {main}" if main else ""),
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
                self.navigator.open_kernels(node)
