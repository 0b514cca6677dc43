"""Kernel names people can tell apart in a 30-column cell (parsers.kernel_names.table_name),
cached: the grid asks for the same few hundred names on every repaint."""
from __future__ import annotations

from functools import lru_cache

from nsight_tui.parsers.kernels.kernel_names import table_name


@lru_cache(maxsize=65536)
def display_kernel_name(name: str) -> str:
    return table_name(name)
