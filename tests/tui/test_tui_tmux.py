"""The app in a real terminal: `nsight-tui FILE` inside a detached tmux session (its own server
socket), driven with send-keys and read with capture-pane.

- The key path: find backward, open its kernels, follow the top one to its launch and
  correlation, export, quit with status 0. Each step waits for the state it then asserts
  (the text that only the finished view shows), never for text already on screen before.
- Signals: SIGINT, SIGTERM and SIGHUP during the load (the loading screen up) and after it
  end the app with 128 + the signal's number, leave the terminal
  as it was (`stty -a` before and after, and tmux's own view of the pane: alternate screen,
  mouse tracking, cursor), and leave no child process and no temp file behind.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

# The pane's modes as tmux sees them: what a program that exits badly leaves on.
PANE_FLAGS = "#{alternate_on} #{mouse_any_flag} #{mouse_button_flag} #{mouse_standard_flag} #{mouse_sgr_flag} " \
             "#{cursor_flag}"
CLEAN_PANE = "0 0 0 0 0 1"


class Tmux:
    def __init__(self, folder: Path):
        self.socket = f"nsight-tui-test-{os.getpid()}-{time.monotonic_ns()}"
        self.folder = folder

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=20).stdout

    def start(self, shell: str, size=(100, 30)) -> None:
        """Run `shell`, then keep the pane alive (a dead pane's modes read as reset): its modes
        are then what the app left behind."""
        self.run("new-session", "-d", "-s", "tui", "-x", str(size[0]), "-y", str(size[1]), f"{shell}; sleep 600")
        self.run("resize-window", "-t", "tui", "-x", str(size[0]), "-y", str(size[1]))

    def pane(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui")

    def flags(self) -> str:
        return self.run("display-message", "-p", "-t", "tui", PANE_FLAGS).strip()

    def flags_once_settled(self, want: str, timeout: float = 10.0) -> str:
        """The pane's modes once they read `want`, else as they stand at `timeout`: tmux parses what the
        app wrote in its own time (a busy machine's tmux answered with the modes from before the app's
        last writes, its exit already seen)."""
        t0 = time.monotonic()
        while (flags := self.flags()) != want and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
        return flags

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", "tui", *(["-l"] if literal else []), *keys)

    def wait_for_any(self, *texts: str, timeout: float = 60.0) -> str:
        """Until one of `texts` is on screen."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pane = self.pane()
            if any(text in pane for text in texts):
                return pane
            time.sleep(0.02)
        raise AssertionError(f"none of {texts!r} showed; the pane:\n{self.pane()}")

    def wait_for(self, text: str, timeout: float = 60.0, line: bool = False) -> str:
        """Until `text` is on screen (`line`: as a whole line, e.g. an empty `/` prompt)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pane = self.pane()
            if (text in (ln.strip() for ln in pane.splitlines())) if line else (text in pane):
                return pane
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never showed; the pane:\n{self.pane()}")

    def search(self, query: str) -> None:
        """`/ query enter` as a person does it: each key once the screen shows it took effect
        (keys sent before the prompt opens would be commands)."""
        self.keys("/")
        self.wait_for("/", line=True)
        self.keys(query, literal=True)
        self.wait_for(f"/ {query}", line=True)
        self.keys("Enter")
        self.wait_for("match 1 of 1")

    def kill(self) -> None:
        self.run("kill-server")


def command(repo_root: Path) -> str:
    exe = shutil.which("nsight-tui")
    return shlex.quote(exe) if exe else f"{shlex.quote(sys.executable)} -m nsight_tui"


def stty_settings(text: str) -> list[str]:
    """`stty -a` output as its settings, independent of line wrapping and the window's size."""
    tokens = text.replace(";", " ").split()
    size = {i + 1 for i, tok in enumerate(tokens) if tok in ("rows", "columns")}
    return [tok for i, tok in enumerate(tokens) if tok not in ("rows", "columns") and i not in size]


def wait_file(path: Path, timeout: float = 30.0) -> str:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} never written")


