"""`F`: what to fix first. The rules' findings ranked by the step time their fix would save
(id, title, where, saving, basis), the highlighted one's evidence and fix underneath, and
`enter` to its evidence: a range's kernels, the range in the tree, or the timeline window
(data: Session.findings, tui/viewmodels/findings.py)."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Static

from nsight_tui.parsers.analyses.findings.replayed import NO_EDIT
from nsight_tui.render.safe import markdown as md_text
from nsight_tui.tui.messages import FindingsReady, Navigation
from nsight_tui.tui.table_model import ViewText
from nsight_tui.tui.viewmodels.findings import FindingsView, Jump
from nsight_tui.tui.viewmodels.timeline import TimelineTarget
from nsight_tui.tui.viewmodels.whatif import WhatIf
from nsight_tui.tui.views.base import TableScreen, literal
from nsight_tui.tui.widgets.grid import DataGrid


class FindingsScreen(TableScreen):
    DEFAULT_CSS = """
    FindingsScreen #table { height: 1fr; min-height: 3; }
    /* the detail whole at 80x24 (17 rows with its evidence rows: fp32-gemm states a range), the table
       down to its minimum (its header and two rows, j/k scroll it);
       12 rows cut the fix and where enter goes without a mark; past 80% it scrolls, with a bar */
    FindingsScreen #fdetail { height: auto; max-height: 80%; overflow-y: auto; padding: 0 1; background: $panel; }
    """
    view_name = "findings"

    @dataclass
    class EvidenceChosen(Navigation):
        """enter on a finding: its evidence (a range's kernels, a range in the tree, a moment on the
        timeline; `jump.kind` says which)."""

        jump: Jump

    @dataclass
    class WhatIfChosen(Navigation):
        """`w` on a finding: its fix replayed (the what-if view)."""

        ask: WhatIf
    empty_text = "running the rules over the steady-state steps…"
    hint = "enter: jump to the evidence"

    BINDING_GROUP_TITLE = "What to fix first (F)"
    BINDINGS = [Binding("enter", "jump", "Evidence", id="findings.jump",
                        tooltip="Jump to the highlighted finding's evidence: the kernels of the range it names, "
                        "or the timeline over its window (idle gaps, blocking calls, copies, slow steps)"),
                Binding("w", "whatif", "What if", id="findings.whatif",
                        tooltip="The highlighted finding's fix replayed: the predicted step and its range, the saving "
                        "per step, what holds the step after the fix")]

    current: var[int | None] = var(None, init=False)  # the highlighted finding (its index in view.findings)

    def __init__(self, session, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.view: FindingsView | None = None

    def crumb(self) -> str:
        if self.view is None:
            return "what to fix first"
        return f"what to fix first · {self.view.scope}"

    def compose_body(self) -> ComposeResult:
        yield DataGrid(id="table", empty_text=self.empty_text)
        yield Static("", id="fdetail")

    def mounted(self) -> None:
        super().mounted()
        self.build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def build(self) -> None:
        self.post_message(FindingsReady(self.session.findings()))

    def on_findings_ready(self, message: FindingsReady) -> None:
        self.view = message.view
        self.grid.empty_text = "no findings (why: below)"
        self.show_crumb()
        self.show_table(message.view.table())
        self.refresh_bindings()

    def _sync_grid(self, cursor: int | None = None) -> None:
        """Every table change (first show, sort, filter) may put another finding under the cursor."""
        super()._sync_grid(cursor)
        self.current = self.selected_position()
        self.show_detail()

    def on_data_grid_highlighted(self, event: DataGrid.Highlighted) -> None:
        self.current = self.selected_position()

    def watch_current(self) -> None:
        self.show_detail()
        self.refresh_bindings()  # `w` replays the highlighted finding: none highlighted, none to replay

    def check_action(self, action: str, parameters) -> bool | None:
        if action in ("whatif", "jump") and self.view is not None and self.current is None:
            return None  # no finding (none fired, or the filter hides them): shown, dimmed
        return super().check_action(action, parameters)

    def show_detail(self) -> None:
        detail = self.query_one("#fdetail", Static)
        if self.view is None:
            detail.update("")
        elif self.current is None:
            detail.update(literal(self.view.none_text() if not self.view.findings else "no finding matches the filter"))
        else:
            text = Text()
            for label, line in self.view.detail(self.current):
                if text:
                    text.append("\n")
                text.append(f"{label}: " if label else "", style="bold")
                text.append_text(literal(line, "bold" if not label else ""))
            detail.update(text)

    # -- enter: the evidence --------------------------------------------------------------------
    def on_data_grid_selected(self, event: DataGrid.Selected) -> None:
        self.action_jump()

    def action_jump(self) -> None:
        if self.view is None or self.current is None:
            return
        jump = self.view.jumps[self.current]
        if jump.leads_somewhere:
            self.post_message(self.EvidenceChosen(jump))
        else:
            self.set_status(jump.what)

    def action_whatif(self) -> None:
        if self.view is None or self.current is None:
            return
        f = self.view.findings[self.current]
        if not f.edits:
            self.set_status(f"{f.id}: the replay has no edit for this fix ({NO_EDIT.get(f.id, 'none named')})")
            return
        if f.not_replayed:  # the replay refused its edits once already: a what-if screen would only fail again
            self.set_status(f"{f.id}: not replayed ({f.not_replayed}); its saving is the rule's estimate")
            return
        self.post_message(self.WhatIfChosen(WhatIf(f.id, tuple(f.edits), f.estimate_ms_per_step)))

    def timeline_target(self) -> TimelineTarget | None:
        """`t`: the highlighted finding's window, whatever `enter` opens."""
        if self.view is None or self.current is None:
            return None
        return self.view.jumps[self.current].target

    # -- export ---------------------------------------------------------------------------------
    def export_view(self) -> ViewText | None:
        view, table, pos = self.view, self.table, self.current
        if view is None or table is None:
            return None
        head = self.export_header(table.describe())
        if not view.findings:
            return ViewText(self.view_name, head, md_text(view.none_text()) + "\n")
        body = self.export_table("Findings, largest saving first")
        if pos is not None:
            f = view.findings[pos]
            body += f"\n### Highlighted: `{f.id}`\n\n" + "\n".join(
                f"- {label + ': ' if label else ''}{md_text(line)}" for label, line in view.detail(pos)) + "\n"
            rows = view.evidence_markdown(pos)
            body += ("\n" + rows) if rows else ""
        return ViewText(self.view_name, head, body)
