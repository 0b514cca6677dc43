"""Keys typed right after `q`, before the app is gone (a person typing `qu` in one burst), in a
real terminal (tmux): they used to run their actions on an app shutting down. `u` pushed a memory
view that was never composed, its mount raised (NoMatches: InfoBar), and the app ended with a
traceback and status 1 where quitting is quiet and 0. (Under Pilot each key waits for the app to
settle, so the race does not happen there.)"""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES
from test_tui_tmux import Tmux, command, wait_file

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


@pytest.mark.parametrize("after", ["u", "5", "F"])
def test_a_key_typed_with_q_does_nothing(after, repo_root: Path, tmp_path: Path):
    status = tmp_path / "exit_status"
    shell = (f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(str(repo_root))} {command(repo_root)} "
             f"{shlex.quote(str(SAMPLES / 'small_ctx128.sqlite'))}; echo $? > {shlex.quote(str(status))}")
    t = Tmux(tmp_path)
    try:
        t.start(shell, size=(80, 24))
        t.wait_for("% of its GPU time")  # the GPU columns are in: every view key acts
        t.keys("q" + after, literal=True)  # one write to the terminal: both keys before the exit is done
        assert wait_file(status) == "0"
        pane = t.pane()
        assert "Traceback" not in pane and "Error" not in pane, pane
    finally:
        t.kill()
