"""The header every view shows: one row at 80 columns (file, GPU, counts, load time, an
`attr: <mode>` badge with the rank filter where the export has several ranks), two when the
file name is long. `?` shows every field in full.

Fields drop or shorten in a fixed order until the row fits (`fit`), so the same file shows
the same header in every view at a given width.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from nsight_tui.render import numbers

VENDOR_PREFIXES = ("NVIDIA ", "GeForce ")


@dataclass(frozen=True)
class HeaderInfo:
    """The numbers behind the header (from the trace's TraceInfo and the session)."""

    file_name: str
    gpus: tuple[str, ...]
    nsys_version: str
    span_ns: int
    kernels: int
    api_calls: int
    ranges: int
    load_seconds: float
    attribution: str
    mode_help: str
    notes: tuple[str, ...] = field(default=())
    warning: str = ""  # a few words in the row itself (unbalanced NVTX); its note says it in full
    main_thread: str = ""  # which thread frames the iterations (render.process_view), for `?`
    rank: str = ""  # the rank filter in force (`rank 1`, `Σ 2 ranks`); "" for an export of one rank
    rank_help: str = ""  # the same in words, for `?`
    # The load's first stage on screen (Session.pending): what is still loading, and how far;
    # `load_seconds` is then the time to the tree.
    pending: str = ""
    pending_percent: int = 0
    # Where the GPU runs behind the CPU (no synchronise at phase ends): the clocks in words, for `?`;
    # the badge then says so. "" where the two clocks agree.
    clocks: str = ""
    # Ranges inferred from the kernel sequence (parsers.model.inferred), in the tree beside the
    # export's own NVTX ranges (`ranges`): the header counts them apart so "0 ranges" never sits
    # beside a full tree.
    inferred: int = 0
    # The steps for `?`: their period against their own time and the loop's between them where that
    # differs visibly, or the iteration the run died in (out of GPU memory); "" otherwise.
    steps: str = ""

    def ranges_text(self, short: bool = False) -> str:
        if not self.inferred:
            return f"{self.ranges:,} ranges"
        if not self.ranges:
            return f"{self.inferred:,} inferred" if short else f"{self.inferred:,} inferred ranges"
        return f"{self.ranges:,}+{self.inferred:,} inferred" if short else \
            f"{self.ranges:,} NVTX + {self.inferred:,} inferred ranges"

    @property
    def loaded_text(self) -> str:
        if self.pending:
            return f"tree in {self.load_seconds:.2f}s · {self.pending}… {self.pending_percent}%"
        return f"loaded in {self.load_seconds:.2f}s"

    @property
    def loaded_short(self) -> str:
        if self.pending:
            return f"tree {self.load_seconds:.2f}s · GPU {self.pending_percent}%"
        return f"{self.load_seconds:.2f}s"

    def gpu_text(self, short: bool = False) -> str:
        counts = Counter(self.gpus)
        if not counts:
            return "GPU ?" if short else "GPU: unknown"
        out = []
        for name, n in counts.items():
            if short:
                for prefix in VENDOR_PREFIXES:
                    name = name.removeprefix(prefix)
            out.append(f"{n}× {name}" if n > 1 else name)
        return ", ".join(out)

    @property
    def badge(self) -> str:
        return (f"attr: {self.attribution}" + (f" · {self.rank}" if self.rank else "")
                + (" · GPU behind" if self.clocks else ""))

    def full_lines(self) -> list[str]:
        """Everything, for `?`: the file, its counts, and the attribution explained."""
        nvtx = f"{self.ranges:,} NVTX ranges" + (
            f" + {self.inferred:,} ranges inferred from the kernel sequence (the tree's inferred: rows)"
            if self.inferred else "")
        counts = (f"{nvtx} · kernels and CUDA API calls still loading · " if self.pending
                  else f"{self.kernels:,} kernels · {self.api_calls:,} CUDA API calls · {nvtx} · ")
        lines = [
            f"file: {self.file_name}",
            f"GPU: {self.gpu_text()} · nsys {self.nsys_version or '?'} · capture span {numbers.duration(self.span_ns)}",
            counts + self.loaded_text,
            f"attribution: {self.attribution} — {self.mode_help} (m switches)",
        ]
        if self.main_thread:
            lines.append(f"{self.main_thread} (M on a thread row picks another)")
        if self.rank_help:
            lines.append(self.rank_help)
        if self.clocks:
            lines.append(self.clocks)
        if self.steps:
            lines.append(self.steps)
        return lines + [f"note: {n}" for n in self.notes]


def _stem(name: str) -> str:
    return name[: -len(".sqlite")] if name.endswith(".sqlite") else name


def _variants(h: HeaderInfo) -> list[list[str]]:
    """The fields of the row, longest form first; each next form is shorter."""
    counts_long = [f"{h.kernels:,} kernels", f"{h.api_calls:,} API calls", h.ranges_text()]
    counts_short = [f"{h.kernels:,} kernels", f"{h.api_calls:,} API", h.ranges_text(short=True)]
    if h.pending:  # kernels and API calls are not counted yet: not 0
        counts_long = counts_short = [h.ranges_text()]
    version = [f"nsys {h.nsys_version}"] if h.nsys_version else []
    span = [f"span {numbers.duration(h.span_ns)}"] if h.span_ns else []
    loaded = h.loaded_text
    return [
        [h.file_name, h.gpu_text(), *version, *span, *counts_long, loaded],
        [h.file_name, h.gpu_text(), *span, *counts_long, loaded],
        [h.file_name, h.gpu_text(), *counts_long, loaded],
        [h.file_name, h.gpu_text(short=True), *counts_short, h.loaded_short],
    ]


def _tight(h: HeaderInfo) -> list[str]:
    counts = [] if h.pending else [f"{h.kernels:,} kernels", f"{h.api_calls:,} API"]
    return [_stem(h.file_name), h.gpu_text(short=True), *counts, h.ranges_text(short=True), h.loaded_short]


def _tail(h: HeaderInfo) -> str:
    """The badges at the end of the row: the mode in force, and notes when there are any."""
    notes = f" · {len(h.notes)} note{'s' if len(h.notes) != 1 else ''} (?)" if h.notes else ""
    warning = f" · ⚠ {h.warning}" if h.warning else ""
    return h.badge + warning + notes


@dataclass(frozen=True)
class HeaderRow:
    text: str  # the fields
    badge: str  # drawn apart (right-aligned, reversed) by the widget; "" on the first of two rows


def fit(h: HeaderInfo, width: int) -> list[HeaderRow]:
    """One row when the fields fit in `width` (the badge included), else two: the file name
    alone on the first, the rest on the second (cut at the end only if even that is too long).
    With a rank badge (an export of several ranks) the tightest forms drop the load time, then
    the API and range counts, before the row splits: the rank in force is worth more room."""
    tail = _tail(h)
    for fields in _variants(h):
        text = " · ".join(fields)
        if len(text) + 2 + len(tail) <= width:
            return [HeaderRow(text, tail)]
    tight = _tight(h)
    tighter = [tight]
    if h.rank or h.warning or h.clocks:  # then without the load time, the API count, the range count
        tighter += [tight[:-1], [*tight[:3], tight[4]], tight[:3]] if len(tight) > 4 else [tight[:-1]]
    for fields in tighter:
        text = "  ".join(fields)
        if len(text) + 2 + len(tail) <= width:
            return [HeaderRow(text, tail)]
    rests = ["  ".join(fields[1:]) for fields in tighter]
    rest = next((r for r in rests if len(r) + 2 + len(tail) <= width), rests[-1])
    return [HeaderRow(h.file_name, ""), HeaderRow(rest, tail)]
