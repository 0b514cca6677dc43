"""The six `nsys stats` reports, value for value.

Each report follows NVIDIA's definitions (read from nsys's behaviour on real exports):
 - statistics are per group: total, count, avg, median (mean of the middle two for even
   counts), min, max, sample standard deviation (0 for one value);
 - averages and percentages are rounded to 0.1 on the exact binary value, ties away from
   zero (46653051/60 -> 777550.8, 2297/4 -> 574.3): `nsys_round`;
 - rows are ordered as nsys's SQL orders them, ties kept in group-key order (SQLite's
   sorter is stable on the grouped rows).
Under the `process` attribution, the NVTX reports use process-wide attribution instead of
the launching-thread rule; everything else is identical.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd

from nsight_tui.parsers.model.nvtx_nesting import nsys_nesting
from nsight_tui.parsers.nsys.kern_groups import STYLES, kernel_groups
from nsight_tui.parsers.read.groupstats import distinct, group_ids, group_stats
from nsight_tui.parsers.read.ids import GRAPH, KERNEL, MEMCPY, MEMSET, PID_MASK, api_display_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.threads import cores, in_parallel
from nsight_tui.parsers.model.ranges import range_model

REPORTS = ("nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
           "cuda_gpu_mem_time_sum")

STAT_HEADERS = ["Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)"]


@dataclass
class Report:
    name: str
    title: str
    headers: list[str]
    rows: list[list] = field(default_factory=list)
    message: str = ""  # why a report is empty, as nsys would say it

    @property
    def empty(self) -> bool:
        return not self.rows


def nsys_round(values, digits: int = 1) -> list:
    """round() as nsys's SQLite computes it: on the exact binary value, ties away from zero.

    (Python's round() breaks exact ties to even; SQLite 3.40's printf-based round() looks at
    ~15 significant digits and turns 777550.8499999999767 into .9 where nsys prints .8.)
    """
    quantum = Decimal(1).scaleb(-digits)
    out: list[float | None] = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        else:
            out.append(float(Decimal(float(v)).quantize(quantum, rounding=ROUND_HALF_UP)))
    return out


def _group_stats(keys: pd.DataFrame, values: np.ndarray) -> pd.DataFrame:
    """total, num, avg, med, min, max, std per group of `keys`, rows in key order (GROUP BY)."""
    if len(keys.columns) == 1 and keys.dtypes.iloc[0].kind in "iu":  # integers: ranked as they are
        groups = group_ids(keys[keys.columns[0]].to_numpy())
    else:
        groups = group_ids(*[pd.factorize(keys[c], sort=True)[0] for c in keys.columns])
    st = group_stats(groups.gid, groups.n, values)
    out = keys.iloc[groups.first].reset_index(drop=True)
    for name in ("total", "num", "avg", "med", "min", "max", "std"):
        out[name] = getattr(st, name)
    return out


def _stat_columns(s: pd.DataFrame) -> list[list]:
    avg = nsys_round(s["avg"])
    med = nsys_round(s["med"])
    std = nsys_round(s["std"])
    return [[a, m, int(mn), int(mx), sd] for a, m, mn, mx, sd in zip(avg, med, s["min"], s["max"], std)]




def _percent(totals: pd.Series) -> list:
    grand = float(totals.sum())
    return nsys_round([t * 100.0 / grand if grand else None for t in totals.astype(float)])


def _summary_rows(s: pd.DataFrame, names: list) -> list[list]:
    """[Time %, Total, Count, Avg, Med, Min, Max, StdDev, Name] in the given row order."""
    pct = _percent(s["total"])
    stats = _stat_columns(s)
    return [[p, int(t), int(n), *st, name] for p, t, n, st, name in zip(pct, s["total"], s["num"], stats, names)]


def _sort_desc(s: pd.DataFrame, by: str) -> pd.DataFrame:
    return s.sort_values(by, ascending=False, kind="stable").reset_index(drop=True)


# -- CUDA reports -------------------------------------------------------------------------
def cuda_gpu_kern_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    headers = ["Time (%)", "Total Time (ns)", "Instances", *STAT_HEADERS, "Name"]
    rep = Report("cuda_gpu_kern_sum", "CUDA GPU Kernel Summary", headers)
    ops = trace.ops
    is_k = ops["kind"].to_numpy() == KERNEL  # the columns it needs, not a copy of the frame
    if not trace.schema.has("CUPTI_ACTIVITY_KIND_KERNEL") or not is_k.any():
        rep.message = "does not contain CUDA kernel data"
        return rep
    names, dur = ops["name"].to_numpy(), ops["end"].to_numpy() - ops["start"].to_numpy()
    if not is_k.all():
        names, dur = names[is_k], dur[is_k]
    s = _group_stats(pd.DataFrame({"rank": _name_ranks(trace)[names]}), dur)
    s = s.sort_values(["total", "num", "rank"], ascending=[False, True, True], kind="stable").reset_index(drop=True)
    by_rank = sorted(trace.op_names)
    rep.rows = _summary_rows(s, [by_rank[r] for r in s["rank"]])
    return rep


def _name_ranks(trace: Trace) -> np.ndarray:
    """op name code -> rank of its text in sorted order: grouping and ordering by name on
    integers instead of 10^6 Python strings (the names are distinct texts)."""
    order = sorted(range(len(trace.op_names)), key=trace.op_names.__getitem__)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def cuda_api_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    return cuda_api_sum_of(trace, None)


def cuda_api_sum_of(trace: Trace, gpids: frozenset[int] | None) -> Report:
    """cuda_api_sum over the calls of the processes `gpids` only (one rank's process), or
    over every call (None: nsys's report)."""
    headers = ["Time (%)", "Total Time (ns)", "Num Calls", *STAT_HEADERS, "Name"]
    rep = Report("cuda_api_sum", "CUDA API Summary", headers)
    api = trace.api
    if gpids is not None:
        process = api["gtid"].to_numpy(np.int64) & PID_MASK
        api = api[np.isin(process, np.fromiter(gpids, dtype=np.int64))]
    if not trace.schema.has("CUPTI_ACTIVITY_KIND_RUNTIME") or api.empty:
        rep.message = "does not contain CUDA trace data"
        return rep
    # Grouped by the string id, whose order load.py keeps in the name codes.
    s = _group_stats(pd.DataFrame({"code": api["name"].to_numpy()}), (api["end"] - api["start"]).to_numpy())
    s = _sort_desc(s, "total")
    rep.rows = _summary_rows(s, [api_display_name(trace.api_names[c]) for c in s["code"]])
    return rep


def cuda_gpu_mem_time_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    headers = ["Time (%)", "Total Time (ns)", "Count", *STAT_HEADERS, "Operation"]
    rep = Report("cuda_gpu_mem_time_sum", "CUDA GPU MemOps Summary (by Time)", headers)
    m = trace.ops[trace.ops["kind"].isin((MEMCPY, MEMSET))]
    if m.empty:
        rep.message = "does not contain GPU memory data"
        return rep
    s = _group_stats(pd.DataFrame({"rank": _name_ranks(trace)[m["name"].to_numpy()]}),
                     (m["end"] - m["start"]).to_numpy())
    s = _sort_desc(s, "total")
    by_rank = sorted(trace.op_names)
    rep.rows = _summary_rows(s, [by_rank[r] for r in s["rank"]])
    if not trace.memcpy_labels_from_export and (m["kind"] == MEMCPY).any():
        rep.message = ("export lacks ENUM_CUDA_MEMCPY_OPER, where nsys stats reports nothing; "
                       "memcpy kinds labelled from CUPTI's enum")
    return rep


# -- NVTX reports -------------------------------------------------------------------------
_NO_NVTX = "does not contain NV Tools Extension (NVTX) data"


def _style(pushpop: pd.Series) -> np.ndarray:
    return np.where(pushpop.to_numpy(dtype=bool), "PushPop", "StartEnd")


def nvtx_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    headers = ["Time (%)", "Total Time (ns)", "Instances", *STAT_HEADERS, "Style", "Range"]
    rep = Report("nvtx_sum", "NVTX Range Summary", headers)
    r = trace.ranges
    if r.empty:
        rep.message = _NO_NVTX
        return rep
    # names as ranks in sorted order (grouped and ordered as the texts are), each name once
    names, by_rank = trace.range_names.sorted_ranks
    style, duration = _style(r["pushpop"]), (r["end_sum"] - r["start"]).to_numpy()
    if attribution == "nsys" and "copies" in r and (r["copies"].to_numpy() > 1).any():
        # nsys joins a range to every thread's create of its domain (read.load): k rows for k creators
        copies = r["copies"].to_numpy()
        names, style, duration = np.repeat(names, copies), np.repeat(style, copies), np.repeat(duration, copies)
    keys = pd.DataFrame({"name": names, "style": style})
    s = _group_stats(keys, duration)
    s = _sort_desc(s, "total")
    pct = _percent(s["total"])
    stats = _stat_columns(s)
    rep.rows = [[p, int(t), int(n), *st, style, by_rank[name]]
                for p, t, n, st, style, name in zip(pct, s["total"], s["num"], stats, s["style"], s["name"])]
    return rep


def _needs_api(trace: Trace, rep: Report) -> bool:
    if trace.ranges.empty or not trace.schema.has("NVTX_EVENTS"):
        rep.message = _NO_NVTX
        return False
    if not trace.schema.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        rep.message = "does not contain CUDA API data"
        return False
    return True


def without_graphs_traced_whole(trace: Trace) -> Trace:
    """The trace as nsys's reports see it: a CUDA graph launch traced whole (ids.GRAPH, nsys's default
    --cuda-graph-trace=graph) is no GPU op to `nsys stats`, whose NVTX projection leaves it out (a
    graphed step projects no GPU time there). nsight-tui's own views count it; its nsys-compatible
    reports do not, so they print NVIDIA's numbers. The same trace where it has none."""
    kind = trace.ops["kind"].to_numpy()
    if not (kind == GRAPH).any():
        return trace
    if "nsys.without_graphs" not in trace.derived:
        # a model of its own: fresh derived data, nothing from the user's cache of the whole trace
        trace.derived["nsys.without_graphs"] = replace(
            trace, ops=trace.ops[kind != GRAPH].reset_index(drop=True), derived={}, stash=None)
    return trace.derived["nsys.without_graphs"]


def nvtx_gpu_proj_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    trace = without_graphs_traced_whole(trace)
    headers = ["Range", "Style", "Total Proj Time (ns)", "Total Range Time (ns)", "Range Instances",
               "Proj Avg (ns)", "Proj Med (ns)", "Proj Min (ns)", "Proj Max (ns)", "Proj StdDev (ns)",
               "Total GPU Ops", "Avg GPU Ops", "Avg Range Lvl", "Avg Num Child"]
    rep = Report("nvtx_gpu_proj_sum", "NVTX GPU Projection Summary", headers)
    if not _needs_api(trace, rep):
        return rep
    m = range_model(trace, attribution, main_thread, inferred=False)  # nsys knows no inferred range
    pr = m.pair_range
    # GPU ops are counted by launching call: a CUDA graph launch is one op however many nodes.
    # Attributed ops all have their launching call (ops["api"]), and two ops share a
    # correlation ID in a process exactly when they share that call: while no call launched
    # two ops, every pair counts; otherwise count distinct (range, call).
    op_api = trace.ops["api"].to_numpy()
    launched = op_api[op_api >= 0]
    seen = np.zeros(len(trace.api), dtype=bool)  # a presence table, not a count per call (1 B each, not 8)
    seen[launched] = True
    if np.count_nonzero(seen) == len(launched):  # no call launched two ops
        op_nb = m.op_count
    else:
        key = pr.astype(np.int64) * np.int64(len(trace.api) + 1) + op_api[m.pair_op]
        op_nb = np.bincount(distinct(key) // np.int64(len(trace.api) + 1), minlength=m.n)
    has = m.op_count > 0
    ids = np.flatnonzero(has)
    if len(ids) == 0:
        return rep
    # nsys's own nesting (parsers/nvtx_nesting), not the tree the views show: they differ on
    # overlapping, unended, cross-thread and duplicated ranges.
    parent, depth = trace.derived.pop(NESTING, None) or nsys_nesting(trace.ranges)
    child_with_ops = np.bincount(parent[(parent >= 0) & has], minlength=m.n)
    r = trace.ranges
    ranks, by_rank = trace.range_names.sorted_ranks  # grouped and ordered as the names are
    frame = pd.DataFrame({
        "name": ranks[ids], "style": _style(r["pushpop"])[ids],
        "proj": m.proj_ns[ids], "range": m.cpu_ns[ids], "ops": op_nb[ids],
        "level": depth[ids], "child": child_with_ops[ids],
    })
    g = frame.groupby(["name", "style"], sort=True)
    s = _group_stats(frame[["name", "style"]], frame["proj"].to_numpy())
    extra = g.agg(range=("range", "sum"), ops=("ops", "sum"),
                  level=("level", "mean"), child=("child", "mean")).reset_index()
    s = s.merge(extra, on=["name", "style"], how="left", sort=False)
    s = _sort_desc(s, "total")
    stats = _stat_columns(s)
    ops_avg = nsys_round(s["ops"] / s["num"])
    level = nsys_round(s["level"])
    child = nsys_round(s["child"])
    rep.rows = [[by_rank[name], style, int(t), int(rt), int(n), st[0], st[1], st[2], st[3], st[4], int(o), oa, lv, ch]
                for name, style, t, rt, n, st, o, oa, lv, ch in zip(
                    s["name"], s["style"], s["total"], s["range"], s["num"], stats, s["ops"], ops_avg, level, child)]
    return rep


def nvtx_kern_sum(trace: Trace, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    headers = ["NVTX Range", "Style", "PID", "TID", "NVTX Inst", "Kern Inst", "Total Time (ns)", *STAT_HEADERS,
               "Kernel Name"]
    rep = Report("nvtx_kern_sum", "NVTX Range Kernel Summary", headers)
    if not _needs_api(trace, rep) or not trace.schema.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        rep.message = rep.message or "does not contain CUDA kernel data"
        return rep
    m = range_model(trace, attribution, main_thread, inferred=False)  # nsys knows no inferred range
    s, rname_text, kname_text = kernel_groups(trace, m)
    s["_neg_total"] = -s["total"]
    s = s.sort_values(["name", "pid", "tid", "_neg_total"], kind="stable").reset_index(drop=True)
    stats = _stat_columns(s)
    rep.rows = [[None if n < 0 else rname_text[n], None if st_ < 0 else STYLES[st_],
                 None if p < 0 else int(p), None if t < 0 else int(t),
                 int(ni), int(ki), int(tot), *st, kname_text[kn]]
                for n, st_, p, t, ni, ki, tot, st, kn in zip(
                    s["name"], s["style"], s["pid"], s["tid"], s["nvtx_inst"], s["kern_inst"], s["total"], stats,
                    s["kname"])]
    return rep


BUILDERS = {
    "nvtx_sum": nvtx_sum, "nvtx_gpu_proj_sum": nvtx_gpu_proj_sum, "nvtx_kern_sum": nvtx_kern_sum,
    "cuda_gpu_kern_sum": cuda_gpu_kern_sum, "cuda_api_sum": cuda_api_sum,
    "cuda_gpu_mem_time_sum": cuda_gpu_mem_time_sum,
}


MODEL_FREE = ("cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "nvtx_sum")  # no range model


def build_reports(trace: Trace, names: list[str], attribution: str = "nsys",
                  main_thread: str | None = None) -> list[Report]:
    """Several reports, in `names`' order, on two cores: a worker thread builds the range model
    (attribution: the longest step) and then nvtx_kern_sum (the longest report); the caller's
    the reports that need no model and what needs no model of the others (nsys's nesting), then,
    once the model is there, the other reports on it. The same reports as `build_report` one
    by one."""
    for name in names:
        if name not in BUILDERS:
            raise ValueError(f"unknown report {name!r}; choose from {', '.join(REPORTS)}")
    free = [n for n in names if n in MODEL_FREE]
    on_model = [n for n in names if n not in MODEL_FREE]
    if not on_model or cores() < 2 or (not free and len(on_model) < 2):
        return [build_report(trace, n, attribution, main_thread) for n in names]
    last = "nvtx_kern_sum" if "nvtx_kern_sum" in on_model else on_model[-1]
    after_model = [n for n in on_model if n != last]
    model_built = threading.Event()

    def model_then_last() -> list[Report]:
        try:
            range_model(trace, attribution, main_thread, inferred=False)  # the one the NVTX reports use
        finally:
            model_built.set()  # a failed model: the other side builds it again and raises its error
        return [build_report(trace, last, attribution, main_thread)]

    def others() -> list[Report]:
        done = [build_report(trace, n, attribution, main_thread) for n in free]
        if "nvtx_gpu_proj_sum" in after_model:
            trace.derived[NESTING] = nsys_nesting(trace.ranges)
        model_built.wait()
        try:
            return done + [build_report(trace, n, attribution, main_thread) for n in after_model]
        finally:
            trace.derived.pop(NESTING, None)  # taken by nvtx_gpu_proj_sum, unless it had no use for it

    # the model on the worker thread, the waiting on this one: a signal's exception here ends the
    # wait and joins a worker that never waits (the other way round, a SIGHUP that landed before
    # the model's `finally` left the worker waiting for an event nobody would set, and the
    # command hung at exit)
    second, first = in_parallel(model_then_last, others)
    built = dict(zip(free + after_model + [last], first + second))
    return [built[n] for n in names]


NESTING = ("nsys_nesting",)  # trace.derived's key for nsys's nesting computed ahead (build_reports)


def build_report(trace: Trace, name: str, attribution: str = "nsys", main_thread: str | None = None) -> Report:
    if name not in BUILDERS:
        raise ValueError(f"unknown report {name!r}; choose from {', '.join(REPORTS)}")
    return BUILDERS[name](trace, attribution, main_thread)
