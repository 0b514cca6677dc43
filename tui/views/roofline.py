"""The roofline view (`r`): ranges, or the kernel families of one range, on a log-log plot of
achieved TFLOP/s against arithmetic intensity under the GPU's memory and compute roofs, with the
table behind the plot underneath. j/k move through the points (the one under the cursor is
marked on the plot), enter on a range shows its families, `t` switches ranges/families, `e`
exports the table."""
from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import Static
from textual_plotext import PlotextPlot

from nsight_tui.parsers.kernels.peaks import MATH_PATH_WORDS
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render import numbers
from nsight_tui.tui.viewmodels import roofline as vm
from nsight_tui.tui.messages import RooflineReady
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


def _num(digits: int):
    def show(v) -> str:
        return "" if numbers.missing(v) else f"{v:,.{digits}f}"
    return show


COLUMNS = [
    Column("label", "Point", None, "left", text=True, min_width=18, md_header="point"),
    Column("tflops", "TFLOP/s", 8, fmt=_num(2), priority=9),
    Column("gbps", "GB/s", 7, fmt=_num(0), priority=8),
    Column("ai", "FLOP/B", 8, fmt=_num(2), priority=7),
    Column("mfu", "MFU", 6, fmt=numbers.percent, priority=4),
    Column("gpu_ms_per", "GPU ms/it", 9, fmt=_num(3), priority=5, md_header="GPU ms per instance"),
    Column("verdict", "Verdict", 20, "left", text=True, priority=9),
    Column("reason", "", show=False, text=True),
]


