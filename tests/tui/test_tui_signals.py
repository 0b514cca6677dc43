"""The TUI ends on SIGTERM and SIGHUP at any moment of its life: a dropped SSH
session once left `nsight-tui` running with PPID 1, ignoring SIGTERM, for 49 minutes. Its
handlers ran on the event loop, and a loop blocked in a synchronous call (Textual flushing to a
terminal that had hung up) never ran them. And ctrl+c during the load exited 0.

Real processes in a real terminal (tmux, a server of its own), signals at several points of the
load, each point several times (the race was 1 in 8): the terminal killed (what a dropped SSH
connection does: SIGHUP to the processes on it), SIGTERM, ctrl+c. Every wait is for a state: the
pid file, the loading screen, the tree, the GPU columns, the process gone, the exit status."""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import time
from pathlib import Path

import pytest
from test_tui_tmux import Tmux, command, processes_with, wait_file

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
              pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]

# The states a load passes through, each with what the screen shows once it is reached
# ("started": the process exists, Textual may not even be imported yet).
# "gpu": the header counts API calls only once the GPU work is read (before: `tree 0.5s · GPU 40%`).
POINTS = {"started": None, "loading": "loading sig_", "tree": "ranges (aggregated", "gpu": " API"}
REPEATS = 2


def gone(pid: int, timeout: float = 30.0) -> bool:
    """Until the process has ended (a zombie waiting for a parent that is gone counts as ended)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def threads(pid: int) -> str:
    """What each thread of `pid` waits in, for the failure message."""
    out = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            out.append(f"{(task / 'comm').read_text().strip()}:{(task / 'wchan').read_text().strip()}")
        except OSError:
            pass
    return " ".join(out)


def _start(big_trace: Path, repo_root: Path, tmp_path: Path, name: str):
    trace = tmp_path / f"sig_{name}.sqlite"  # a name only this run's processes carry
    os.link(big_trace, trace)
    pid_file, status = tmp_path / f"{name}.pid", tmp_path / f"{name}.status"
    q = lambda p: shlex.quote(str(p))  # noqa: E731
    app = f"sh -c 'echo $$ > {q(pid_file)}; exec {command(repo_root)} {q(trace)}'"
    # PYTHONPATH: the code under test, wherever pytest was started (a worktree's overlay included)
    path = os.environ.get("PYTHONPATH", str(repo_root))
    t = Tmux(tmp_path)
    t.start(f"cd {q(tmp_path)} && export PYTHONPATH={q(path)}; {app}; echo $? > {q(status)}")
    return t, trace, pid_file, status


def _reach(t: Tmux, point: str) -> None:
    """Until the screen shows `point`'s state or a later one: a load from a warm page cache can
    pass the loading screen between two looks (the signal then lands in the next stage, still
    in the load)."""
    later = list(POINTS)[list(POINTS).index(point):]
    texts = [POINTS[p] for p in later if POINTS[p] is not None]
    if not texts:
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        pane = t.pane()
        if any(text in pane for text in texts):
            return
        time.sleep(0.02)
    raise AssertionError(f"{point} never reached; the pane:\n{t.pane()}")


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("repeat", range(REPEATS))
def test_terminal_going_away_ends_the_app(big_trace, repo_root, tmp_path, point, repeat):
    t, trace, pid_file, _ = _start(big_trace, repo_root, tmp_path, f"hup_{point}_{repeat}")
    try:
        pid = int(wait_file(pid_file))
        _reach(t, point)
    except BaseException:
        t.kill()
        raise
    t.kill()  # the terminal goes away, as with a dropped SSH connection
    try:
        assert gone(pid), f"still running after its terminal went away ({point}): {threads(pid)}"
        assert processes_with(str(trace)) == []
    finally:
        if not gone(pid, 0):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("repeat", range(REPEATS))
def test_signal_ends_the_app_at_any_point(big_trace, repo_root, tmp_path, sig, point, repeat):
    t, trace, pid_file, status = _start(big_trace, repo_root, tmp_path, f"{sig.name}_{point}_{repeat}")
    try:
        pid = int(wait_file(pid_file))
        _reach(t, point)
        os.kill(pid, sig)
        assert wait_file(status, timeout=60) == str(128 + sig)
        assert gone(pid) and processes_with(str(trace)) == []
        assert "Traceback" not in t.pane()
    finally:
        t.kill()


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_ctrl_c_during_the_load_is_an_interruption(big_trace, repo_root, tmp_path, repeat):
    t, trace, pid_file, status = _start(big_trace, repo_root, tmp_path, f"ctrlc_{repeat}")
    try:
        pid = int(wait_file(pid_file))
        _reach(t, "loading")
        if POINTS["gpu"] in t.pane():
            pytest.skip("the load ended before ctrl+c could be sent during it")
        t.keys("C-c")
        assert wait_file(status, timeout=60) == "130"
        assert gone(pid)
    finally:
        t.kill()


def test_ctrl_c_once_loaded_is_a_quit(big_trace, repo_root, tmp_path):
    t, trace, pid_file, status = _start(big_trace, repo_root, tmp_path, "ctrlc_loaded")
    try:
        int(wait_file(pid_file))
        t.wait_for(POINTS["gpu"], timeout=120)
        t.keys("C-c")
        assert wait_file(status, timeout=60) == "0"
    finally:
        t.kill()


def test_leaving_by_hand_after_sighup_puts_the_terminals_settings_back():
    """The way out by hand (a signal the app did not act on within its grace) restores the terminal's
    settings after SIGHUP too, never waiting on it: a SIGHUP sent by `kill` leaves the terminal there,
    and the skipped restore left it raw. A pseudo-terminal made raw after the guard saved it."""
    import termios
    import tty

    from nsight_tui.tui.launch import TerminalGuard

    parent, child = os.openpty()
    try:
        guard = TerminalGuard(app=None)
        guard._fd, guard._saved = child, termios.tcgetattr(child)
        tty.setraw(child)
        assert termios.tcgetattr(child) != guard._saved
        guard.signal = signal.SIGHUP
        guard.restore(now=True)  # returns after RESTORE_WAIT_S at the most; the settings are put back aside
        deadline = time.monotonic() + 30
        while termios.tcgetattr(child) != guard._saved and time.monotonic() < deadline:
            time.sleep(0.01)  # polling the state asserted below, not a wait standing in for it
        assert termios.tcgetattr(child) == guard._saved
    finally:
        os.close(parent)
        os.close(child)


def test_the_reset_by_hand_reaches_a_terminal_whose_buffer_is_full(repo_root: Path):
    """The way out by hand (a signal during a slow load) writes RESET without blocking; a terminal that
    is there but slow to read (its buffer full of the app's last frames) must still get all of it once
    it drains, within RESTORE_WAIT_S: one non-blocking write gave up at once and left the alternate
    screen and mouse tracking on. A child whose stdout is a pty nobody reads fills it, then resets by
    hand, and says when that waits for the terminal; only then does this side read the pty. The child
    waits up to 60 s instead of RESTORE_WAIT_S: what is checked is that the reset arrives whole once the
    terminal drains, and this side may start reading late on a loaded machine (it once missed the 0.5 s).
    The kernel moves a pty's bytes on in the background, so the buffer a write found full may have room
    again by the reset (seen once in a full run on two busy cores): such a child says so, and another
    is started, until one waits (the path under test)."""
    from nsight_tui.tui.launch import RESET

    for _ in range(20):
        waited, got, rc = _reset_into_a_full_pty(repo_root)
        assert rc == 0
        assert got.endswith(RESET.encode())
        if waited:
            return
    pytest.fail("20 children in a row found room in the pty for the reset: the waiting path never ran")


def _reset_into_a_full_pty(repo_root: Path) -> tuple[bool, bytes, int]:
    """One child filling a pty nobody reads and then resetting by hand: whether it waited for the
    terminal, what this side read, its exit status."""
    import pty
    import subprocess
    import sys

    from nsight_tui.tui.launch import RESET

    master, slave = pty.openpty()
    child = ("import os, select, sys\n"
             "from nsight_tui.tui import launch\n"
             "from nsight_tui.tui.launch import _write_reset\n"
             "launch.RESTORE_WAIT_S = 60\n"
             "real = select.select\n"
             "def waits(*args):\n"
             "    sys.stderr.write('waiting\\n'); sys.stderr.flush()\n"
             "    return real(*args)\n"
             "select.select = waits\n"
             "os.set_blocking(1, False)\n"
             "try:\n"
             "    while True:\n"
             "        os.write(1, b'x' * 4096)\n"
             "except BlockingIOError:\n"
             "    pass\n"
             "_write_reset(True)\n"
             "sys.stderr.write('done\\n'); sys.stderr.flush()\n")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=slave, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(repo_root)})
    os.close(slave)
    try:
        assert proc.stderr is not None
        said = []  # "waiting": the buffer is full and the reset waits for it to drain (a warning may come first)
        while not said or said[-1] not in (b"waiting\n", b"done\n", b""):
            said.append(proc.stderr.readline())
        assert said[-1], f"the child said {said} and ended"
        first = said[-1]
        got = b""
        while not got.endswith(RESET.encode()):
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child has gone and the pty with it
                break
            if not chunk:
                break
            got += chunk
        return first == b"waiting\n", got, proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
