"""`nsight-tui stats FILE`: NVIDIA's `nsys stats` reports, in nsys's column layout.

With `--attribution nsys` the output is NVIDIA's, value for value (diff it against
`nsys stats -f csv`). The default, `process`, differs only in the NVTX reports, where
the ranges of each process's main thread also hold the GPU work other threads (PyTorch's
autograd thread) launched while they were open.
"""
from __future__ import annotations

import os
import sys

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note
from nsight_tui.parsers import MODE_HELP, MODES, REPORTS, TraceError
from nsight_tui.render import output
from nsight_tui.render.nsys import FORMATS, render
from nsight_tui.render.safe import visible


def add_arguments(parser) -> None:
    parser.add_argument("file", help="an nsys SQLite export (nsys export --type sqlite), or the folder of "
                        "nsys export --type parquetdir or arrowdir")
    parser.add_argument("-r", "--report", default=",".join(REPORTS),
                        help=f"comma-separated reports (default: all): {', '.join(REPORTS)}")
    add_format(parser, tuple(FORMATS), "table")
    parser.add_argument("-o", "--output", default="-",
                        help="write PREFIX_REPORT.EXT per report into an existing folder; '-' (default) prints to stdout")
    parser.add_argument("--attribution", default="process", choices=MODES,
                        help="process (default): process-wide attribution; nsys: NVIDIA's launching-thread rule")
    parser.add_argument("--main-thread", metavar="TID|NAME",
                        help="the thread whose ranges frame the iteration (default: chosen, see the note on stderr)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files (never the input)")


def run(args) -> int:
    with output.exit_on_signals():
        return _run(args)


def _run(args) -> int:
    from nsight_tui.parsers import Options, Profile

    names = list(dict.fromkeys(n.strip() for n in args.report.split(",") if n.strip()))
    unknown = [n for n in names if n not in REPORTS]
    if unknown:
        raise TraceError(f"unknown report {', '.join(map(visible, unknown))}; choose from {', '.join(REPORTS)}")
    if not names:
        raise TraceError(f"-r {visible(args.report)!r}: no report named; choose from {', '.join(REPORTS)}")
    if args.output != "-" and not os.path.basename(args.output):  # '' or a folder: `_nvtx_sum.txt` in it
        raise TraceError(f"-o {visible(args.output)!r}: give a file name prefix (PREFIX_REPORT.EXT is written "
                         "per report, e.g. -o out/run1), or - for stdout")
    paths = {name: f"{args.output}_{name}.{FORMATS[args.format]}" for name in names}
    if args.output != "-":
        for path in paths.values():  # refuse before any work, so nothing is half-written
            output.check_target(path, args.force, inputs=[args.file])
    elif sys.stdout is None:
        raise TraceError("standard output is closed; nowhere to write (use -o PREFIX)")
    profile = Profile.open(args.file, Options(attribution=args.attribution, main_thread=args.main_thread))
    mode = args.attribution
    note(f"attribution: {mode} — {MODE_HELP[mode]}")
    reports = profile.nsys_reports(names)  # the range model among them
    if profile.has_nvtx:
        from nsight_tui.render.process_view import main_thread_line

        note("note: " + main_thread_line(profile.trace, profile.ranges()))
    for said in profile.notes:
        note(f"note: {visible(said)}")
    width = output.stdout_width()
    if args.output == "-" and args.format == "json" and len(names) > 1:  # one JSON document, not a stream
        from nsight_tui.render.nsys import render_json_reports

        output.write_stdout(render_json_reports(reports, mode))
        return 0
    files = []
    for name, rep in zip(names, reports):
        text = render(rep, args.format, mode, width)
        if args.output == "-":
            if len(names) > 1 and args.format == "csv":
                output.write_stdout(f"\n ** {rep.title} ({rep.name}):\n\n")
            if rep.empty and args.format == "csv":
                print(f"SKIPPED: {visible(args.file)} {rep.message or 'no data'} ({rep.name})", file=sys.stderr)
            output.write_stdout(text)
        else:
            files.append((paths[name], text))
    # -o: every report's file or none (a signal or a full disk part-way leaves none of them)
    for written in output.write_all(files, overwrite=args.force, inputs=[args.file]):
        note(f"wrote {visible(str(written))}")
    return 0
