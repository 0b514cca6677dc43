"""Backward by forward part: one table per mapping the trace allows (parsers.backward_parts),
as rows for the grid and the notes that go under it."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from nsight_tui.parsers.analyses.backward_parts import backward_parts
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.render import backward_parts as text
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column, TableModel


def ratio(x) -> str:
    return "" if numbers.missing(x) else f"{x:.2f}x"


def columns(iterations: int) -> list[Column]:
    """The table's columns; the times are totals over the `iterations` instances of backward
    (and their forwards), and the headers say so."""
    total = f"total ×{iterations}" if iterations > 1 else "one iteration"
    return [
        Column("label", "Forward part", None, "left", text=True, min_width=20, md_header="Forward part"),
        Column("fwd", "Fwd tot" if iterations > 1 else "Fwd", 9, fmt=numbers.duration, priority=9,
               md_header=f"Forward kernel time (ns, {total})"),
        Column("bwd", "Bwd tot" if iterations > 1 else "Bwd", 9, fmt=numbers.duration, priority=9,
               md_header=f"Backward kernel time (ns, {total})"),
        Column("ratio", "Bwd/fwd", 8, fmt=ratio, priority=8, md_header="Bwd/fwd", md_fmt=lambda v: round(float(v), 4)),
        Column("bwd_per", "Bwd/it", 9, fmt=numbers.duration, priority=6,
               md_header="Backward kernel time per iteration (ns)"),
        Column("fwd_self", "Fwd self", 9, fmt=numbers.duration, priority=4, md_header=f"Forward self (ns, {total})"),
        Column("bwd_self", "Bwd self", 9, fmt=numbers.duration, priority=4, md_header=f"Backward self (ns, {total})"),
        Column("self_ratio", "Self b/f", 8, fmt=ratio, priority=5, md_header="Self bwd/fwd",
               md_fmt=lambda v: round(float(v), 4)),
        Column("path", "", show=False, text=True, md_header="Path"),
    ]


COLUMNS = columns(1)

NO_MAPPING = ("no backward-to-forward mapping: capture with --autograd-nvtx / --emit-nvtx or "
              "--backward-ranges, with forward and backward ranges")


@dataclass(frozen=True)
class Mapping:
    method: str  # "seq" (op ranges) or "name" (backward:<part> ranges)
    frame: pd.DataFrame  # one row per forward part, COLUMNS' keys
    notes: list[str]  # what the mapping covers and what it left out, as text lines
    iterations: int = 1  # instances of backward the times add up
    parts: tuple = ()  # parsers' PartRow per frame row (its backward kernels: backward_ops)

    @property
    def basis(self) -> str:
        """What the times are: totals over the iterations (one column per iteration too)."""
        if self.iterations > 1:
            return f"kernel time, total ×{self.iterations} iterations; Bwd/it per iteration"
        return "kernel time of one iteration"

    def table(self) -> TableModel:
        return TableModel(self.frame, columns(self.iterations))

    def backward_ops(self, path: str):
        """The backward kernels of the part at `path` (positions in trace.ops)."""
        for p in self.parts:
            if "/".join(p.path) == path:
                return p.backward_ops
        return None


def mappings(model: RangeModel) -> list[Mapping]:
    out = []
    for t in backward_parts(model):
        frame = pd.DataFrame([{
            "label": "  " * (len(p.path) - 1) + p.path[-1], "path": "/".join(p.path),
            "fwd": p.forward_kernel_ns, "bwd": p.backward_kernel_ns, "ratio": p.ratio,
            "bwd_per": p.backward_kernel_ns / max(t.iterations, 1),
            "fwd_self": p.forward_self_ns, "bwd_self": p.backward_self_ns, "self_ratio": p.self_ratio,
        } for p in t.parts], columns=[c.key for c in COLUMNS])
        out.append(Mapping(t.method, frame, text.notes(text.backward_parts_json(t)), max(t.iterations, 1), tuple(t.parts)))
    return out


def empty_table() -> TableModel:
    return TableModel(pd.DataFrame({c.key: [] for c in COLUMNS}), COLUMNS)