class RooflineScreen(TableScreen):
    view_name = "roofline"
    hint = "enter: families of the range · t: ranges/families"

    BINDING_GROUP_TITLE = "Roofline view (r)"
    BINDINGS = [Binding("t", "toggle_mode", "Ranges/families",
                        tooltip="Plot every range, or the kernel families of the range last opened",
                        id="roofline.mode")]

    mode: var[str] = var(vm.RANGES, init=False)  # ranges | families

    DEFAULT_CSS = """
    RooflineScreen #roof-plot { height: 1fr; min-height: 8; }
    RooflineScreen #roof-body { height: 1fr; }
    RooflineScreen #table { height: 9; }
    RooflineScreen #roof-needs { height: auto; padding: 0 1; display: none; }
    RooflineScreen.-no-counts #roof-plot { display: none; }
    RooflineScreen.-no-counts #roof-needs { display: block; }
    RooflineScreen.-no-counts #table { height: 1fr; }
    """

    def __init__(self, session, node=None, mode: str = vm.RANGES, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.node = node
        self.set_reactive(RooflineScreen.mode, mode if node is None else vm.FAMILIES)
        self.data: vm.RooflineData | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="roof-body"):
            yield PlotextPlot(id="roof-plot")
            yield Static("", id="roof-needs")
            yield DataGrid(id="table", empty_text="computing…")

    def crumb(self) -> str:
        if self.data is None:
            return "roofline"
        return self.data.header()

    def mounted(self) -> None:
        super().mounted()
        self.build(self.mode, self.node)

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self, mode: str, node) -> None:
        self.post_message(RooflineReady(self.session.roofline(mode, node)))

    def on_roofline_ready(self, message: RooflineReady) -> None:
        self.data = data = message.data
        self.show_crumb()
        self.grid.empty_text = "nothing to plot: no ranges with GPU work"
        self.show_table(TableModel(data.frame, COLUMNS))
        self.set_status(f"{data.source_line} · {data.peaks_line}")
        needs = data.needs_counts()
        self.set_class(bool(needs), "-no-counts")
        self.query_one("#roof-needs", Static).update(literal(needs))
        self._draw()

    # -- the plot --------------------------------------------------------------------------------
    def _current_label(self) -> str | None:
        if self.table is None or not len(self.table):
            return None
        return str(self.table.record(self.grid.cursor)["label"])

    def _draw(self) -> None:
        widget = self.query_one(PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        data = self.data
        pts = data.plottable() if data is not None else None
        if data is None or pts is None or pts.empty:
            plt.title("no point with both FLOPs and bytes to plot")
            widget.refresh()
            return
        xs = pts["ai"].tolist()
        ridges = [r / data.bandwidth for r in data.roofs.values()] if data.bandwidth else []
        lo = min(xs + ridges) / 4
        hi = max(xs + ridges) * 4
        plt.xscale("log")
        plt.yscale("log")
        if data.bandwidth:
            paths = [p for p in ("fp32", *sorted({*pts["math_path"]} - {"fp32"})) if p in data.roofs]
            for path in paths:
                peak = data.roofs[path]
                ridge = peak / data.bandwidth
                plt.plot([lo, ridge, hi], [lo * data.bandwidth / 1e12, peak / 1e12, peak / 1e12],
                         label=f"{MATH_PATH_WORDS[path]} roof", marker="braille")
        estimated = pts[pts["source"] != vm.MEASURED]
        measured = pts[pts["source"] == vm.MEASURED]
        if len(estimated):
            plt.scatter(estimated["ai"].tolist(), estimated["tflops"].tolist(), marker="o",
                        label=f"{data.mode} ({data.source} FLOPs, nsys time)" if len(measured) else data.mode)
        if len(measured):  # Nsight Compute's counters (--ncu), beside the estimate
            plt.scatter(measured["ai"].tolist(), measured["tflops"].tolist(), marker="+",
                        label="measured (ncu counters, ncu time)")
        current = self._current_label()
        sel = pts[pts["label"] == current]
        if current is not None and len(sel):
            plt.scatter(sel["ai"].tolist(), sel["tflops"].tolist(), marker="X", color="red", label=current[:30])
        plt.xlabel("arithmetic intensity (FLOP/byte)")
        plt.ylabel("TFLOP/s")
        # no xlim/ylim: plotext reads limits on a log axis as exponents; the roof lines span the range
        widget.refresh()

    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        if self.data is not None:
            self._draw()
            rec = self.table.record(event.row) if self.table is not None and len(self.table) else None
            if rec is not None:
                self.set_status(f"{rec['label']}: {rec['verdict']} — {rec['reason']}")

    # -- moving ------------------------------------------------------------------------------------
    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.data is None or self.data.mode != vm.RANGES or self.table is None or not len(self.table):
            return
        path = str(self.table.record(event.row)["path"])
        node = self._node_for(path)
        if node is not None:
            self.app.push_screen(RooflineScreen(self.session, node))

    def _node_for(self, path: str):
        from nsight_tui.parsers.analyses.roofline import node_path

        model = self.session.model
        stack = [n for g in model.aggregated_groups for n in g.roots]
        while stack:
            n = stack.pop()
            if node_path(n.path) == path:
                return n
            stack.extend(n.children)
        return None

    def action_toggle_mode(self) -> None:
        """Ranges ⇄ the kernel families of the range opened, else of the range under the cursor
        (never of one the user did not pick)."""
        if self.mode == vm.RANGES and self.node is None and self.table is not None and len(self.table):
            self.node = self._node_for(str(self.table.record(self.grid.cursor)["path"]))
        self.mode = vm.FAMILIES if self.mode == vm.RANGES else vm.RANGES

    def watch_mode(self, mode: str) -> None:
        self.set_status("computing…")
        self.build(mode, self.node)

    # -- export ------------------------------------------------------------------------------------
    def export_view(self) -> ViewText | None:
        if self.data is None:
            return None
        headers, rows = vm.markdown_rows(self.data)
        head = self.export_header(self.data.source_line, self.data.peaks_line,
                                  "TFLOP/s, GB/s over GPU time (ranges: GPU busy; families and kernels: summed "
                                  "kernel durations); MFU over NVTX time")
        return ViewText(f"roofline_{self.data.mode}", head, md_table(headers, rows, title=f"Roofline: {self.data.scope}"))

