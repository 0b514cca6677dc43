"""A range model's launches and correlations: each GPU op with the API call that launched it
(`launch_rows`), and one correlation ID's call, ops and the NVTX ranges open around it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nsight_tui.parsers.model.range_node import display_name
from nsight_tui.parsers.read.ids import PID_MASK, api_display_name, pid_of, tid_of

if TYPE_CHECKING:
    from nsight_tui.parsers.model.ranges import RangeModel


@dataclass
class LaunchRows:
    """One kernel's (or every op's) launches as columns in launch order (`RangeModel.launch_rows`).
    `texts[key]`: the distinct strings a text column's codes index (-1: the last, ""); `linked`:
    per row, whether a launching API call is known."""

    columns: dict[str, np.ndarray]
    texts: dict[str, np.ndarray]
    linked: np.ndarray

    def __len__(self) -> int:
        return len(self.linked)

    def text(self, key: str) -> np.ndarray:
        """The text column `key` as strings (an object array: one per row)."""
        return self.texts[key][self.columns[key]] if len(self) else np.zeros(0, dtype=object)


@dataclass
class Correlation:
    corr: int
    api_pos: int
    api_name: str
    api_start: int
    api_end: int
    gtid: int
    pid: int
    tid: int
    thread: str
    process: str
    ops: pd.DataFrame
    own_stack: list[str]
    main_thread: str
    main_stack: list[str]
    attributed: list[str]


def launch_rows(model: RangeModel, op_positions: np.ndarray, name: str | None = None) -> LaunchRows:
    """`launches` as arrays, in launch order (start, device, stream, correlation ID): the
    text columns as codes into their distinct values, turned into strings by whoever
    needs them (a table of 10^5 launches draws 40 rows)."""
    t = model.trace
    pos = np.asarray(op_positions, dtype=np.int64)
    ops = t.ops
    op_name = ops["name"].to_numpy()
    if name is not None:
        code = t.op_names.index(name) if name in t.op_names else -1
        pos = pos[op_name[pos] == code]
    o_start = ops["start"].to_numpy()[pos]
    device, stream, corr = (ops[c].to_numpy()[pos] for c in ("device", "stream", "corr"))
    # the order a stable sort by (start, device, stream, corr) of the rows in `pos` order gives
    # (none to do where the starts already rise: ops are mostly stored in time order)
    if len(pos) > 1 and not (o_start[1:] > o_start[:-1]).all():
        order = np.lexsort((corr, stream, device, o_start))
        pos, o_start, device, stream, corr = pos[order], o_start[order], device[order], stream[order], corr[order]
    o_api = ops["api"].to_numpy()[pos]
    has = o_api >= 0
    safe = np.where(has, o_api, 0)
    api = t.api
    if len(api):
        a_start = np.where(has, api["start"].to_numpy()[safe], -1)
        a_gtid = np.where(has, api["gtid"].to_numpy()[safe], -1)
        a_name = np.where(has, api["name"].to_numpy()[safe], -1)
    else:
        a_start = a_gtid = a_name = np.full(len(pos), -1)
    # Strings are looked up once per distinct value, then spread by index.
    name_codes, name_of = np.unique(op_name[pos], return_inverse=True)
    api_names = np.array([*map(api_display_name, t.api_names), ""], dtype=object)
    threads, thread_idx = np.unique(a_gtid, return_inverse=True)
    thread_text = np.array([t.thread_label(int(g)) if g >= 0 else "" for g in threads], dtype=object)
    columns = {
        "op": pos,
        "name": name_of.reshape(-1),
        "start": o_start,
        "duration": ops["end"].to_numpy()[pos] - o_start,
        "device": device,
        "stream": stream,
        "corr": corr,
        "api_name": a_name,
        "api_start": a_start,
        "tid": np.where(a_gtid >= 0, tid_of(a_gtid), -1),
        "thread": thread_idx.reshape(-1),
        "latency": np.where(has, o_start - a_start, 0),
    }
    texts = {"name": np.array(t.op_names, dtype=object)[name_codes] if len(pos) else np.zeros(0, dtype=object),
             "api_name": api_names, "thread": thread_text}
    return LaunchRows(columns, texts, has)


def correlation(model: RangeModel, corr: int, gpid: int | None = None) -> Correlation | None:
    """The API call with this correlation ID (in process `gpid`, or the first process
    that has it), the GPU ops it launched, and the NVTX ranges open around it."""
    t = model.trace
    api = t.api
    sel = np.flatnonzero(api["corr"].to_numpy() == corr)
    if gpid is not None:
        sel = sel[(api["gtid"].to_numpy()[sel] & PID_MASK) == gpid]
    if len(sel) == 0:
        return None
    a = int(sel[0])
    row = api.iloc[a]
    gtid = int(row["gtid"])
    op_pos = np.flatnonzero(t.ops["api"].to_numpy() == a)
    op_pos = op_pos[np.lexsort((t.ops["corr"].to_numpy()[op_pos], t.ops["start"].to_numpy()[op_pos]))]
    own = model.stack_at(gtid, int(row["start"]), int(row["end"]))
    main = model.main_threads.get(gtid & PID_MASK)
    attributed = sorted(set(model.pair_range[np.isin(model.pair_op, op_pos)].tolist()),
                        key=lambda i: (model.depth[i], model.r_start[i]))
    return Correlation(
        corr=corr, api_pos=a, api_name=api_display_name(t.api_names[int(row["name"])]), api_start=int(row["start"]),
        api_end=int(row["end"]), gtid=gtid, pid=pid_of(gtid), tid=tid_of(gtid),
        thread=t.thread_label(gtid), process=t.process_label(gtid & PID_MASK), ops=model.op_table(op_pos),
        own_stack=[display_name(t.range_names.objects[i]) for i in own],
        main_thread=t.thread_label(main) if main is not None else "",
        main_stack=[display_name(t.range_names.objects[i]) for i in model.stack_at(main, int(row["start"]))]
        if main is not None and main != gtid else [],
        attributed=[display_name(t.range_names.objects[i]) for i in attributed],
    )
