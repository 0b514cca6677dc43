"""Kernel names people can tell apart in a 30-column cell.

cuBLAS/CUTLASS GEMM names differ only in the middle (`..._nt_n_tilesize64x64x8_...`), so a
truncated name hides the difference; decoded GEMMs show library, layout, tile and type
instead. Other kernels get parsers.kernel_names' short form (`reduce_kernel<sum_functor>`).
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def display_kernel_name(name: str) -> str:
    try:
        from parsers.kernel_names import decode_gemm, short_kernel_name
    except ImportError:
        return name
    if not isinstance(name, str) or not name:
        return ""
    d = decode_gemm(name)
    if d and d.get("library") and d.get("layout") and d.get("tile"):
        parts = [d["library"], d.get("op") or "gemm", d["layout"], d["tile"], d.get("a_type") or ""]
        label = " ".join(p for p in parts if p)
        if d.get("role") == "split-k reduction":
            label += " split-K reduce"
        return label
    return short_kernel_name(name)
