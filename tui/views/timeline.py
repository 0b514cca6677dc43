"""`t`: the timeline. Lanes (NVTX levels of the main thread, CUDA API calls per launching
thread, GPU ops per device and stream, GPU idle by cause), one character cell per time
bucket coloured by what dominated it, a cursor in the centre column with the item under it,
and the window's GPU idle split.

The screen only draws: building the lanes and each frame (parsers/analyses/timeline.py through
tui/viewmodels/timeline.py) runs in thread workers that post typed messages back.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from nsight_tui.parsers.analyses.idle import WindowIdle
from nsight_tui.parsers.analyses.timeline import Lane, Timeline
from nsight_tui.render.safe import visible
from nsight_tui.render import numbers
from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.tui.messages import Navigation
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.viewmodels.timeline import (
    TITLE_WIDTH,
    ZOOM,
    TimelineFrame,
    TimelineState,
    TimelineTarget,
    gap_detail,
    target_for_trace,
)
from nsight_tui.tui.viewmodels.whatif import REPLAYED_MARK, ReplayLanes, is_replayed, with_lanes
from nsight_tui.tui.views.modals import TextPanel
from nsight_tui.tui.views.base import ViewScreen, literal
from nsight_tui.tui.widgets.timeline_canvas import COLOURS, TimelineCanvas, frame_strips
from nsight_tui.render.idle import window_json, window_markdown

SUMMARY_DELAY_S = 0.15


# Typed messages: the screen's workers post them to the screen itself, which renders them.
@dataclass
class TimelineBuilt(Message):
    """The lanes are built."""

    timeline: Timeline


@dataclass
class TimelineFrameReady(Message):
    """A frame for the state as it was when asked, and its drawing; `serial` says which."""

    frame: TimelineFrame
    strips: list
    serial: int


@dataclass
class TimelineSummaryReady(Message):
    """The visible window's CPU lead and queue depth (after its frame)."""

    summary: WindowIdle
    serial: int


@dataclass
class ReplayLanesReady(Message):
    """The replayed step's lanes (`y`, or the what-if's `l`) are built."""

    lanes: ReplayLanes


