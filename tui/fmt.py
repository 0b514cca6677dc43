"""How numbers look on screen: short, fixed-width-friendly, unit-bearing.

Exports never use these: Markdown gets exact integers (ns) so it can be checked and diffed.
"""
from __future__ import annotations

import math

from nsight_tui.parsers.ids import api_display_name


def missing(value) -> bool:
    """None or NaN (pandas' empty cell)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def duration(ns) -> str:
    """Adaptive unit: 850 ns, 12.3 µs, 3.18 ms, 9.80 s."""
    if missing(ns):
        return ""
    ns = float(ns)
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def seconds(ns) -> str:
    """A timestamp on the capture's clock, in seconds with µs resolution."""
    if ns is None or ns < 0:
        return ""
    return f"{ns / 1e9:.6f}"


def count(n) -> str:
    if missing(n):
        return ""
    return f"{int(n):,}"


def percent(x) -> str:
    """A fraction (0..1) as a percentage."""
    if missing(x):
        return ""
    return f"{100.0 * x:.1f}%"


def plain_percent(x) -> str:
    """A value already in percent (nsys reports)."""
    if missing(x):
        return ""
    return f"{float(x):.1f}%"


def api_name(name) -> str:
    """CUDA API names without the `_v11060`-style version tag nsys also drops."""
    return api_display_name(name) if isinstance(name, str) else ""


def times(n) -> str:
    return f"×{int(n)}"


def text(v) -> str:
    return "" if v is None else str(v)


def exact(v):
    """A value as it goes into Markdown: integers stay integers, floats keep 3 decimals."""
    if v is None:
        return None
    if hasattr(v, "item"):  # numpy scalar -> Python
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return round(v, 3)
    return v


def exact_int(v):
    """An integer column that may have blanks (stored as float NaN): exported as an integer."""
    return None if missing(v) else int(v)
