"""What each MCP tool answers, as plain JSON-ready data, through the code paths the command
line uses: `report -f json` (parsers.analyses.questions + render.report.public), `stats -f json`
(parsers.nsys.reports + render.nsys.render_json), `diff -f json` (render.diff.as_json), `ranks -f
json` (render.ranks.ranks_json_text), and the RangeModel the TUI's tables are built from. Nothing
is computed differently here: this module picks, pages and converts (numpy scalars to Python
numbers, NaN to null). No MCP SDK here: the server (nsight_tui.mcp.server) wraps these.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsight_tui.mcp.sizing import SIZED
from nsight_tui.parsers.model.attribution import MODE_HELP, MODES
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode, ThreadGroup, range_model
from nsight_tui.parsers.read.conventions import INFERRED_DOMAIN
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import Trace

MAX_LIMIT = 500  # rows a page holds at most; left to the server, as many as fit (sizing.ANSWER_CHARS)
MAX_DEPTH = 16


class BadRequest(TraceError):
    """A request the server cannot answer (unknown range, bad paging): an MCP tool error."""


# -- plain data ---------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """numpy and pandas values to JSON's: ints, floats (NaN/inf -> None), lists, dicts."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    return value


def from_json_text(text: str) -> Any:
    """A document the render layer wrote as JSON text, read back (the same figures, as parsed)."""
    return json.loads(text)


def records(frame: pd.DataFrame, columns: Sequence[str]) -> list[dict]:
    return [plain(dict(zip(columns, row))) for row in frame[list(columns)].itertuples(index=False, name=None)]


# -- paging -------------------------------------------------------------------------------------
def check_mode(attribution: str) -> str:
    if attribution not in MODES:
        raise BadRequest(f"attribution must be one of {', '.join(MODES)}, not {attribution!r}")
    return attribution


def page_bounds(offset: int, limit: int | None) -> tuple[int, int]:
    if offset < 0:
        raise BadRequest(f"offset must be >= 0, not {offset}")
    if limit is not None and limit < 1:
        raise BadRequest(f"limit must be >= 1, not {limit}")
    return offset, MAX_LIMIT if limit is None else min(limit, MAX_LIMIT)


def page(rows: Sequence, offset: int, limit: int | None, moves_on: str = "offset") -> dict:
    """rows[offset:offset+limit] with the paging fields every paged answer carries, marked SIZED: the
    server keeps the rows that fit in the answer (limit None: at most MAX_LIMIT) and says where the
    rest begin (`moves_on`: the tool's argument for it)."""
    offset, at_most = page_bounds(offset, limit)
    chunk = list(rows[offset:offset + at_most])
    end = offset + len(chunk)
    out = {"total": len(rows), "offset": offset, "limit": None if limit is None else at_most, "returned": len(chunk),
           "next_offset": end if end < len(rows) else None, "rows": chunk, SIZED: moves_on}
    return out


def page_frame(frame: pd.DataFrame, columns: Sequence[str], offset: int, limit: int | None,
               names: dict[str, str] | None = None, moves_on: str = "offset") -> dict:
    """`page` over a frame's rows, converting only the rows returned (a kernel launched 10^6 times);
    `names` renames columns in the rows (the frame's name -> the answer's)."""
    offset, at_most = page_bounds(offset, limit)
    chunk = frame.iloc[offset:offset + at_most]
    out = page(range(len(frame)), offset, limit, moves_on)
    rows = records(chunk, columns) if len(chunk) else []
    if names:
        rows = [{names.get(k, k): v for k, v in r.items()} for r in rows]
    out["rows"] = rows
    return out


# -- the trace and its model -------------------------------------------------------------------
def summary(trace: Trace, attribution: str, name: str) -> dict:
    """The header of the TUI and `report`: what the file is, the attribution, the main thread."""
    from nsight_tui.parsers.model import main_thread as main_threads
    from nsight_tui.render.process_view import main_thread_line

    i = trace.info
    model = range_model(trace, attribution)
    out = {
        "file": name, "export_kind": i.export_kind, "nsys_version": i.nsys_version, "gpus": list(i.gpus),
        "span_ns": i.span_ns, "start_ns": _trace_start(trace),
        "counts": {"kernels": i.kernels, "memcpys": i.memcpys, "memsets": i.memsets, "api_calls": i.api_calls,
                   "nvtx_ranges": i.ranges, "processes": i.processes},
        "attribution": attribution, "attribution_help": MODE_HELP[attribution],
        "other_attribution": {m: MODE_HELP[m] for m in MODES if m != attribution},
        "main_threads": main_threads.as_json(trace, model.main_info),
        "main_thread": main_thread_line(trace, model) if i.has_nvtx else None,
        "config": dict(trace.meta().config),
        "notes": list(i.notes),
    }
    return plain(out)


