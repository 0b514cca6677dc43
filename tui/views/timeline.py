"""`t`: the timeline. Lanes (NVTX levels of the main thread, CUDA API calls per launching
thread, GPU ops per device and stream, GPU idle by cause), one character cell per time
bucket coloured by what dominated it, a cursor in the centre column with the item under it,
and the window's GPU idle split.

The screen only draws: building the lanes and each frame (parsers/timeline.py through
tui/timeline_state.py) runs in thread workers that post typed messages back.
"""
from __future__ import annotations

import copy
import math

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from nsight_tui.parsers.families import FAMILIES
from nsight_tui.parsers.idle import idle_analysis
from nsight_tui.parsers.timeline import IDLE, NVTX, Timeline, timeline
from nsight_tui.render.idle import window_markdown
from nsight_tui.tui import fmt
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.timeline_state import (TITLE_WIDTH, ZOOM, TimelineFrame, TimelineState, TimelineTarget,
                                           target_for_trace)
from nsight_tui.tui.views.base import ViewScreen

BLOCKS = " ▁▂▃▄▅▆▇█"
COLOURS = {
    ("gpu", "gemm"): "#4e79a7", ("gpu", "attention"): "#f28e2b", ("gpu", "softmax"): "#e15759",
    ("gpu", "elementwise"): "#76b7b2", ("gpu", "reduction"): "#59a14f", ("gpu", "normalization"): "#edc948",
    ("gpu", "optimizer"): "#b07aa1", ("gpu", "memory"): "#ff9da7", ("gpu", "communication"): "#9c755f",
    ("gpu", "other"): "#bab0ac", ("gpu", "memcpy"): "#17becf", ("gpu", "memset"): "#bcbd22",
    ("api", "launch"): "#2ca02c", ("api", "sync"): "#d62728", ("api", "other"): "#8c8c8c",
    ("idle", "launch-bound"): "#e6c229", ("idle", "sync-bound"): "#d62728", ("idle", "host-bound"): "#6f8fd8",
}
NVTX_COLOURS = ("#5b8def", "#e0915a", "#6cc08b", "#c27bd1", "#d6c25a", "#5ac6d6", "#d65a7e", "#9aa0a6")
FAMILY_LABEL = {f.key: f.label.split(" (")[0] for f in FAMILIES}
CURSOR_BG = "#3a3a3a"


def colour(kind: str, category: str, code: int) -> str:
    if kind == NVTX:
        return NVTX_COLOURS[code % len(NVTX_COLOURS)]
    return COLOURS.get((kind, category), "#bab0ac")


