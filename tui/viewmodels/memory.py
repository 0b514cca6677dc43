"""The GPU memory view (`u`): the peak in use and where, by memory kind, torch's own
figures beside nsys's, per phase over the steady-state steps, and an out-of-memory run's failed
allocation. Data: parsers.analyses.memory. No Textual here.

One row per figure, each saying what it is (in use from nsys's memory events vs torch's reserved
segments vs torch's allocated tensors); the export has the exact bytes."""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from nsight_tui.parsers.analyses.memory import MemoryReport, memory_analysis
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.render.numbers import bytes_, seconds
from nsight_tui.tui.table_model import Column


def _bytes(n) -> str:
    return bytes_(n) if n is None or n >= 0 else "−" + bytes_(-n)


def _decimal(n) -> str:
    """The same size in decimal units (torch's figures are often printed as `/ 1e9` "GB")."""
    if n is None or pd.isna(n):
        return ""
    v = abs(float(n))
    sign = "−" if n < 0 else ""
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if v >= scale:
            return f"{sign}{v / scale:.2f} {unit}"
    return f"{sign}{v:.0f} B"


def _both(n) -> str:
    """`5.52 GiB · 5.93 GB`: binary units (GiB = 2^30 bytes) and decimal ones (GB = 10^9) side by
    side, each labelled: a torch user compares with `max_memory_allocated() / 1e9`. The export keeps bytes."""
    if n is None or pd.isna(n):
        return ""
    binary, decimal = _bytes(n), _decimal(n)
    return binary if binary.endswith(" B") else f"{binary} · {decimal}"


UNITS_NOTE = "GiB = 2^30 B, GB = 10^9 B (torch's / 1e9)"

FIGURE_MAX = 32  # a range's path longer than this is cut in its column (whole under the table, on the cursor)

COLUMNS = [
    Column("section", "", 9, "left", text=True, priority=6, md_header="Section"),
    Column("what", "Figure", 24, "left", text=True, priority=10, md_header="Figure"),
    Column("bytes", "Size (GiB · GB)", 21, fmt=_both, priority=9, md_header="Bytes"),
    Column("where", "Where / what it is", None, "left", text=True, min_width=18, md_header="Where / what it is"),
]


def columns(frame: pd.DataFrame) -> list[Column]:
    """COLUMNS sized to what they hold, so "Where / what it is" (the one flexible column) gets
    the rest of the width: a fixed column padded past its widest cell took it from Where."""
    def widest(key: str, fmt=str) -> int:
        return max((len(fmt(v)) for v in frame[key]), default=0) if key in frame else 0

    sized = []
    for col in COLUMNS:
        if col.key == "section":
            col = replace(col, width=max(widest("section"), 5))
        elif col.key == "what":
            col = replace(col, width=min(FIGURE_MAX, max(widest("what"), len(col.header))))
        elif col.key == "bytes":
            col = replace(col, width=max(widest("bytes", _both), len(col.header)))
        sized.append(col)
    return sized


@dataclass(frozen=True)
class MemoryView:
    frame: pd.DataFrame  # COLUMNS' keys
    report: MemoryReport

    def summary(self) -> str:
        r = self.report
        torch = f" · torch's figures from the {r.torch_source}" if r.torch_source and (
            r.torch_peak_reserved_bytes is not None or r.phases) else ""
        if r.out_of_memory is not None:
            o = r.out_of_memory
            return (f"OUT OF MEMORY: {o.call} failed in {o.path or '(no range)'} with {_both(o.in_use_bytes)} in use "
                    f"of {_both(o.total_memory_bytes)}{torch} · {UNITS_NOTE}")
        if not r.has_events:
            return ("no GPU memory events in this export (nsys --cuda-memory-usage=true; nsight-tui capture records "
                    "them by default)" + (f"; torch's figures from the {r.torch_source} below" if r.phases else ""))
        total = f" of {_both(r.gpu_total_bytes)}" if r.gpu_total_bytes else ""
        return (f"peak in use {_both(r.peak_bytes)}{total} in {r.peak_path or '(no range)'}{torch} · {UNITS_NOTE}")

    def row_text(self, position: int) -> str:
        """One row said whole (its Where may be cut in the table): under the table, for the cursor's row."""
        row = self.frame.iloc[position]
        where = f" — {row['where']}" if row["where"] else ""
        return f"{row['section']} · {row['what']}: {_both(row['bytes']) or '–'}{where}"


