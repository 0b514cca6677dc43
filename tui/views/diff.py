"""The diff of two runs: the merged range tree with Δ columns (enter: a range's kernel and
family diff), the why summary (`w`), the step's kernels (`K`). Workers compute the view models
(tui/viewmodels/diff.py over parsers/analyses/diff.py) and post them back; the screens only render."""
from __future__ import annotations

from pathlib import Path
from typing import cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Static

from nsight_tui.parsers.analyses.diff import RangeDiff
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.safe import rich_text, visible
from nsight_tui.tui.messages import DiffFailed, DiffProgress, DiffReady, ScopeReady
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.viewmodels import diff as vm
from nsight_tui.tui.views.base import TableScreen, ViewScreen
from nsight_tui.tui.views.ranges import RangeTree
from nsight_tui.tui.widgets.grid import DataGrid
from nsight_tui.tui.widgets.prompt_bar import PromptBar


class DiffScreen(ViewScreen):
    """A against B: every Δ is B − A, per iteration of each range's basis."""

    view_name = "diff"

    BINDING_GROUP_TITLE = "Diff of two runs (several-files view: b baseline, d diff)"
    BINDINGS = [
        Binding("w", "why", "Why", tooltip="The step's Δ by phase and family (waterfall) and the largest contributors",
                id="diff.why"),
        Binding("K", "step_kernels", "Step kernels",
                tooltip="Kernel and family diff of the whole step (or of the whole captures without steps)",
                id="diff.step-kernels"),
        Binding("t", "next_metric", "Metric",
                tooltip="Which metric the A / B / Δ / Δ% columns show: GPU busy, kernel time, CPU time, kernel count",
                id="diff.metric"),
        Binding("slash", "search", "Search", tooltip="Search ranges by name (a/b matches a path ending a/b)",
                id="diff.search"),
        Binding("n", "search_next", "Next match", show=False, id="diff.search-next"),
        Binding("N", "search_prev", "Previous match", show=False, id="diff.search-prev"),
    ]

    search_text: var[str] = var("", init=False, always_update=True)

    def __init__(self, a: Path, b: Path, attribution: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.a, self.b = Path(a), Path(b)
        self.attribution = attribution
        self.view: vm.DiffView | None = None
        self.source: vm.DiffTreeSource | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("", id="diff-summary")
        yield RangeTree(id="tree", empty_text="comparing…")

    @property
    def grid(self) -> RangeTree:
        return self.query_one("#tree", RangeTree)

    def crumb(self) -> str:
        return self.view.crumb() if self.view else f"diff: {self.a.name} → {self.b.name} (A → B)"

    def mounted(self) -> None:
        self.grid.focus()
        self.set_status("comparing the two runs…")
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="diff")
    def build(self) -> None:
        def held(path: Path):
            session = self.host.held_session(path)
            return session.trace if session is not None else None

        view = vm.compare_files(self.a, self.b, self.attribution, held, lambda text: self.post_message(DiffProgress(text)))
        if isinstance(view, vm.CannotCompare):
            self.post_message(DiffFailed(view.message))
            return
        self.post_message(DiffReady(view))

    def on_diff_progress(self, message: DiffProgress) -> None:
        self.set_status(message.text)

    def on_diff_failed(self, message: DiffFailed) -> None:
        self.grid.empty_text = "cannot compare: " + message.message
        self.grid.data_changed()
        self.set_status(message.message)
        self.app.notify(message.message, title="diff", severity="error", markup=False)

    def on_diff_ready(self, message: DiffReady) -> None:
        self.view = message.view
        self.source = vm.DiffTreeSource(self.view.diff)
        self.source.expand_default()
        self.grid.empty_text = "no NVTX ranges in either run: K shows the kernel and family diff"
        self.grid.set_source(self.source, 1 if len(self.source) > 1 else 0)
        self.show_crumb()
        text = rich_text(self.view.headline, style="bold")
        for line in self.view.summary:
            text.append("\n" + visible(line))
        self.query_one("#diff-summary", Static).update(text)
        self.set_status("enter: kernel diff of the range · w why · K step kernels · t metric · / search")

    # -- keys -----------------------------------------------------------------------------------
    def _ready(self) -> vm.DiffView | None:
        """The comparison, or None (said in the status line) while it is still being made."""
        if self.view is None:
            self.set_status("still comparing…")
        return self.view

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.source is None:
            return
        node = self.source.node_at(event.row)
        if node is None:
            self.grid.action_toggle_node()
            return
        diff_node = cast(RangeDiff, node)  # a DiffTreeSource holds RangeDiffs
        self.app.push_screen(DiffKernelsScreen(node=diff_node, title=diff_node.path_text))

    def action_step_kernels(self) -> None:
        if view := self._ready():
            self.app.push_screen(DiffKernelsScreen(scope=view.diff.kernels, title=view.diff.kernels.scope))

    def action_why(self) -> None:
        if view := self._ready():
            self.app.push_screen(WhyScreen(vm.why_view(view), view.crumb()))

    def action_next_metric(self) -> None:
        if self.source is None:
            return
        keys = [k for k, _ in vm.METRICS]
        self.source.set_metric(keys[(keys.index(self.source.metric) + 1) % len(keys)])
        self.grid.set_source(self.source, self.grid.cursor)
        self.set_status(f"A / B / Δ / Δ% columns: {dict(vm.METRICS)[self.source.metric]} (per iteration)")

    def action_search(self) -> None:
        self.prompt.open("search", "/", self.search_text)

    def on_prompt_bar_submitted(self, event: PromptBar.Submitted) -> None:
        self.focus_after_prompt(self.grid)
        self.search_text = event.value.strip()

    def watch_search_text(self) -> None:
        self._find(step=0)

    def on_prompt_bar_cancelled(self, event: PromptBar.Cancelled) -> None:
        self.focus_after_prompt(self.grid)

    def action_search_next(self) -> None:
        self._find(step=1)

    def action_search_prev(self) -> None:
        self._find(step=-1)

    def _find(self, step: int) -> None:
        """The next (step 1), previous (-1) or first-from-here (0) range matching the search."""
        if self.source is None or not self.search_text:
            return
        hits = self.source.matches(self.search_text)
        if not hits:
            self.set_status(f"no range matches '{self.search_text}'")
            self.app.bell()
            return
        order = {id(n): k for k, n in enumerate(self.source.all_nodes())}
        here_node = self.source.node_at(self.grid.cursor)
        here = order.get(id(here_node), -1)
        ranks = [order[id(n)] for n in hits]
        if step < 0:
            pick = max((k for k, r in enumerate(ranks) if r < here), default=len(hits) - 1)
        else:
            pick = min((k for k, r in enumerate(ranks) if (r > here if step else r >= here)), default=0)
        row = self.source.reveal(hits[pick])
        if row is not None:
            self.grid.data_changed(row)
        self.set_status(f"match {pick + 1} of {len(hits)} for '{self.search_text}' (n/N)")

    def export_view(self) -> ViewText | None:
        if self.view is None or self.source is None:
            return None
        headers, rows = self.source.export_rows()
        d = self.view.diff
        head = [f"nsight-tui export: {self.view.crumb()}", f"A `{d.a_path}` · B `{d.b_path}` · attribution "
                f"`{d.attribution}`", f"basis: {d.basis}", self.view.headline, *self.view.summary,
                f"rows as expanded on screen ({len(rows)} ranges); values in ns (counts) per iteration"]
        return ViewText("diff", head, md_table(headers, rows, title="Ranges, A vs B"))


