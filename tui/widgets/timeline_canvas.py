"""The timeline's drawing: a TimelineFrame (tui/viewmodels/timeline.py) as rows of styled runs.

`frame_strips(frame)` is a pure function (run in the frame worker, off the UI thread); the
widget only hands the prepared Strips to Textual line by line. One cell = one time bucket;
its colour is the category that dominated it, its height (block eighths, over the lane's rows)
how full it was. Runs of equal style become one Segment, so a row costs a few dozen segments
whatever the zoom.
"""
from __future__ import annotations

import math
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from nsight_tui.parsers.kernels.families import FAMILIES
from nsight_tui.parsers.analyses.timeline import IDLE, NVTX
from nsight_tui.render.safe import visible
from nsight_tui.tui.viewmodels.timeline import TITLE_WIDTH, LaneRow, TimelineFrame

BLOCKS = " ▁▂▃▄▅▆▇█"
COLOURS = {
    ("gpu", "gemm"): "#4e79a7", ("gpu", "attention"): "#f28e2b", ("gpu", "softmax"): "#e15759",
    ("gpu", "elementwise"): "#76b7b2", ("gpu", "reduction"): "#59a14f", ("gpu", "normalization"): "#edc948",
    ("gpu", "optimizer"): "#b07aa1", ("gpu", "memory"): "#ff9da7", ("gpu", "communication"): "#9c755f",
    ("gpu", "other"): "#bab0ac", ("gpu", "memcpy"): "#17becf", ("gpu", "memset"): "#bcbd22",
    ("api", "launch"): "#2ca02c", ("api", "sync"): "#d62728", ("api", "other"): "#8c8c8c",
    ("memory", "in use"): "#9467bd", ("metric", "sampled"): "#8cd17d",
    ("idle", "launch-bound"): "#e6c229", ("idle", "sync-bound"): "#d62728", ("idle", "host-bound"): "#6f8fd8",
}
NVTX_COLOURS = ("#5b8def", "#e0915a", "#6cc08b", "#c27bd1", "#d6c25a", "#5ac6d6", "#d65a7e", "#9aa0a6")
FAMILY_LABEL = {f.key: f.label.split(" (")[0] for f in FAMILIES}
CURSOR_BG = "#3a3a3a"
DIM = Style(dim=True)
MARK = Style(color="white", bold=True)


def colour(kind: str, category: str, code: int) -> str:
    if kind == NVTX:
        return NVTX_COLOURS[code % len(NVTX_COLOURS)]
    return COLOURS.get((kind, category), "#bab0ac")


@lru_cache(maxsize=512)
def _fg(hex_colour: str) -> Style:
    return Style(color=hex_colour)


@lru_cache(maxsize=128)
def _label(hex_colour: str) -> Style:
    return Style(color="black", bgcolor=hex_colour, bold=True)


@lru_cache(maxsize=1024)
def _cursor(style: Style, selected: bool) -> Style:
    return style + (Style(reverse=True) if selected else Style(bgcolor=CURSOR_BG))


def _runs(cells: list[tuple[str, Style]]) -> list[Segment]:
    out: list[Segment] = []
    text, style = "", None
    for ch, st in cells:
        if st is style:
            text += ch
        else:
            if text:
                out.append(Segment(text, style))
            text, style = ch, st
    if text:
        out.append(Segment(text, style))
    return out


def frame_strips(f: TimelineFrame) -> list[Strip]:
    """Axis, every lane row, legend."""
    strips = [_axis(f)]
    for row in f.rows:
        strips += _lane(f, row)
    strips.append(_legend(f))
    return strips


def _axis(f: TimelineFrame) -> Strip:
    """Ticks and their labels, each label whole with a blank after it; the cursor's ▼ first,
    so no label runs into it (`╷▼ms`)."""
    cells = [" "] * f.n
    centre = f.n // 2
    cells[centre] = "▼"
    for cell, label in f.ticks:
        end = cell + len(label) + 2
        if 0 <= cell and end <= f.n and all(c == " " for c in cells[max(0, cell - 1):end]):
            cells[cell] = "╷"
            for k, ch in enumerate(label):
                cells[cell + 1 + k] = ch
    head = f"lanes {f.selected_pos + 1}/{f.lane_count}"[: TITLE_WIDTH - 1].ljust(TITLE_WIDTH)
    return Strip([Segment(head + "".join(cells), DIM)])


