"""One table, four outputs: Markdown (GitHub pipe table), CSV, JSON and a terminal table,
all from the same headers and rows. Every text cell passes through `safe` on its way out.

Rows hold plain values: numbers stay numbers (CSV/JSON keep them exact), text is text.
Pre-formatted text cells (`12.5%`, `1,234.567`) are fine and align right in Markdown.
"""
from __future__ import annotations

import csv as _csv
import io
import json as _json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from nsight_tui.render import safe
from nsight_tui.render.numbers import MISSING

FORMATS = ("table", "csv", "markdown", "json")


@dataclass
class Table:
    headers: list[str]
    rows: list[list] = field(default_factory=list)
    title: str | None = None
    notes: list[str] = field(default_factory=list)


# -- Markdown -------------------------------------------------------------------------------
def _md_cell(value) -> str:
    return "" if value is None else safe.markdown(value)


# One way to split digits between the parts: `[\d,]*\.?\d+` tries every split of a digit run (quadratic).
_NUMERIC = re.compile(r"^[-+]?(?:[\d,]*\.\d+|[\d,]*\d)(e[-+]?\d+)?\s*(%|x|ms|µs|ns|s)?$")


def _is_number(value) -> bool:
    """Numbers, and text that reads as one (`12.5%`, `1,024`, `2.31x`), align right."""
    if isinstance(value, str):
        return value in (MISSING, "") or bool(_NUMERIC.match(value.strip()))
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_columns(headers: Sequence, rows: Sequence[Sequence]) -> list[bool]:
    return [bool(rows) and all(_is_number(r[i]) or r[i] is None for r in rows)
            and any(r[i] not in (None, "", MISSING) for r in rows) for i in range(len(headers))]


def markdown(headers: Sequence[str], rows: Sequence[Sequence], title: str | None = None,
             notes: Sequence[str] = ()) -> str:
    """A pipe table under an optional `### title`; numeric columns right-aligned; notes in italics."""
    numeric = _numeric_columns(headers, rows)
    lines = []
    if title:
        lines += [f"### {safe.markdown(title)}", ""]
    lines.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
    if notes:
        lines.append("")
        lines += [f"_{safe.markdown(n)}_" for n in notes]
    return "\n".join(lines) + "\n"


# -- CSV ----------------------------------------------------------------------------------
def csv(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """RFC 4180-style CSV, `\\n` line ends (as `nsys stats -f csv`); text cells made visible."""
    buf = io.StringIO()
    writer = _csv.writer(buf, lineterminator="\n")
    writer.writerow([safe.visible(h) for h in headers])
    writer.writerows([safe.visible(v) if isinstance(v, str) else v for v in row] for row in rows)
    return buf.getvalue()


# -- JSON ---------------------------------------------------------------------------------
def json(document) -> str:
    """A JSON document (json.dumps escapes control characters itself: names go in as they are)."""
    return _json.dumps(document, indent=1) + "\n"


def json_table(headers: Sequence[str], rows: Sequence[Sequence], **fields) -> str:
    return json({**fields, "columns": list(headers), "rows": [list(r) for r in rows]})


# -- terminal -------------------------------------------------------------------------------
def terminal(headers: Sequence[str], rows: Sequence[Sequence], title: str | None = None,
             notes: Sequence[str] = (), width: int = 200) -> str:
    """A plain-text table; cells are literal text with control characters shown visibly.
    Laid out by `text_table`, in time linear in the text: Rich's layout never finished on
    60k rows (3,000-deep NVTX nesting) or a 10 MB name."""
    from nsight_tui.render.text_table import text_table

    return text_table(headers, rows, title=title, notes=notes, width=width, escape=safe.visible)


def terminal_lines(lines: Sequence[str], width: int = 200) -> str:
    """Lines of prose laid out as `terminal` lays out its notes (literal, wrapped at `width`)."""
    console = _console(width)
    for line in lines:
        console.print(safe.rich_text(line))
    return console.file.getvalue()


def _console(width: int):
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None,
                   highlight=False, markup=False, emoji=False)


def render(table: Table, fmt: str, width: int = 200) -> str:
    """`table` in one of FORMATS."""
    if fmt == "csv":
        return csv(table.headers, table.rows)
    if fmt == "markdown":
        return markdown(table.headers, table.rows, table.title, table.notes)
    if fmt == "json":
        return json_table(table.headers, table.rows, title=table.title, notes=list(table.notes))
    return terminal(table.headers, table.rows, table.title, table.notes, width)
