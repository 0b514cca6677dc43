"""The keyboard on a Linux terminal: Textual's driver, with a lone `esc` reported when its delay is up.

A terminal sends `esc` as the byte that also begins every escape sequence (arrows, function
keys), so Textual's parser waits ESCDELAY (100 ms by default) for more bytes before it reports
the key. Its input thread looks at that timer only when `select` returns, every 0.1 s when no
byte comes: a lone `esc` waited 100 to 200 ms before the app saw it, and in tmux `esc` took
120-290 ms to go back a view where `1` took 16-50 ms (the view's own work: ~10 ms of CPU).

Here the wait for input ends when the parser's timer is due, and `launch` shortens the delay to
its ESC_DELAY_MS unless the user set $ESCDELAY: a terminal writes a key's whole escape sequence at
once (tmux waits 10 ms by default since 3.5), so the sequence is not split at that scale.
Terminals that speak the kitty keyboard protocol report `esc` unambiguously, with no wait.
"""
from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

POLL_S = 0.1  # how often the input thread looks at its exit flag (Textual's figure)


def wait_s(parser: XTermParser, now: float) -> float:
    """How long to wait for input: until the parser's timer (a lone `esc` pending) is due, else POLL_S."""
    due = getattr(parser, "_timeout_time", None)
    if due is None:
        return POLL_S
    return min(POLL_S, max(due - now, 0.0))


class PromptEscapeDriver(LinuxDriver):
    """LinuxDriver whose input thread wakes for the parser's timer (see the module's note)."""

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        try:
            parser = XTermParser(self._debug)
        except TypeError:  # a Textual whose parser is made otherwise: its own input thread, as it was
            selector.close()
            return super().run_input_thread()
        decode = getincrementaldecoder("utf-8")().decode

        def process(ready: list, final: bool = False) -> None:
            for last, (_key, mask) in loop_last(ready):
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 4096), final=final and last)
                    if not data:  # stdin piped and at its end
                        break
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(wait_s(parser, get_time())))
            selector.unregister(fileno)
            process(selector.select(POLL_S), final=True)
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
