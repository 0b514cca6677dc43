"""`nsight-tui ncu FILE.ncu-rep [--trace T.sqlite]`: Nsight Compute's figures per profiled kernel,
per kernel name within a range, or per range (measured vs estimated roofline), joined to the
export's NVTX ranges when --trace is given."""
from __future__ import annotations

import sys
from pathlib import Path

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note
from nsight_tui.parsers import MODES, TraceError
from nsight_tui.render import output
from nsight_tui.render.safe import visible

HELP = "Nsight Compute report: per-kernel hardware figures joined to the export's NVTX ranges"
VIEWS = ("kernel", "name", "range", "tensor", "findings")


def add_arguments(parser) -> None:
    parser.add_argument("report", help="an Nsight Compute report (.ncu-rep), e.g. from `nsight-tui capture --ncu`")
    parser.add_argument("--trace", metavar="FILE.sqlite",
                        help="the nsys export of the same workload: each profiled kernel joined to its kernel and range")
    parser.add_argument("--by", default="kernel", choices=VIEWS,
                        help="kernel: every profiled kernel; name: per kernel name within a range (mean over "
                        "instances); range: measured (ncu) vs estimated roofline per range (needs --trace); tensor: per GEMM kernel, "
                        "the tensor cores' measured FLOPs, FLOP/s and pipe busy %% vs the datasheet's peak for its "
                        "precision; findings: kernels that matter "
                        "limited by occupancy, with ncu's estimated saving (needs --trace)")
    add_format(parser, ("table", "csv", "json"), "table")
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file (never an input)")
    parser.add_argument("--attribution", default="process", choices=MODES)


def run(args) -> int:
    with output.exit_on_signals():
        return _run(args)


def _run(args) -> int:
    from nsight_tui.parsers import Options, Profile, ncu_alone, read_ncu
    from nsight_tui.render import ncu as ncu_text
    from nsight_tui.render import tables

    inputs = [Path(args.report), *([Path(args.trace)] if args.trace else [])]
    if args.output != "-":
        output.check_target(args.output, args.force, inputs)
    if args.by in ("range", "findings") and not args.trace:
        raise TraceError(f"--by {args.by} needs the export's ranges and timing: give --trace FILE.sqlite")
    report = read_ncu(args.report)
    if args.trace:
        profile = Profile.open(args.trace, Options(attribution=args.attribution))
        answers = ncu_text.ncu_json(profile.ncu(report))
        warning = ncu_text.warning_line(answers)
        if warning:
            print(visible(warning), file=sys.stderr)
    else:
        answers = ncu_text.report_only_json(ncu_alone(report))
    if args.format == "json":
        text = tables.json(answers)
    else:
        headers, rows = {"kernel": (ncu_text.KERNEL_HEADERS, ncu_text.kernel_rows),
                         "name": (ncu_text.NAME_HEADERS, ncu_text.name_rows),
                         "range": (ncu_text.RANGE_HEADERS, ncu_text.range_rows),
                         "tensor": (ncu_text.TENSOR_HEADERS, ncu_text.tensor_rows),
                         "findings": (ncu_text.FINDING_HEADERS, ncu_text.finding_rows)}[args.by]
        if args.format == "csv":
            text = tables.csv(headers, rows(answers))
        else:
            extra = ncu_text.tensor_notes(answers) if args.by == "tensor" else []
            text = tables.terminal(headers, rows(answers), title=f"Nsight Compute: {visible(args.report)}",
                                   notes=ncu_text.notes(answers) + extra)
    if args.output == "-":
        output.write_stdout(text)
    else:
        output.write_atomic(args.output, text, overwrite=args.force, inputs=inputs)
        note(f"wrote {visible(args.output)}")
    return 0
