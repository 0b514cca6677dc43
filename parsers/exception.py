"""The one root of the errors the core raises for the user to read.

Every error meant for the user derives from `NsightError` (`read.errors.TraceError`, the bad-input
error of every floor; `OptionsError`, a bad option; the MCP server's and the capture's own), so a
front end catches this one class: `str(err)` is the complete line to show, `err.exit_code` the
process's exit status. Anything else that escapes is a bug, said as an internal error."""
from __future__ import annotations


class NsightError(Exception):
    """A problem with what the user gave (a file, an option); `str(err)` is one line, ready to print."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class OptionsError(NsightError):
    """An option out of its range (`options.Options`); `option` is its field name, `problem` the rest
    of the line, so a front end can name the option as its user spells it (`--peak-tflops`)."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"{option} {problem}")
        self.option = option
        self.problem = problem

    def said_as(self, name: str) -> str:
        """The line with the option named `name` (a flag, a tool argument)."""
        return f"{name} {self.problem}"
