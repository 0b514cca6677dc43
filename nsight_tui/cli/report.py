"""`nsight-tui report FILE|DIR`: the answers to the profiling questions, Markdown or JSON."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note
from nsight_tui.parsers import MODES, OptionsError, TraceError
from nsight_tui.render import output
from nsight_tui.render.safe import visible

if TYPE_CHECKING:
    from nsight_tui.parsers import Options


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


def options_of(args) -> Options:
    """The report's options from its flags, checked once (a bad value is one line naming the flag)."""
    from nsight_tui.parsers import Options

    flags = {"peak_tflops": "--peak-tflops", "peak_gbps": "--peak-gbps", "attribution": "--attribution",
             "batch": "--batch", "n_heads": "--heads", "ctx": "--ctx", "d_head": "--d-head"}
    try:
        return Options(attribution=args.attribution, main_thread=args.main_thread, flops_file=args.flops,
                       peak_tflops=args.peak_tflops, peak_gbps=args.peak_gbps, batch=args.batch,
                       n_heads=args.n_heads, ctx=args.ctx, d_head=args.d_head, ncu_file=args.ncu)
    except OptionsError as exc:
        raise TraceError(exc.said_as(flags.get(exc.option, exc.option))) from None


def _run(args) -> int:
    from nsight_tui.parsers import Profile, Sweep, is_sweep_folder
    from nsight_tui.render import report
    from nsight_tui.render import sweep as sweep_text
    from nsight_tui.render.memory_model import memory_model_json

    target = Path(args.target)
    # a folder of captures is a sweep; nsys's parquetdir/arrowdir folder is one trace
    folder = is_sweep_folder(target)
    found = Sweep.discover(target) if folder else None
    skipped = found.skipped if found else []  # non-regular files in the folder (a FIFO would block the read)
    runs = found.runs if found else []
    for line in skipped:
        note(f"note: {visible(line)}")
    inputs = [target, *(r.path for r in runs)]
    if args.output != "-":  # refuse before any work
        output.check_target(args.output, args.force, inputs)
    elif sys.stdout is None:
        raise TraceError("standard output is closed; nowhere to write (use -o FILE)")
    if args.fail_on is not None and folder:
        raise TraceError("--fail-on takes one file, not a folder")
    if args.fail_on is not None:  # an empty list too: a CI gate given no id must not pass silently
        from nsight_tui.parsers import RULE_IDS
        from nsight_tui.render.findings import unknown_ids

        unknown = unknown_ids(args.fail_on, RULE_IDS)
        if unknown:
            raise TraceError(f"--fail-on: no finding is called {', '.join(map(repr, unknown))}; "
                             f"the ids are: {', '.join(RULE_IDS)} (or any)")
    if args.ncu and folder:
        raise TraceError("--ncu takes one export, not a folder")
    options = options_of(args)
    if args.ncu:
        inputs.append(Path(args.ncu))
    findings: list = []
    if found is not None:
        if not runs:
            raise TraceError(f"{visible(target)}: no .sqlite captures in this folder")
        # each run reads its own main thread and config mark; the roofs and FLOPs file apply to all
        each = replace(options, main_thread=None, batch=None, n_heads=None, ctx=None, d_head=None)
        found.analyse(each, progress=lambda f, name: note(f"analysing {round(f * len(runs)) + 1}/{len(runs)} "
                                                          f"{visible(name)}"))
        tables = sweep_text.tables(runs)
        memory = memory_model_json(found.memory_model())  # the model x ctx memory table, OOM cells explained
        if args.format == "json":
            text = report.sweep_json(target, runs, tables, args.attribution, skipped, memory)
        else:
            text = report.sweep_markdown(target, tables, args.attribution, runs, skipped, memory)
    else:
        profile = Profile.open(target, options)
        for said in profile.notes:  # rows left out, tables without a column they need: as stats says them
            note(f"note: {visible(said)}")
        # one call: every section, the Nsight Compute report's (--ncu) and the findings that read it included
        document = profile.report()
        findings = document.findings.findings
        text = report.single_json(document) if args.format == "json" else report.single_markdown(document)
    if args.output == "-":
        output.write_stdout(text)
    else:
        output.write_atomic(args.output, text, overwrite=args.force, inputs=inputs)
        note(f"wrote {visible(args.output)}")
    if args.fail_on:
        from nsight_tui.render.findings import present

        hit = present(findings, args.fail_on)
        if hit:
            print(f"nsight-tui: findings present: {', '.join(hit)} (--fail-on {args.fail_on})", file=sys.stderr)
            return 1
    return 0