class TimelineCanvas(Widget):
    """Axis, lanes and legend of one TimelineFrame; nothing computed here but characters."""

    DEFAULT_CSS = """
    TimelineCanvas {
        height: 1fr;
        min-height: 4;
    }
    """
    can_focus = True  # keeps keys away from the (hidden) search prompt

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.frame: TimelineFrame | None = None

    class Resized(Message):
        """The canvas changed size: the screen asks for a frame that fits."""

    def on_resize(self) -> None:
        self.post_message(self.Resized())

    def show(self, frame: TimelineFrame) -> None:
        self.frame = frame
        self.refresh()

    def render(self) -> Text:
        f = self.frame
        if f is None:
            return Text("building the timeline…", style="italic")
        lines = [self._axis(f)]
        lines += [self._lane(f, row) for row in f.rows]
        lines.append(self._legend(f))
        return Text("\n").join(lines)

    def _axis(self, f: TimelineFrame) -> Text:
        cells = [" "] * f.n
        for cell, label in f.ticks:
            if 0 <= cell < f.n and all(c == " " for c in cells[cell:cell + len(label) + 2]):
                cells[cell] = "╷"
                for k, ch in enumerate(label[: f.n - cell - 1]):
                    cells[cell + 1 + k] = ch
        cells[f.n // 2] = "▼"
        head = Text(f"{'lanes ' + str(f.selected + 1) + '/' + str(f.lane_count):<{TITLE_WIDTH}}", style="dim")
        return head + Text("".join(cells), style="dim")

    def _lane(self, f: TimelineFrame, row) -> Text:
        """A lane of `row.height` screen rows: bars of block characters whose height is the
        cell's covered fraction (eighths of a row per row), coloured by the dominant item."""
        lane, h = row.lane, row.height
        selected = row.index == f.selected
        dom, full = row.cells.dominant, row.cells.fullness
        labels = {}
        for c0, c1, label in row.labels:
            for k, ch in enumerate(label[: max(0, c1 - c0 - 1)]):
                labels[c0 + 1 + k] = ch
        mark = f.launch_mark[1] if f.launch_mark and f.launch_mark[0] == row.index else None
        title_style = "reverse bold" if selected else "bold" if lane.kind == "gpu" else ""
        lines = []
        for level in range(h - 1, -1, -1):  # top screen row first
            title = lane.title[: TITLE_WIDTH - 1] if level == h - 1 else ""
            text = Text(title.ljust(TITLE_WIDTH - 1) + " ", style=title_style if title else "")
            for c in range(f.n):
                ch, style = self._cell(lane, int(dom[c]), float(full[c]) * h - level, level, labels.get(c))
                if c == mark and level == 0:
                    ch, style = "◆", Style(color="white", bold=True)
                if c == f.n // 2:
                    style = style + (Style(reverse=True) if selected else Style(bgcolor=CURSOR_BG))
                text.append(ch, style)
            lines.append(text)
        return Text("\n").join(lines)

    @staticmethod
    def _cell(lane, code: int, fill: float, level: int, label: str | None) -> tuple[str, Style]:
        if code < 0:
            return ("·" if lane.kind == IDLE and level == 0 else " "), Style(dim=True)
        if lane.kind == NVTX and label:  # a name inside its bar
            return label, Style(color="black", bgcolor=colour(NVTX, "", code), bold=True)
        eighths = max(0, min(8, math.ceil(fill * 8)))
        if level == 0:
            eighths = max(1, eighths)  # anything at all shows
        return BLOCKS[eighths], Style(color=colour(lane.kind, "" if lane.kind == NVTX else lane.categories[code], code))

    def _legend(self, f: TimelineFrame) -> Text:
        text = Text(" " * TITLE_WIDTH)
        for kind, cat in f.legend:
            name = FAMILY_LABEL.get(cat, cat) if kind == "gpu" else cat
            text.append("■", Style(color=colour(kind, cat, 0)))
            text.append(f"{name} ")
        if f.launch_mark:
            text.append("◆", "bold")
            text.append("launching call")
        text.truncate(TITLE_WIDTH + f.n)
        return text


class TimelineScreen(ViewScreen):
    """The timeline around a range instance, a launch or the whole trace."""

    BINDINGS = [
        Binding("plus,equals_sign", "zoom(1)", "Zoom in", id="timeline.zoom_in",
                tooltip="Zoom in around the cursor (the centre column)"),
        Binding("minus", "zoom(-1)", "Zoom out", id="timeline.zoom_out", tooltip="Zoom out around the cursor"),
        Binding("h,left", "pan(-1)", "Pan left", show=False, id="timeline.pan_left",
                tooltip="Pan left one cell (the cursor stays in the centre)"),
        Binding("l,right", "pan(1)", "Pan right", show=False, id="timeline.pan_right", tooltip="Pan right one cell"),
        Binding("H", "pan_screen(-1)", "Screen left", show=False, id="timeline.screen_left",
                tooltip="Pan left a whole screen"),
        Binding("L", "pan_screen(1)", "Screen right", show=False, id="timeline.screen_right",
                tooltip="Pan right a whole screen"),
        Binding("0", "fit", "Fit", id="timeline.fit", tooltip="Fit the range the view opened on"),
        Binding("left_square_bracket", "gap(-1)", "Prev gap", show=False, id="timeline.prev_gap",
                tooltip="Previous GPU gap (idle stretch) longer than 10 µs or two cells, on the selected lane's GPU"),
        Binding("right_square_bracket", "gap(1)", "Next gap", id="timeline.next_gap",
                tooltip="Next GPU gap longer than 10 µs or two cells, on the selected lane's GPU"),
        Binding("j,down", "lane(1)", "Lane down", show=False, id="timeline.lane_down", tooltip="Next lane"),
        Binding("k,up", "lane(-1)", "Lane up", show=False, id="timeline.lane_up", tooltip="Previous lane"),
        Binding("enter", "open_item", "Detail", id="timeline.open",
                tooltip="The item under the cursor: a kernel or API call -> its correlation detail; a range -> "
                "its kernels; an idle stretch -> its causes and what the CPU did"),
    ]

    class Built(Message):
        """The lanes are built (worker -> screen)."""

        def __init__(self, timeline: Timeline) -> None:
            super().__init__()
            self.timeline = timeline

    class FrameReady(Message):
        """A frame for the state as it was when asked (worker -> screen)."""

        def __init__(self, frame: TimelineFrame, serial: int) -> None:
            super().__init__()
            self.frame, self.serial = frame, serial

    def __init__(self, session, target=None, **kwargs) -> None:
        """`target`: a TimelineTarget, or a function Timeline -> TimelineTarget (for targets
        that need the lanes, like a launch); None: the whole trace."""
        super().__init__(session, **kwargs)
        self._target = target
        self.state: TimelineState | None = None
        self.frame: TimelineFrame | None = None
        self._serial = 0
        self.frames_drawn = 0  # tests and the benchmark wait on these two
        self.frame_serial = 0

    view_name = "timeline"

    def crumb(self) -> str:
        if self.state is None:
            return "timeline"
        return f"timeline · {self.state.target.title} · window {fmt.duration(self.state.span)}"

    def compose_body(self) -> ComposeResult:
        yield TimelineCanvas(id="tl-canvas")
        yield Static("", id="tl-cursor")
        yield Static("", id="tl-idle")

    @property
    def canvas(self) -> TimelineCanvas:
        return self.query_one(TimelineCanvas)

    def on_mount(self) -> None:
        super().on_mount()
        self.canvas.focus()
        self._say("building the timeline…")
        self._build()

    # -- workers ------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-build")
    def _build(self) -> None:
        trace = self.session.trace
        tl = timeline(trace, self.session.model, idle_analysis(trace))
        if not get_current_worker().is_cancelled:
            self.post_message(self.Built(tl))

    def on_timeline_screen_built(self, message: Built) -> None:
        target = self._target
        if callable(target):
            target = target(message.timeline)
        self.state = TimelineState(message.timeline, target or target_for_trace(message.timeline))
        self.query_one("#crumb", Static).update(Text(self.crumb()))
        self._say("+/- zoom · h/l pan · H/L screen · [/] gaps · j/k lanes · enter detail · 0 fit · e export")
        self.redraw()

    def on_timeline_canvas_resized(self, message: TimelineCanvas.Resized) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Ask for a frame of the current state (computed in a worker; the newest wins)."""
        if self.state is None or not self.is_mounted:
            return
        size = self.canvas.size
        if size.width <= TITLE_WIDTH + 8 or size.height < 3:
            return
        self.state.set_cells(size.width - TITLE_WIDTH)
        visible = size.height - 2  # rows for lanes: all but the axis and the legend
        self.state.fit_lanes(visible)
        self._serial += 1
        self._frame(copy.copy(self.state), visible, self._serial)

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-frame")
    def _frame(self, state: TimelineState, visible: int, serial: int) -> None:
        frame = state.frame(visible)
        if not get_current_worker().is_cancelled:
            self.post_message(self.FrameReady(frame, serial))

    def on_timeline_screen_frame_ready(self, message: FrameReady) -> None:
        if message.serial != self._serial:
            return  # a newer state is on its way
        self.frame = message.frame
        self.frame_serial = message.serial
        self.canvas.show(message.frame)
        self.query_one("#crumb", Static).update(Text(self.crumb()))
        self.query_one("#tl-cursor", Static).update(self._cursor_text(message.frame))
        self.query_one("#tl-idle", Static).update(self._idle_text(message.frame))
        self.frames_drawn += 1

    def _say(self, text: str) -> None:
        self.set_status(Text(text))  # plain text: names and `[`/`]` are not markup

    # -- text under the lanes -----------------------------------------------------------------
    def _cursor_text(self, f: TimelineFrame) -> Text:
        """▼ time · lane: the item under the cursor, its duration, correlation ID, CPU lead."""
        lane = self.state.timeline.lanes[f.selected] if f.lane_count else None
        text = Text(f"▼ {_signed(f.cursor_ns - f.origin)} ", style="bold")
        if lane is None:
            return text + Text("no lanes")
        text.append(f"{lane.title}: ", style="bold")
        it = f.item
        if it is None:
            text.append("nothing here", style="dim")
        else:
            name = display_kernel_name(it.name) if it.kind == "kernel" else it.name
            text.append(name if it.kind in ("range", "api", "kernel") else f"{it.kind} {name}")
            text.append(f" · {fmt.duration(it.duration_ns)}")
            if it.corr is not None:
                text.append(f" · corr {it.corr}")
            if it.lead_ns is not None:
                text.append(f" · CPU lead {fmt.duration(it.lead_ns)}", style="bold")
                text.append(f" ◆ {it.call_name} on {it.call_thread}")
            elif it.call_name:
                text.append(f" · from {it.call_name} on {it.call_thread}")
        text.append(f" · at {fmt.seconds(f.cursor_ns)} s", style="dim")
        return text

    def _idle_text(self, f: TimelineFrame) -> Text:
        lane = self.state.timeline.lanes[f.selected] if f.lane_count else None
        devices = f.idle.devices
        if not devices:
            return Text("no GPU work in this trace", style="dim")
        dev = next((d for d in devices if lane is not None and d.device == lane.device), devices[0])
        s, span = dev.split, max(1, dev.split.window_ns)
        text = Text(f"GPU{dev.device} ", style="bold")
        text.append(f"busy {s.busy_ns / span:.0%}", style="bold")
        for label, ns, key in (("launch", s.launch_bound_ns, "launch-bound"), ("sync", s.sync_bound_ns, "sync-bound"),
                               ("host", s.host_bound_ns, "host-bound")):
            text.append(" · ")
            text.append(f"{label} {ns / span:.0%}", Style(color=COLOURS[("idle", key)]))
        if dev.lead.kernels:
            text.append(f" · lead p50 {fmt.duration(dev.lead.median_ns)} p95 {fmt.duration(dev.lead.p95_ns)}")
        if dev.queue.mean_depth is not None:
            text.append(f" · queue {dev.queue.mean_depth:.1f} (max {dev.queue.max_depth})")
        return text

    # -- keys ---------------------------------------------------------------------------------
    def _move(self, fn) -> None:
        if self.state is None:
            return
        fn(self.state)
        self.redraw()

    def action_zoom(self, direction: int) -> None:
        self._move(lambda s: s.zoom(ZOOM if direction > 0 else 1 / ZOOM))

    def action_pan(self, cells: int) -> None:
        self._move(lambda s: s.pan(cells))

    def action_pan_screen(self, screens: int) -> None:
        self._move(lambda s: s.pan(screens * s.n))

    def action_fit(self) -> None:
        self._move(lambda s: s.fit())

    def action_lane(self, delta: int) -> None:
        self._move(lambda s: s.move_lane(delta))

    def action_gap(self, direction: int) -> None:
        if self.state is None:
            return
        threshold = self.state.gap_threshold()
        gap = self.state.to_gap(direction > 0)
        if gap is None:
            self._say(f"no {'later' if direction > 0 else 'earlier'} GPU gap of {fmt.duration(threshold)} or more")
            self.app.bell()
            return
        gs, ge = gap
        device = self.state.gap_device()
        self._say(f"GPU{device} gap {fmt.duration(ge - gs)} at {_signed(gs - self.state.fit_window[0])}"
                        f" (gaps ≥ {fmt.duration(threshold)}; enter on the idle lane: why)")
        self.redraw()

    def action_open_item(self) -> None:
        f = self.frame
        if f is None or f.item is None:
            self._say("nothing under the cursor in this lane")
            return
        it = f.item
        if it.kind == "range":
            node = _instance_node(self.session, it.ref)
            if node is not None:
                self.app.open_kernels(node)
            return
        if it.corr is not None:
            self.app.open_correlation(it.corr, it.gpid if it.gpid is not None and it.gpid >= 0 else None)
            return
        self._explain_gap(it)

    def _explain_gap(self, it) -> None:
        """enter on the idle lane: the whole idle stretch under the cursor, by cause."""
        tl, t = self.state.timeline, self.frame.cursor_ns
        busy = tl.idle.device(it.lane.device).busy
        if busy.contains(t):
            return
        k = int(np.searchsorted(busy.end, t, side="right"))  # busy blocks over by t
        gs = int(busy.end[k - 1]) if k > 0 else tl.t_min
        ge = int(busy.start[k]) if k < len(busy) else tl.t_max
        gap = tl.idle.gap(it.lane.device, gs, ge)
        doing = "; ".join(f"{a.thread}: " + (", ".join(f"{n} ×{c}" for n, c, _ in a.api_calls[:2]) or "no CUDA call")
                          for a in gap.threads)
        self._say(f"gap {fmt.duration(gap.duration_ns)}: launch {fmt.duration(gap.launch_bound_ns)} · sync "
                        f"{fmt.duration(gap.sync_bound_ns)} · host {fmt.duration(gap.host_bound_ns)} — {doing}")

    # -- export -------------------------------------------------------------------------------
    def export_view(self) -> ViewText | None:
        state = copy.copy(self.state) if self.state is not None else None
        if state is None:
            return None
        tl = state.timeline
        t0, t1 = state.t0, state.t1
        idle = tl.idle.window(t0, t1, top_gaps=10).to_json()
        rows = []
        for lane, idx in tl.window_items(t0, t1):
            for i in idx.tolist():
                it = tl.describe(lane, i)
                rows.append([lane.title, it.kind, it.name, it.start_ns, it.duration_ns, it.corr, it.lead_ns])
        head = self.export_header(f"window {t0} ns to {t1} ns ({t1 - t0} ns), opened on {state.target.title}",
                                  f"cursor at {state.cursor_ns} ns, lane {tl.lanes[state.selected].title}"
                                  if tl.lanes else "")
        return ViewText("timeline", head, window_markdown(state.target.title, idle, rows, state.fit_window[0]))


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "−") + fmt.duration(abs(ns))


def _instance_node(session, rid: int):
    """The range tree's node of one range instance (for its kernel table)."""
    index = session.cache.get("instance_nodes")
    if index is None:
        index = {}
        for group in session.model.thread_groups:
            stack = list(group.roots)
            while stack:
                node = stack.pop()
                index[int(node.ids[0])] = node
                stack.extend(node.children)
        session.cache["instance_nodes"] = index
    return index.get(int(rid))


def open_target(screen) -> TimelineTarget | None:
    """What `t` opens on from a screen: its `timeline_target()` if it has one."""
    maker = getattr(screen, "timeline_target", None)
    return maker() if maker is not None else None
