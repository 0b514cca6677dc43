"""`5`: the ranks side by side (data: Session.ranks_view, from parsers.ranks): per rank its
step time (median, min, max), compute per step, communication and the exposed part of it;
the spread across ranks and the straggler; per phase and rank the same, with each rank's
distance from the median rank. enter on a rank: the range tree of that rank only; `w`: what the
straggler costs, replayed (the `straggler` edit, the what-if view)."""
from __future__ import annotations

from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from nsight_tui.parsers.analyses.ranks import Rank
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.render.safe import markdown as md_text
from nsight_tui.tui.messages import Navigation, RanksReady
from nsight_tui.tui.table_model import TableModel, ViewText
from nsight_tui.tui.viewmodels.ranks import COMM_NOTE, RanksView
from nsight_tui.tui.viewmodels.whatif import WhatIf
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class RanksScreen(TableScreen):
    DEFAULT_CSS = """
    RanksScreen #table { height: auto; max-height: 40%; }
    RanksScreen #rank-lines {
        height: auto; max-height: 6; padding: 0 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis;
    }
    RanksScreen #phases { height: 1fr; }
    """
    view_name = "ranks"

    @dataclass
    class RankChosen(Message):
        """enter or `R` on a rank: filter every view to it (a new model, not a new view)."""

        rank: Rank

    @dataclass
    class StragglerWhatIf(Navigation):
        """`w` where the ranks name a straggler: the straggler evened out, replayed (the what-if view)."""

        ask: WhatIf
    empty_text = "summarising the ranks…"
    hint = "enter: this rank's tree · R: cycle ranks · w: straggler what-if"

    BINDING_GROUP_TITLE = "Ranks (5)"
    BINDINGS = [Binding("enter", "filter_rank", "Filter to rank", id="ranks.filter_rank",
                        tooltip="The range tree and kernel tables of the rank under the cursor only (R cycles ranks)"),
                Binding("w", "whatif", "Straggler what-if", id="ranks.whatif",
                        tooltip="What the straggler costs, replayed: its own pauses, slower kernels and syncs at the "
                        "other ranks' length, the predicted step and what holds it after (whatif DIR straggler)")]

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.view: RanksView | None = None
        self.phases: TableModel | None = None

    def crumb(self) -> str:
        if self.view is None:
            return "ranks side by side"
        n = len(self.view.ranks)
        return f"ranks side by side · {n} rank{'s' if n != 1 else ''} · step time, compute, communication"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="rank-lines")
        phases = DataGrid(id="phases", empty_text="no forward/backward/optimizer ranges inside step_N ranges")
        phases.can_focus = False  # sort, filter and search act on the ranks above
        yield phases

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(RanksReady(self.session.ranks_view()))

    def on_ranks_ready(self, message: RanksReady) -> None:
        self.view = view = message.view
        self.grid.empty_text = "no GPU work in this export"
        self.show_table(view.rank_table())
        self.phases = view.phase_table()
        self.query_one("#phases", DataGrid).set_source(self.phases)
        self.query_one("#rank-lines", Static).update(literal("\n".join(view.lines)))
        self.show_crumb()
        self.refresh_bindings()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "whatif" and (self.view is None or self.view.run.straggler is None):
            return None  # no straggler named (one rank, or ranks that arrive together): shown, dimmed
        return super().check_action(action, parameters)

    def action_whatif(self) -> None:
        if self.view is not None and self.view.run.straggler is not None:
            self.post_message(self.StragglerWhatIf(WhatIf("", ("straggler",))))  # an edit asked for, not a finding

    def selected_rank(self):
        position = self.selected_position()
        return None if self.view is None or position is None else self.view.ranks[position]

    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        self.action_filter_rank()

    def action_filter_rank(self) -> None:
        rank = self.selected_rank()
        if rank is not None:
            self.post_message(self.RankChosen(rank))

    def export_view(self) -> ViewText | None:
        view, phases = self.view, self.phases
        if self.table is None or view is None or phases is None:
            return None
        head = self.export_header(self.table.describe(), *view.notes)
        body = self.export_table("Ranks") + "\n" + "\n".join(f"- {md_text(line)}" for line in view.lines) + "\n\n"
        headers, rows = phases.export_rows()
        body += md_table(headers, rows, title="Per phase (steady-state steps)", notes=[COMM_NOTE])
        return ViewText(self.view_name, head, body)
