"""Keystroke latency of the TUI on a big trace: key press -> the app idle again, headless.

    python bench/tui_latency.py TRACE.sqlite [--app nsight_tui.tui.app:NsightApp] [--json]

Runs the app under Textual's `App.run_test()` and drives it with a Pilot. For each scenario the
time from `pilot.press(key)` to the return of `await pilot.pause()` (the message queue drained,
the screen refreshed) is the latency a person would feel, minus the terminal's own drawing.
Beside it, `first_frame`: the key to the first frame the app writes after it (App._display),
what a person sees first (a view's table, before e.g. a worker fills in lazy columns); and
`cpu`: the CPU time of the app's process, every thread, from the press to idle (on a shared
machine a key also waits for a core: the CPU time says what the key itself cost).

The app is imported lazily; when it is missing (it is being written) this prints why and exits 3
so bench/run.py reports "n/a" instead of failing.

TODO(tui): what this assumes of the app (class, constructor, `loaded` flag, keys) is in
SCENARIOS, `_make_app` and `_wait_loaded`; adjust there when the TUI changes.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOADED_MARKER = "loaded in"  # the TUI shows "loaded in X.XXs" once the model is built
SIZE = (120, 40)

REPEAT = 5

# (label, keys); every key is timed on its own. The path is issue 3's "find backward, see its
# kernels, follow one to its launches", plus sorting and filtering those big tables.
# TODO(tui): bindings as in tui/ today (j/k grid, / search, enter open, s/S sort, f filter,
# escape back, 2/3 global views). If a key changes, the screen column in the output shows
# where the walk went off course.
BIGGEST = "open the kernel table of the range holding the most kernels (enter)"
SCENARIOS = [
    ("tree: down (j)", ["j"] * REPEAT),
    ("tree: up (k)", ["k"] * REPEAT),
    ("tree: collapse/expand (space)", ["space"] * 2),
    # The cursor is put on that range first (not timed): step_N over every step, whole_run...
    (BIGGEST, ["enter"]),
    ("back from it (escape)", ["escape"]),
    ("tree: search prompt (/)", ["slash"]),
    ("tree: search, type a char", list("backward")),
    ("tree: search, jump (enter)", ["enter"]),
    ("open the range's kernel table (enter)", ["enter"]),
    ("kernels: down (j)", ["j"] * REPEAT),
    ("kernels: sort (s)", ["s"] * REPEAT),
    ("kernels: reverse sort (S)", ["S"] * 2),
    ("kernels: filter prompt (f)", ["f"]),
    ("kernels: filter, type a char", list("gemm")),
    ("kernels: filter, apply (enter)", ["enter"]),
    ("kernel -> its launches (enter)", ["enter"]),
    ("launches: down (j)", ["j"] * REPEAT),
    ("launches: sort (s)", ["s"] * 3),
    ("launches: last row (G)", ["G"]),
    ("back (escape)", ["escape"] * 2),
    ("all-kernels view (2)", ["2"]),
    ("all-kernels: sort (s)", ["s"] * 3),
    ("API summary view (3)", ["3"]),
    ("back to the range tree (1)", ["1"]),
]


class Unavailable(Exception):
    """The app cannot be benchmarked yet; the message says why."""


def _load_app_class(spec: str):
    module_name, _, cls_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise Unavailable(f"cannot import {module_name} ({exc})") from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise Unavailable(f"{module_name} has no {cls_name}")
    return cls


def _make_app(cls, path: Path):
    # TODO(tui): guessing the constructor from its signature until the app settles.
    params = inspect.signature(cls.__init__).parameters
    if "paths" in params:
        return cls(paths=[str(path)])
    if "path" in params:
        return cls(path=str(path))
    return cls(str(path))


def _screen_text(app) -> str:
    try:
        return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    except Exception:  # private API; fall back to what the widgets hold
        parts = [str(app.title), str(app.sub_title)]
        for widget in app.screen.walk_children(with_self=True):
            content = getattr(widget, "content", None)
            if content is not None:
                parts.append(str(content))
        return "\n".join(parts)


async def _wait_loaded(app, pilot, timeout: float) -> float:
    """Seconds until the app says it is loaded; Unavailable if it never does."""
    # The app sets `loaded` when the first file is on screen; older builds only show the marker.
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        await pilot.pause(0.02)
        if getattr(app, "loaded", False) is True or LOADED_MARKER in _screen_text(app):
            return time.perf_counter() - t0
        if getattr(app, "error_message", ""):
            raise Unavailable(f"the app could not load the file: {app.error_message}")
    raise Unavailable(f"no {LOADED_MARKER!r} on screen after {timeout:.0f} s")


def _fine_idle_detection() -> None:
    # Pilot.pause() decides "idle" by sleeping 20 ms slices and checking CPU time, which would
    # put a 20-40 ms floor under every figure. 2 ms slices keep the figure within ~4 ms of
    # the real work. Private module of Textual: if it moves, the figures just get coarser.
    try:
        import textual._wait as wait

        wait.SLEEP_GRANULARITY = 0.002
        wait.SLEEP_IDLE = 0.0002
    except (ImportError, AttributeError):
        pass


class FrameClock:
    """When the app writes a frame (App._display, private: if it moves, no frame figures).

    "until idle" counts every worker and every repaint a key causes; the first frame after
    the key is what a person sees first (a view's chrome and table, before e.g. a worker's
    lazy columns). Both are reported."""

    def __init__(self, app) -> None:
        self.last: float | None = None
        display = getattr(app, "_display", None)
        if display is None:
            return

        def timed(screen, renderable, *args, **kwargs):
            result = display(screen, renderable, *args, **kwargs)
            if self.last is None and renderable is not None and not getattr(app, "_batch_count", 0):
                self.last = time.perf_counter()
            return result

        app._display = timed

    def start(self) -> None:
        self.last = None

    def since(self, t0: float) -> float | None:
        return None if self.last is None else (self.last - t0) * 1000


async def measure(path: Path, app_spec: str, timeout: float) -> dict:
    cls = _load_app_class(app_spec)
    _fine_idle_detection()
    app = _make_app(cls, path)
    frames = FrameClock(app)
    results: dict[str, dict] = {}
    out = {"load_s": None, "keys_ms": results}
    try:
        async with app.run_test(size=SIZE) as pilot:
            out["load_s"] = await _wait_loaded(app, pilot, timeout)
            await _settle(app, pilot)
            for name, keys in SCENARIOS:
                if name == BIGGEST:
                    _cursor_on_biggest(app)
                    await _settle(app, pilot)
                samples, first, cpu = [], [], []
                for key in keys:
                    frames.start()
                    t0, c0 = time.perf_counter(), time.process_time()
                    await pilot.press(key)
                    await _settle(app, pilot)
                    samples.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
                    if frames.since(t0) is not None:
                        first.append(frames.since(t0))
                    crash = getattr(app, "_exception", None)  # Textual keeps a handler's exception here
                    if crash is not None:
                        out["error"] = f"app failed at '{name}': {type(crash).__name__}: {crash}"
                        return out
                results[name] = {
                    "median": statistics.median(samples),
                    "max": max(samples),
                    # CPU time of the app's process (every thread) over the same span: steadier
                    # than wall time on a shared machine, where a key also waits for a core
                    "cpu": statistics.median(cpu),
                    "n": len(samples),
                    "screen": type(app.screen).__name__,
                }
                if first:  # press -> first frame written (median), beside press -> idle
                    results[name]["first_frame"] = statistics.median(first)
    except Unavailable:
        raise
    except Exception as exc:  # the app crashed mid-walk: keep what was measured before it
        step = next((n for n, _ in SCENARIOS if n not in results), "?")
        out["error"] = f"app failed at '{step}': {type(exc).__name__}: {exc}"
    return out


def _cursor_on_biggest(app) -> None:
    """Put the range tree's cursor on the visible range with the most kernels (issue 11: its
    kernel table must open within 50 ms). TODO(tui): assumes RangesScreen.grid / .ranges."""
    grid = app.screen.grid
    tree = grid.ranges
    rows = [i for i in range(len(tree)) if tree.node_at(i) is not None]
    if rows:
        grid.data_changed(max(rows, key=lambda i: tree.node_at(i).kernels))


async def _settle(app, pilot) -> None:
    """Until the key's work is done and painted: messages drained, no worker running (sorts
    of big tables run in one), CPU idle. pause() alone gives up after 1 s of busy CPU."""
    await pilot.pause()
    while any(w.state.name in ("PENDING", "RUNNING") for w in app.workers):
        await asyncio.sleep(0.002)
        await pilot.pause()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="keystroke latency of the TUI, headless")
    p.add_argument("trace", type=Path)
    p.add_argument("--app", default="nsight_tui.tui.app:NsightApp", help="module:Class of the Textual app")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for the load marker")
    p.add_argument("--json", action="store_true", help="one JSON line (for bench/run.py)")
    args = p.parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        out = asyncio.run(measure(args.trace, args.app, args.timeout))
    except Unavailable as exc:
        print(json.dumps({"error": str(exc)}) if args.json else f"tui_latency: skipped: {exc}")
        return 3
    except Exception as exc:  # the app under test failed: report it as a result, not a crash
        msg = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"error": msg}) if args.json else f"tui_latency: app failed: {msg}")
        return 1
    if args.json:
        print(json.dumps(out))
    else:
        print(f"loaded in {out['load_s']:.2f} s (headless)" if out["load_s"] is not None else "not loaded")
        print("  until idle (median, max) and until the first frame after the key (median):")
        for name, s in out["keys_ms"].items():
            frame = f"{s['first_frame']:7.1f}" if "first_frame" in s else "    n/a"
            print(f"  {name:40s} median {s['median']:7.1f} ms   max {s['max']:7.1f} ms   first frame {frame} ms"
                  f"   CPU {s['cpu']:7.1f} ms"
                  f"   (n={s['n']}, {s['screen']})")
        if "error" in out:
            print(f"  stopped: {out['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
