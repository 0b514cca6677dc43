"""The main view: the NVTX range tree per process/thread, aggregated by name path or as
individual instances, with the highlighted range's numbers underneath."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.message import Message
from textual.widgets import Static

from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.steps import gpu_lags
from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.render.process_view import main_thread_reason
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.safe import rich_text, visible
from nsight_tui.render import numbers
from nsight_tui.tui.messages import Navigation
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.tree_source import (
    INFERRED,
    INFERRED_CPU_MARK,
    INFERRED_CPU_SHORT,
    PER_INSTANCE,
    PER_STEP,
    TOTAL,
    RangeTreeSource,
    is_step_row,
    iteration_of,
    node_key,
    path_text,
)
from nsight_tui.tui.views.base import ViewScreen
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.prompt_bar import PromptBar

class RangeTree(DataGrid):
    """The range tree: a DataGrid over a RangeTreeSource, plus expand/collapse keys."""

    BINDING_GROUP_TITLE = "Range tree: expand and collapse"
    BINDINGS = [
        Binding("l,right", "expand", "Expand", show=False, id="tree.expand"),
        Binding("h,left", "collapse", "Collapse / to parent", show=False, id="tree.collapse"),
        Binding("space", "toggle_node", "Expand/collapse", show=False, id="tree.toggle"),
    ]

    @property
    def ranges(self) -> RangeTreeSource:
        assert isinstance(self.source, RangeTreeSource)
        return self.source

    def action_expand(self) -> None:
        if len(self.source) and self.ranges.expand(self.cursor):
            self.data_changed()
        elif len(self.source) and self.ranges.rows[self.cursor].expanded:
            self.move_to(self.cursor + 1)

    def action_collapse(self) -> None:
        if not len(self.source):
            return
        if self.ranges.collapse(self.cursor):
            self.data_changed()
            return
        parent = self.ranges.parent_row(self.cursor)
        if parent is not None:
            self.move_to(parent)

    def action_toggle_node(self) -> None:
        if not len(self.source):
            return
        changed = self.ranges.collapse(self.cursor) or self.ranges.expand(self.cursor)
        if changed:
            self.data_changed()


class RangesScreen(ViewScreen):
    view_name = "ranges"

    @dataclass
    class RangeChosen(Navigation):
        """enter on a range: its kernels."""

        node: RangeNode

    @dataclass
    class BackwardPartsAsked(Navigation):
        """`b`: backward's kernels by the forward part they belong to."""

    @dataclass
    class ThreadPicked(Message):
        """`M` on a thread row: make it its process's main thread (a new attribution, not a new view)."""

        gtid: int

    BINDING_GROUP_TITLE = "Range tree (main view)"
    BINDINGS = [
        Binding("a", "toggle_aggregate", "Aggregate",
                tooltip="Toggle: ranges aggregated by name path (step_N ×5) / individual instances",
                id="ranges.aggregate"),
        Binding("i", "toggle_per_instance", "Per step/total/instance", show=False, id="ranges.per_instance",
                tooltip="Aggregated rows (step_N ×3): figures per step (where the capture has steps: the total ÷ "
                "the instances of the step_N or warmup_N it is in; how it opens), as totals over the instances, "
                "or per instance (total ÷ ×N); the headers say which"),
        Binding("slash", "search", "Search", tooltip="Search ranges by name (a/b matches a path ending a/b)",
                id="ranges.search"),
        Binding("n", "search_next", "Next match", show=False, id="ranges.search-next"),
        Binding("N", "search_prev", "Previous match", show=False, id="ranges.search-prev"),
        Binding("b", "backward_parts", "Bwd by part", show=False, id="ranges.backward_parts",
                tooltip="Backward by forward part: each forward part's forward and backward kernel time, bwd/fwd "
                "(needs op ranges from --autograd-nvtx / emit_nvtx, or backward:<part> ranges)"),
        Binding("M", "main_thread", "Main thread", show=False, id="ranges.main_thread",
                tooltip="Make the thread under the cursor its process's main thread (its ranges then hold the "
                "work every thread launched while they were open); again on it: back to the automatic choice"),
    ]

    aggregated: var[bool] = var(True, init=False)  # by name path (step_N ×5) or instances
    # aggregated figures: per step (how a capture with steps opens), totals, or ÷ instances
    figures: var[str] = var(TOTAL, init=False)
    search_text: var[str] = var("", init=False, always_update=True)

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.set_reactive(RangesScreen.aggregated, session.aggregated)
        self._matches: list[RangeNode] = []
        self._figures_chosen = False  # `i` pressed: the figures stay as chosen (else per step where there are steps)

    def compose_body(self) -> ComposeResult:
        yield RangeTree(id="tree", empty_text="no NVTX ranges in this export: press 2 for the kernel summary")
        yield Static("", id="detail")

    @property
    def grid(self) -> RangeTree:
        return self.query_one("#tree", RangeTree)

    def mounted(self) -> None:
        self.rebuild()
        self.set_focus(self.grid, scroll_visible=False)  # now: the first frame is drawn focused

    def crumb(self) -> str:
        # where ranges are inferred, the CPU column's mark is explained here (the header has 9 columns)
        cpu = f" · CPU{INFERRED_CPU_MARK}: {INFERRED_CPU_SHORT}" if self.has_inferred() else ""
        what = self.tree_what()
        if not self.aggregated:
            return f"{what} (individual instances)" + cpu
        steps = self.session.steps()
        if self.figures == PER_STEP and steps is not None:
            n, period, alike = steps
            # ÷ the step count, and the step's typical period (the loop's pace: the median, the mean
            # where the steps alternate)
            return (f"{what} per step (÷{n}, {'median' if alike else 'mean, steps unlike,'} "
                    f"{numbers.duration(period)}){cpu} · i: totals")
        died = None if self.session.pending else self.session.died()
        if died is not None and steps is None:  # the iteration it died in is no step: no figure per step
            each = "per instance" if self.figures == PER_INSTANCE else "total ×N"
            return f"{what} · {died.text()} · {each}{cpu}"
        if self.figures == PER_INSTANCE:
            return f"{what} (aggregated by name path) · per instance{cpu} · i: " + ("per step" if steps else "total ×N")
        return f"{what} (aggregated by name path) · total ×N{cpu} · i: per instance"

    def tree_what(self) -> str:
        """What the tree is: NVTX ranges, or ranges inferred from the kernel sequence (no NVTX)."""
        if self.session.trace.info.ranges == 0 and self.has_inferred():
            return "inferred ranges (no NVTX)"
        return "ranges"

    def has_inferred(self) -> bool:
        """Ranges inferred from the kernel sequence are in the tree (parsers.model.inferred)."""
        return inference(self.session.trace).found

    # -- building -------------------------------------------------------------------------------
    def rebuild(self, keep: tuple | None = None) -> None:
        """(Re)build the tree from the session's model; put the cursor on `keep`
        ((gtid, name-path key)) when it still exists, else on the first range."""
        model = self.session.model
        agg = self.aggregated
        if not self._figures_chosen:  # per step where the capture has steps (known once its GPU work is read)
            self.set_reactive(RangesScreen.figures, PER_STEP if self.session.steps() is not None else TOTAL)
        figures = self.figures if self.figures != PER_STEP or self.session.steps() is not None else TOTAL
        died = None if self.session.pending else self.session.died()
        source = RangeTreeSource(model.aggregated_groups if agg else model.thread_groups, agg, figures,
                                 self.has_inferred(), died.ids if died is not None else frozenset())
        source.expand_default()
        self._matches = []
        cursor = source.home_row()
        self._home = cursor
        if keep is not None:
            node = source.find_key(*keep)
            row = source.reveal(node) if node is not None else None
            if row is not None:
                cursor = row
        self.grid.set_source(source, cursor)
        if self.session.trace.info.ranges > 5000:
            self._prepare_search(source)
        self.show_crumb()
        self._update_detail()
        if self.session.trace.info.ranges == 0 and self.has_inferred():
            self.set_status("no NVTX: the tree is inferred from the kernel sequence · enter: kernels · ? help")
        elif self.session.trace.info.ranges == 0:
            self.set_status("no NVTX ranges: 2 kernel summary · 3 API summary")
        else:
            self.set_status("enter: kernels of the range · l/h expand/collapse · a aggregate · / search · ? help")

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "back" and not self.host.multi:
            return False  # the only file's range tree is home: nothing to go back to
        if action in ("backward_parts", "main_thread") and self.session.pending:
            return False  # both need the GPU work, still loading (the app refreshes the keys then)
        if action == "main_thread":  # `t` on a thread row; on a range, `t` is the app's timeline
            return self.is_mounted and len(self.grid.source) > 0 and self.grid.ranges.node_at(self.grid.cursor) is None
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="search-index")
    def _prepare_search(self, source: RangeTreeSource) -> None:
        source.prepare_search()

    def kept_key(self) -> tuple | None:
        """What a rebuild keeps the cursor on: the range under it, unless it is still where the
        tree opened (then the new tree's own start: the iteration)."""
        if self.grid.cursor == getattr(self, "_home", None):
            return None
        return self.current_key()

    def current_key(self) -> tuple | None:
        tree = self.grid.ranges
        node = tree.node_at(self.grid.cursor)
        if node is None:
            return None
        return tree.group_at(self.grid.cursor).gtid, node_key(node)

    def select_key(self, gtid: int, key: tuple[str, ...]) -> bool:
        tree = self.grid.ranges
        node = tree.find_key(gtid, key)
        if node is None:
            return False
        return self.select_node(node)

    def select_node(self, node: RangeNode) -> bool:
        row = self.grid.ranges.reveal(node)
        if row is None:
            return False
        self.grid.data_changed(row)
        return True

    # -- reacting -------------------------------------------------------------------------------
    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        self._update_detail()

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        tree = self.grid.ranges
        node = tree.node_at(event.row)
        if node is None:
            self.grid.action_toggle_node()
            return
        self.post_message(self.RangeChosen(node))

    def _update_detail(self) -> None:
        detail = self.query_one("#detail", Static)
        tree = self.grid.ranges
        node = tree.node_at(self.grid.cursor) if len(tree) else None
        if node is None:
            if len(tree):
                g = tree.group_at(self.grid.cursor)
                text = rich_text(g.label, style="bold")
                ranks = self.session.process_ranks_text(g.gpid)
                if ranks:
                    text.append(f" · {ranks}")
                text.append(f"\n{len(g.roots):,} top-level range{'s' if len(g.roots) != 1 else ''}")
                info = self.session.model.main_info.get(g.gpid)
                if g.is_main and info is not None:
                    text.append("\nmain thread: " + main_thread_reason(info, self.session.trace.thread_label(g.gtid)))
                    if self.session.attribution == "process":
                        text.append("; its ranges hold the work every thread launched while they were open")
                else:
                    text.append(" · M: make it the main thread")
                detail.update(text)
            else:
                detail.update("")
            return
        share = node.share_of_parent()
        busy = node.busy_ns / node.proj_ns if node.proj_ns else None
        text = Text()
        text.append(visible(path_text(node)), style="bold")
        if node.instances > 1:
            text.append(f"  ×{node.instances}")
        if self.grid.ranges.holds_died(node):
            text.append(" · died: out of GPU memory inside it, no step", style="bold")
        else:
            clock = None if node.model.gpu_pending else self.session.step_clock()
            if clock is not None and clock.visible and node.instances == clock.steps and is_step_row(node):
                text.append(f" · {clock.short()}")
        text.append("\n")
        if node.model.gpu_pending:
            detail.update(text.append(f"CPU {numbers.duration(node.cpu_ns)} (NVTX span) · GPU work: loading…"))
            return
        n = node.instances
        per, it = self.grid.ranges.divisor(node), iteration_of(node)
        first = ""  # the figures the tree shows, first
        if self.grid.ranges.figures == PER_STEP and per > 1 and it is not None:
            first = f"per step (÷{per}): " + self._per_text(node, per)
        elif self.grid.ranges.figures == PER_INSTANCE and n > 1:
            first = "per instance: " + self._per_text(node, n)
        if first:
            text.append(first + "\n")
        if n > 1:
            text.append(f"total ×{n}: ")
        # an inferred range (parsers.model.inferred) spans its kernels' launches, not an NVTX push/pop
        span = "launch span, inferred from the kernel sequence" if node.label.startswith(INFERRED) else "NVTX span"
        text.append(f"CPU {numbers.duration(node.cpu_ns)} ({span}) · GPU {numbers.duration(node.proj_ns)} (its work's span)")
        if gpu_lags(node.proj_ns, node.cpu_ns):
            text.append(" ▲ the GPU runs behind the CPU", style="bold")
        text.append(f" · busy {numbers.duration(node.busy_ns)} ({numbers.percent(busy) or 'n/a'} of its GPU time)")
        if share is not None:
            text.append(f", {numbers.percent(share)} of parent")
        others = "memcpy/memset/graph" if self.session.trace.info.graphs_whole else "memcpy/memset"
        text.append(f" · {node.kernels:,} kernels · {node.ops - node.kernels:,} {others}")
        if n > 1 and not first.startswith("per instance") and not (first and per == n):
            text.append("\nper instance: " + self._per_text(node, n))
        scope = self.session.node_scope_text(node)
        if scope:
            text.append(f" · {scope}")
        detail.update(text)

    @staticmethod
    def _per_text(node: RangeNode, per: int) -> str:
        return (f"CPU {numbers.duration(node.cpu_ns / per)} · GPU {numbers.duration(node.proj_ns / per)} · "
                f"busy {numbers.duration(node.busy_ns / per)} · {numbers.count(round(node.kernels / per))} kernels")

    def action_backward_parts(self) -> None:
        self.post_message(self.BackwardPartsAsked())

    def action_main_thread(self) -> None:
        tree = self.grid.ranges
        if len(tree):
            self.post_message(self.ThreadPicked(tree.group_at(self.grid.cursor).gtid))

    def action_toggle_aggregate(self) -> None:
        self.aggregated = not self.aggregated

    def action_toggle_per_instance(self) -> None:
        if not self.aggregated:
            self.set_status("individual instances: every figure is one instance's (a: aggregate)")
            return
        # per step → totals → per instance → per step (without steps: totals ↔ per instance)
        order = [PER_STEP, TOTAL, PER_INSTANCE] if self.session.steps() is not None else [TOTAL, PER_INSTANCE]
        at = order.index(self.figures) if self.figures in order else 0
        self._figures_chosen = True
        self.figures = order[(at + 1) % len(order)]

    def watch_figures(self, figures: str) -> None:
        keep = self.current_key()
        self.rebuild(keep)
        self.set_status({PER_INSTANCE: "figures per instance: total ÷ ×N",
                         PER_STEP: "figures per step: total ÷ the instances of its step_N (warmup_N)"}.get(
                             figures, "figures: totals over ×N instances"))

    def watch_aggregated(self, aggregated: bool) -> None:
        keep = self.current_key()
        self.session.aggregated = aggregated
        self.rebuild(keep)
        self.set_status("aggregated by name path (step_N = all steps)" if aggregated else "individual instances")

    # -- search -------------------------------------------------------------------------------
    def action_search(self) -> None:
        self.prompt.open("search", "/", self.search_text)

    def on_prompt_bar_submitted(self, event: PromptBar.Submitted) -> None:
        self.focus_after_prompt(self.grid)
        self.search_text = event.value.strip()

    def watch_search_text(self, text: str) -> None:
        self._matches = self.grid.ranges.matches(text)
        self._jump(backwards=False, include_current=True)

    def on_prompt_bar_cancelled(self, event: PromptBar.Cancelled) -> None:
        self.focus_after_prompt(self.grid)

    def action_search_next(self) -> None:
        self._jump(backwards=False)

    def action_search_prev(self) -> None:
        self._jump(backwards=True)

    def _jump(self, backwards: bool, include_current: bool = False) -> None:
        if not self.search_text:
            return
        if not self._matches:
            self.set_status(f"no range matches '{self.search_text}'")
            self.app.bell()
            return
        tree = self.grid.ranges
        current = tree.node_at(self.grid.cursor)
        here = tree.preorder_index(current) if current is not None else -1
        positions = [tree.preorder_index(n) for n in self._matches]
        if backwards:
            before = [k for k, p in enumerate(positions) if p < here]
            k = before[-1] if before else len(positions) - 1
        else:
            after = [k for k, p in enumerate(positions) if (p >= here if include_current else p > here)]
            k = after[0] if after else 0
        self.select_node(self._matches[k])
        self.set_status(f"match {k + 1} of {len(self._matches)} for '{self.search_text}' (n/N)")

    def timeline_target(self):
        """`t`: the range under the cursor (aggregated: its median instance)."""
        from nsight_tui.tui.viewmodels.timeline import target_for_node  # the timeline's: imported when asked for

        node = self.grid.ranges.node_at(self.grid.cursor) if len(self.grid.ranges) else None
        return None if node is None else target_for_node(self.session.model, node)

    # -- export ---------------------------------------------------------------------------------
    def export_view(self) -> ViewText:
        headers, rows = self.grid.ranges.export_rows()
        mode = "aggregated by name path" if self.aggregated else "individual instances"
        head = self.export_header(f"view: range tree, {mode}; rows as expanded on screen ({len(rows)} ranges)")
        return ViewText("ranges", head, md_table(headers, rows, title="NVTX ranges"))
