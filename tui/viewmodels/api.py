"""The CUDA API summary (nsys's cuda_api_sum, value for value)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.nsys.reports import cuda_api_sum_of
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column

KEYS = ["pct", "total", "calls", "avg", "med", "min", "max", "std", "name"]


@dataclass(frozen=True)
class ApiView:
    frame: pd.DataFrame  # one row per API name, columns KEYS
    headers: list[str]  # nsys's column names, for the export
    empty_reason: str  # why there are no rows, as nsys would say it


def api_columns(headers: list[str]) -> list[Column]:
    h = dict(zip(KEYS, headers))
    return [
        Column("name", "API call", None, "left", text=True, min_width=18, md_header=h["name"]),
        Column("pct", "Time %", 7, fmt=numbers.plain_percent, priority=8, md_header=h["pct"]),
        Column("total", "Total", 9, fmt=numbers.duration, priority=9, md_header=h["total"]),
        Column("calls", "Calls", 8, fmt=numbers.count, priority=8, md_header=h["calls"]),
        Column("avg", "Avg", 9, fmt=numbers.duration, priority=6, md_header=h["avg"]),
        Column("med", "Med", 9, fmt=numbers.duration, priority=3, md_header=h["med"]),
        Column("min", "Min", 9, fmt=numbers.duration, priority=2, md_header=h["min"]),
        Column("max", "Max", 9, fmt=numbers.duration, priority=4, md_header=h["max"]),
        Column("std", "StdDev", 9, fmt=numbers.duration, priority=1, md_header=h["std"]),
    ]


def api_summary(trace: Trace, gpids: frozenset[int] | None = None) -> ApiView:
    """Every CUDA API call (nsys's report), or the calls of the processes `gpids` (a rank's)."""
    report = cuda_api_sum_of(trace, gpids)
    frame = pd.DataFrame(report.rows, columns=KEYS) if report.rows else pd.DataFrame({k: [] for k in KEYS})
    return ApiView(frame, report.headers, report.message or "no CUDA API calls")
