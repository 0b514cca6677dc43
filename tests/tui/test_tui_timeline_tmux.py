"""The timeline in a real terminal, keyboard only: `nsight-tui FILE` in a detached tmux
session at 80x24; find step_N/backward, `t`, zoom in, next gap, export, quit with status 0.
Each key waits for the state it causes to be on screen."""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES, Sql
from test_tui_tmux import Tmux, command, wait_file

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
    pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing"),
]


def backward_median() -> int:
    """The duration of the median step_N/backward (the lower middle of the three)."""
    con = Sql.connect(TRACE)
    try:
        rows = con.execute("""
            SELECT b.end - b.start, b.start, coalesce(st.text, ss.value)
            FROM NVTX_EVENTS b LEFT JOIN StringIds bs ON bs.id = b.textId
            JOIN NVTX_EVENTS st ON st.globalTid = b.globalTid AND st.start <= b.start AND st.end >= b.end
            LEFT JOIN StringIds ss ON ss.id = st.textId
            WHERE coalesce(b.text, bs.value) = 'backward' AND coalesce(st.text, ss.value) GLOB 'step_[0-9]*'
            AND b.eventType IN (59, 60) AND st.eventType IN (59, 60)""").fetchall()
    finally:
        con.close()
    rows.sort()
    return rows[(len(rows) - 1) // 2][0]


def test_timeline_by_keyboard_at_80x24(tmp_path: Path):
    from nsight_tui.render import numbers

    status = tmp_path / "exit_status"
    shell = (f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(str(ROOT))} {command(ROOT)} "
             f"{shlex.quote(str(TRACE))}; echo $? > {shlex.quote(str(status))}")
    duration = backward_median()
    window = duration  # the view opens on exactly the range
    t = Tmux(tmp_path)
    try:
        t.start(shell, size=(80, 24))
        t.wait_for("[main thread]")  # the tree is on screen, per step or aggregated: the load is done
        t.search("step_N/backward")
        t.keys("t")
        t.wait_for("GPU0 idle")  # the first frame is drawn
        pane = t.wait_for(f"window {numbers.duration(window)}")
        assert "timeline · backward (median of 3" in pane and "GPU0 s7" in pane and "GPU0 idle" in pane
        assert "busy" in pane and "launch" in pane and "host" in pane
        t.keys("+")
        t.wait_for(f"window {numbers.duration(window // 2)}")
        t.keys("]")
        t.wait_for("GPU0 gap")
        t.keys("0")
        t.wait_for(f"window {numbers.duration(window)}")
        t.keys("e")
        t.wait_for("exported nsight-tui_timeline.md")
        text = (tmp_path / "nsight-tui_timeline.md").read_text()
        assert "GPU idle in the window (backward (median of 3 by CPU time))" in text
        assert "| GPU0 s7 | kernel |" in text
        t.keys("q")
        assert wait_file(status) == "0"
    finally:
        t.kill()
