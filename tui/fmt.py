"""How numbers look on screen: the render layer's numbers module, plus the few screen-only
helpers. A missing value reads `numbers.MISSING` here as everywhere.

Exports never use these: Markdown gets exact integers (ns) so it can be checked and diffed.
"""
from __future__ import annotations

from nsight_tui.parsers.read.ids import api_display_name

from nsight_tui.render.numbers import (
    MISSING,
    count,
    duration,
    exact,
    missing,
    percent,
    plain_percent,
    seconds,
)
from nsight_tui.render.numbers import instances as times
from nsight_tui.render.safe import visible


def api_name(name) -> str:
    """CUDA API names without the `_v11060`-style version tag nsys also drops."""
    return visible(api_display_name(name)) if isinstance(name, str) else ""


def text(v) -> str:
    return "" if v is None else visible(v)


def exact_int(v):
    """An integer column that may have blanks (stored as float NaN): exported as an integer."""
    return None if missing(v) else int(v)


__all__ = ["MISSING", "api_name", "count", "duration", "exact", "exact_int", "missing", "percent", "plain_percent",
           "seconds", "text", "times"]