def _trace_start(trace: Trace) -> int | None:
    starts = [int(f["start"].min()) for f in (trace.ops, trace.api, trace.ranges) if len(f)]
    return min(starts) if starts else None


def groups(model: RangeModel) -> list[ThreadGroup]:
    return model.aggregated_groups


def node_path(node: RangeNode) -> str:
    return "/".join(node.path)


def _walk(nodes: list[RangeNode], depth: int) -> Iterator[RangeNode]:
    """`nodes` and their descendants, depth first, `depth` levels in all."""
    stack = [(n, 1) for n in reversed(nodes)]
    while stack:
        node, level = stack.pop()
        yield node
        if level < depth:
            stack.extend((c, level + 1) for c in reversed(node.children))


INFERRED = f"{INFERRED_DOMAIN}:"  # the tag of the ranges inferred from an unannotated capture's kernels


def find_range(model: RangeModel, path: str) -> tuple[ThreadGroup, RangeNode]:
    """The aggregated node at a name path (`step_N/backward`), main threads' trees first. On an
    unannotated capture the same path finds the inferred ranges (`inferred:step_N/inferred:backward`):
    a part matches a range's own name first, else the inferred range of that name."""
    want = [p for p in path.strip().strip("/").split("/") if p]
    if not want:
        raise BadRequest("name a range path, e.g. step_N/backward (range_tree lists them)")
    ordered = sorted(groups(model), key=lambda g: not g.is_main)
    for g in ordered:
        level, found = g.roots, None
        for name in want:
            found = _child(level, name) or _child(level, INFERRED + name)
            if found is None:
                break
            level = found.children
        if found is not None:
            return g, found
    raise BadRequest(f"no range at path {path!r} (range_tree lists the paths)")


def _child(level: list[RangeNode], name: str) -> RangeNode | None:
    return next((n for n in level if n.label == name or n.key == name or n.name == name), None)


def node_row(node: RangeNode, group: ThreadGroup) -> dict:
    """One row of the TUI's range tree: the figures its columns show, exact."""
    return plain({
        "path": node_path(node), "name": node.label, "depth": node.depth, "thread": group.label,
        "main_thread": group.is_main, "instances": node.instances, "cpu_ns": node.cpu_ns,
        "busy_ns": node.busy_ns, "kernel_ns": node.kernel_ns, "op_ns": node.op_ns, "proj_ns": node.proj_ns,
        "kernels": node.kernels, "ops": node.ops, "share_of_parent": node.share_of_parent(),
        "children": len(node.children),
    })


def range_tree(model: RangeModel, under: str | None, depth: int, offset: int, limit: int | None) -> dict:
    if not 1 <= depth <= MAX_DEPTH:
        raise BadRequest(f"depth must be 1..{MAX_DEPTH}, not {depth}")
    if under:
        g, node = find_range(model, under)
        rows = [node_row(n, g) for n in _walk([node], depth + 1)]
    else:
        rows = [node_row(n, g) for g in groups(model) for n in _walk(g.roots, depth) if g.roots]
    out = page(rows, offset, limit)
    out.update(attribution=model.mode, attribution_help=MODE_HELP[model.mode], depth=depth, under=under,
               aggregated="instances merged by name path (step_3 and step_4 are step_N); figures are sums over them",
               units="ns; share_of_parent = GPU busy / the parent's GPU busy")
    return out


# One row per kernel name: `name` is the full name as the export holds it (what kernel_launches
# takes), `label` a readable one; nsys's short name is left out (a fragment, or the name again).
KERNEL_COLUMNS = ("name", "label", "family", "kind", "instances", "total_ns", "avg_ns", "med_ns", "min_ns",
                  "max_ns", "share")


