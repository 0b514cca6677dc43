"""One correlation ID: the CUDA API call, the GPU operations it started, and the NVTX
ranges open around it."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from nsight_tui.parsers.read.ids import OP_KINDS
from nsight_tui.parsers.model.ranges import Correlation, RangeModel
from nsight_tui.render import numbers
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import Column


@dataclass(frozen=True)
class CorrelationView:
    corr: int
    found: Correlation | None  # None: no API call has this ID
    lines: list[tuple[str, str]]  # (field, value), as shown and exported
    ops: pd.DataFrame  # the GPU ops the call started

    @property
    def missing_text(self) -> str:
        return f"no CUDA API call with correlation ID {self.corr} in this trace"


def op_columns() -> list[Column]:
    return [
        Column("label", "GPU operation", None, "left", text=True, min_width=16, md_header="Operation"),
        Column("kind_name", "Kind", 7, "left", priority=3, md_header="Kind"),
        Column("start", "Start (s)", 12, fmt=numbers.seconds, priority=6, md_header="Start (ns)"),
        Column("duration", "Duration", 9, fmt=numbers.duration, priority=9, md_header="Duration (ns)"),
        Column("device", "Dev", 3, priority=2, md_header="Device"),
        Column("stream", "Strm", 4, priority=2, md_header="Stream"),
        Column("name", "", show=False, text=True, md_header="Name (demangled)"),
    ]


def stack_text(stack: list[str]) -> str:
    return " › ".join(stack) if stack else "(none)"


def _call_time_lines(c: Correlation) -> list[tuple[str, str]]:
    """The call's duration, named for what it was (analyses.call_time): launch overhead only for a
    launch; a blocking copy's wait is the GPU's, with its queue and copy time beside it."""
    from nsight_tui.parsers.analyses.call_time import of_correlation

    t = of_correlation(c)
    out = [(t.label, numbers.duration(t.duration_ns))]
    if t.queued_ns is not None and t.gpu_ns is not None:
        out.append(("of it: behind earlier GPU work / the copy itself",
                    f"{numbers.duration(t.queued_ns)} / {numbers.duration(t.gpu_ns)}"))
    return out


def detail_lines(c: Correlation, attribution: str) -> list[tuple[str, str]]:
    out = [
        ("API call", c.api_name),
        ("thread", f"{c.thread} in {c.process}"),
        ("start / end", f"{c.api_start:,} ns / {c.api_end:,} ns"),
        *_call_time_lines(c),
        ("NVTX open on its thread", stack_text(c.own_stack)),
    ]
    if c.main_thread and c.main_stack:
        out.append((f"open on main thread {c.main_thread}", stack_text(c.main_stack)))
    out.append((f"attributed to ({attribution})", ", ".join(c.attributed) or "(no range)"))
    if len(c.ops):
        first = int(c.ops["start"].min())
        out.append(("queue delay / CPU lead (GPU start − call start)", numbers.duration(first - c.api_start)))
    return out


def correlation(model: RangeModel, corr: int, gpid: int | None) -> CorrelationView:
    c = model.correlation(corr, gpid)
    if c is None:
        return CorrelationView(corr, None, [], pd.DataFrame())
    ops = c.ops.copy()
    ops["kind_name"] = [OP_KINDS[int(k)] for k in ops["kind"]]
    ops["label"] = [display_kernel_name(n) for n in ops["name"]]
    return CorrelationView(corr, c, detail_lines(c, model.mode), ops)
