"""One Screen per view of the TUI."""
from __future__ import annotations

import importlib

# The views the app reaches by a key or from another view, imported once the first screen is
# up (the loader's warm-up, tui/loader.py) so that neither the first screen nor a key waits
# for them. The roofline (Plotext), memory and Nsight Compute views stay imported when asked for.
AFTER_FIRST_SCREEN = ("kernels", "api", "launches", "correlation", "modals", "help", "timeline", "findings",
                      "whatif", "backward", "pace", "ranks", "files", "diff")


def import_after_first_screen() -> None:
    for name in AFTER_FIRST_SCREEN:
        importlib.import_module(f"{__name__}.{name}")