def range_kernels(model: RangeModel, path: str | None, offset: int, limit: int | None) -> dict:
    """`enter` on a range in the TUI: one row per kernel name, most GPU time first, and its ratios."""
    from nsight_tui.parsers.analyses.ratios import family_shares, ratio_panel
    from nsight_tui.parsers.kernels import families
    from nsight_tui.parsers.kernels.kernel_names import table_name

    if path:
        g, node = find_range(model, path)
        positions = node.op_positions()
        scope = node_path(node)
        ratios = [plain({"label": r.label, "value": r.value, "unit": r.unit, "basis": r.basis})
                  for r in ratio_panel(model, node)]
        head = node_row(node, g)
    else:
        positions = model.scope_op_positions()
        scope, head = "the whole trace", None
        ratios = [plain({"label": f"{r.label} share", "value": r.share, "unit": "fraction",
                         "basis": "GPU op time in the whole trace"})
                  for r in family_shares(model, positions).itertuples() if r.total_ns]
    summary_frame = model.kernel_summary(positions)
    summary_frame["family"] = [families.classify(n) for n in summary_frame["name"]]
    summary_frame["label"] = [table_name(n) for n in summary_frame["name"]]  # as report's top_kernels "short"
    out = page_frame(summary_frame, KERNEL_COLUMNS, offset, limit)
    out.update(scope=scope, range=head, ratios=ratios, attribution=model.mode,
               share_basis="share = this kernel's total / all GPU op time (kernels, memcpy, memset) in scope")
    return out


LAUNCH_COLUMNS = ("op", "start", "duration", "corr", "api_name", "api_start", "overhead_ns", "queue_ns",
                  "thread", "tid", "device", "stream")
# the model's column names -> the answers' (every time in ns says so; one spelling of the correlation ID)
FIELD_NAMES = {"start": "start_ns", "duration": "duration_ns", "corr": "corr_id", "api_start": "api_start_ns",
               "lead": "lead_ns"}


def kernel_launches(model: RangeModel, kernel: str, path: str | None, offset: int, limit: int | None) -> dict:
    """`enter` on a kernel: its launches in time order, each with the call that launched it."""
    trace = model.trace
    if kernel not in trace.op_names:  # nsys's short name, or the readable label range_kernels gives
        from nsight_tui.parsers.kernels.kernel_names import table_name

        short = [n for n, s in zip(trace.op_names, trace.op_short) if s == kernel or table_name(n) == kernel]
        if len(set(short)) != 1:
            raise BadRequest(f"no GPU operation named {kernel!r} (range_kernels lists the names)")
        kernel = short[0]
    positions = find_range(model, path)[1].op_positions() if path else model.scope_op_positions()
    frame = model.launches(positions, kernel).rename(columns={"latency": "queue_ns"})
    call = trace.ops["api"].to_numpy()[frame["op"].to_numpy()]
    has = call >= 0
    if len(trace.api):  # the launch overhead: the launching call's own duration (tui.viewmodels.launches)
        ends = trace.api["end"].to_numpy()[np.where(has, call, 0)]
        frame["overhead_ns"] = np.where(has, ends - frame["api_start"].to_numpy(), np.nan)
    else:
        frame["overhead_ns"] = np.nan
    frame["queue_ns"] = frame["queue_ns"].where(has)
    rows = page_frame(frame, LAUNCH_COLUMNS, offset, limit, FIELD_NAMES)
    if rows["rows"]:  # grid and block are read from the file for the rows returned only
        details = trace.op_details(np.array([r["op"] for r in rows["rows"]], dtype=np.int64))
        for r in rows["rows"]:
            if r["op"] in details.index:
                r["grid"], r["block"] = plain(details.at[r["op"], "grid"]), plain(details.at[r["op"], "block"])
    durations = frame["duration"].to_numpy()
    rows.update(kernel=kernel, scope=path or "the whole trace", attribution=model.mode,
                total_ns=int(durations.sum()) if len(durations) else 0,
                columns_help={"start_ns": "on the capture's clock", "overhead_ns": "launch overhead: the API call's "
                              "duration", "queue_ns": "queue delay / CPU lead: kernel start - call start",
                              "op": "position of the op in the model (correlation takes corr_id)"})
    return rows


