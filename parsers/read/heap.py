"""Freed memory given back to the system once the load's big temporaries are gone.

glibc's malloc keeps freed heap memory for reuse, and a load frees hundreds of MB of
temporaries (Arrow batches, per-table columns, the read-ahead thread's arena) in pieces
it cannot always reuse for the next large array: the process then holds them until exit
and the next big allocation (the range model's pairs, a report's sort) adds to the peak.
`malloc_trim(0)` returns them (a few ms). Elsewhere (macOS, musl) nothing is done.
"""
from __future__ import annotations

import ctypes
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
