"""Writing outputs: atomically, and never over an existing file unless asked."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nsight_tui.parsers.errors import TraceError


def write_atomic(path: str | os.PathLike, text: str, overwrite: bool = False) -> Path:
    """Write `text` to `path` via a temp file in the same folder and os.replace.

    Raises TraceError if `path` exists and `overwrite` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise TraceError(f"{path}: exists; not overwriting (use --force or another name)")
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if overwrite:
            os.replace(tmp, path)
        else:
            try:  # link, unlike replace, fails if the name was taken meanwhile
                os.link(tmp, path)
            except FileExistsError:
                raise TraceError(f"{path}: appeared while writing; not overwriting") from None
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def unique_path(path: str | os.PathLike) -> Path:
    """`path`, or `stem-2.ext`, `stem-3.ext`, ... : the first name not taken."""
    path = Path(path)
    if not path.exists():
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
        n += 1
