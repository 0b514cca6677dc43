"""Fixtures for the TUI tests: the traces to open, a driver for the app (Textual's Pilot) that
waits for states instead of sleeping, and the expected values computed straight from the
SQLite file with hand-written SQL, never from the model the TUI shows.

Everything here is a fixture. Pytest imports this file under the module name `conftest`, the
name tests elsewhere import tests/conftest.py by (`from conftest import SAMPLES`): whichever of
the two is imported last answers that import, so this one re-exports tests/conftest.py's names.
"""
from __future__ import annotations

import asyncio
import importlib.util
import re
import sqlite3
import time
import unicodedata
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest


def _tests_conftest():
    spec = importlib.util.spec_from_file_location("tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_shared = _tests_conftest()
REPORTS, ROOT, SAMPLES, SHARED = _shared.REPORTS, _shared.ROOT, _shared.SAMPLES, _shared.SHARED
FINDINGS, trace_stem = _shared.FINDINGS, _shared.trace_stem
oracle_cases, sample_traces, shared_trace = _shared.oracle_cases, _shared.sample_traces, _shared.shared_trace
sample_file = _shared.sample_file
mutated_copy = _shared.mutated_copy
SAMPLE = SAMPLES / "small_ctx128.sqlite"

RANGE_TYPES = "(59, 60, 70, 71)"  # NVTX push/pop and start/end ranges (plain and registered strings)


def trace_params() -> list:
    """The committed GPT-2 sample (always), and the shared two-thread capture when present."""
    out = []
    if SAMPLE.exists():
        out.append(pytest.param(SAMPLE, id="sample_small_ctx128"))
    shared = SHARED / "small_ctx128_threads.sqlite"
    if shared.exists():
        out.append(pytest.param(shared, id="shared_small_ctx128_threads"))
    if not out:
        out.append(pytest.param(None, marks=pytest.mark.skip(reason="no GPT-2 trace with NVTX ranges")))
    return out


@pytest.fixture(params=trace_params())
def trace(request) -> Path:
    """Each GPT-2 training trace with NVTX ranges (the committed sample, the shared capture)."""
    return request.param


@pytest.fixture()
def sample() -> Path:
    """The committed sample trace."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    return SAMPLE


@pytest.fixture(scope="session")
def sample_once() -> Path:
    """The committed sample trace, for module-scoped fixtures."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    return SAMPLE


@pytest.fixture()
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture()
def shared_dir() -> Path:
    return SHARED


@pytest.fixture()
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def repo_root_once() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def big_trace(tmp_path_factory, repo_root_once: Path) -> Path:
    """The sample replicated to 214k kernels: a load long enough to be interrupted (the signal
    tests of test_tui_tmux and test_tui_signals share one build)."""
    import subprocess
    import sys

    src = repo_root_once / "sample_traces" / "small_ctx128.sqlite"
    if not src.exists():
        pytest.skip("sample trace missing")
    out = tmp_path_factory.mktemp("big") / "big_run.sqlite"
    subprocess.run([sys.executable, str(repo_root_once / "bench" / "scale_trace.py"), str(src), str(out),
                    "--times", "55"], check=True, capture_output=True, timeout=300)
    return out


# -- the expected values, from SQL --------------------------------------------------------------
_BACKWARD_CALLS = f"""
WITH r AS (
    SELECT e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
    FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
    WHERE e.eventType IN {RANGE_TYPES} AND e.end IS NOT NULL
),
bwd AS (  -- `backward` inside a `step_<n>` (steady state, not warmup) on the same thread
    SELECT b.* FROM r b WHERE b.name = 'backward' AND EXISTS (
        SELECT 1 FROM r p WHERE p.tid = b.tid AND p.name GLOB 'step_[0-9]*'
        AND p.start <= b.start AND p.end >= b.end)
),
hit AS (
    SELECT DISTINCT c.correlationId AS corr, c.globalTid AS tid
    FROM CUPTI_ACTIVITY_KIND_RUNTIME c JOIN bwd b ON (
        -- nsys's rule: the call lies inside the range, on the range's own thread
        (c.globalTid = b.tid AND c.start >= b.start AND c.end <= b.end)
        -- process-wide: a call on another thread of the process, with no range of its own
        -- thread around it, belongs to the range open on the ranges' thread when it starts
        OR (:process AND c.globalTid != b.tid AND (c.globalTid >> 24) = (b.tid >> 24)
            AND b.start <= c.start AND c.start <= b.end
            AND NOT EXISTS (SELECT 1 FROM r o WHERE o.tid = c.globalTid
                            AND o.start <= c.start AND o.end >= c.end)))
)
"""
_KERNELS_OF_HITS = """FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN hit h ON h.corr = k.correlationId
                      AND (h.tid >> 24) = (k.globalPid >> 24)"""


class Sql:
    """Expected values, read from the export with hand-written SQL."""

    @staticmethod
    def connect(path: Path) -> sqlite3.Connection:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)

    def scalar(self, path: Path, sql: str, *args):
        con = self.connect(path)
        try:
            return con.execute(sql, args).fetchone()[0]
        finally:
            con.close()

    def column(self, path: Path, sql: str, *args) -> list:
        con = self.connect(path)
        try:
            return [r[0] for r in con.execute(sql, args)]
        finally:
            con.close()

    def backward_kernels(self, path: Path, mode: str) -> dict:
        """step_N/backward under `mode`: kernel count, names, the kernel with the most GPU time,
        and the launch timing of its kernels (API call durations, kernel start − call start)."""
        con = self.connect(path)
        join = _KERNELS_OF_HITS
        try:
            params = {"process": 1 if mode == "process" else 0}
            count = con.execute(_BACKWARD_CALLS + f"SELECT count(*) {join}", params).fetchone()[0]
            top = con.execute(_BACKWARD_CALLS + f"""
                SELECT s.value, sum(k.end - k.start) AS total, count(*) {join}
                JOIN StringIds s ON s.id = k.demangledName
                GROUP BY k.demangledName ORDER BY total DESC LIMIT 1""", params).fetchone()
            names = [r[0] for r in con.execute(_BACKWARD_CALLS + f"""
                SELECT DISTINCT s.value {join} JOIN StringIds s ON s.id = k.demangledName""", params)]
            timing = con.execute(_BACKWARD_CALLS + f"""
                SELECT c.end - c.start, k.start - c.start {join}
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = k.correlationId
                     AND (c.globalTid >> 24) = (k.globalPid >> 24)""", params).fetchall()
        finally:
            con.close()
        return {"count": count, "top_name": top[0] if top else None, "top_total": top[1] if top else None,
                "top_count": top[2] if top else 0, "names": names,
                "call_ns": [t[0] for t in timing], "queue_ns": [t[1] for t in timing]}

    def first_launch_of(self, path: Path, kernel_name: str, mode: str = "process") -> dict:
        """The earliest launch of `kernel_name` in step_N/backward: correlation ID, API call name,
        the call's duration and kernel start − call start."""
        con = self.connect(path)
        try:
            row = con.execute(_BACKWARD_CALLS + """
                SELECT k.correlationId, a.value, c.end - c.start, k.start - c.start
                FROM CUPTI_ACTIVITY_KIND_KERNEL k
                JOIN hit h ON h.corr = k.correlationId AND (h.tid >> 24) = (k.globalPid >> 24)
                JOIN StringIds s ON s.id = k.demangledName
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = k.correlationId
                     AND (c.globalTid >> 24) = (k.globalPid >> 24)
                JOIN StringIds a ON a.id = c.nameId
                WHERE s.value = :name ORDER BY k.start LIMIT 1""",
                              {"process": 1 if mode == "process" else 0, "name": kernel_name}).fetchone()
        finally:
            con.close()
        return {"corr": int(row[0]), "api_name": row[1], "call_ns": int(row[2]), "queue_ns": int(row[3])}


