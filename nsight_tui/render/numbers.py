"""Numbers with units -> text: the one place that decides how a time, a share, a count,
a size or a rate reads. The core hands over plain numbers (`*_ns` ints, fractions 0..1).

A missing value (None, NaN, pandas' NA) always reads as `MISSING` in text; exported tables
that keep exact values use `exact`, where missing is an empty cell (None).
"""
from __future__ import annotations

import math

import pandas as pd

MISSING = "–"


def missing(value) -> bool:
    """None, NaN or pandas' NA/NaT: a value that is not there."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # not a scalar: not a missing value
        return False


# -- time --------------------------------------------------------------------------------
def ms(ns, digits: int = 3) -> str:
    """Nanoseconds as milliseconds, thousands separated: `1,234.567`."""
    return MISSING if missing(ns) else f"{ns / 1e6:,.{digits}f}"


def us(ns, digits: int = 1) -> str:
    """Nanoseconds as microseconds, thousands separated: `1,234.5`."""
    return MISSING if missing(ns) else f"{ns / 1e3:,.{digits}f}"


def ns(value) -> str:
    """Whole nanoseconds, thousands separated: `1,234,567`."""
    return MISSING if missing(value) else f"{int(value):,}"


def duration(value_ns) -> str:
    """Adaptive unit for a screen cell: `850 ns`, `12.3 µs`, `3.18 ms`, `9.80 s`."""
    if missing(value_ns):
        return MISSING
    v = float(value_ns)
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:.1f} µs"
    if a < 1e9:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e9:.2f} s"


def seconds(value_ns) -> str:
    """A timestamp on the capture's clock, in seconds with µs resolution."""
    if missing(value_ns) or value_ns < 0:
        return MISSING
    return f"{value_ns / 1e9:.6f}"


# -- shares, ratios, counts -----------------------------------------------------------------
def percent(fraction, digits: int = 1) -> str:
    """A fraction (0..1) as a percentage: `12.5%`."""
    return MISSING if missing(fraction) else f"{100.0 * fraction:.{digits}f}%"


def plain_percent(value) -> str:
    """A value already in percent (nsys reports' Time (%)): `12.5%`."""
    return MISSING if missing(value) else f"{float(value):.1f}%"


def times(x, digits: int = 2) -> str:
    """A ratio as a multiple: `2.31x`."""
    return MISSING if missing(x) else f"{x:.{digits}f}x"


def fixed(x, digits: int = 3) -> str:
    """A plain number with `digits` decimals: `0.123`."""
    return MISSING if missing(x) else f"{x:.{digits}f}"


def count(n) -> str:
    """A count, thousands separated: `1,234`."""
    return MISSING if missing(n) else f"{int(n):,}"


def mean_count(x) -> str:
    """A count per something (kernels per instance): a whole number as one (`435`, `1,867` for
    1866.7: a count reads as an integer), a small mean with its decimal (`2.5` syncs per step)."""
    if missing(x):
        return MISSING
    v = float(x)
    return f"{round(v):,}" if v == int(v) or abs(v) >= 100 else f"{v:,.1f}"


def instances(n) -> str:
    """How many instances a row stands for: `×5`."""
    return MISSING if missing(n) else f"×{int(n)}"


# -- sizes and rates ----------------------------------------------------------------------
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def bytes_(n) -> str:
    """A size in binary units: `512 B`, `1.50 KiB`, `3.00 GiB`."""
    if missing(n):
        return MISSING
    v = float(n)
    for unit in _BYTE_UNITS:
        if abs(v) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    return MISSING  # unreachable


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(v: float, unit: str) -> str:
    for scale, prefix in _SI:
        if abs(v) >= scale:
            return f"{v / scale:.2f} {prefix}{unit}"
    return f"{v:.2f} {unit}" if v != int(v) else f"{int(v)} {unit}"


def flops(n) -> str:
    """A FLOP count, SI-scaled: `4.29 GFLOP`."""
    return MISSING if missing(n) else _si(float(n), "FLOP")


def flop_rate(flop_per_s) -> str:
    """Throughput, SI-scaled: `312.00 TFLOP/s`."""
    return MISSING if missing(flop_per_s) else _si(float(flop_per_s), "FLOP/s")


def byte_rate(bytes_per_s) -> str:
    """Bandwidth, SI-scaled (as GPU datasheets quote it): `3.35 TB/s`."""
    return MISSING if missing(bytes_per_s) else _si(float(bytes_per_s), "B/s")


# -- quantities the core tags with a unit ---------------------------------------------------
UNITS = {
    "fraction": percent,
    "ns": lambda v: f"{us(v)} µs" if not missing(v) else MISSING,
    "count": count,
    "per_instance": mean_count,
    "x": times,
    "bytes": bytes_,
    "flops": flops,
    "flop_per_s": flop_rate,
    "bytes_per_s": byte_rate,
    "flop_per_byte": lambda v: MISSING if missing(v) else f"{float(v):,.2f} FLOP/B",
    "text": lambda v: MISSING if v is None else str(v),  # a word, not a number (a verdict)
}


def quantity(value, unit: str) -> str:
    """A value the core tagged with its unit (`fraction`, `ns`, `count`, `x`, ...)."""
    return UNITS[unit](value)


# -- exact values for exported tables --------------------------------------------------------
def exact(v):
    """A value as it goes into an exported table: ints stay ints, floats keep 3 decimals,
    numpy scalars become Python numbers, missing is None (an empty cell)."""
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
