"""One run in a real terminal: `nsight-tui FILE` inside a detached tmux session (its own
server socket), driven with send-keys and read with capture-pane: find backward, open its
kernels, follow the top one to its launch and correlation, export, quit with status 0."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_tui_support import ROOT, SAMPLES, backward_kernels

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
    pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing"),
]


class Tmux:
    def __init__(self, tmp: Path):
        self.socket = f"nsight-tui-test-{os.getpid()}"
        self.tmp = tmp

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=20).stdout

    def pane(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", "tui", *(["-l"] if literal else []), *keys)

    def wait_for(self, text: str, timeout: float = 30.0, line: bool = False) -> str:
        """Until `text` is on screen (`line`: as a whole line, e.g. an empty `/` prompt)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pane = self.pane()
            if (text in (ln.strip() for ln in pane.splitlines())) if line else (text in pane):
                return pane
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never showed; the pane:\n{self.pane()}")


def test_real_terminal_key_path(tmp_path: Path):
    exe = shutil.which("nsight-tui")
    cmd = shlex.quote(exe) if exe else f"{shlex.quote(sys.executable)} -m nsight_tui"
    status = tmp_path / "exit_status"
    shell = (f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(str(ROOT))} {cmd} "
             f"{shlex.quote(str(TRACE))}; echo $? > {shlex.quote(str(status))}")
    t = Tmux(tmp_path)
    try:
        t.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", shell)
        t.run("resize-window", "-t", "tui", "-x", "100", "-y", "30")
        pane = t.wait_for("loaded in")
        assert TRACE.name in pane and "attribution: process" in pane
        # A person waits for the prompt before typing; keys sent earlier would be commands.
        t.keys("/")
        t.wait_for("/", line=True)
        t.keys("step_N/backward", literal=True)
        t.wait_for("/ step_N/backward", line=True)
        t.keys("Enter")
        t.wait_for("match 1 of 1")
        t.keys("Enter")
        t.wait_for("kernels of step_N/backward")
        pane = t.wait_for("cuBLAS gemm")  # the top kernel, once the table is computed
        assert "GEMM" in pane and f"{backward_kernels(TRACE, 'process')['count']:,} kernels" in pane
        t.keys("Enter")
        t.wait_for("cudaLaunchKernel")
        t.keys("Enter")
        t.wait_for("correlation ID")
        pane = t.wait_for("API call: cudaLaunchKernel")  # the crumb shows before the lookup ends
        assert "backward" in pane
        t.keys("e")
        t.wait_for("exported nsight-tui_corr_")
        exported = list(tmp_path.glob("nsight-tui_corr_*.md"))
        assert len(exported) == 1 and "cudaLaunchKernel" in exported[0].read_text()
        t.keys("q")
        t0 = time.monotonic()
        while not status.exists() and time.monotonic() - t0 < 20:
            time.sleep(0.1)
        assert status.read_text().strip() == "0"
    finally:
        t.run("kill-server")