@pytest.fixture()
def sql() -> Sql:
    return Sql()


# -- driving the app -------------------------------------------------------------------------------
class Ui:
    """The app under Pilot, with waits for states (never sleeps).

    The waits are Textual's own, made exact: every message the app's nodes hold is handled (what
    `Pilot._wait_for_screen` waits for), the screen laid out and painted (what `Pilot.pause` forces),
    no worker pending or running. Pilot's `press` and `pause` also wait for the process to look idle
    (`textual._wait.wait_for_idle`: 20 ms sleeps until one uses under 1 ms of CPU, up to 1 s), at
    least 40 ms a key whatever the key does: most of the TUI tests' time, for no state of its own."""

    POLL_S = 0.005  # between looks while a worker runs in its thread (it posts what it makes)

    def __init__(self, app, pilot) -> None:
        self.app, self.pilot = app, pilot

    @property
    def screen(self):
        return self.app.screen

    async def _handled(self) -> None:
        """What the app and the screen on top hold is handled, and the screen laid out and painted
        as it now stands (Pilot.pause without its wait for an idle process)."""
        await self.pilot._wait_for_screen()
        screen = self.app.screen
        screen._on_timer_update()
        if screen._next_callbacks:  # the callbacks the refresh let run (after-refresh ones, a recompose)
            await self.pilot._wait_for_screen()

    def _quiet(self) -> bool:
        """No worker pending or running, no mode switch under way, no message, callback or repaint
        waiting anywhere in the app (background screens and spares too), no animation."""
        app = self.app
        if any(w.state.name in ("PENDING", "RUNNING") for w in app.workers):
            return False
        if getattr(app, "_mode_switching", False) or not app._animator._complete_event.is_set():
            return False
        if any(node._message_queue.qsize() or node._next_callbacks for node in (app, *app._registry)):
            return False
        screen = app.screen
        return not (screen._callbacks or screen._dirty_widgets or screen._layout_required
                    or screen._repaint_required or screen._scroll_required or screen._recompose_required)

    async def settle(self, timeout: float = 30.0) -> None:
        """Until no worker runs or waits, the mode switch is done, and what workers posted is handled."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await self._handled()
            if self._quiet():
                return
            await self._workers_done(deadline)
        raise AssertionError("the app did not settle")

    async def _workers_done(self, deadline: float) -> None:
        """Until no worker is pending or running (a look every POLL_S, which costs next to nothing:
        the worker's thread keeps the CPU), or at least one POLL_S for whatever else is under way."""
        await asyncio.sleep(self.POLL_S)
        while time.monotonic() < deadline and any(w.state.name in ("PENDING", "RUNNING") for w in self.app.workers):
            await asyncio.sleep(self.POLL_S)

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Until `condition()` holds (checked after each look: the screen laid out and painted as
        it then stands), or fail saying `what`."""
        t0 = time.monotonic()
        while not condition():
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"{what}: not reached in {timeout:.0f} s; the screen:\n{self.text()}")
            await asyncio.sleep(self.POLL_S)
            self.app.screen._on_timer_update()

    async def until_text(self, text: str, timeout: float = 60.0) -> str:
        await self.until(lambda: text in self.flat_text(), f"{text!r} on screen", timeout)
        return self.flat_text()

    async def loaded(self, timeout: float = 60.0) -> None:
        def done() -> bool:
            if self.app.error_message:
                raise AssertionError(f"load failed: {self.app.error_message}")
            return self.app.loaded

        await self.until(done, "the file loaded", timeout)
        await self.settle()

    async def press(self, *keys: str) -> None:
        """Each key as Pilot.press sends it (the same Key event, to the app), then until settled."""
        for key in keys:
            await self.app._post_message(_key_event(self.app, key))
            await self.settle()

    async def type(self, text: str) -> None:
        await self.press(*[{"/": "slash", " ": "space", "_": "underscore", "[": "left_square_bracket",
                            "]": "right_square_bracket"}.get(c, c) for c in text])

    def text(self) -> str:
        """The screen as the user sees it, line by line."""
        return "\n".join(strip.text for strip in self.app.screen._compositor.render_strips())

    def flat_text(self) -> str:
        """The screen's words with line breaks and runs of spaces as one space."""
        return " ".join(self.text().split())

    async def open_backward_kernels(self) -> None:
        """The newcomer's path: `/` step_N/backward, enter (jump), enter (its kernels)."""
        await self.press("slash")
        await self.type("step_N/backward")
        await self.press("enter", "enter")


def _key_event(app, key: str):
    """The Key event `Pilot.press(key)` posts (textual.app.App._press_keys)."""
    from textual import events
    from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    return event


def make_app(paths, **kwargs):
    from nsight_tui.tui.app import NsightApp

    return NsightApp([str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])], **kwargs)


