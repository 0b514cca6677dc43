"""nsys's output made fit for a log: on a terminal it passes through untouched; anywhere else
(a pipe, a file, CI) its `\\r`-redrawn progress bars become one line per stage.

`nsys profile`/`export` redraw a bar hundreds of times (`[1/1] [==  12%  ] x.nsys-rep\\r...`);
copied into a log that is hundreds of "Processing N events" fragments glued by carriage
returns. Here a redrawn line is held back and only its last state is written, once per
stage (a stage = the line with its numbers and bar drawn out), when the next stage starts or
the line ends.
"""
from __future__ import annotations

import codecs
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

_BAR = re.compile(r"[\d\s=#>\-\[\]%.,|/:*]+")


def stage(line: str) -> str:
    """What stays the same while a progress line is redrawn: its words, not its numbers or bar."""
    return _BAR.sub(" ", line).strip()


class StageLines:
    """Feed text as it comes; whole lines go to `write`, `\\r` redraws collapsed per stage."""

    def __init__(self, write: Callable[[str], None]):
        self.write = write
        self.buf = ""
        self.pending: str | None = None  # the latest redraw of the current progress line

    def feed(self, text: str) -> None:
        self.buf += text
        while True:
            cut = min((i for i in (self.buf.find("\r"), self.buf.find("\n")) if i >= 0), default=-1)
            if cut < 0:
                return
            if self.buf[cut] == "\r" and cut + 1 == len(self.buf):
                return  # maybe the first half of \r\n: wait for the next chunk
            piece, sep = self.buf[:cut], self.buf[cut]
            if sep == "\r" and self.buf[cut + 1] == "\n":
                sep, cut = "\n", cut + 1
            self.buf = self.buf[cut + 1:]
            if sep == "\r":
                self._redraw(piece)
            else:
                self._line(piece)

    def _redraw(self, piece: str) -> None:
        if not piece.strip():
            return
        if self.pending is not None and stage(self.pending) != stage(piece):
            self.write(self.pending + "\n")
        self.pending = piece

    def _line(self, piece: str) -> None:
        if self.pending is not None:
            if not piece.strip():
                piece = self.pending  # the bar ended with \r\n or \r then \n: its last state
            elif stage(piece) != stage(self.pending):
                self.write(self.pending + "\n")
            self.pending = None
        self.write(piece + "\n")

    def close(self) -> None:
        if self.buf.rstrip("\r"):
            self.feed("\n")
        elif self.pending is not None:
            self.write(self.pending + "\n")
        self.buf, self.pending = "", None


def _is_tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def _pump(pipe, target) -> None:
    lock = threading.Lock()

    def write(line: str) -> None:
        if target is None:
            return
        with lock:
            try:
                target.write(line)
                target.flush()
            except (OSError, ValueError):
                pass  # our own output is gone; the child must still be drained

    lines = StageLines(write)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for chunk in iter(lambda: pipe.read1(65536), b""):
        lines.feed(decoder.decode(chunk))
    lines.feed(decoder.decode(b"", final=True))
    lines.close()
    pipe.close()


def run(command: Sequence[str], env: dict | None = None) -> int:
    """Run `command`; each of its streams goes to ours unchanged on a TTY, else as stage lines."""
    out_tty, err_tty = _is_tty(sys.stdout), _is_tty(sys.stderr)
    proc = subprocess.Popen(list(command), env=env, stdin=subprocess.DEVNULL if sys.stdin is None else None,
                            stdout=None if out_tty else subprocess.PIPE,
                            stderr=None if err_tty else subprocess.PIPE)
    pumps = [threading.Thread(target=_pump, args=(pipe, target), daemon=True)
             for pipe, target in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)) if pipe is not None]
    for t in pumps:
        t.start()
    try:
        code = proc.wait()
    except BaseException:  # interrupted: do not leave nsys running
        proc.kill()
        proc.wait()
        raise
    finally:
        for t in pumps:
            t.join()
    return code
