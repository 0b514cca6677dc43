"""A plain fixed-width text table, in time linear in the text it prints.

Rich's Table measures and wraps every cell in Python: 60k rows (a 3,000-deep NVTX nesting
in nvtx_kern_sum) or one 10 MB name never finished. Here each column's width is a max over
its cells, long text cells are folded into lines of their column's width, and a cell longer
than CELL_LIMIT characters is cut with a note of how much is left out (`-f csv` or `-f json`
print it whole).
"""
from __future__ import annotations

from typing import Callable, Sequence

CELL_LIMIT = 4096  # characters of one cell on screen; real kernel names stay below ~2k
MIN_TEXT_WIDTH = 24
GAP = "  "


def shorten(text: str, limit: int = CELL_LIMIT) -> str:
    if len(text) <= limit:
        return text
    more = len(text) - limit
    return f"{text[:limit]}… (+{more:,} characters; -f csv prints it whole)"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def text_table(headers: Sequence[str], rows: Sequence[Sequence], title: str | None = None,
               notes: Sequence[str] = (), width: int = 200, escape: Callable[[str], str] = str) -> str:
    """`escape` makes each (already shortened) cell, header, title and note safe to print."""
    numeric = [bool(rows) and all(_is_number(r[i]) or r[i] is None for r in rows) for i in range(len(headers))]
    cells = [["" if v is None else escape(shorten(str(v))) for v in row] for row in rows]
    headers = [escape(str(h)) for h in headers]
    title = escape(title) if title else title
    notes = [escape(n) for n in notes]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    # Fold the widest text columns until the table fits the width (numbers never fold).
    room = width - len(GAP) * (len(headers) - 1)
    text_cols = sorted((i for i in range(len(headers)) if not numeric[i]), key=lambda i: -widths[i])
    for i in text_cols:
        over = sum(widths) - room
        if over <= 0:
            break
        widths[i] = max(min(MIN_TEXT_WIDTH, widths[i]), widths[i] - over)
    out: list[str] = []
    if title:
        out.append(title)
        out.append("")
    out.extend(_lines(headers, widths, [False] * len(headers)))
    out.append(GAP.join("-" * w for w in widths))
    for row in cells:
        out.extend(_lines(row, widths, numeric))
    out.extend(notes)  # as given: callers say "note:" where they mean it
    return "\n".join(line.rstrip() for line in out) + "\n"


def _lines(row: Sequence[str], widths: Sequence[int], numeric: Sequence[bool]) -> list[str]:
    """One table row, folded over as many lines as its longest cell needs."""
    if all(len(c) <= w for c, w in zip(row, widths)):  # the usual row: one line
        return [GAP.join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric))]
    parts = [_fold(c, w) if w > 0 else [c] for c, w in zip(row, widths)]
    height = max(len(p) for p in parts)
    lines = []
    for k in range(height):
        cols = []
        for p, w, num in zip(parts, widths, numeric):
            piece = p[k] if k < len(p) else ""
            cols.append(piece.rjust(w) if num else piece.ljust(w))
        lines.append(GAP.join(cols))
    return lines


BREAKS = "/ ,"  # a range path folds after a `/`, a name after a space or comma


def _fold(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width`, each ending after the last BREAKS character that keeps it
    at least half full (`step_1/forward/` then `computing_attention_scores`), else cut at `width`
    (one long word). Each line is one search back from its end: linear in the text."""
    lines = []
    at = 0
    while len(text) - at > width:
        cut = max(text.rfind(ch, at, at + width) for ch in BREAKS) + 1
        if cut - at < (width + 1) // 2:
            cut = at + width
        lines.append(text[at:cut])
        at = cut
    lines.append(text[at:])
    return lines
