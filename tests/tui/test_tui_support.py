"""Helpers for the TUI tests (no tests here): which traces to open, how to drive the app,
and the expected values computed straight from the SQLite file with hand-written SQL,
never from the model the TUI shows."""
from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

try:  # Pilot's idle detection sleeps in 20 ms slices; 2 ms keeps a key-driven test fast.
    import textual._wait as _wait

    _wait.SLEEP_GRANULARITY = 0.002
    _wait.SLEEP_IDLE = 0.0002
except (ImportError, AttributeError):  # a private module: if it moves, tests only get slower
    pass

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
SHARED = ROOT.parent / "shared" / "traces"

RANGE_TYPES = "(59, 60, 70, 71)"  # NVTX push/pop and start/end ranges (plain and registered strings)


def tui_traces() -> list:
    """The committed GPT-2 sample (always), and the shared two-thread capture when present."""
    out = []
    sample = SAMPLES / "small_ctx128.sqlite"
    if sample.exists():
        out.append(pytest.param(sample, id="sample_small_ctx128"))
    shared = SHARED / "small_ctx128_threads.sqlite"
    if shared.exists():
        out.append(pytest.param(shared, id="shared_small_ctx128_threads"))
    if not out:
        out.append(pytest.param(None, marks=pytest.mark.skip(reason="no GPT-2 trace with NVTX ranges")))
    return out


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


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
        -- process-wide: a call on another thread of the process (ranges of its own or not)
        -- belongs to the main thread's range open when it starts (`backward` is on it)
        OR (:process AND c.globalTid != b.tid AND (c.globalTid >> 24) = (b.tid >> 24)
            AND b.start <= c.start AND c.start <= b.end))
)
"""


def backward_kernels(path: Path, mode: str) -> dict:
    """step_N/backward under `mode`: kernel count, and the kernel with the most GPU time."""
    con = ro(path)
    try:
        params = {"process": 1 if mode == "process" else 0}
        join = """FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN hit h ON h.corr = k.correlationId
                  AND (h.tid >> 24) = (k.globalPid >> 24)"""
        count = con.execute(_BACKWARD_CALLS + f"SELECT count(*) {join}", params).fetchone()[0]
        top = con.execute(_BACKWARD_CALLS + f"""
            SELECT s.value, sum(k.end - k.start) AS total, count(*) {join}
            JOIN StringIds s ON s.id = k.demangledName
            GROUP BY k.demangledName ORDER BY total DESC LIMIT 1""", params).fetchone()
        names = [r[0] for r in con.execute(_BACKWARD_CALLS + f"""
            SELECT DISTINCT s.value {join} JOIN StringIds s ON s.id = k.demangledName""", params)]
    finally:
        con.close()
    return {"count": count, "top_name": top[0] if top else None, "top_total": top[1] if top else None,
            "top_count": top[2] if top else 0, "names": names}


def first_launch_of(path: Path, kernel_name: str, mode: str = "process") -> tuple[int, str]:
    """(correlation ID, API call name) of the earliest launch of `kernel_name` in step_N/backward."""
    con = ro(path)
    try:
        row = con.execute(_BACKWARD_CALLS + """
            SELECT k.correlationId, a.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN hit h ON h.corr = k.correlationId AND (h.tid >> 24) = (k.globalPid >> 24)
            JOIN StringIds s ON s.id = k.demangledName
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = k.correlationId
                 AND (c.globalTid >> 24) = (k.globalPid >> 24)
            JOIN StringIds a ON a.id = c.nameId
            WHERE s.value = :name ORDER BY k.start LIMIT 1""",
                          {"process": 1 if mode == "process" else 0, "name": kernel_name}).fetchone()
    finally:
        con.close()
    return int(row[0]), row[1]


def scalar(path: Path, sql: str, *args):
    con = ro(path)
    try:
        return con.execute(sql, args).fetchone()[0]
    finally:
        con.close()


# -- driving the app -------------------------------------------------------------------------------
def make_app(paths, **kwargs):
    from nsight_tui.tui.app import NsightApp

    return NsightApp([str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])], **kwargs)


async def settle(app, pilot, timeout: float = 30.0) -> None:
    """Until no worker runs or waits, the mode switch is done and messages are drained."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        await pilot.pause()
        busy = any(w.state.name in ("PENDING", "RUNNING") for w in app.workers)
        if not busy and not getattr(app, "_mode_switching", False):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the app did not settle")


async def wait_loaded(app, pilot, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not app.loaded:
        if app.error_message:
            raise AssertionError(f"load failed: {app.error_message}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError("not loaded in time")
        await pilot.pause(0.02)
    await settle(app, pilot)


@asynccontextmanager
async def running(paths, size=(100, 30), **kwargs):
    app = make_app(paths, **kwargs)
    async with app.run_test(size=size) as pilot:
        if len(app.paths) == 1:
            await wait_loaded(app, pilot)
        else:
            await settle(app, pilot)
        yield app, pilot


async def press(app, pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(app, pilot)


async def type_text(app, pilot, text: str) -> None:
    await press(app, pilot, *[{"/": "slash", " ": "space", "_": "underscore"}.get(c, c) for c in text])


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def open_backward_kernels(app, pilot) -> None:
    """The newcomer's path: `/` step_N/backward, enter (jump), enter (its kernels)."""
    await press(app, pilot, "slash")
    await type_text(app, pilot, "step_N/backward")
    await press(app, pilot, "enter", "enter")


# -- reading an export -----------------------------------------------------------------------------
_PIPE = re.compile(r"(?<!\\)\|")


# CommonMark: a backslash before ASCII punctuation stands for that character.
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every pipe table in a Markdown text: (headers, rows of cells), unescaped."""
    tables, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:|]+\|$", lines[i + 1]):
            split = lambda s: [_MD_ESCAPE.sub(r"\1", c.strip())  # noqa: E731
                               for c in _PIPE.split(s.strip())[1:-1]]
            headers, rows = split(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(split(lines[i]))
                i += 1
            tables.append((headers, rows))
        else:
            i += 1
    return tables
