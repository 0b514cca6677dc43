"""The core: an Nsight Systems export read into one model, and the analyses over it.

Its front door is `parsers.api` (`Profile`, `Options`, `NsightError`), re-exported here; the
names are imported on first use, so `import nsight_tui.parsers.read.errors` stays cheap (no
pandas, no numpy) for the command line's first lines."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsight_tui.parsers.api import (MODE_HELP, MODES, REPORTS, NsightError, Options, OptionsError, Profile, Sweep,
                                        TraceError, columnar_kind, export_paths, is_sweep_folder, ncu_alone, ranks_of_files,
                                        parse_edits, read_ncu)
    from nsight_tui.parsers.analyses.findings import RULE_IDS
    from nsight_tui.parsers.read.compressed import exports_in
    from nsight_tui.parsers.read.rank_merge import run_in, run_of
    from nsight_tui.parsers.read.source import refuse_special

__all__ = ["MODES", "MODE_HELP", "REPORTS", "NsightError", "Options", "OptionsError", "Profile", "Sweep",
           "TraceError", "columnar_kind", "export_paths", "is_sweep_folder", "ncu_alone", "ranks_of_files", "read_ncu",
           "refuse_special", "RULE_IDS", "parse_edits", "exports_in", "run_in", "run_of"]

# where each name lives: the light ones (errors, options, names) without loading the readers
_HOMES = {"NsightError": "exception", "OptionsError": "exception", "TraceError": "read.errors",
          "Options": "options", "MODES": "model.attribution", "MODE_HELP": "model.attribution",
          "REPORTS": "nsys.reports", "Profile": "api", "Sweep": "api", "is_sweep_folder": "api", "ncu_alone": "api",
          "read_ncu": "api", "export_paths": "api", "columnar_kind": "read.source", "refuse_special": "read.source",
          "RULE_IDS": "analyses.findings", "parse_edits": "api", "ranks_of_files": "api", "exports_in": "read.compressed",
          "run_in": "read.rank_merge", "run_of": "read.rank_merge"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