def test_real_terminal_key_path(sample: Path, sql, repo_root: Path, tmp_path: Path):
    profiles = tmp_path / "profiles"  # nothing may be written beside the profile: its folder stays as it was
    profiles.mkdir()
    sample = Path(shutil.copy(sample, profiles / sample.name))
    work = tmp_path / "work"
    work.mkdir()
    status = tmp_path / "exit_status"
    shell = (f"cd {shlex.quote(str(work))} && PYTHONPATH={shlex.quote(str(repo_root))} {command(repo_root)} "
             f"{shlex.quote(str(sample))}; echo $? > {shlex.quote(str(status))}")
    want = sql.backward_kernels(sample, "process")
    t = Tmux(tmp_path)
    try:
        t.start(shell)
        pane = t.wait_for("[main thread]")  # the tree is on screen, per step or aggregated: the load is done
        assert sample.stem in pane and "attr: process" in pane
        t.search("step_N/backward")
        t.keys("Enter")
        pane = t.wait_for("cuBLAS gemm")  # the top kernel: the table is computed
        assert "kernels of step_N/backward" in pane and "GEMM" in pane and f"{want['count']:,} kernels" in pane
        t.keys("Enter")
        t.wait_for("rows · enter: its API call")  # the launches are listed (the title shows before them)
        t.keys("Enter")
        pane = t.wait_for("API call: ")  # the detail is looked up (the title alone says "correlation ID")
        assert "API call: cudaLaunchKernel" in pane and "backward" in pane
        t.keys("e")
        t.wait_for("exported nsight-tui_corr_")
        exported = list(work.glob("nsight-tui_corr_*.md"))
        assert len(exported) == 1 and "cudaLaunchKernel" in exported[0].read_text()
        t.keys("q")
        assert wait_file(status) == "0"
        assert t.flags_once_settled(CLEAN_PANE) == CLEAN_PANE
        assert [p.name for p in profiles.iterdir()] == [sample.name]  # no lock, cache or export beside it
    finally:
        t.kill()


# -- signals ------------------------------------------------------------------------------------------
def processes_with(text: str) -> list[int]:
    """Python processes whose command line mentions `text` (the trace's unique path: the app,
    not the shell that started it)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(text.encode() in a for a in argv) and (b"python" in argv[0] or b"nsight-tui" in argv[0]):
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig, when", [
    (signal.SIGINT, "loading"), (signal.SIGTERM, "loading"), (signal.SIGHUP, "loading"),
    (signal.SIGINT, "loaded"), (signal.SIGTERM, "loaded"), (signal.SIGHUP, "loaded"),
])
def test_signal_ends_the_app_cleanly(big_trace: Path, repo_root: Path, tmp_path: Path, sig, when):
    trace = tmp_path / f"sig_{sig.name}_{when}.sqlite"  # a name only this run's processes carry
    os.link(big_trace, trace)
    pid_file, status, before, after = (tmp_path / n for n in ("pid", "status", "stty_before", "stty_after"))
    q = lambda p: shlex.quote(str(p))  # noqa: E731
    app = f"sh -c 'echo $$ > {q(pid_file)}; exec {command(repo_root)} {q(trace)}'"
    shell = (f"cd {q(tmp_path)} && export PYTHONPATH={q(repo_root)} && stty -a > {q(before)}; {app}; "
             f"echo $? > {q(status)}; stty -a > {q(after)}")
    t = Tmux(tmp_path)
    try:
        t.start(shell)
        pid = int(wait_file(pid_file))
        if when == "loading":
            # the loading screen is up: the file is being read. A busy machine can draw the tree
            # between two looks; the signal then lands in the load's next stage (test_tui_signals).
            t.wait_for_any("loading sig_", "ranges (aggregated")
        else:
            t.wait_for("ranges (aggregated", timeout=120)
        os.kill(pid, sig)
        assert wait_file(status, timeout=30) == str(128 + sig)
        wait_file(after)
        # raw mode undone: the same termios settings as before the app
        assert stty_settings(after.read_text()) == stty_settings(before.read_text())
        assert t.flags_once_settled(CLEAN_PANE) == CLEAN_PANE  # no alternate screen, no mouse tracking, cursor shown
        assert processes_with(str(trace)) == []  # the app is gone, and no process it started
        assert not Path(f"/proc/{pid}").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert "Traceback" not in t.pane()
    finally:
        t.kill()
