"""The `nsys stats` reports (parsers.nsys_reports.Report) as text: CSV exactly as NVIDIA's
`nsys stats -f csv` writes it, and Markdown, JSON and a terminal table from the same rows."""
from __future__ import annotations

from nsight_tui.parsers.model.attribution import MODE_HELP
from nsight_tui.parsers.nsys.reports import Report
from nsight_tui.render import tables

FORMATS = {"table": "txt", "csv": "csv", "markdown": "md", "json": "json"}  # format -> file extension


def render_csv(rep: Report) -> str:
    """NVIDIA's CSV, byte for byte (an empty report is empty, as nsys leaves it)."""
    return "" if rep.empty else tables.csv(rep.headers, rep.rows)


def render_markdown(rep: Report, mode: str) -> str:
    notes = [f"attribution: {mode} ({MODE_HELP[mode]})"]
    if rep.message:
        notes.append(rep.message)
    return tables.markdown(rep.headers, rep.rows, title=f"{rep.title} ({rep.name})", notes=notes)


def json_document(rep: Report, mode: str) -> dict:
    return {"report": rep.name, "title": rep.title, "attribution": mode, "message": rep.message,
            "columns": list(rep.headers), "rows": [list(r) for r in rep.rows]}


def render_json(rep: Report, mode: str) -> str:
    return tables.json(json_document(rep, mode))


def render_json_reports(reps: list[Report], mode: str) -> str:
    """Several reports as ONE JSON document (`{"reports": [...]}`, each as `render_json` has
    it): a stream of documents is not JSON, and `json.load` refuses it."""
    return tables.json({"attribution": mode, "reports": [json_document(r, mode) for r in reps]})


def render_table(rep: Report, mode: str, width: int = 200) -> str:
    if rep.empty:
        return tables.terminal_lines([f"{rep.title} ({rep.name}): no data — {rep.message or 'nothing to report'}"],
                                     width)
    notes = [f"note: {rep.message}"] if rep.message else []
    return tables.terminal(rep.headers, rep.rows, f"{rep.title} ({rep.name}) — attribution: {mode}", notes, width)


def render(rep: Report, fmt: str, mode: str, width: int = 200) -> str:
    """`rep` in one of FORMATS."""
    if fmt == "csv":
        return render_csv(rep)
    if fmt == "markdown":
        return render_markdown(rep, mode)
    if fmt == "json":
        return render_json(rep, mode)
    return render_table(rep, mode, width)
