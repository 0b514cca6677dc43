"""`nsight-tui report FILE|DIR`: the answers to the profiling questions, Markdown or JSON."""
from __future__ import annotations

import sys
from pathlib import Path

from nsight_tui.cli.formats import add_format
from nsight_tui.parsers.model.attribution import MODES
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.render import output
from nsight_tui.render.safe import visible


def add_arguments(parser) -> None:
    parser.add_argument("target", help="an nsys SQLite export, or a folder of {model}_ctx{N}*.sqlite captures")
    add_format(parser, ("markdown", "json"), "markdown")
    parser.add_argument("-o", "--output", default="-",
                        help="write to this file in an existing folder ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file (never an input)")
    parser.add_argument("--attribution", default="process", choices=MODES)
    parser.add_argument("--main-thread", metavar="TID|NAME",
                        help="the thread whose ranges frame the iteration (default: chosen; the report says which)")
    parser.add_argument("--fail-on", metavar="ID[,ID...]|any",
                        help="exit 1 when one of these findings (section h) is present, e.g. "
                        "sync-stall,host-bound-gap or any (a CI gate; one file)")
    parser.add_argument("--ncu", metavar="FILE.ncu-rep",
                        help="an Nsight Compute report of the same workload (capture --ncu): its kernels joined to "
                        "this trace's ranges, per range (measured vs estimated roofline) and per kernel name")
    roof = parser.add_argument_group("roofline (section g)")
    roof.add_argument("--flops", metavar="FILE.json",
                      help='FLOPs and bytes per range path, for traces without counts: '
                      '{"ranges": {"step_N/forward": {"flops": 7.0e11, "bytes": 3.1e10}}} (per instance)')
    roof.add_argument("--peak-tflops", type=float, help="compute roof in TFLOP/s (a GPU the peaks table lacks)")
    roof.add_argument("--peak-gbps", type=float, help="memory roof in GB/s")
    dims = parser.add_argument_group("attention dims for traces without capture metadata (FLOP ratio)")
    dims.add_argument("--batch", type=int)
    dims.add_argument("--heads", type=int, dest="n_heads")
    dims.add_argument("--ctx", type=int)
    dims.add_argument("--d-head", type=int, dest="d_head")


def run(args) -> int:
    with output.exit_on_signals():
        return _run(args)


def _run(args) -> int:
    from nsight_tui.parsers.analyses import sweep
    from nsight_tui.parsers.analyses.questions import questions
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.render import report
    from nsight_tui.render import sweep as sweep_text

    from nsight_tui.parsers.read.source import columnar_kind

    target = Path(args.target)
    # a folder of captures is a sweep; nsys's parquetdir/arrowdir folder is one trace
    folder = target.is_dir() and columnar_kind(target) is None
    skipped: list[str] = []  # non-regular files in the folder (a FIFO would block the read)
    runs = sweep.discover(target, skipped) if folder else []
    for line in skipped:
        print(f"note: {visible(line)}", file=sys.stderr)
    inputs = [target, *(r.path for r in runs)]
    if args.output != "-":  # refuse before any work
        output.check_target(args.output, args.force, inputs)
    elif sys.stdout is None:
        raise TraceError("standard output is closed; nowhere to write (use -o FILE)")
    dims = {"batch": args.batch, "n_heads": args.n_heads, "ctx": args.ctx, "d_head": args.d_head}
    for value, flag in ((args.peak_tflops, "--peak-tflops"), (args.peak_gbps, "--peak-gbps")):
        if value is not None and not value > 0:
            raise TraceError(f"{flag} must be a positive number, not {value}")
    roof = {"flops_file": args.flops, "peak_tflops": args.peak_tflops, "peak_gbps": args.peak_gbps}
    if args.fail_on and folder:
        raise TraceError("--fail-on takes one file, not a folder")
    if args.fail_on:
        from nsight_tui.parsers.analyses.findings import RULE_IDS
        from nsight_tui.render.findings import unknown_ids

        unknown = unknown_ids(args.fail_on, RULE_IDS)
        if unknown:
            raise TraceError(f"--fail-on: no finding is called {', '.join(map(repr, unknown))}; "
                             f"the ids are: {', '.join(RULE_IDS)} (or any)")
    if args.ncu and folder:
        raise TraceError("--ncu takes one export, not a folder")
    if args.ncu:
        inputs.append(Path(args.ncu))
    if folder:
        if not runs:
            raise TraceError(f"{visible(target)}: no .sqlite captures in this folder")
        sweep.analyse(runs, args.attribution,
                      progress=lambda f, name: print(f"analysing {visible(name)}", file=sys.stderr),
                      roofline_options=roof)
        tables = sweep_text.tables(runs)
        memory = sweep.memory_model(runs).to_json()  # the model x ctx memory table, OOM cells explained
        if args.format == "json":
            text = report.sweep_json(target, runs, tables, args.attribution, skipped, memory)
        else:
            text = report.sweep_markdown(target, tables, args.attribution, runs, skipped, memory)
    else:
        trace = load_trace(target)
        for note in trace.info.notes:  # rows left out, tables without a column they need: as stats says them
            print(f"note: {visible(note)}", file=sys.stderr)
        joined = None
        if args.ncu:  # joined once: its own section, and the findings that read it (occupancy, chains)
            from nsight_tui.parsers.analyses import ncu
            from nsight_tui.parsers.read.ncu_rep import read_ncu_report

            joined = ncu.analyse(trace, read_ncu_report(args.ncu), args.attribution)
        answers = questions(trace, args.attribution, dims, args.main_thread, roofline_options=roof, ncu=joined)
        if joined is not None:
            answers["ncu"] = ncu.answers_of(joined)
        text = report.single_json(answers) if args.format == "json" else report.single_markdown(answers)
    if args.output == "-":
        output.write_stdout(text)
    else:
        output.write_atomic(args.output, text, overwrite=args.force, inputs=inputs)
        print(f"wrote {visible(args.output)}", file=sys.stderr)
    if args.fail_on:
        from nsight_tui.render.findings import present

        hit = present((answers.get("findings") or {}).get("findings") or [], args.fail_on)
        if hit:
            print(f"nsight-tui: findings present: {', '.join(hit)} (--fail-on {args.fail_on})", file=sys.stderr)
            return 1
    return 0
