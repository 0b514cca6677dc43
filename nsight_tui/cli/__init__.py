"""The `nsight-tui` command line: one module per subcommand behind one protocol.

Each subcommand module has ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
They are imported lazily so `nsight-tui stats` never pays for Textual and
`nsight-tui FILE` (the ``open`` command, the default) never pays for torch.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, help)
SUBCOMMANDS = {
    "stats": ("nsight_tui.cli.stats", "nsys-stats compatible reports (nvtx_sum, cuda_gpu_kern_sum, ...)"),
    "report": ("nsight_tui.cli.report", "answers to the profiling questions for one trace or a sweep directory"),
    "diff": ("nsight_tui.cli.diff", "what changed between two runs (ranges, kernels, families) and why the step moved"),
    "ncu": ("nsight_tui.cli.ncu", "Nsight Compute report: per-kernel hardware figures joined to the export's NVTX ranges"),
    "ranks": ("nsight_tui.cli.ranks", "per-rank figures, communication vs compute, the straggler"),
    "mcp": ("nsight_tui.cli.mcp", "a Model Context Protocol server over stdio: the same answers, for agents"),
    "serve": ("nsight_tui.cli.serve", "the TUI in a web browser (textual-serve), on 127.0.0.1 by default"),
    "capture": ("nsight_tui.cli.capture", "run the NVTX-annotated GPT-2 workload under nsys and export SQLite"),
    "cache": ("nsight_tui.cli.cache", "list (or clear) the per-user cache that makes a second open of a file fast"),
}
OPEN = ("nsight_tui.cli.open", "Terminal explorer for Nsight Systems SQLite exports.")


def _parser(module_name: str, prog: str, help_text: str, epilog: str | None = None):
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=help_text, epilog=epilog)
    module.add_arguments(parser)
    if module_name not in NO_TRACE:
        parser.add_argument("--no-cache", action="store_true",
                            help="neither read nor write the per-user cache of loaded files (`nsight-tui cache`)")
    return parser, module


NO_TRACE = ("nsight_tui.cli.capture", "nsight_tui.cli.cache")  # the commands that open no profile


def _finish_cache() -> None:
    """A command that ends normally waits for the copies it started into the per-user cache
    (background threads, so the command's own work went on meanwhile); a signal does not."""
    cache = sys.modules.get("nsight_tui.parsers.read.cache")  # not imported: nothing was loaded
    if cache is not None:
        cache.wait_all()


def _parsed(parser, argv: list[str]):
    args = parser.parse_args(argv)
    if getattr(args, "no_cache", False):
        # An environment variable, so the processes a command starts (`serve`'s app) skip it too.
        os.environ["NSIGHT_TUI_NO_CACHE"] = "1"
    return args


WRITERS = ("stats", "report", "diff", "ranks", "ncu")  # the commands that write outputs from a profile


def _subcommand(argv: list[str]) -> int:
    module_name, help_text = SUBCOMMANDS[argv[0]]
    parser, module = _parser(module_name, f"nsight-tui {argv[0]}", help_text)
    code = int(module.run(_parsed(parser, argv[1:])) or 0)
    _finish_cache()
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in WRITERS:
            # SIGTERM/SIGHUP end these with 128 + the signal from here on, before the ~0.5 s of
            # imports: a signal then was lost when the process began with it ignored (a harness,
            # nohup), and the command carried on and wrote its files (issue 27).
            from nsight_tui.render.output import exit_on_signals  # cheap: no pandas, no numpy

            with exit_on_signals():
                return _subcommand(argv)
        if argv and argv[0] in SUBCOMMANDS:
            return _subcommand(argv)
        epilog = "subcommands: " + "; ".join(f"{k}: {v[1]}" for k, v in SUBCOMMANDS.items())
        parser, module = _parser(OPEN[0], "nsight-tui", OPEN[1], epilog)
        code = int(module.run(_parsed(parser, argv)) or 0)
        _finish_cache()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one clear line, never a traceback, for anything we did not foresee
        from nsight_tui.render.output import signalled

        sig = signalled()
        if sig is not None:  # the signal's SystemExit, turned into another exception on its way
            return 128 + sig  # up (an import in C code makes it an ImportError)
        from nsight_tui.parsers import NsightError  # the root of every error meant for the user
        from nsight_tui.render.safe import visible  # messages quote paths and names: one line, no escapes

        if isinstance(exc, NsightError):
            print(f"nsight-tui: {visible(exc)}", file=sys.stderr)
            return exc.exit_code
        print(f"nsight-tui: internal error: {type(exc).__name__}: {visible(exc)}", file=sys.stderr)
        return 70
