"""nsys's `\\r`-redrawn progress bars: on a terminal they pass through as they are; in a log
(pipe, file, CI) each stage is one line and no carriage return is copied (issue #10)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# A stand-in for `nsys export`: a stage line, a redrawn bar on stdout, counters on stderr.
CHILD = textwrap.dedent(r"""
    import sys, time
    print("Generating '/tmp/x.qdstrm'", flush=True)
    for p in range(0, 101, 5):
        sys.stdout.write(f"\r[1/1] [{'=' * (p // 5):<20}] {p:3d}% x.nsys-rep"); sys.stdout.flush()
    sys.stdout.write("\n")
    for n in range(0, 500_000, 1000):
        sys.stderr.write(f"Processing {n} events\r")
    sys.stderr.write("Processing 500000 events\rFinalizing\r\n")
    print("Exported successfully to x.sqlite", flush=True)
""")


def test_runner_collapses_progress_when_not_a_tty(tmp_path, capfd):
    from nsight_tui.capture.runner import Runner

    runner = Runner("nsys", tmp_path, echo=lambda line: None)
    assert runner._run([sys.executable, "-c", CHILD]) == 0
    out, err = capfd.readouterr()
    assert "\r" not in out and "\r" not in err
    assert out.splitlines() == ["Generating '/tmp/x.qdstrm'", "[1/1] [====================] 100% x.nsys-rep",
                                "Exported successfully to x.sqlite"]
    assert err.splitlines() == ["Processing 500000 events", "Finalizing"]


def test_progress_passes_through_on_a_tty(tmp_path):
    """stdout a terminal: the bar is redrawn in place, as nsys draws it."""
    import pty

    master, slave = pty.openpty()
    script = ("import sys; from nsight_tui.capture.runner import Runner; "
              f"sys.exit(Runner('nsys', {str(tmp_path)!r}, echo=lambda l: None)._run([sys.executable, '-c', {CHILD!r}]))")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child side closed
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0
    os.close(master)
    text = b"".join(chunks).decode()
    assert text.count("\r") >= 20  # every redraw reached the terminal


@pytest.mark.parametrize("chunks,lines", [
    (["a 1%\r", "a 2%\r", "\n"], ["a 2%"]),                             # a bar ending with \r then \n: its last state
    (["x 1%\rx 50%\ry 0%\ry 9", "9%\n"], ["x 50%", "y 99%"]),    # two stages: one line each
    (["line one\r\nline two\n"], ["line one", "line two"]),       # CRLF is a line end
    (["Processing 1 events\r", "Processing 2 events"], ["Processing 2 events"]),  # unterminated at exit
])
def test_stage_lines(chunks, lines):
    from nsight_tui.capture.progress import StageLines

    out: list[str] = []
    s = StageLines(out.append)
    for c in chunks:
        s.feed(c)
    s.close()
    assert out == [line + "\n" for line in lines]
