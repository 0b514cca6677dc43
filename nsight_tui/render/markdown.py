"""Tables to Markdown (GitHub pipe tables), for pasting into reports."""
from __future__ import annotations

import re
from collections.abc import Sequence


def _cell(value) -> str:
    if value is None:
        return ""
    text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


_NUMERIC = re.compile(r"^[-+]?(?:[\d,]*\.\d+|[\d,]*\d)(e[-+]?\d+)?\s*(%|x|ms|µs|ns|s)?$")  # one split: linear


def _is_number(value) -> bool:
    """Numbers, and text that reads as one (`12.5%`, `1,024`, `2.31x`), align right."""
    if isinstance(value, str):
        return value in ("–", "") or bool(_NUMERIC.match(value.strip()))
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def table(headers: Sequence[str], rows: Sequence[Sequence], title: str | None = None,
          notes: Sequence[str] = ()) -> str:
    """A pipe table; numeric columns are right-aligned."""
    numeric = [bool(rows) and all(_is_number(r[i]) or r[i] is None for r in rows)
               and any(r[i] not in (None, "", "–") for r in rows) for i in range(len(headers))]
    lines = []
    if title:
        lines += [f"### {title}", ""]
    lines.append("| " + " | ".join(_cell(h) for h in headers) + " |")
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if notes:
        lines.append("")
        lines += [f"_{n}_" for n in notes]
    return "\n".join(lines) + "\n"