def _lane(f: TimelineFrame, row: LaneRow) -> list[Strip]:
    """`row.height` screen rows; a cell's bar fills `fullness * height` rows in eighths."""
    lane, h = row.lane, row.height
    selected = row.index == f.selected
    dom, full = row.cells.dominant.tolist(), row.cells.fullness.tolist()
    labels: dict[int, str] = {}
    for c0, c1, label in row.labels:
        for k, ch in enumerate(label[: max(0, c1 - c0 - 1)]):
            labels[c0 + 1 + k] = ch
    mark = f.launch_mark[1] if f.launch_mark and f.launch_mark[0] == row.index else None
    title_style = Style(reverse=True, bold=True) if selected else Style(bold=lane.kind == "gpu")
    styles = [_fg(colour(lane.kind, "" if lane.kind == NVTX else lane.categories[c], c)) if c >= 0 else DIM
              for c in range(-1, len(lane.categories))]
    out = []
    centre = f.n // 2
    for level in range(h - 1, -1, -1):  # top screen row first
        title = visible(lane.title)[: TITLE_WIDTH - 1] if level == h - 1 else ""
        cells: list[tuple[str, Style]] = []
        for c in range(f.n):
            code = dom[c]
            if code < 0:
                ch, style = ("·" if lane.kind == IDLE and level == 0 else " "), DIM
            elif lane.kind == NVTX and c in labels:  # a name inside its bar
                ch, style = labels[c], _label(colour(NVTX, "", code))
            else:
                eighths = max(0, min(8, math.ceil((full[c] * h - level) * 8)))
                ch, style = BLOCKS[max(1, eighths) if level == 0 else eighths], styles[code + 1]
            if c == mark and level == 0:
                ch, style = "◆", MARK
            if c == centre:
                style = _cursor(style, selected)
            cells.append((ch, style))
        head = Segment(title.ljust(TITLE_WIDTH - 1) + " ", title_style if title else Style())
        out.append(Strip([head, *_runs(cells)]))
    return out


def legend_items(f: TimelineFrame) -> list[list[tuple[str, Style]]]:
    """The legend's items, each as (text, style) pieces; an item that starts a lane kind's group
    carries the group's word ("API ■launch", "GPU ■GEMM", "idle ■host")."""
    items: list[list[tuple[str, Style]]] = []
    group = None
    for kind, cat in f.legend:
        pieces: list[tuple[str, Style]] = []
        if kind != group:
            pieces.append((f"{'API' if kind == 'api' else kind.upper() if kind == 'gpu' else kind} ", DIM))
            group = kind
        name = FAMILY_LABEL.get(cat, cat) if kind == "gpu" else cat.removesuffix("-bound")
        pieces += [("■", _fg(colour(kind, cat, 0))), (f"{name} ", Style())]
        items.append(pieces)
    if f.launch_mark:
        items.append([("◆", MARK), ("launching call", Style())])
    return items


def _legend(f: TimelineFrame) -> Strip:
    """As many whole items as the row holds, then `+k` for those left out (never a cut word)."""
    width = TITLE_WIDTH + f.n
    items = legend_items(f)
    size = [sum(len(t) for t, _ in it) for it in items]
    keep = len(items)
    while keep and TITLE_WIDTH + sum(size[:keep]) + (len(f"+{len(items) - keep}") if keep < len(items) else 0) > width:
        keep -= 1
    segments = [Segment(" " * TITLE_WIDTH)]
    for it in items[:keep]:
        segments += [Segment(t, st) for t, st in it]
    if keep < len(items):
        segments.append(Segment(f"+{len(items) - keep}", DIM))
    return Strip(segments).crop(0, width)


class TimelineCanvas(Widget):
    """Shows the strips of the latest frame; computes nothing."""

    DEFAULT_CSS = """
    TimelineCanvas {
        height: 1fr;
        min-height: 4;
    }
    """
    can_focus = True  # keeps keys away from the (hidden) search prompt

    class Resized(Message):
        """The canvas changed size: the screen asks for a frame that fits."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.strips: list[Strip] = []

    def on_resize(self) -> None:
        self.post_message(self.Resized())

    def show(self, strips: list[Strip]) -> None:
        self.strips = strips
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not self.strips:
            return Strip([Segment("building the timeline…", Style(italic=True))]).adjust_cell_length(width) \
                if y == 0 else Strip.blank(width)
        if y < len(self.strips):
            return self.strips[y].adjust_cell_length(width)
        return Strip.blank(width)
