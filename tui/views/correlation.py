"""One correlation ID: the CUDA API call (cudaLaunchKernel, graph launch, memcpy...), the GPU
operations it started, and the NVTX ranges open around it."""
from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static
from textual.worker import get_current_worker

from nsight_tui.render.markdown import table as md_table
from nsight_tui.parsers.ids import OP_KINDS
from nsight_tui.tui import fmt
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import Column, TableModel, ViewText
from nsight_tui.tui.viewmodels.timeline import target_for_op
from nsight_tui.tui.views.base import TableScreen


def op_columns() -> list[Column]:
    return [
        Column("label", "GPU operation", None, "left", text=True, min_width=16, md_header="Operation"),
        Column("kind_name", "Kind", 7, "left", priority=3, md_header="Kind"),
        Column("start", "Start (s)", 12, fmt=fmt.seconds, priority=6, md_header="Start (ns)"),
        Column("duration", "Duration", 9, fmt=fmt.duration, priority=9, md_header="Duration (ns)"),
        Column("device", "Dev", 3, priority=2, md_header="Device"),
        Column("stream", "Strm", 4, priority=2, md_header="Stream"),
        Column("name", "", show=False, text=True, md_header="Name (demangled)"),
    ]


def stack_text(stack: list[str]) -> str:
    return " › ".join(stack) if stack else "(none)"


class CorrelationScreen(TableScreen):
    empty_text = "looking up…"

    def __init__(self, session, corr: int, gpid: int | None = None, **kwargs) -> None:
        super().__init__(session, **kwargs)
        self.corr, self.gpid = corr, gpid
        self.detail = None

    @property
    def view_name(self) -> str:  # type: ignore[override]
        return f"corr_{self.corr}"

    def crumb(self) -> str:
        return f"correlation ID {self.corr}"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="corr-detail")
        yield from super().compose_body()

    def on_mount(self) -> None:
        super().on_mount()
        self._build()

    @work(thread=True, exclusive=True, exit_on_error=False, group="build")
    def _build(self) -> None:
        c = self.session.model.correlation(self.corr, self.gpid)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._built, c)

    def _built(self, c) -> None:
        self.detail = c
        if c is None:
            msg = f"no CUDA API call with correlation ID {self.corr} in this trace"
            self.query_one("#corr-detail", Static).update(Text(msg, style="bold red"))
            self.grid.empty_text = ""
            self.grid.data_changed()
            self.set_status(msg)
            return
        self.query_one("#corr-detail", Static).update(self._detail_text(c))
        ops = c.ops.copy()
        ops["kind_name"] = [OP_KINDS[int(k)] for k in ops["kind"]]
        ops["label"] = [display_kernel_name(n) for n in ops["name"]]
        self.grid.empty_text = "this call started no GPU operation"
        self.show_table(TableModel(ops, op_columns()))

    def lines(self, c) -> list[tuple[str, str]]:
        out = [
            ("API call", c.api_name),
            ("thread", f"{c.thread} in {c.process}"),
            ("start / end", f"{c.api_start:,} ns / {c.api_end:,} ns ({fmt.duration(c.api_end - c.api_start)})"),
            ("NVTX open on its thread", stack_text(c.own_stack)),
        ]
        if c.main_thread and c.main_stack:
            out.append((f"open on main thread {c.main_thread}", stack_text(c.main_stack)))
        out.append((f"attributed to ({self.session.attribution})", ", ".join(c.attributed) or "(no range)"))
        if len(c.ops):
            first = c.ops.sort_values("start").iloc[0]
            out.append(("launch latency", fmt.duration(int(first["start"]) - c.api_start)))
        return out

    def _detail_text(self, c) -> Text:
        text = Text()
        for i, (k, v) in enumerate(self.lines(c)):
            if i:
                text.append("\n")
            text.append(f"{k}: ", style="bold")
            text.append(v)
        return text

    def timeline_target(self):
        """`t`: centred on the first GPU op this call started."""
        if self.detail is None or not len(self.detail.ops):
            return None
        op, model = int(self.detail.ops.sort_values("start")["op"].iat[0]), self.session.model
        return lambda tl: target_for_op(tl, op, model)

    def export_view(self) -> ViewText | None:
        c = self.detail
        if c is None:
            return None
        head = self.export_header()
        body = md_table(["Field", "Value"], [[k, v] for k, v in [("correlation ID", str(c.corr))] + self.lines(c)],
                        title=f"Correlation ID {c.corr}")
        if self.table is not None:
            body += "\n" + self.export_table("GPU operations it started")
        return ViewText(self.view_name, head, body)
