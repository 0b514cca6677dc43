"""The `nsight-tui` command line: open the TUI, or run `stats`, `report`, `capture`.

Subcommands import their modules lazily so `nsight-tui stats` never pays for Textual
and `nsight-tui FILE` never pays for torch.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, help). Each module has `add_arguments(parser)` and `run(args) -> int`.
SUBCOMMANDS = {
    "stats": ("tui.stats_cli", "nsys-stats compatible reports (nvtx_sum, cuda_gpu_kern_sum, ...)"),
    "report": ("tui.report_cli", "answers to the profiling questions for one trace or a sweep directory"),
    "capture": ("capture.cli", "run the NVTX-annotated GPT-2 workload under nsys and export SQLite"),
}


def _subcommand_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"nsight-tui {name}", description=help_text)
    module.add_arguments(parser)
    return parser, module


def _open_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nsight-tui",
        description="Terminal explorer for Nsight Systems SQLite exports.",
        epilog="subcommands: " + "; ".join(f"{k}: {v[1]}" for k, v in SUBCOMMANDS.items()),
    )
    parser.add_argument("paths", nargs="+", help="one or more .sqlite exports, or a directory of them")
    parser.add_argument(
        "--attribution",
        choices=("process", "nsys"),
        default="process",
        help="process (default): kernels launched outside any NVTX range (autograd thread) count for the "
        "ranges open on the main thread; nsys: NVIDIA's rule, launching thread only",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            parser, module = _subcommand_parser(argv[0])
            return int(module.run(parser.parse_args(argv[1:])) or 0)
        args = _open_parser().parse_args(argv)
        from tui.launch import launch

        return int(launch(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one clear line, never a traceback, for anything we did not foresee
        from parsers.errors import TraceError

        if isinstance(exc, TraceError):
            print(f"nsight-tui: {exc}", file=sys.stderr)
            return exc.exit_code
        print(f"nsight-tui: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
