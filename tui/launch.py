"""`nsight-tui PATH...`: check the input and the terminal, then run the app.

A single unreadable file gets one line on stderr and a non-zero exit before any screen
is drawn; a directory opens every .sqlite export in it side by side. Without a terminal the
app does not start (one line, exit 2). SIGINT, SIGTERM and SIGHUP end the app through its
normal exit, so the terminal is restored; no child process is left behind.
"""
from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.source import export_paths

if TYPE_CHECKING:
    from nsight_tui.parsers.read.load import TraceLoader

# Exit status for each signal, as a shell reports a process killed by it (128 + number).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# After SIGTERM/SIGHUP/SIGINT the app exits through Textual (the terminal restored); if the
# process is still there this much later (a terminal gone mid-write, a read that cannot be
# interrupted), it restores what it can and leaves by hand.
EXIT_GRACE_S = 3.0
RESTORE_WAIT_S = 0.5  # after SIGHUP, how long the way out by hand waits for the terminal's settings

# What a program that left early may have left on: the alternate screen, mouse tracking
# (every mode Textual turns on), a hidden cursor, bracketed paste.
RESET = "\x1b[?1049l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?25h"


def _flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # the terminal hung up
            pass


def check_readable(path: Path) -> None:
    """Open read-only and touch every big table: a missing, foreign, empty or truncated
    file fails here with the loader's own one-line message. A file the user's cache holds,
    unchanged since it was read to its end, is opened without the touch (counting 50M rows
    took 30 s of a 4 GB profile's second open)."""
    from nsight_tui.parsers.read import cache
    from nsight_tui.parsers.read.columns import open_tables
    from nsight_tui.parsers.read.source import refuse_special

    refuse_special(path)  # before the cache's look at it: opening a FIFO waits for a writer
    open_tables(path, native=False, probe=not cache.holds(path, cache.TRACE_BUNDLE), count_rows=False).close()


def open_early(path: Path) -> Callable[[], TraceLoader]:
    """Open one export and begin reading its GPU tables now, in the background, while
    Textual is imported and the loading screen drawn (the driver reads without the GIL):
    the app's load takes the loader from the returned call, which raises what opening raised."""
    def opening() -> TraceLoader:
        from nsight_tui.parsers.read.load import TraceLoader

        loader = TraceLoader(path)
        loader.read_ahead()
        return loader

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsight-open")
    opened = pool.submit(opening)
    pool.shutdown(wait=False)
    return opened.result


def check_terminal() -> None:
    """The TUI needs a terminal on stdin and stdout; say what to use instead."""
    def tty(stream) -> bool:
        try:
            return stream is not None and stream.isatty()
        except (ValueError, OSError):  # closed
            return False

    if os.environ.get("TEXTUAL_DRIVER", "").startswith("textual.drivers.web_driver"):
        return  # `nsight-tui serve`: textual-serve runs the app on pipes and draws it in a browser page
    if not (tty(sys.stdin) and tty(sys.stdout)):
        raise TraceError("no terminal: the explorer needs one on stdin and stdout; for text output use "
                         "`nsight-tui stats FILE` (nsys-style reports) or `nsight-tui report FILE`")


