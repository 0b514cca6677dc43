"""What a command says on stderr beside its results: notes ("note: ...", "wrote FILE") and
progress, which `-q`/`--quiet` silences; errors and gate failures are said whatever.

The switch is an environment variable, as `--no-cache`'s is, so what runs below the command line
(the cache's one note, `serve`'s app in its own process) stays quiet too."""
from __future__ import annotations

import os
import sys

QUIET_ENV = "NSIGHT_TUI_QUIET"


def quiet() -> bool:
    return os.environ.get(QUIET_ENV) == "1"


def note(text: str) -> None:
    """One line on stderr, unless the command was asked to be quiet."""
    if not quiet():
        print(text, file=sys.stderr)
