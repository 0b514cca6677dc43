"""Individual launches of one kernel (within a range or the whole trace), each with its
launching API call, thread, launch overhead and queue delay.

Grid and block stay in the file until asked for (10^6-kernel traces): the table shows a
placeholder for rows not read yet, and the screen reads the rows in view in a worker
(`read_details`). Drawing a row never touches the file.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.ids import api_display_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.render import numbers
from nsight_tui.render.safe import visible
from nsight_tui.tui.table_model import Column, TableModel

PENDING = "…"  # grid/block of a row not read from the file yet
UNREADABLE = "?"  # the read failed (the file changed underneath): the status line says why

OVERHEAD_HELP = "Overhead = launch overhead (the API call's duration)"
QUEUE_HELP = "Queue = queue delay / CPU lead (kernel start − call start)"


def api_name(name) -> str:
    """CUDA API names without the `_v11060`-style version tag nsys also drops."""
    return visible(api_display_name(name)) if isinstance(name, str) else ""


def launch_columns() -> list[Column]:
    return [
        Column("start", "Start (s)", 11, fmt=numbers.seconds, priority=4, md_header="Start (ns)"),
        Column("duration", "Duration", 9, fmt=numbers.duration, priority=9, md_header="Duration (ns)"),
        Column("corr", "Corr ID", 8, fmt=visible, priority=10, md_header="Correlation ID"),
        Column("api_name", "API call", None, "left", fmt=api_name, text=True, min_width=18,
               md_header="API call"),
        Column("overhead_ns", "Overhead", 9, fmt=numbers.duration, priority=7, md_fmt=numbers.exact_int,
               md_header="Launch overhead: API call duration (ns)"),
        Column("queue_ns", "Queue", 9, fmt=numbers.duration, priority=8, md_fmt=numbers.exact_int,
               md_header="Queue delay / CPU lead: kernel start - call start (ns)"),
        # 13 (was 20; Grid, Block, Corr ID one less): at 120 columns the API call, nsys's
        # `cudaLaunchKernelExC_v11060`, is whole; `python3 (492)` still is, `pt_autograd_0 (715)` keeps its name
        Column("thread", "Thread", 13, "left", text=True, priority=6, md_header="Thread"),
        Column("grid", "Grid", 9, "left", priority=3, md_header="Grid"),
        Column("block", "Block", 8, "left", priority=3, md_header="Block"),
        Column("device", "Dev", 3, priority=2, md_header="Device"),
        Column("stream", "Strm", 4, priority=2, md_header="Stream"),
        Column("api_start", "", show=False, md_header="API call start (ns)"),
        Column("name", "", show=False, text=True, md_header="Kernel (demangled)"),
    ]


def launch_frame(model: RangeModel, positions: np.ndarray, name: str) -> pd.DataFrame:
    """model.launches with the launching call's own duration beside the queue delay.

    Built from `model.launch_rows` column by column: the text columns as object arrays taken
    from their few distinct values (pandas would otherwise turn 10^5 repeated kernel names into
    Arrow strings, and the table back into objects: ~120 ms of a 10^5-launch table at 4.8M
    kernels)."""
    trace = model.trace
    rows = model.launch_rows(positions, name)
    columns: dict = {}
    for key, values in rows.columns.items():
        if key in rows.texts:
            columns[key] = pd.Series(rows.text(key), dtype=object, copy=False)
        else:
            columns["queue_ns" if key == "latency" else key] = values
    has = rows.linked
    call = trace.ops["api"].to_numpy()[rows.columns["op"]]
    if len(trace.api):
        ends = trace.api["end"].to_numpy()[np.where(has, call, 0)]
        columns["overhead_ns"] = np.where(has, ends - rows.columns["api_start"], np.nan)
    else:
        columns["overhead_ns"] = np.full(len(rows), np.nan)
    if not has.all():  # (as Series.where: whole numbers while every launch has its call)
        columns["queue_ns"] = np.where(has, columns["queue_ns"], np.nan)
    return pd.DataFrame(columns, copy=False)


class LaunchTable(TableModel):
    """Launches; grid/block come from `read_details` (a worker), never from drawing."""

    LAZY = ("grid", "block")

    def __init__(self, frame: pd.DataFrame, columns: list[Column], trace: Trace) -> None:
        super().__init__(frame, columns)
        self.trace = trace
        self._ops = self.frame["op"].to_numpy()
        self._details: dict[int, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.failed = ""  # the last read's error, once one failed

    def value(self, row: int, key: str):
        if key not in self.LAZY:
            return super().value(row, key)
        op = int(self._ops[self.order[row]])
        grid, block = self._details.get(op, (UNREADABLE, UNREADABLE) if self.failed else (PENDING, PENDING))
        return grid if key == "grid" else block

    def missing(self, first: int, last: int) -> np.ndarray:
        """Ops of view rows [first, last) whose grid/block are not read yet."""
        if self.failed:
            return np.zeros(0, dtype=np.int64)
        ops = self._ops[self.order[max(first, 0):max(last, 0)]]
        return np.array([o for o in ops.tolist() if o not in self._details], dtype=np.int64)

    def read_details(self, ops) -> None:
        """Read grid/block of `ops` from the file (a worker calls this; it may raise)."""
        ops = np.unique(np.asarray(ops, dtype=np.int64))
        if len(ops) == 0:
            return
        try:
            details = self.trace.op_details(ops)
        except Exception as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            raise
        with self._lock:
            for op, grid, block in zip(details.index.tolist(), details["grid"], details["block"]):
                self._details[int(op)] = (grid or "", block or "")

    def export_rows(self):
        self.read_details(self._ops)
        pairs = [self._details.get(int(o), ("", "")) for o in self._ops]
        self.frame["grid"] = [p[0] for p in pairs]
        self.frame["block"] = [p[1] for p in pairs]
        return super().export_rows()
