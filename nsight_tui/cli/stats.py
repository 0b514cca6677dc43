"""`nsight-tui stats FILE`: NVIDIA's `nsys stats` reports, in nsys's column layout.

With `--attribution nsys` the output is NVIDIA's, value for value (diff it against
`nsys stats -f csv`). The default, `process`, differs only in the NVTX reports, where
the ranges of each process's main thread also hold the GPU work other threads (PyTorch's
autograd thread) launched while they were open.
"""
from __future__ import annotations

import csv
import io
import json
import os
import sys

from nsight_tui.parsers.attribution import MODE_HELP, MODES
from nsight_tui.parsers.errors import TraceError
from nsight_tui.render.output import write_atomic
from nsight_tui.parsers.nsys_reports import REPORTS, Report, build_report

FORMATS = {"table": "txt", "csv": "csv", "markdown": "md", "json": "json"}


def add_arguments(parser) -> None:
    parser.add_argument("file", help="an nsys SQLite export (nsys export --type sqlite)")
    parser.add_argument("-r", "--report", default=",".join(REPORTS),
                        help=f"comma-separated reports (default: all): {', '.join(REPORTS)}")
    parser.add_argument("-f", "--format", default="table", choices=tuple(FORMATS),
                        help="table (default), csv, markdown or json")
    parser.add_argument("-o", "--output", default="-",
                        help="write PREFIX_REPORT.EXT per report; '-' (default) prints to stdout")
    parser.add_argument("--attribution", default="process", choices=MODES,
                        help="process (default): process-wide attribution; nsys: NVIDIA's launching-thread rule")
    parser.add_argument("--main-thread", metavar="TID|NAME",
                        help="the thread whose ranges frame the iteration (default: chosen, see the note on stderr)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def render_csv(rep: Report) -> str:
    if rep.empty:
        return ""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(rep.headers)
    writer.writerows(rep.rows)
    return buf.getvalue()


def render_markdown(rep: Report, mode: str) -> str:
    from nsight_tui.render.markdown import table

    notes = [f"attribution: {mode} ({MODE_HELP[mode]})"]
    if rep.message:
        notes.append(rep.message)
    return table(rep.headers, rep.rows, title=f"{rep.title} ({rep.name})", notes=notes)


def render_json(rep: Report, mode: str) -> str:
    return json.dumps({
        "report": rep.name, "title": rep.title, "attribution": mode, "message": rep.message,
        "columns": rep.headers, "rows": rep.rows,
    }, indent=1) + "\n"


def render_table(rep: Report, mode: str) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{rep.title} ({rep.name}) — attribution: {mode}", title_justify="left",
                  show_edge=False, header_style="bold")
    numeric = [bool(rep.rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rep.rows)
               for i in range(len(rep.headers))]
    for header, num in zip(rep.headers, numeric):
        table.add_column(header, justify="right" if num else "left", overflow="fold")
    for row in rep.rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    buf = io.StringIO()
    console = Console(file=buf, width=max(100, min(240, sys.stdout.isatty() and Console().width or 200)),
                      force_terminal=False, color_system=None)
    if rep.empty:
        console.print(f"{rep.title} ({rep.name}): no data — {rep.message or 'nothing to report'}")
    else:
        console.print(table)
        if rep.message:
            console.print(f"note: {rep.message}")
    return buf.getvalue()


def render(rep: Report, fmt: str, mode: str) -> str:
    if fmt == "csv":
        return render_csv(rep)
    if fmt == "markdown":
        return render_markdown(rep, mode)
    if fmt == "json":
        return render_json(rep, mode)
    return render_table(rep, mode)


def run(args) -> int:
    from nsight_tui.parsers.load import load_trace

    names = list(dict.fromkeys(n.strip() for n in args.report.split(",") if n.strip()))
    unknown = [n for n in names if n not in REPORTS]
    if unknown:
        raise TraceError(f"unknown report {', '.join(unknown)}; choose from {', '.join(REPORTS)}")
    if args.output != "-" and not args.force:
        for name in names:  # refuse before any work, so nothing is half-written
            path = f"{args.output}_{name}.{FORMATS[args.format]}"
            if os.path.exists(path):
                raise TraceError(f"{path}: exists; not overwriting (use --force or another prefix)")
    trace = load_trace(args.file)
    mode = args.attribution
    print(f"attribution: {mode} — {MODE_HELP[mode]}", file=sys.stderr)
    if trace.info.has_nvtx:
        from nsight_tui.render.process_view import main_thread_line

        print(main_thread_line(trace, trace.model(mode, args.main_thread)), file=sys.stderr)
    for note in trace.info.notes:
        print(f"note: {note}", file=sys.stderr)
    for name in names:
        rep = build_report(trace, name, mode, args.main_thread)
        text = render(rep, args.format, mode)
        if args.output == "-":
            if len(names) > 1 and args.format == "csv":
                sys.stdout.write(f"\n ** {rep.title} ({rep.name}):\n\n")
            if rep.empty and args.format == "csv":
                print(f"SKIPPED: {args.file} {rep.message or 'no data'} ({rep.name})", file=sys.stderr)
            sys.stdout.write(text)
        else:
            path = f"{args.output}_{name}.{FORMATS[args.format]}"
            write_atomic(path, text, overwrite=args.force)
            print(f"wrote {path}", file=sys.stderr)
    sys.stdout.flush()
    return 0