def rows(r: MemoryReport) -> list[dict]:
    out: list[dict] = []

    def add(section, what, nbytes, where=""):
        out.append({"section": section, "what": what, "bytes": nbytes, "where": where})

    if r.has_events:
        add("nsys", "peak in use", r.peak_bytes,
            f"{r.peak_path or '(no range)'} at {seconds(r.peak_t_ns)} s (every kind)")
        for kind, peak in r.peak_by_kind.items():
            add("nsys", f"peak of kind {kind}", peak, "static globals of modules" if "Static" in kind else "")
        add("nsys", "GPU total", r.gpu_total_bytes, "TARGET_INFO_GPU.totalMemory")
        if r.allocator_peak_bytes is not None:
            add("nsys", "torch allocator's segments", r.allocator_peak_bytes,
                "most held (cudaMallocs after cudaStreamIsCapturing)")
        for name, label, what in (("library", "not torch: libraries", "their own cudaMalloc (cuBLAS handles)"),
                                  ("static", "not torch: static", "modules' __device__ globals")):
            group = r.owners.get(name)
            if group is not None:
                add("nsys", label, group.held_at_end_bytes, f"{what}: {group.allocations:,} allocations")
    if r.torch_peak_reserved_bytes is not None:
        add("torch", "max reserved", r.torch_peak_reserved_bytes, "the caching allocator's segments")
        if r.allocator_peak_bytes is not None:
            add("torch", "segments − reserved", r.allocator_peak_bytes - r.torch_peak_reserved_bytes,
                "the allocator's segments (nsys) − torch's max reserved")
        elif r.has_events and r.peak_bytes is not None:
            add("torch", "in use beyond reserved", r.peak_bytes - r.torch_peak_reserved_bytes,
                "libraries' cudaMalloc (cuBLAS) and static globals")
    if r.torch_peak_allocated_bytes is not None:
        add("torch", "max allocated", r.torch_peak_allocated_bytes, "live tensors")
    if r.optimizer_state_bytes is not None:
        add("torch", "optimizer state", r.optimizer_state_bytes,
            "allocated: first step's start − first warm-up's start")
    for p in r.phases:
        add(p.phase, "kept (end − start)", p.kept_bytes,
            {"forward": "activations kept for backward", "backward": "freed, net of the gradients made",
             "optimizer": "zero_grad's freed gradients"}.get(p.phase, "") + f" · median of {p.steps} steps")
        add(p.phase, "peak allocated", p.peak_allocated_bytes, "live tensors, the phase's most")
        add(p.phase, "peak reserved", p.peak_reserved_bytes, "the allocator's segments, the phase's most")
        if p.segments_grown_bytes is not None:
            add(p.phase, "segments grown", p.segments_grown_bytes, "cudaMalloc'd inside the phase, all steps (nsys)")
    for inst in r.steps:  # the instances that took memory from the driver (the first iterations, mostly)
        if inst.allocated_bytes or inst.freed_bytes:
            add("range", inst.path, inst.net_bytes,
                f"allocated {bytes_(inst.allocated_bytes)}, freed {bytes_(inst.freed_bytes)}, "
                f"most held {bytes_(inst.peak_bytes)}")
    o = r.out_of_memory
    if o is not None:
        add("OOM", f"{o.call} returned {o.return_value}", o.in_use_bytes, f"in use then · in {o.path or '(no range)'}")
        add("OOM", "GPU total", o.total_memory_bytes, f"{o.failed_calls} failed allocation(s) on {o.thread}")
    return out


def memory(model: RangeModel) -> MemoryView:
    report = memory_analysis(model)
    return MemoryView(pd.DataFrame(rows(report), columns=[c.key for c in COLUMNS]), report)
