"""One open file: the loaded trace, the attribution mode in force, how long loading took."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers.load import Trace
from nsight_tui.tui import fmt
from nsight_tui.parsers.model import range_model


@dataclass
class Session:
    path: Path
    trace: Trace
    attribution: str
    load_seconds: float
    aggregated: bool = True
    main_thread: str | None = None  # --main-thread or `t`: a thread id; None = chosen by the model
    pending: str = ""  # while the GPU work loads (the tree shows first): what the loader is doing
    cache: dict = field(default_factory=dict)  # per-session results worth keeping (global summary)

    @property
    def model(self):
        """The range model of the mode in force (already built: the loader and the mode
        switch build it in a worker before they set `attribution`)."""
        return range_model(self.trace, self.attribution, self.main_thread)

    def timeline(self):
        """The timeline's lanes and idle analysis under the mode in force (built once; slow:
        call from a worker)."""
        from nsight_tui.parsers.idle import idle_analysis
        from nsight_tui.parsers.timeline import timeline

        return timeline(self.trace, self.model, idle_analysis(self.trace))

    @property
    def file_name(self) -> str:
        return self.path.name

    def gpu_text(self) -> str:
        gpus = Counter(self.trace.info.gpus)
        if not gpus:
            return "GPU: unknown"
        return ", ".join(f"{n}× {name}" if n > 1 else name for name, n in gpus.items())

    def info_lines(self) -> list[str]:
        """The header every view shows: what the file is, and the attribution in force."""
        i = self.trace.info
        first = " · ".join([
            self.file_name, self.gpu_text(), f"nsys {i.nsys_version or '?'}",
            f"span {fmt.duration(i.span_ns)}", f"{i.kernels:,} kernels", f"{i.api_calls:,} API calls",
            f"{i.ranges:,} ranges",
            f"tree in {self.load_seconds:.2f}s · {self.pending}" if self.pending else f"loaded in {self.load_seconds:.2f}s",
        ])
        from nsight_tui.render.process_view import main_thread_short

        main = f" · {main_thread_short(self.trace, self.model)}" if i.has_nvtx else ""
        lines = [first, f"attribution: {self.attribution}{main} — {self.model.mode_help}"]
        lines += [f"note: {n}" for n in i.notes]
        return lines

    def export_header(self) -> str:
        i = self.trace.info
        return (f"file `{self.file_name}` · {self.gpu_text()} · nsys {i.nsys_version or '?'} · "
                f"attribution `{self.attribution}` ({self.model.mode_help})" + self._main_export())

    def _main_export(self) -> str:
        if not self.trace.info.has_nvtx:
            return ""
        from nsight_tui.render.process_view import main_thread_short

        return f" · {main_thread_short(self.trace, self.model)}"
