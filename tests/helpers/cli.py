"""A command of the `nsight-tui` command line run in this process, its output captured: for tests
that check what a command prints or writes. A test of how the process ends (its exit status on bad
input or a signal, no traceback or interpreter warning on stderr, what a pipe or umask does) starts
a real one; this saves the ~1 s of imports a process pays."""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from nsight_tui.cli import main


@dataclass(frozen=True)
class Ran:
    """What `subprocess.run(..., capture_output=True, text=True)` would hold."""
    returncode: int
    stdout: str
    stderr: str


def run_main(*args) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return Ran(int(code or 0), out.getvalue(), err.getvalue())