class TerminalGuard:
    """The terminal's settings before the app, put back after it whatever happened;
    signals turned into the app's own exit."""

    def __init__(self, app) -> None:
        self.app = app
        self.signal: int | None = None
        self.finished = False
        self._ended = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._saved = None
        self._fd = -1
        try:
            import termios
        except ImportError:
            return
        try:
            assert sys.stdin is not None
            self._fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(self._fd)
        except (OSError, ValueError, AttributeError, termios.error):  # not a terminal (`serve`: a pipe)
            pass

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Python-level handlers (signal.signal), not the loop's: a loop handler runs only when
        the loop turns, and a loop blocked in a synchronous call (Textual's driver flushing to a
        terminal that hung up waits forever) never turned again: SIGTERM was caught and ignored
        and the process lived on with PPID 1. These run in the main thread whatever it waits on."""
        self._loop = loop
        for sig in SIGNALS:
            try:
                signal.signal(sig, self._on_signal)
            except (ValueError, OSError):  # not the main thread
                pass
        if self._fd >= 0:
            threading.Thread(target=self._watch_terminal, name="nsight-hangup", daemon=True).start()

    def _watch_terminal(self) -> None:
        """A terminal that goes away does not always signal: killing a tmux session left the
        app with no SIGHUP (its shell died first) and Textual stuck writing to the dead
        terminal. poll() with no events asked for wakes only on a hang-up (or an error) of
        the terminal: then it is SIGHUP, whichever way it came."""
        import select

        try:
            poller = select.poll()
            poller.register(self._fd, 0)
            while not self.finished:
                events = poller.poll()
                if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events):
                    break
            else:
                return
        except (OSError, ValueError):
            return
        if not self.finished:
            self._on_signal(signal.SIGHUP)

    def _on_signal(self, sig: int, _frame=None) -> None:
        """First signal: the app's normal exit (restores the terminal), and a watchdog that
        leaves by hand if that has not ended the process within EXIT_GRACE_S. A second
        signal, or one after the app has ended: restore by hand and leave now."""
        if self.signal is not None or self.finished:
            self.restore(now=True)
            os._exit(128 + sig)
        self.signal = sig
        try:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self.app.exit, None, 128 + sig)
        except RuntimeError:  # the loop is closed: nothing to ask
            pass
        threading.Thread(target=self._leave_if_stuck, args=(sig,), name="nsight-exit", daemon=True).start()

    def _leave_if_stuck(self, sig: int) -> None:
        if not self._ended.wait(EXIT_GRACE_S):
            self.restore(now=True)
            os._exit(128 + sig)

    def ended(self) -> None:
        """The app has returned: a signal from now on ends the process at once."""
        self.finished = True
        self._ended.set()

    def restore(self, now: bool = False) -> None:
        """Put the saved terminal settings back and switch off what the app turned on. A
        no-op for a terminal already restored; errors ignored (after SIGHUP it may be gone).
        `now`: on the way out by hand, never waiting on the terminal (a hung-up one blocked
        TCSADRAIN forever, and with it the exit): TCSANOW and a write that gives up rather than
        waits; after SIGHUP no write, and the settings put back from a thread given
        RESTORE_WAIT_S: on a terminal that hung up even TCSANOW waited forever (behind Textual's
        writer stuck on it), while a SIGHUP sent by `kill` leaves the terminal there, and
        skipping its settings left it raw (no icrnl) when a busy machine's app took longer than
        EXIT_GRACE_S to leave during its load."""
        if self._saved is None:
            return
        if now and self.signal == signal.SIGHUP:
            aside = threading.Thread(target=self._set_settings, args=(True,), name="nsight-restore", daemon=True)
            aside.start()
            aside.join(RESTORE_WAIT_S)
            return
        self._set_settings(now)
        try:
            if self.signal is not None and self.signal != signal.SIGHUP:
                _write_reset(now)
        except (OSError, ValueError, AttributeError):
            pass

    def _set_settings(self, now: bool) -> None:
        if self._saved is None:
            return
        try:
            import termios

            termios.tcsetattr(self._fd, termios.TCSANOW if now else termios.TCSADRAIN, self._saved)
        except (OSError, ValueError, AttributeError):
            pass


def _write_reset(now: bool) -> None:
    """RESET to the terminal. `now` (the way out by hand): never blocking on it, but a terminal that is
    there and slow to read (a busy machine's tmux, its buffer full of the app's last frames) still gets
    it, a piece at a time as it drains, for up to RESTORE_WAIT_S: one write that gave up at once left
    the alternate screen and mouse tracking on after a Ctrl-C during a slow load."""
    data = RESET.encode()
    if not now:
        os.write(1, data)
        return
    import select
    import time

    os.set_blocking(1, False)
    deadline = time.monotonic() + RESTORE_WAIT_S
    while data:
        try:
            data = data[os.write(1, data):]
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            select.select([], [1], [], left)


def roofline_options(args) -> dict:
    """--flops/--peak-* for the roofline view, checked once by the core's Options (the FLOPs file
    read now: a bad value or file is one line before any screen)."""
    from nsight_tui.parsers import Options, OptionsError

    flags = {"peak_tflops": "--peak-tflops", "peak_gbps": "--peak-gbps"}
    try:
        options = Options(flops_file=getattr(args, "flops", None), peak_tflops=getattr(args, "peak_tflops", None),
                          peak_gbps=getattr(args, "peak_gbps", None))
    except OptionsError as exc:
        raise TraceError(exc.said_as(flags.get(exc.option, exc.option))) from None
    return options.roofline


# $ESCDELAY's default for the app (Textual's own: 100 ms): how long a lone esc waits for the rest of
# an escape sequence before it is the key (tui/terminal_input.py). Read by Textual when imported.
ESC_DELAY_MS = 30


def launch(args) -> int:
    os.environ.setdefault("ESCDELAY", str(ESC_DELAY_MS))
    paths = export_paths(args.paths)
    diff = getattr(args, "diff", False)
    if diff and len(paths) != 2:
        raise TraceError(f"--diff compares two files (A B), got {len(paths)}")
    if len(paths) == 1 or diff:
        for path in paths:
            check_readable(path)
    else:
        from nsight_tui.parsers.read.source import columnar_kind

        missing = [p for p in paths if not (p.is_file() or columnar_kind(p))]
        if missing:
            raise TraceError(f"{missing[0]}: no such file")
    options = roofline_options(args)
    ncu_file = getattr(args, "ncu", None)
    if ncu_file:
        if len(paths) != 1 or diff:
            raise TraceError("--ncu goes with one export (the nsys capture of the same workload)")
        from nsight_tui.parsers.read import ncu_rep

        ncu_rep.check_readable(ncu_file)
    check_terminal()
    opened = open_early(paths[0]) if len(paths) == 1 else None
    from nsight_tui.tui.app import NsightApp

    app = NsightApp(paths, attribution=args.attribution, diff=diff, main_thread=getattr(args, "main_thread", None))
    app.opened = opened
    app.roofline_options = options
    app.ncu_file = ncu_file
    guard = TerminalGuard(app)
    # The imports' objects (modules, classes, functions: ~10^5) live as long as the process: kept
    # out of the cyclic collector's full passes, which then walk only what the load makes.
    gc.freeze()
    # Our own loop, not asyncio.run(): asyncio.run would wait at exit for a worker thread
    # still loading a big file, so `q` during a long load would hang until the load finished.
    loop = asyncio.new_event_loop()
    guard.install(loop)
    try:
        app.run(loop=loop)
    except OSError:  # the terminal went away (SIGHUP): nothing left to draw on
        if guard.signal is None:
            raise
    finally:
        asyncio.set_event_loop(None)
        loop.close()
        guard.restore()
        guard.ended()
    if app.error_message:
        print(f"nsight-tui: {app.error_message}", file=sys.stderr)
    code = app.return_code or 0
    if guard.signal is not None:
        # Ended by a signal: nothing is left to save, and the interpreter's exit would wait
        # for every worker thread still reading the file (a load cannot be interrupted).
        code = 128 + guard.signal
        _flush_quietly()
        os._exit(code)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # `q` during a long load: a worker thread is still reading the (read-only) file and
        # cannot be interrupted; nothing is left to write, so leave now instead of waiting.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