class TimelineScreen(ViewScreen):
    """The timeline around a range instance, a launch or the whole trace."""

    @dataclass
    class RangeChosen(Navigation):
        """enter on a range instance: its kernels."""

        node: RangeNode

    @dataclass
    class OpChosen(Navigation):
        """enter on a kernel, copy or API call: its correlation ID on GPU `gpid`."""

        corr: int
        gpid: int | None

    BINDING_GROUP_TITLE = "Timeline (t)"

    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
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
        Binding("0", "fit", "Fit range", id="timeline.fit", tooltip="Fit the range the view opened on"),
        Binding("w", "whole", "Whole capture", id="timeline.whole",
                tooltip="Zoom out to the whole capture, first event to last (0 fits the range the view opened on)"),
        Binding("left_square_bracket", "gap(-1)", "Prev gap", show=False, id="timeline.prev_gap",
                tooltip="Previous GPU gap (idle stretch) longer than 10 µs or two cells, on the selected lane's GPU"),
        Binding("right_square_bracket", "gap(1)", "Next gap", id="timeline.next_gap",
                tooltip="Next GPU gap longer than 10 µs or two cells, on the selected lane's GPU"),
        Binding("j,down", "lane(1)", "Lane down", show=False, id="timeline.lane_down", tooltip="Next lane"),
        Binding("k,up", "lane(-1)", "Lane up", show=False, id="timeline.lane_up", tooltip="Previous lane"),
        Binding("y", "replayed", "Replayed", id="timeline.replayed",
                tooltip="Toggle the replayed step's lanes (≈, the replay's model) under the measured GPU stream and "
                "CUDA API lanes: the unchanged replay, or the fix's replay when opened from a what-if (w on a finding)"),
        Binding("enter", "open_item", "Detail", id="timeline.open",
                tooltip="The item under the cursor: a kernel or API call -> its correlation detail; a range -> "
                "its kernels; an idle stretch -> its causes and what the CPU did"),
    ]

    def __init__(self, session, target=None, replay: tuple[str, ...] | None = None, replay_title: str = "",
                 **kwargs) -> None:
        """`target`: a TimelineTarget, or a function Timeline -> TimelineTarget (for targets
        that need the lanes, like a launch); None: the whole trace. `replay`: open with the lanes
        of the replay with these edits beside the measured ones, on its first step (`y` toggles
        them; without `replay`, `y` shows the unchanged replay's)."""
        super().__init__(session, **kwargs)
        self._target = target
        self._replay_edits = replay
        self._replay_title = replay_title
        self._measured: Timeline | None = None
        self.replay: ReplayLanes | None = None  # the replayed lanes on screen (None: measured only)
        self._replay_asked = False
        self.state: TimelineState | None = None
        self.frame: TimelineFrame | None = None
        self._serial = 0
        self.frames_drawn = 0  # tests and the benchmark wait on these two
        self.frame_serial = 0
        self.summary_serial = 0  # the frame whose lead/queue line is shown
        self._crumb = ""

    view_name = "timeline"

    def crumb(self) -> str:
        if self.state is None:
            return "timeline"
        hidden = self.frame.hidden if self.frame is not None else 0
        empty = f" · {hidden} empty lane{'s' if hidden != 1 else ''} hidden" if hidden else ""
        replayed = (f" · measured + {REPLAYED_MARK} replayed (model: {visible(self.replay.label)})"
                    if self.replay is not None else "")
        return (f"timeline · {visible(self.state.target.title)} · window {numbers.duration(self.state.span)}"
                f"{empty}{replayed}")

    def compose_body(self) -> ComposeResult:
        yield TimelineCanvas(id="tl-canvas")
        yield Static("", id="tl-cursor")
        yield Static("", id="tl-idle")

    @property
    def canvas(self) -> TimelineCanvas:
        return self.query_one(TimelineCanvas)

    def mounted(self) -> None:
        self.canvas.focus()
        self._say("building the timeline…")
        self._build()

    # -- workers ------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-build")
    def _build(self) -> None:
        tl = self.session.timeline()
        if not get_current_worker().is_cancelled:
            self.post_message(TimelineBuilt(tl))

    def on_timeline_built(self, message: TimelineBuilt) -> None:
        target = self._target
        if callable(target):
            target = target(message.timeline)
        self._measured = message.timeline
        self.state = TimelineState(message.timeline, target or target_for_trace(message.timeline))
        self.show_crumb()
        self._say("+/- zoom · h/l pan · H/L screen · [/] gaps · j/k lanes · 0 fit · w whole · enter detail · e export")
        self.redraw()
        if self._replay_edits is not None:
            self._ask_replay(self._replay_edits)

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
        strips = frame_strips(frame)
        if get_current_worker().is_cancelled:
            return
        self.post_message(TimelineFrameReady(frame, strips, serial))

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-summary")
    def _summary(self, state: TimelineState, serial: int) -> None:
        summary = state.summary()
        if not get_current_worker().is_cancelled:
            self.post_message(TimelineSummaryReady(summary, serial))

    def _ask_summary(self, serial: int) -> None:
        """The lead/queue line once the view has rested (SUMMARY_DELAY_S after the last frame):
        its selection over every kernel in view never competes with a key's frame."""
        if serial == self._serial and self.state is not None:
            self._summary(copy.copy(self.state), serial)

    def on_timeline_frame_ready(self, message: TimelineFrameReady) -> None:
        if message.serial != self._serial:
            return  # a newer state is on its way
        self.frame = message.frame
        self.frame_serial = message.serial
        self.canvas.show(message.strips)
        # fixed-height lines (app.tcss): no layout pass per key, only a repaint
        crumb = self.crumb()
        if crumb != self._crumb:
            self._crumb = crumb
            self.query_one("#crumb", Static).update(literal(crumb), layout=False)
        self.query_one("#tl-cursor", Static).update(self._cursor_text(message.frame), layout=False)
        self.query_one("#tl-idle", Static).update(self._idle_text(message.frame, None), layout=False)
        self.frames_drawn += 1
        self.set_timer(SUMMARY_DELAY_S, lambda: self._ask_summary(message.serial))

    def on_timeline_summary_ready(self, message: TimelineSummaryReady) -> None:
        if message.serial == self.frame_serial and self.frame is not None:
            self.query_one("#tl-idle", Static).update(self._idle_text(self.frame, message.summary), layout=False)
            self.summary_serial = message.serial

    def _say(self, text: str) -> None:
        self.set_status(Text(visible(text)))  # plain text: names and `[`/`]` are not markup

    # -- text under the lanes -----------------------------------------------------------------
    def _selected_lane(self, f: TimelineFrame) -> Lane | None:
        """The frame's own selected lane (its rows hold it): the lanes on the state may have
        changed since the frame was made (`y`)."""
        if self.state is None or not f.lane_count:
            return None
        row = next((r for r in f.rows if r.index == f.selected), None)
        if row is not None:
            return row.lane
        lanes = self.state.timeline.lanes
        return lanes[f.selected] if f.selected < len(lanes) else None

    def _cursor_text(self, f: TimelineFrame) -> Text:
        """▼ time · lane: the item under the cursor, its duration, correlation ID, CPU lead."""
        lane = self._selected_lane(f)
        text = Text(f"▼ {_signed(f.cursor_ns - f.origin)} ", style="bold")
        if lane is None:
            return text + Text("no lanes")
        if self.replay is not None:
            text.append("replayed (model) " if is_replayed(lane) else "measured ", style="bold")
        text.append(f"{visible(lane.title)}: ", style="bold")
        it = f.item
        if it is None:
            text.append("nothing here", style="dim")
        elif f.gap is not None:  # the idle lane: the whole gap, the figure its detail gives
            g = f.gap
            text.append(f"gap {numbers.duration(g.duration_ns)}, {g.cause} mostly "
                        f"({getattr(g, g.cause.replace('-', '_') + '_ns') / max(1, g.duration_ns):.0%})")
            text.append(" · enter: what each thread did", style="dim")
        else:
            name = visible(display_kernel_name(it.name) if it.kind == "kernel" else it.name)
            text.append(name if it.kind in ("range", "api", "kernel") else f"{it.kind} {name}")
            text.append(f" · {numbers.duration(it.duration_ns)}")
            if it.corr is not None:
                text.append(f" · corr {it.corr}")
            if it.lead_ns is not None and not is_replayed(lane):  # a replayed op's lead is the model's
                text.append(f" · CPU lead {numbers.duration(it.lead_ns)}", style="bold")
                text.append(f" ◆ {visible(it.call_name)} on {visible(it.call_thread)}")
            elif it.call_name:
                text.append(f" · from {visible(it.call_name)} on {visible(it.call_thread)}")
        text.append(f" · at {numbers.seconds(f.cursor_ns)} s", style="dim")
        return text

    def _idle_text(self, f: TimelineFrame, summary) -> Text:
        """The window's split for the selected lane's GPU; lead and queue once computed."""
        lane = self._selected_lane(f)
        if not f.splits:
            return Text("no GPU work in this trace", style="dim")
        s = next((x for x in f.splits if lane is not None and x.device == lane.device), f.splits[0])
        span = max(1, s.window_ns)
        text = Text(f"GPU{s.device} ", style="bold")
        text.append(f"busy {s.busy_ns / span:.0%}", style="bold")
        for label, ns, key in (("launch", s.launch_bound_ns, "launch-bound"), ("sync", s.sync_bound_ns, "sync-bound"),
                               ("host", s.host_bound_ns, "host-bound")):
            text.append(" · ")
            text.append(f"{label} {ns / span:.0%}", Style(color=COLOURS[("idle", key)]))
        dev = next((d for d in summary.devices if d.device == s.device), None) if summary is not None else None
        if dev is None:
            text.append(" · lead …", style="dim")
            return text
        if dev.lead.kernels:
            text.append(f" · lead p50 {numbers.duration(dev.lead.median_ns)} p95 {numbers.duration(dev.lead.p95_ns)}")
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

    def action_whole(self) -> None:
        self._move(lambda s: s.whole())

    def action_replayed(self) -> None:
        """`y`: the replayed lanes on or off."""
        if self.state is None or self._measured is None:
            return
        if self.replay is not None:
            self._show_lanes(None)
            self._say("measured lanes only · y: the replayed ones beside them")
            return
        edits = self._replay_edits if self._replay_edits is not None else ()
        self._ask_replay(edits)

    def _ask_replay(self, edits: tuple[str, ...]) -> None:
        if self._replay_asked:
            return
        self._replay_asked = True
        what = f"with {' '.join(edits)}" if edits else "unchanged"
        self._say(f"replaying the capture {what} (the model; the lanes come when it is done)…")
        self._replay_build(edits)

    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline-replay")
    def _replay_build(self, edits: tuple[str, ...]) -> None:
        lanes = self.session.replay_lanes(edits)
        if not get_current_worker().is_cancelled:
            self.post_message(ReplayLanesReady(lanes))

    def worker_failed(self, worker) -> None:
        self._replay_asked = False

    def on_replay_lanes_ready(self, message: ReplayLanesReady) -> None:
        first = self._replay_edits is not None and self.replay is None and not getattr(self, "_replayed_once", False)
        self._replayed_once = True
        self._replay_asked = False
        self._show_lanes(message.lanes)
        if first and message.lanes.step_window is not None and self.state is not None:
            a, b = message.lanes.step_window  # the replay's first steady-state step, a margin each side
            pad = max((b - a) // 20, 1)
            title = f"what if · {self._replay_title or message.lanes.label} · the replay's first step"
            self.state.target = TimelineTarget(title, (a - pad, b + pad), origin=a)
            self.state.fit_window = (a - pad, b + pad)  # `0` fits it
            self.state.origin = a  # the axis and the cursor from the step's start, as a range's timeline
            self.state.t0, self.state.t1 = a - pad, b + pad
            self.show_crumb()
            self.redraw()
        self._say(f"{REPLAYED_MARK} lanes: replayed (model: {message.lanes.label}), each under its measured lane "
                  "· y: measured only")

    def _show_lanes(self, lanes: ReplayLanes | None) -> None:
        """Swap the timeline under the state: the measured lanes, or with the replayed ones; the
        window and the selected lane (by its key) kept."""
        if self.state is None or self._measured is None:
            return
        old = self.state.timeline
        key = old.lanes[self.state.selected].key if old.lanes else None
        self.replay = lanes
        tl = with_lanes(self._measured, lanes)
        self.state.timeline = tl
        i = tl.lane_index(key) if key is not None else None
        self.state.selected = i if i is not None else 0
        self.state.top = 0
        self.show_crumb()
        self.redraw()

    def action_lane(self, delta: int) -> None:
        self._move(lambda s: s.move_lane(delta))

    def action_gap(self, direction: int) -> None:
        if self.state is None:
            return
        threshold = self.state.gap_threshold()
        gap = self.state.to_gap(direction > 0)
        if gap is None:
            self._say(f"no {'later' if direction > 0 else 'earlier'} GPU gap of {numbers.duration(threshold)} or more")
            self.app.bell()
            return
        gs, ge = gap
        device = self.state.gap_device()
        self._say(f"GPU{device} gap {numbers.duration(ge - gs)} at {_signed(gs - self.state.fit_window[0])}"
                        f" (gaps ≥ {numbers.duration(threshold)}; enter on the idle lane: why)")
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
                self.post_message(self.RangeChosen(node))
            return
        if it.kind == "memory":
            self._say(f"GPU memory: {it.name} · u: the memory view (peak, per phase, out of memory)")
            return
        if it.kind == "metric":
            self._say(f"GPU metric: {it.name} · per-range averages: nsight-tui report (GPU metrics section)")
            return
        if it.corr is not None:
            self.post_message(self.OpChosen(it.corr, it.gpid if it.gpid is not None and it.gpid >= 0 else None))
            return
        self._explain_gap(it)

    def _explain_gap(self, it) -> None:
        """enter on the idle lane: the whole gap under the cursor, by cause, and what each CPU
        thread was doing, in a panel (a status line cut it)."""
        if self.state is None or self.frame is None or self.frame.gap is None:
            return
        g = self.frame.gap
        gap = self.state.timeline.idle.gap(g.device, g.start_ns, g.end_ns)
        title, lines = gap_detail(gap, self.state.fit_window[0])
        self._say(title)
        self.app.push_screen(TextPanel(title, lines))

    # -- export -------------------------------------------------------------------------------
    def export_view(self) -> ViewText | None:
        state = copy.copy(self.state) if self.state is not None else None
        if state is None:
            return None
        tl = state.timeline
        t0, t1 = state.t0, state.t1
        idle = window_json(tl.idle.window(t0, t1, top_gaps=10))
        items = tl.window_table(t0, t1)
        rows = [[None if v is None else int(v) if i >= 3 else v for i, v in enumerate(r)]
                for r in items.itertuples(index=False, name=None)]
        head = self.export_header(f"window {t0} ns to {t1} ns ({t1 - t0} ns), opened on {state.target.title}",
                                  f"cursor at {state.cursor_ns} ns, lane {tl.lanes[state.selected].title}"
                                  if tl.lanes else "")
        return ViewText("timeline", head, window_markdown(state.target.title, idle, rows, state.fit_window[0]))


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "−") + numbers.duration(abs(ns))


def _instance_node(session, rid: int):
    """The range tree's node of one range instance (for its kernel table)."""
    return session.instance_node(rid)


def open_target(screen) -> TimelineTarget | None:
    """What `t` opens on from a screen: its `timeline_target()` if it has one."""
    maker = getattr(screen, "timeline_target", None)
    return maker() if maker is not None else None