def correlation(model: RangeModel, corr: int, pid: int | None) -> dict:
    from nsight_tui.parsers.analyses.call_time import of_correlation
    from nsight_tui.parsers.read.ids import OP_KINDS

    gpid = None
    if pid is not None:
        gpid = next((g for g, (p, _) in model.trace.processes.items() if p == pid), None)
        if gpid is None:
            raise BadRequest(f"no process {pid} in this trace")
    c = model.correlation(corr, gpid)
    if c is None:
        raise BadRequest(f"no CUDA API call with correlation ID {corr} in this trace")
    ops = c.ops.copy()
    ops["kind"] = [OP_KINDS[int(k)] for k in ops["kind"]]
    first = int(ops["start"].min()) if len(ops) else None
    timing = of_correlation(c)
    return plain({
        "corr_id": corr, "api_call": c.api_name, "thread": c.thread, "process": c.process, "pid": c.pid, "tid": c.tid,
        "api_start_ns": c.api_start, "api_end_ns": c.api_end, "call_ns": timing.duration_ns,
        "call_is": timing.label, "launch_overhead_ns": timing.launch_overhead_ns,
        "queue_delay_ns": None if first is None else first - c.api_start,
        "ops": [{FIELD_NAMES.get(k, k): v for k, v in r.items()}
                for r in records(ops, ("name", "kind", "start", "duration", "device", "stream"))],
        "nvtx_on_its_thread": c.own_stack, "main_thread": c.main_thread or None,
        "nvtx_on_main_thread": c.main_stack, "attributed_to": c.attributed, "attribution": model.mode,
        "attribution_help": MODE_HELP[model.mode],
    })


def idle_window(model: RangeModel, start_ns: int | None, end_ns: int | None, path: str | None, top_gaps: int,
                items_offset: int, items_limit: int) -> dict:
    """GPU busy / launch-, sync-, host-bound idle in a window (the timeline's status line and `e`),
    or over a range's instances (the report's gpu_idle for a phase)."""
    from nsight_tui.parsers.analyses.idle import DEFINITIONS, idle_analysis
    from nsight_tui.render.idle import window_json

    idle = idle_analysis(model.trace)
    if not 0 <= top_gaps <= 50:
        raise BadRequest(f"top_gaps must be 0..50, not {top_gaps}")
    if path:
        if start_ns is not None or end_ns is not None:
            raise BadRequest("give either a range path or start_ns/end_ns, not both")
        _, node = find_range(model, path)
        from nsight_tui.parsers.analyses.idle_report import range_idle

        result = window_json(range_idle(model, node.ids, top_gaps))
        t0, t1 = node.start, node.end
        what = (f"the {node.instances} instance(s) of {node_path(node)}, summed: an iteration's window is its "
                "period (its start to the next's), any other range's its NVTX span")
    else:
        if start_ns is None or end_ns is None or end_ns <= start_ns:
            raise BadRequest("give start_ns < end_ns (on the capture's clock, see summary's start_ns/span_ns), "
                             "or a range path")
        t0, t1 = int(start_ns), int(end_ns)
        result = window_json(idle.window(t0, t1, None, top_gaps))
        what = f"[{t0}, {t1}) ns on the capture's clock"
    out: dict = {"window": what, "start_ns": t0, "end_ns": t1, "attribution": model.mode, **plain(result),
                 "definitions": DEFINITIONS}
    if items_limit:
        from nsight_tui.parsers.analyses.timeline import timeline

        table = timeline(model.trace, model, idle).window_table(t0, t1)
        out["items"] = page_frame(table, ("lane", "kind", "name", "start", "duration", "corr", "lead"),
                                  items_offset, items_limit, FIELD_NAMES, "items_offset")
        out["items_help"] = ("every NVTX range, CUDA API call and GPU op overlapping the window (for a range: from "
                             "its first instance's start to its last's end), by lane then start; lead_ns = kernel "
                             "start - its launching call's start (ns)")
    return out


def nsys_report(trace: Trace, name: str, attribution: str, offset: int, limit: int | None) -> dict:
    from nsight_tui.parsers.nsys.reports import REPORTS, build_report
    from nsight_tui.render.nsys import render_json

    if name not in REPORTS:
        raise BadRequest(f"unknown report {name!r}; choose from {', '.join(REPORTS)}")
    doc = from_json_text(render_json(build_report(trace, name, attribution), attribution))
    rows = doc.pop("rows")
    return {**doc, **page(rows, offset, limit)}


def trim(values: list, limit: int) -> tuple[list, int]:
    return values[:limit], max(len(values) - limit, 0)
