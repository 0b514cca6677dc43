"""The timeline view's state and what one screen of it shows, without Textual: the visible
window, the cursor (the centre column) and the selected lane; `frame()` turns that into
plain data (cells per lane, axis ticks, the item under the cursor, the window's idle split)
that the screen only draws. Every change is arithmetic on (t0, t1); `frame()` costs a few
binary searches per lane and category (parsers/analyses/timeline.py), whatever the trace size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.analyses.idle import Gap, IdleSplit, WindowIdle
from nsight_tui.parsers.model.steps import gpu_lags
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode, display_name
from nsight_tui.parsers.analyses.timeline import Cells, Item, Lane, Timeline, cell_edges
from nsight_tui.render.safe import visible

TITLE_WIDTH = 13  # lane titles, then one column of space
MIN_SPAN_NS = 200  # zooming in stops here (a few ns per cell)
ZOOM = 2.0
GAP_MIN_NS = 10_000  # `[`/`]` skip gaps shorter than this (or than two cells, when zoomed out)


@dataclass(frozen=True)
class TimelineTarget:
    """Where the view opens: what `0` fits, where it starts centred, which lane is selected."""

    title: str
    fit: tuple[int, int]
    start: tuple[int, int] | None = None  # the first window (default: fit)
    lane_key: str | None = None
    op: int | None = None  # a GPU op to put the cursor on
    origin: int | None = None  # time 0 of the axis (default: the start of `fit`)


@dataclass(frozen=True)
class LaneRow:
    index: int
    lane: Lane
    cells: Cells
    labels: list[tuple[int, int, str]]  # NVTX names inside their bars: (first cell, end cell, text)
    height: int = 1  # screen rows (spare rows go to GPU lanes: taller bars, finer fullness)


@dataclass(frozen=True)
class TimelineFrame:
    t0: int
    t1: int
    n: int
    origin: int
    rows: list[LaneRow]
    lane_count: int
    selected: int
    ticks: list[tuple[int, str]]  # (cell, label)
    cursor_ns: int
    item: Item | None
    launch_mark: tuple[int, int] | None  # (lane index, cell) of the kernel's launching call, if on screen
    splits: list[IdleSplit]  # per GPU, the visible window's busy / launch / sync / host
    legend: list[tuple[str, str]] = field(default_factory=list)  # (lane kind, category) visible
    selected_pos: int = 0  # the selected lane's place among the lanes shown
    hidden: int = 0  # lanes left out: nothing on them in the window
    gap: Gap | None = None  # the idle lane's item: the whole GPU gap it is part of (its threads not read)


class TimelineState:
    """Window, cursor lane and lane scroll; mutated by the keys, read by `frame()`."""

    def __init__(self, timeline: Timeline, target: TimelineTarget):
        self.timeline = timeline
        self.target = target
        self.fit_window = _valid(target.fit, timeline)
        self.origin = target.origin if target.origin is not None else self.fit_window[0]
        self.t0, self.t1 = _valid(target.start or target.fit, timeline)
        self.n = 60
        self.top = 0
        self.selected = 0
        if target.lane_key is not None:
            i = timeline.lane_index(target.lane_key)
            if i is not None:
                self.selected = i
        elif timeline.lanes:
            self.selected = next((i for i, lane in enumerate(timeline.lanes) if lane.kind == "gpu"), 0)

    # -- geometry -----------------------------------------------------------------------------
    @property
    def span(self) -> int:
        return self.t1 - self.t0

    @property
    def cursor_cell(self) -> int:
        return self.n // 2

    def cell_bounds(self, cell: int) -> tuple[int, int]:
        edges = cell_edges(self.t0, self.t1, self.n)
        return int(edges[cell]), int(edges[cell + 1])

    @property
    def cursor_ns(self) -> int:
        a, b = self.cell_bounds(self.cursor_cell)
        return (a + b) // 2

    def set_cells(self, n: int) -> None:
        self.n = max(8, int(n))

    def shown_lanes(self) -> list[int]:
        """The lanes with something in the window (and the selected one): an empty lane takes
        no row (the DDP sample's 22 lanes at 80×24 left 13 rows for whatever was in view)."""
        return [i for i, lane in enumerate(self.timeline.lanes)
                if i == self.selected or has_items(lane, self.t0, self.t1)]

    def fit_lanes(self, visible: int, shown: list[int] | None = None) -> None:
        """Scroll the shown lanes so the selected lane is among `visible` rows."""
        visible = max(1, visible)
        shown = self.shown_lanes() if shown is None else shown
        pos = shown.index(self.selected) if self.selected in shown else 0
        if pos < self.top:
            self.top = pos
        elif pos >= self.top + visible:
            self.top = pos - visible + 1
        self.top = max(0, min(self.top, max(0, len(shown) - visible)))

    # -- moves ----------------------------------------------------------------------------------
    def _centre_on(self, centre: int, span: float) -> None:
        span = max(MIN_SPAN_NS, int(span))
        self.t0 = int(centre) - span // 2
        self.t1 = self.t0 + span

    def zoom(self, factor: float) -> None:
        """factor > 1 zooms in, around the cursor."""
        self._centre_on(self.cursor_ns, self.span / factor)

    def pan(self, cells: float) -> None:
        step = round(self.span * cells / self.n)
        if step == 0:
            step = 1 if cells > 0 else -1
        self.t0 += step
        self.t1 += step

    def fit(self) -> None:
        self.t0, self.t1 = self.fit_window

    def whole(self) -> None:
        """The whole capture: its first event to its last, on every lane."""
        self.t0, self.t1 = _valid((self.timeline.t_min, self.timeline.t_max), self.timeline)

    def move_lane(self, delta: int) -> None:
        """To the next/previous lane shown (empty lanes in the window are skipped)."""
        if self.timeline.lanes:
            shown = self.shown_lanes()
            pos = shown.index(self.selected) if self.selected in shown else 0
            self.selected = shown[max(0, min(len(shown) - 1, pos + delta))]

    def gap_device(self) -> int | None:
        lane = self.timeline.lanes[self.selected] if self.timeline.lanes else None
        if lane is not None and lane.device >= 0:
            return lane.device
        return self.timeline.idle.devices[0] if self.timeline.idle.devices else None

    def gap_at(self, device: int, t: int) -> Gap | None:
        """The GPU gap (maximal idle stretch between busy blocks) holding time `t`, or None
        when the GPU is busy then."""
        tl = self.timeline
        busy = tl.idle.device(device).busy
        if busy.contains(t):
            return None
        k = int(np.searchsorted(busy.end, t, side="right"))  # busy blocks over by t
        gs = int(busy.end[k - 1]) if k > 0 else tl.t_min
        ge = int(busy.start[k]) if k < len(busy) else tl.t_max
        _, launch, sync, host = (int(x) for x in tl.idle.device(device).split(gs, ge))
        return Gap(device, gs, ge, launch, sync, host)

    def gap_threshold(self) -> int:
        return max(GAP_MIN_NS, 2 * self.span // self.n)

    def to_gap(self, forward: bool) -> tuple[int, int] | None:
        """Centre the next GPU gap (starting after the cursor; backward: ending before it) of at
        least gap_threshold() on the selected lane's GPU; None if there is none."""
        device = self.gap_device()
        if device is None:
            return None
        gap = self.timeline.next_gap(device, self.cursor_ns, self.gap_threshold(), forward)
        if gap is None:
            return None
        gs, ge = gap
        self._centre_on((gs + ge) // 2, max(self.span, (ge - gs) * 3 // 2))
        return gap

    def centre_op(self, op: int) -> None:
        t = self.timeline.trace.ops
        start, end = int(t["start"].iat[op]), int(t["end"].iat[op])
        self._centre_on((start + end) // 2, self.span)
        where = self.timeline.op_lane(op)
        if where is not None:
            self.selected = where[0]

    # -- what the screen shows ----------------------------------------------------------------
    def frame(self, visible_lanes: int) -> TimelineFrame:
        """What `visible_lanes` screen rows of lanes show (spare rows make GPU lanes taller)."""
        tl = self.timeline
        shown = self.shown_lanes()
        self.fit_lanes(visible_lanes, shown)
        chosen = shown[self.top:self.top + max(1, visible_lanes)]
        heights = lane_heights([tl.lanes[i].kind for i in chosen], visible_lanes)
        rows: list[LaneRow] = []
        legend: dict[tuple[str, str], None] = {}
        for i in chosen:
            lane = tl.lanes[i]
            cells = lane.cells(self.t0, self.t1, self.n)
            labels = self._labels(lane) if lane.kind == "nvtx" else []
            rows.append(LaneRow(i, lane, cells, labels, heights[len(rows)]))
            if lane.kind != "nvtx":
                for c in np.unique(cells.dominant[cells.dominant >= 0]).tolist():
                    legend[(lane.kind, lane.categories[c])] = None
        a, b = self.cell_bounds(self.cursor_cell)
        item = tl.item(self.selected, a, b) if tl.lanes else None
        gap = None
        if item is not None and item.lane.kind == "idle":
            gap = self.gap_at(item.lane.device, max(item.start_ns, min(item.end_ns - 1, self.cursor_ns)))
        return TimelineFrame(
            t0=self.t0, t1=self.t1, n=self.n, origin=self.origin, rows=rows, lane_count=len(shown),
            selected=self.selected, ticks=axis_ticks(self.t0, self.t1, self.n, self.origin),
            cursor_ns=self.cursor_ns, item=item, launch_mark=self._launch_mark(item, chosen),
            splits=self.splits(), legend=list(legend),
            selected_pos=shown.index(self.selected) if self.selected in shown else 0,
            hidden=len(tl.lanes) - len(shown), gap=gap,
        )

    def splits(self) -> list[IdleSplit]:
        """The window's idle split per GPU: a few binary searches (the frame shows it at once)."""
        out = []
        for d in self.timeline.idle.devices:
            parts = (int(x) for x in self.timeline.idle.device(d).split(self.t0, self.t1))
            out.append(IdleSplit(d, self.span, *parts))
        return out

    def summary(self) -> WindowIdle:
        """The window's CPU lead and queue depth too (a selection over every kernel in view:
        the screen asks for it after the frame, so it never delays a key)."""
        return self.timeline.idle.window(self.t0, self.t1, top_gaps=0)

    def _labels(self, lane: Lane) -> list[tuple[int, int, str]]:
        names = self.timeline.range_names
        out = []
        for c0, c1, i in lane.spans(self.t0, self.t1, self.n, min_cells=4):
            label = fit_label(visible(display_name(names[int(lane.ref[i])])), c1 - c0)
            if label:
                out.append((c0, c1, label))
        return out

    def _launch_mark(self, item: Item | None, chosen: list[int]) -> tuple[int, int] | None:
        if item is None or item.call_ref is None:
            return None
        where = self.timeline.api_lane(item.call_ref)
        if where is None or where[0] not in chosen:
            return None
        start = int(self.timeline.trace.api["start"].iat[item.call_ref])
        if not self.t0 <= start < self.t1:
            return None
        return where[0], int((start - self.t0) * self.n // self.span)


def has_items(lane, t0: int, t1: int) -> bool:
    """Whether anything on `lane` overlaps [t0, t1): two binary searches (the first item whose
    running end passes t0 ends after t0; it overlaps when it starts before t1)."""
    if not len(lane):
        return False
    lo = int(np.searchsorted(lane._run_end, t0, side="right"))
    return lo < len(lane) and int(lane.start[lo]) < t1


def fit_label(name: str, cells: int) -> str:
    """A range's name inside its bar of `cells` cells, a bar cell kept at each end so two
    names never run together (`optforward`): whole, else cut with `…` (4 cells or more), else none."""
    room = cells - 2
    if len(name) <= room:
        return name
    return name[: room - 1] + "…" if room >= 4 else ""


def lane_heights(kinds: list[str], rows: int) -> list[int]:
    """One row per lane; rows left over go to GPU lanes (up to 4 rows), then the idle lanes
    (up to 3) and the API lanes (up to 2), top to bottom."""
    heights = [1] * len(kinds)
    spare = rows - len(kinds)
    for kind, most in (("gpu", 2), ("gpu", 3), ("idle", 2), ("api", 2), ("gpu", 4), ("idle", 3), ("memory", 2)):
        for i, k in enumerate(kinds):
            if spare > 0 and k == kind and heights[i] < most:
                heights[i] += 1
                spare -= 1
    return heights


# -- axis ---------------------------------------------------------------------------------------
UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def nice_step(raw: float) -> int:
    """The 1/2/5 x 10^k ns step at or above `raw`."""
    raw = max(1.0, raw)
    exp = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * exp >= raw:
            return int(m * exp)
    return int(10 * exp)


def unit_for(step: int) -> tuple[int, str]:
    return next(((div, name) for div, name in UNITS if step >= div), UNITS[-1])


def time_label(ns: int, step: int) -> str:
    """A time relative to the origin in the unit its tick step calls for (12.5ms, -200µs)."""
    div, name = unit_for(step)
    value = ns / div
    digits = 0 if step % div == 0 else max(0, -math.floor(math.log10(step / div)))
    return f"{value:.{digits}f}{name}"


def axis_ticks(t0: int, t1: int, n: int, origin: int, every: int = 12) -> list[tuple[int, str]]:
    """Ticks at round times (relative to `origin`) about `every` cells apart."""
    span = max(1, t1 - t0)
    step = nice_step(span * every / n)
    first = math.ceil((t0 - origin) / step) * step + origin
    out = []
    t = first
    while t < t1:
        cell = int((t - t0) * n // span)
        out.append((cell, time_label(t - origin, step)))
        t += step
    return out


# -- where the view opens ----------------------------------------------------------------------
def _valid(window: tuple[int, int], timeline: Timeline) -> tuple[int, int]:
    a, b = int(window[0]), int(window[1])
    if b - a < MIN_SPAN_NS:
        mid = (a + b) // 2
        a, b = mid - MIN_SPAN_NS // 2, mid + MIN_SPAN_NS // 2
    return a, b


def median_instance(model: RangeModel, ids: np.ndarray) -> int:
    """The instance with the median CPU time (the lower of the middle two)."""
    ids = np.asarray(ids, dtype=np.int64)
    order = ids[np.lexsort((model.r_start[ids], model.cpu_ns[ids]))]
    return int(order[(len(order) - 1) // 2])


def target_for_node(model: RangeModel, node: RangeNode) -> TimelineTarget:
    rid = median_instance(model, node.ids) if node.instances > 1 else int(node.ids[0])
    a, b = int(model.r_start[rid]), int(model.r_end[rid])
    which = f" (median of {node.instances} by CPU time)" if node.instances > 1 else ""
    name = display_name(model.trace.range_names.objects[rid])
    proj, gpu_end = int(model.proj_ns[rid]), int(model.gpu_end[rid])
    # The GPU runs behind the CPU: its work on the range spans longer than the CPU span, or ends
    # well after it (a short phase queued behind earlier work: an unsynchronised run's optimizer
    # runs ~100 ms after its CPU span). The window is the range's CPU span through the end of its
    # GPU work (from its start, so its launches stay in view), not only when the CPU issued it.
    if gpu_lags(proj, b - a) or (proj > 0 and gpu_lags(gpu_end - a, b - a)):
        return TimelineTarget(f"{name}{which}, through its GPU work (the GPU runs behind)",
                              (a, max(b, gpu_end)), origin=a)
    # exactly the range: at `0` the idle line is that instance's split, as `report` counts it
    return TimelineTarget(f"{name}{which}", (a, b), origin=a)


def target_for_trace(timeline: Timeline) -> TimelineTarget:
    return TimelineTarget("the whole trace", (timeline.t_min, timeline.t_max), origin=timeline.t_min)


def target_for_op(timeline: Timeline, op: int, model: RangeModel, node: RangeNode | None = None) -> TimelineTarget:
    """Centred on the op, at a zoom that shows its neighbours; `0` fits the instance of
    `node` it belongs to (else the innermost range open on the main thread at its launch)."""
    ops = timeline.trace.ops
    start, end = int(ops["start"].iat[op]), int(ops["end"].iat[op])
    call = int(ops["api"].iat[op])
    when = int(timeline.trace.api["start"].iat[call]) if call >= 0 else start
    span = max(40 * (end - start), 200_000, 3 * abs(start - when))
    centre = (start + end) // 2
    fit, origin = None, None
    if node is not None:
        ids = np.asarray(node.ids, dtype=np.int64)
        inside = ids[(model.r_start[ids] <= when) & (model.r_end[ids] >= when)]
        if len(inside):
            rid = int(inside[0])
            origin = int(model.r_start[rid])
            fit = (origin, int(model.r_end[rid]))
    if fit is None:
        fit = (centre - span // 2, centre - span // 2 + span)
        origin = start
    where = timeline.op_lane(op)
    lane_key = timeline.lanes[where[0]].key if where else None
    corr = int(ops["corr"].iat[op])
    return TimelineTarget(f"launch corr {corr}", fit, (centre - span // 2, centre - span // 2 + span), lane_key, op,
                          origin)


# -- a GPU gap in full (enter on the idle lane) ----------------------------------------------------
def gap_detail(gap, origin: int) -> tuple[str, list[str]]:
    """A gap's title and its lines: when, how long, the split by cause, then per CPU thread the
    CUDA calls overlapping it (every call name, count and time inside the gap), the NVTX ranges
    open when it began and those that began during it. Plain text (the view shows it literally)."""
    from nsight_tui.render.safe import visible
    from nsight_tui.render import numbers

    title = (f"GPU{gap.device} idle {numbers.duration(gap.duration_ns)} at {_signed(gap.start_ns - origin)}"
             f" ({gap.cause} mostly)")
    span = max(1, gap.duration_ns)
    lines = [f"from {_signed(gap.start_ns - origin)} to {_signed(gap.end_ns - origin)}: "
             f"{numbers.duration(gap.duration_ns)} with no kernel or copy on GPU{gap.device}",
             "by cause: " + " · ".join(f"{name} {numbers.duration(ns)} ({ns / span:.0%})" for name, ns in (
                 ("launch-bound", gap.launch_bound_ns), ("sync-bound", gap.sync_bound_ns),
                 ("host-bound", gap.host_bound_ns)))]
    for a in gap.threads:
        lines.append("")
        lines.append(f"{visible(a.thread)}:")
        if a.api_calls:
            for name, count, ns in a.api_calls:
                lines.append(f"  {visible(name)} ×{count}: {numbers.duration(ns)} of the gap inside the call{'s' if count > 1 else ''}")
        else:
            lines.append("  no CUDA call during the gap (Python / host work)")
        if a.nvtx_open:
            lines.append("  inside: " + " / ".join(visible(n) for n in a.nvtx_open))
        if a.nvtx_started:
            lines.append("  began during it: " + ", ".join(visible(n) for n in a.nvtx_started))
    if not gap.threads:
        lines += ["", "no CPU thread of the process had a CUDA call or an open range during the gap"]
    return title, lines


def _signed(ns: int) -> str:
    from nsight_tui.render import numbers

    return ("+" if ns >= 0 else "−") + numbers.duration(abs(ns))
