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
    cache: dict = field(default_factory=dict)  # per-session results worth keeping (global summary)

    @property
    def model(self):
        """The range model of the mode in force (already built: the loader and the mode
        switch build it in a worker before they set `attribution`)."""
        return range_model(self.trace, self.attribution)

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
            f"{i.ranges:,} ranges", f"loaded in {self.load_seconds:.2f}s",
        ])
        lines = [first, f"attribution: {self.attribution} — {self.model.mode_help}"]
        lines += [f"note: {n}" for n in i.notes]
        return lines

    def export_header(self) -> str:
        i = self.trace.info
        return (f"file `{self.file_name}` · {self.gpu_text()} · nsys {i.nsys_version or '?'} · "
                f"attribution `{self.attribution}` ({self.model.mode_help})")
