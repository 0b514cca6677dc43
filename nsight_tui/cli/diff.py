"""`nsight-tui diff A.sqlite B.sqlite`: what changed between two runs, and why the step moved.

Markdown (default), JSON or CSV; `-o FILE` writes atomically and never over an existing file
(`--force` to replace it) nor over either input. `--fail-slower PCT` makes it a CI gate: exit 1
when B's steady-state step is more than PCT percent slower than A's.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nsight_tui.parsers.attribution import MODES
from nsight_tui.parsers.errors import TraceError
from nsight_tui.render.diff import FORMATS, TOP_KERNELS

SLOWER_EXIT = 1


def add_arguments(parser) -> None:
    parser.add_argument("a", help="run A (the baseline), an nsys SQLite export")
    parser.add_argument("b", help="run B (the change); every Δ is B − A")
    parser.add_argument("-f", "--format", default="markdown", choices=FORMATS)
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.add_argument("--attribution", default="process", choices=MODES,
                        help="process (default): process-wide attribution; nsys: NVIDIA's launching-thread rule")
    parser.add_argument("--top", type=int, default=TOP_KERNELS,
                        help=f"kernel rows in the Markdown (default {TOP_KERNELS}; 0 = all); JSON/CSV have all")
    parser.add_argument("--fail-slower", type=float, metavar="PCT",
                        help="exit 1 when B's steady-state step (NVTX step_N, mean) is slower than A's by more "
                        "than PCT percent (a CI gate)")


def _write(args, text: str) -> None:
    """The one place output reaches a file: atomic, no clobber, never over an input."""
    from nsight_tui.render.output import write_atomic

    target = Path(args.output).resolve()
    for given in (args.a, args.b):
        if Path(given).resolve() == target:
            raise TraceError(f"{args.output}: is an input file; not writing over it")
    write_atomic(args.output, text, overwrite=args.force)
    print(f"wrote {args.output}", file=sys.stderr)


def run(args) -> int:
    from nsight_tui.parsers.diff import diff_runs
    from nsight_tui.parsers.load import load_trace
    from nsight_tui.render.diff import render

    if args.output != "-" and Path(args.output).exists() and not args.force:  # before any work
        raise TraceError(f"{args.output}: exists; not overwriting (use --force or another name)")
    if args.fail_slower is not None and args.fail_slower < 0:
        raise TraceError(f"--fail-slower {args.fail_slower:g}: expects a percentage >= 0")
    a, b = load_trace(args.a), load_trace(args.b)
    d = diff_runs(a, b, args.attribution)
    if args.fail_slower is not None and d.step is None:
        raise TraceError(f"--fail-slower needs step_N ranges in both runs; {d.basis.split(': ', 1)[-1]}")
    text = render(d, args.format, top=args.top or None)
    if args.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _write(args, text)
    if args.fail_slower is not None and d.step is not None:  # no steps was refused above
        slower = d.step.slower_pct
        if slower is not None and slower > args.fail_slower:
            print(f"nsight-tui: B's step is {slower:.2f}% slower than A's (limit {args.fail_slower:g}%)",
                  file=sys.stderr)
            return SLOWER_EXIT
    return 0
