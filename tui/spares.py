"""Spare screens: the next kernel table (launches, API summary) composed before it is asked for.

Composing, mounting and styling a view's widgets was ~30 ms of the ~100 ms a kernel table took
to open at 120x40 (2 cores). Spares are made off screen, one at a time, only when no key came for
IDLE seconds (after the load, after one is used): a person reading the screen, never in the
middle of typing. Made with Textual's private `App._get_screen` (what `push_screen` itself
calls); where it is missing, there are no spares and views are composed when opened.
"""
from __future__ import annotations

import time
from typing import TypeVar

import numpy as np
from textual.timer import Timer

from nsight_tui.tui.state import AppState
from nsight_tui.tui.views.base import ViewScreen

V = TypeVar("V", bound=ViewScreen)


class Spares:
    DELAY = 0.25
    IDLE = 0.4
    # In the order they are made (`kinds()`). Two kernel tables: the most opened view, often twice
    # in a row (a range's, then another's or every kernel's) before a pause lets a spare be made again.

    def __init__(self, app: AppState) -> None:
        self.app = app
        self._spares: list[ViewScreen] = []
        self._timer: Timer | None = None
        self._last_key = 0.0

    def key_pressed(self) -> None:
        self._last_key = time.monotonic()  # spares are made between keys, not during them

    def later(self) -> None:
        if self._timer is None:
            self._timer = self.app.set_timer(self.DELAY, self._prepare)

    def _prepare(self) -> None:
        self._timer = None
        session = self.app.session
        start = getattr(self.app, "_get_screen", None)  # Textual's start of a screen before it is pushed
        if session is None or session.pending or start is None:
            return  # (another Textual without it: views are composed when opened, as before)
        from nsight_tui.tui.views.api import ApiScreen
        from nsight_tui.tui.views.kernels import KernelsScreen
        from nsight_tui.tui.views.launches import LaunchesScreen

        have = [type(screen) for screen in self._spares]
        missing = []
        for cls in (KernelsScreen, ApiScreen, LaunchesScreen, KernelsScreen):
            if cls in have:
                have.remove(cls)
            else:
                missing.append(cls)
        if not missing:
            return
        if time.monotonic() - self._last_key < self.IDLE:
            self.later()  # keys are coming: later
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
            self.later()

    def ready(self) -> dict[type, ViewScreen]:
        """The spare screen each view class will use next, once composed (tests wait on them)."""
        out: dict[type, ViewScreen] = {}
        for screen in self._spares:
            out.setdefault(type(screen), screen)
        return {cls: screen for cls, screen in out.items() if screen.is_mounted}

    def take(self, cls: type[V]) -> V | None:
        """A composed `cls` to push (then retarget), or None: make one."""
        spare = next((screen for screen in self._spares if isinstance(screen, cls) and type(screen) is cls), None)
        if spare is not None:
            self._spares.remove(spare)
            if not spare.is_running:
                spare = None
        self.later()
        return spare