class DiffKernelsScreen(TableScreen):
    """One range's (or the step's) GPU ops matched by name; `t` shows them by family."""

    view_name = "diff_kernels"
    hint = "t: by family / by kernel"

    BINDING_GROUP_TITLE = "Diff: a range's kernels"
    BINDINGS = [Binding("t", "toggle_families", "By family",
                        tooltip="Show the diff by kernel family / by kernel name", id="diff-kernels.families")]

    by_family: var[bool] = var(False, init=False)

    def __init__(self, node=None, scope=None, title: str = "", **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.node, self.scope, self.title = node, scope, title
        self.view: vm.ScopeView | None = None

    def crumb(self) -> str:
        return self.view.crumb() if self.view else f"kernels of {self.title}…"

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        view = vm.range_scope(self.node) if self.node is not None else vm.scope_view(self.scope)
        self.post_message(ScopeReady(view))

    def on_scope_ready(self, message: ScopeReady) -> None:
        self.view = message.view
        self.show_crumb()
        self.grid.empty_text = "no GPU work in this range on either side"
        self.show_table(self.view.families if self.by_family else self.view.kernels)

    def action_toggle_families(self) -> None:
        if self.view is not None:
            self.by_family = not self.by_family

    def watch_by_family(self, by_family: bool) -> None:
        if self.view is not None:
            self.show_table(self.view.families if by_family else self.view.kernels)

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        if self.table is not None and len(self.table):
            rec = self.table.record(event.row)
            self.set_status(str(rec["name"]))  # the full demangled name (the table shows a short one)

    def export_view(self) -> ViewText | None:
        if self.view is None or self.table is None:
            return None
        what = "families" if self.by_family else "kernels"
        head = [f"nsight-tui export: {self.crumb()}", "Δ = B − A; times in ns per iteration", self.table.describe()]
        return ViewText(f"diff_{what}_{self.title}", head, self.export_table(f"{what.capitalize()} of {self.title}, A vs B"))


class WhyScreen(TableScreen):
    """The step's Δ in one screen: the verdict, the phase x family waterfall, the largest
    contributors."""

    view_name = "diff_why"

    def __init__(self, view: vm.WhyView, crumb: str, **kwargs) -> None:
        super().__init__(None, **kwargs)
        self.view = view
        self._crumb = crumb
        # what the status line says once mounted (the base classes' mount handlers set it last)
        self.empty_text = ("Δ GPU op time per step, by phase (rows) and family (columns) · e export"
                           if view.waterfall is not None else "no per-step comparison")

    def crumb(self) -> str:
        return f"why: {self._crumb}"

    def compose_body(self) -> ComposeResult:
        text = rich_text(self.view.lines[0], style="bold")
        for line in self.view.lines[1:]:
            text.append("\n" + visible(line))
        yield Static(text, id="why-lines")
        yield DataGrid(id="table", empty_text="no steps on both sides: no per-step waterfall")
        top = Text("largest contributors (Δ per step: kernels, then ranges by kernel time)", style="bold")
        for line in self.view.contributors:
            top.append("\n" + visible(line))
        yield Static(top if self.view.contributors else "", id="why-top")

    def mounted(self) -> None:
        super().mounted()
        if self.view.waterfall is not None:
            self.show_table(self.view.waterfall)
        self.set_status(self.empty_text)

    def export_view(self) -> ViewText | None:
        head = [f"nsight-tui export: {self.crumb()}", *self.view.lines]
        body = self.export_table("Step Δ by phase and family (ns per step)") if self.table is not None else ""
        if self.view.contributors:
            body += "\n### Largest contributors\n\n" + "\n".join(f"- {c}" for c in self.view.contributors) + "\n"
        return ViewText("diff_why", head, body)

