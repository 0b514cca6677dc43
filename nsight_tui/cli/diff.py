"""`nsight-tui diff A.sqlite B.sqlite`: what changed between two runs, and why the step moved.

Markdown (default), JSON or CSV; `-o FILE` writes atomically and never over an existing file
(`--force` to replace it) nor over either input. `--fail-slower PCT` makes it a CI gate: exit 1
when B's steady-state step is more than PCT percent slower than A's.
"""
from __future__ import annotations

import math
import sys

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note
from nsight_tui.parsers import MODES, TraceError
from nsight_tui.render.safe import visible
from nsight_tui.render.diff import FORMATS, TOP_KERNELS

SLOWER_EXIT = 1


def add_arguments(parser) -> None:
    parser.add_argument("a", help="run A (the baseline), an nsys SQLite export")
    parser.add_argument("b", help="run B (the change); every Δ is B − A")
    add_format(parser, FORMATS, "markdown")
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.add_argument("--attribution", default="process", choices=MODES,
                        help="process (default): process-wide attribution; nsys: NVIDIA's launching-thread rule")
    parser.add_argument("--top", type=int, default=TOP_KERNELS,
                        help=f"kernel rows in the Markdown (default {TOP_KERNELS}; 0 = all); JSON/CSV have all")
    parser.add_argument("--fail-slower", type=float, metavar="PCT",
                        help="exit 1 when B's steady-state step (the mean step period over step_N, or over the "
                        "iterations inferred from the kernels where a run has no NVTX) is slower than A's by more "
                        "than PCT percent (a CI gate)")


def run(args) -> int:
    from nsight_tui.render import output

    with output.exit_on_signals():
        return _run(args, output)


def _run(args, output) -> int:
    from nsight_tui.parsers import Options, Profile, refuse_special
    from nsight_tui.render.diff import render

    inputs = [args.a, args.b]
    if args.output != "-":  # refuse before any work: an existing file, a folder, an input
        output.check_target(args.output, args.force, inputs)
    if args.fail_slower is not None and not 0 <= args.fail_slower < math.inf:
        raise TraceError(f"--fail-slower {args.fail_slower:g}: expects a percentage >= 0")
    if args.top < 0:
        raise TraceError(f"--top {args.top}: expects a number of rows >= 0 (0: all)")
    for path in inputs:  # both before either is read: B a FIFO is said before A's load, not after it
        refuse_special(path)
    options = Options(attribution=args.attribution)
    d = Profile.open(args.a, options).diff(Profile.open(args.b, options))
    if args.fail_slower is not None and d.step is None:
        raise TraceError(f"--fail-slower needs steps (step_N ranges, or iterations inferred from the kernels) in "
                         f"both runs; {d.basis.split(': ', 1)[-1]}")
    text = render(d, args.format, top=args.top or None)
    if args.output == "-":
        output.write_stdout(text)
    else:
        output.write_atomic(args.output, text, overwrite=args.force, inputs=inputs)
        note(f"wrote {visible(args.output)}")
    if args.fail_slower is not None and d.step is not None:  # no steps was refused above
        slower = d.step.slower_pct
        if slower is not None and slower > args.fail_slower:
            print(f"nsight-tui: B's step is {slower:.2f}% slower than A's (limit {args.fail_slower:g}%)",
                  file=sys.stderr)
            return SLOWER_EXIT
    return 0
