"""`e`: the view on screen as a Markdown file in the current directory, named after the
view, written atomically and never over an existing file without asking."""
from __future__ import annotations

import re
from pathlib import Path

from nsight_tui.render.output import unique_path, write_atomic
from nsight_tui.render.safe import markdown as md_text
from nsight_tui.tui.table_model import ViewText

CLIPBOARD_LIMIT = 512 * 1024  # OSC 52 payloads beyond this stall or get dropped by many terminals


def file_name(stem: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("_.") or "view"
    return f"nsight-tui_{slug}.md"


def render(view: ViewText) -> str:
    lines = []
    if view.header:
        lines.append(f"# {md_text(view.header[0])}")
        lines.append("")
        lines += [f"- {md_text(h)}" for h in view.header[1:]]
        lines.append("")
    return "\n".join(lines) + "\n" + view.body


def target(folder: Path, view: ViewText) -> Path:
    return Path(folder) / file_name(view.stem)


def write(path: Path, text: str, overwrite: bool = False, inputs=()) -> Path:
    """Never over one of `inputs` (the profiles open in the app), even when asked to overwrite."""
    return write_atomic(path, text, overwrite=overwrite, inputs=inputs)


def free_name(path: Path) -> Path:
    return unique_path(path)
