"""Rules on host<->device copies (read.memcpy's rows): from pageable memory, synchronous."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.memcpy import MEMCPY, missing_columns


def _memcpys(c: StepContext) -> np.ndarray | None:
    """The copies on the steps' GPU whose call began inside a step (read.memcpy's rows)."""
    rows = c.trace.memcpy_calls(c.device)
    if not rows:
        return None
    a = np.array([r[:8] for r in rows], dtype=object)
    names = np.array([r[8] or "" for r in rows], dtype=object)
    start = a[:, 6].astype(np.float64)
    k = np.searchsorted(c.t0, np.nan_to_num(start, nan=-1), side="right") - 1
    in_step = (k >= 0) & (start < c.t1[np.clip(k, 0, None)])
    return np.array([(*r[:8], n) for r, n, keep in zip(rows, names, in_step) if keep], dtype=object) \
        if in_step.any() else None


def pageable_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    pageable = (m[:, 4] == 0) | (m[:, 5] == 0)
    host = np.isin(m[:, 3], (1, 2))  # HtoD, DtoH
    sel = m[pageable & host]
    if len(sel) == 0:
        return None
    nbytes = float(sel[:, 2].sum())
    if nbytes / c.n < threshold("pageable_min_bytes"):
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    pinned_ns = nbytes / (threshold("pinned_gbps") * 1e9) * 1e9
    saved = max(call_ns - pinned_ns, 0.0) / c.n
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "copy_ns": int(r[1] - r[0]), "call_ns": int(r[7] - r[6]),
             "direction": {1: "HtoD", 2: "DtoH"}[int(r[3])], "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "pageable-memcpy", "host<->device copies from pageable memory (staged, blocking the CPU)",
        sorted({str(r["range"]) for r in rows}), to_ms(saved),
        f"time in the copies' CUDA calls − their bytes at {threshold('pinned_gbps'):g} GB/s (pinned), per step",
        "pin the host buffers (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
        ".to(device, non_blocking=True)",
        {"copies_per_step": len(sel) / c.n, "bytes_per_step": nbytes / c.n, "call_ns_per_step": call_ns / c.n,
         "copy_ns_per_step": float((sel[:, 1] - sel[:, 0]).sum()) / c.n},
        rows, int(sel[0][6]), int(sel[0][7]))


def sync_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    sync = np.array(["Async" not in str(n) and str(n).startswith(("cudaMemcpy", "cuMemcpy")) for n in m[:, 8]],
                    dtype=bool)
    sel = m[sync]
    if len(sel) == 0:
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    copy_ns = float((sel[:, 1] - sel[:, 0]).sum())
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "call_ns": int(r[7] - r[6]), "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "sync-memcpy", "synchronous copies inside the step",
        sorted({str(r["range"]) for r in rows}), to_ms(max(call_ns - copy_ns, 0.0) / c.n),
        "time the CPU spent in the copies' calls beyond the copies themselves, per step",
        "use cudaMemcpyAsync semantics: tensor.to(device, non_blocking=True) from pinned memory",
        {"copies_per_step": len(sel) / c.n, "call_ns_per_step": call_ns / c.n}, rows,
        int(sel[0][6]), int(sel[0][7]))


def not_checked(trace: Trace) -> list[str]:
    """The rules that could not look at this export, each with the columns it lacks."""
    schema = trace.schema
    if not schema.has(MEMCPY):
        return []  # no copies: nothing for the memcpy rules to find, nothing missing
    gone = missing_columns(schema)
    return [f"pageable-memcpy, sync-memcpy not checked: the export lacks {', '.join(gone)}"] if gone else []
