"""A lone `esc` on a Linux terminal: the input thread waits for the parser's timer, not for its next
0.1 s poll (Textual's driver reported `esc` 100-200 ms after the key; tmux measured 120-290 ms to go
back a view that `1` left in 16-50 ms)."""
from __future__ import annotations

import pytest

from conftest import SAMPLE, make_app


def test_the_wait_for_input_ends_when_a_lone_esc_is_due():
    from textual import constants
    from textual._time import get_time
    from textual._xterm_parser import XTermParser

    from nsight_tui.tui.terminal_input import POLL_S, wait_s

    parser = XTermParser()
    assert wait_s(parser, get_time()) == POLL_S  # nothing pending: the usual poll
    assert list(parser.feed("\x1b")) == []  # esc, or the start of a sequence: not said yet
    now = get_time()
    assert 0 < wait_s(parser, now) <= min(POLL_S, constants.ESCAPE_DELAY)
    assert wait_s(parser, now + 1.0) == 0.0  # overdue: look now
    keys = list(parser.feed("[A"))  # the rest of an arrow's sequence came: no lone esc
    assert [k.key for k in keys] == ["up"] and wait_s(parser, get_time()) == POLL_S


def test_the_app_reads_a_linux_terminal_through_that_driver(monkeypatch):
    pytest.importorskip("termios")
    from textual import constants
    from textual.drivers.linux_driver import LinuxDriver

    from nsight_tui.tui.terminal_input import PromptEscapeDriver

    monkeypatch.setattr(constants, "DRIVER", None)
    app = make_app([SAMPLE])
    assert app.get_driver_class() is PromptEscapeDriver and issubclass(PromptEscapeDriver, LinuxDriver)


def test_in_a_real_terminal_arrows_stay_keys_and_esc_goes_back(sample, repo_root, tmp_path):
    """The shorter esc delay and the driver's timer read a whole escape sequence as its key: in tmux,
    arrows move the cursor of the kernel table and never count as esc; esc then goes back."""
    import shlex
    import shutil
    import time

    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    from test_tui_tmux import Tmux, command

    t = Tmux(tmp_path)
    try:
        t.start(f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(str(repo_root))} {command(repo_root)} "
                f"{shlex.quote(str(sample))}")
        # the GPU work read (the header counts API calls only then): before it, `2` is refused
        # with "still loading" (navigator.need_session), and the tree shows as soon as the CPU
        # times are in
        t.wait_for(" API")
        t.keys("2")
        first = t.wait_for("launches: p50")
        # under the table, the cursor's kernel: "N launches: p50 ..."
        detail = next(line for line in first.splitlines() if "launches: p50" in line)
        for _ in range(3):
            t.keys("Down")
        t0 = time.monotonic()
        while detail in (pane := t.pane()) and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        assert detail not in pane and "kernel summary" in pane  # the cursor moved; still the kernel table
        t.keys("Escape")
        pane = t.wait_for("Range  ")
        assert "kernel summary" not in pane
    finally:
        t.kill()