# Helpers for tests written against (app, pilot) directly (Ui does the waiting).
@asynccontextmanager
async def running(path, size=(100, 30), **kwargs):
    """The app on `path`, loaded."""
    app = make_app(path, **kwargs)
    async with app.run_test(size=size) as pilot:
        await Ui(app, pilot).loaded()
        yield app, pilot


async def press(app, pilot, *keys: str) -> None:
    await Ui(app, pilot).press(*keys)


def screen_text(app) -> str:
    return Ui(app, None).text()


@pytest.fixture()
def tui():
    """`async with tui(paths, size=(w, h), **app_kwargs) as ui:` the app, loaded (or, with
    several files, settled on the files view)."""

    @asynccontextmanager
    async def running(paths, size=(100, 30), app=None, **kwargs):
        app = app or make_app(paths, **kwargs)
        async with app.run_test(size=size) as pilot:
            ui = Ui(app, pilot)
            if len(app.paths) == 1:
                await ui.loaded()
            else:
                await ui.settle()
            yield ui

    return running


@pytest.fixture()
def drive():
    """`drive(pilot)`: a Ui over an app that pytest-textual-snapshot started."""
    return lambda pilot: Ui(pilot.app, pilot)


# -- reading an export -----------------------------------------------------------------------------
_PIPE = re.compile(r"(?<!\\)\|")
# CommonMark: a backslash before ASCII punctuation stands for that character.
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def _md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    tables, lines, i = [], text.splitlines(), 0

    def split(s: str) -> list[str]:
        return [_MD_ESCAPE.sub(r"\1", c.strip()) for c in _PIPE.split(s.strip())[1:-1]]

    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:|]+\|$", lines[i + 1]):
            headers, rows = split(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(split(lines[i]))
                i += 1
            tables.append((headers, rows))
        else:
            i += 1
    return tables


@pytest.fixture()
def md_tables():
    """`md_tables(text)`: every pipe table in a Markdown text, as (headers, rows of cells), unescaped."""
    return _md_tables


# -- snapshots -------------------------------------------------------------------------------------
@pytest.fixture()
def fixed_app():
    """`fixed_app(paths)`: the app with its load time pinned to 0 (the one thing that changes
    from run to run on screen)."""
    def make(paths):
        from nsight_tui.tui.app import NsightApp

        class FixedClock(NsightApp):
            def clock(self) -> float:
                return 0.0

        return FixedClock([str(p) for p in paths])

    return make


@pytest.fixture()
def steps(drive):
    """`steps(*actions)`: run_before for snap_compare: load (or settle on the files view), then
    each action: a key, or an async callable given the Ui."""
    def make(*actions):
        async def run_before(pilot):
            ui = drive(pilot)
            if len(ui.app.paths) == 1:
                await ui.loaded()
            else:
                await ui.settle()
            for action in actions:
                if callable(action):
                    await action(ui)
                else:
                    await ui.press(action)
            await ui.settle()

        return run_before

    return make
