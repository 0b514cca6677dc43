"""`nsight-tui stats FILE`: NVIDIA's `nsys stats` reports, in nsys's column layout.

With `--attribution nsys` the output is NVIDIA's, value for value (diff it against
`nsys stats -f csv`). The default, `process`, differs only in the NVTX reports, where
GPU work launched outside any range on its thread (PyTorch's autograd thread) counts for
the ranges open on the process's main thread.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
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
    # A plain text table: Rich's layout never finished on 60k rows or a 10 MB name.
    from nsight_tui.render.text_table import text_table

    if rep.empty:
        return f"{rep.title} ({rep.name}): no data — {rep.message or 'nothing to report'}\n"
    width = max(100, min(240, shutil.get_terminal_size((200, 24)).columns if sys.stdout and sys.stdout.isatty()
                         else 200))
    return text_table(rep.headers, rep.rows, title=f"{rep.title} ({rep.name}) — attribution: {mode}",
                      notes=[rep.message] if rep.message else (), width=width) + "\n"


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
    for note in trace.info.notes:
        print(f"note: {note}", file=sys.stderr)
    for name in names:
        rep = build_report(trace, name, mode)
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
