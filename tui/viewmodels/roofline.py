"""The roofline as the TUI shows it, without Textual: the rows behind the plot and the table,
the roofs to draw, and the ratios the kernel view adds. Built in a worker, once per session
and attribution (Session.roofline_context)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from nsight_tui.parsers.analyses import roofline as rl
from nsight_tui.parsers.analyses.ratios import Ratio
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.parsers.kernels.peaks import MATH_PATH_WORDS

MAX_RANGES = 300  # a roofline of more points than this is unreadable; the deepest go first
RANGES, FAMILIES = "ranges", "families"
MEASURED = "ncu"  # the `source` of a measured point (Nsight Compute's counters, --ncu)
MEASURED_SUFFIX = " · measured (ncu)"
MEASURED_REASON = ("Nsight Compute's counters over its replay of one step: (FADD + FMUL + 2 FFMA) per cycle × SM "
                   "frequency, plus the tensor cores' FLOPs (sm__ops_path_tensor_src_*) where the report has them, "
                   "DRAM bytes (dram__bytes); time: ncu's kernel durations (its locked clocks)")


def context(session) -> rl.Roofline:
    """The session's roofline context (counts source and peaks), built once per attribution."""
    return session.roofline_context()


NEEDS_COUNTS = "needs FLOP/byte counts"
NEEDS_COUNTS_WHY = ("no FLOPs or bytes for this range: give them with --flops FILE.json, or capture with "
                    "`nsight-tui capture` (it records counts per range); FLOP/s, bytes/s, intensity and MFU "
                    "need them")


def ratios(session, node) -> list[Ratio]:
    """Achieved FLOP/s and bytes/s, intensity, MFU and the verdict of a range (for the ratios
    panel); the verdict's value is the share of its roof it reaches, or the verdict as a word
    where there is no roof to share. What is unknown is left out, and one row says why."""
    roof = context(session)
    p = roof.range_point(node.ids, rl.node_path(node.path), label=node.label)
    src = f"{p.source} FLOPs/bytes" if p.source != "none" else "no FLOP/byte counts"
    out = []
    if p.achieved_flops_per_s is not None:
        out.append(Ratio("achieved FLOP/s", p.achieved_flops_per_s, "flop_per_s", f"FLOPs / GPU busy time ({src})"))
    if p.achieved_bytes_per_s is not None:
        out.append(Ratio("achieved bytes/s", p.achieved_bytes_per_s, "bytes_per_s", f"bytes / GPU busy time ({src})"))
    if p.intensity_flops_per_byte is not None:
        ridge = "–" if p.ridge_flops_per_byte is None else f"{p.ridge_flops_per_byte:,.1f}"
        out.append(Ratio("arithmetic intensity", p.intensity_flops_per_byte, "flop_per_byte",
                         f"FLOPs / bytes; ridge {ridge} FLOP/B ({MATH_PATH_WORDS.get(p.math_path, p.math_path)})"))
    if p.mfu is not None:
        out.append(Ratio("MFU", p.mfu, "fraction", f"FLOPs / (NVTX time × {p.math_path} peak)"))
    if p.roof_share is not None:
        out.append(Ratio(f"{p.verdict} (share of its roof)", p.roof_share, "fraction", p.reason))
    elif p.verdict and p.verdict != rl.UNKNOWN:
        out.append(Ratio("bound", p.verdict, "text", p.reason))
    if p.achieved_flops_per_s is None and p.achieved_bytes_per_s is None:
        out.append(Ratio("roofline", NEEDS_COUNTS, "text", NEEDS_COUNTS_WHY))
    return out


@dataclass
class RooflineData:
    """What the roofline view draws: points (one row each) and the roofs."""

    mode: str  # ranges | families
    scope: str  # which range the families belong to
    frame: pd.DataFrame
    peaks_line: str
    source_line: str
    bandwidth: float | None  # bytes/s
    roofs: dict[str, float] = field(default_factory=dict)  # math path -> FLOP/s
    source: str = "none"
    peaks_name: str = ""  # the table row (or "") for the one-line header

    def header(self) -> str:
        peaks = f"{self.peaks_name} peaks" if self.peaks_name else "no peaks: --peak-tflops/--peak-gbps"
        measured = " · + points from Nsight Compute's counters" if (self.frame["source"] == MEASURED).any() else ""
        return f"roofline: {self.scope} · FLOPs/bytes: {self.source}{measured} · {peaks}"

    def needs_counts(self) -> str:
        """"" when the plot has points; else what it needs and what the table still shows."""
        if not self.plottable().empty:
            return ""
        shown = ("GPU time per range (t: per kernel family of the range under the cursor)" if self.mode == RANGES
                 else "GPU time per kernel family")
        return (f"No roofline to plot: no FLOPs and bytes for these {self.mode} "
                f"(FLOPs/bytes from: {self.source}). It needs counts: --flops FILE.json (range path → "
                "FLOPs and bytes of one instance), or a capture by `nsight-tui capture` (it records them per "
                f"range). Shown below: {shown}, and the verdicts that need no counts (latency/launch-bound: "
                "GPU busy under half the range's GPU span).")

    def plottable(self) -> pd.DataFrame:
        """Rows with a positive intensity and rate: what a log-log plot can show."""
        f = self.frame
        ok = (f["ai"] > 0) & (f["tflops"] > 0)
        return f[ok]


COLUMNS = ["label", "path", "level", "instances", "gflop", "gb", "gpu_ms", "gpu_ms_per", "tflops", "gbps", "ai", "ridge",
           "math_path", "mfu", "verdict", "reason", "source"]


def _frame(points: list[rl.RooflinePoint]) -> pd.DataFrame:
    rows = []
    for p in points:
        rows.append({
            "label": table_name(p.label) if p.level == "kernel" else p.label, "path": p.path, "level": p.level,
            "instances": p.instances,
            "gflop": math.nan if p.flops is None else p.flops / 1e9,
            "gb": math.nan if p.bytes is None else p.bytes / 1e9,
            "gpu_ms": p.gpu_ns / 1e6,  # total over the instances
            "gpu_ms_per": p.gpu_ns / 1e6 / max(int(p.instances or 1), 1),  # per instance (as `report`)
            "tflops": math.nan if p.achieved_flops_per_s is None else p.achieved_flops_per_s / 1e12,
            "gbps": math.nan if p.achieved_bytes_per_s is None else p.achieved_bytes_per_s / 1e9,
            "ai": math.nan if p.intensity_flops_per_byte is None else p.intensity_flops_per_byte,
            "ridge": math.nan if p.ridge_flops_per_byte is None else p.ridge_flops_per_byte,
            "math_path": p.math_path, "mfu": math.nan if p.mfu is None else p.mfu,
            "verdict": "needs counts" if p.verdict == rl.UNKNOWN and p.flops is None else p.verdict,
            "reason": p.reason, "source": p.source,
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def measured_frame(session) -> tuple[pd.DataFrame, str]:
    """One point per range path of the profiled step, from the Nsight Compute report (--ncu):
    measured FLOPs and DRAM bytes over ncu's time, beside the estimated points; and what went
    wrong reading it ("" if nothing: a bad report costs the measured points, not the view)."""
    from nsight_tui.parsers.read.errors import TraceError

    try:
        joined = session.ncu()
    except TraceError as exc:
        return pd.DataFrame(columns=COLUMNS), f"no measured points: {exc}"
    if joined is None:
        return pd.DataFrame(columns=COLUMNS), ""
    rows = []
    for p in joined.ranges:
        seconds = p.ncu_duration_ns * 1e-9
        rows.append({
            "label": p.path + MEASURED_SUFFIX, "path": rl.node_path(p.path.split("/")), "level": "range",
            "instances": p.instances, "gflop": p.measured_flops / 1e9, "gb": p.measured_dram_bytes / 1e9,
            "gpu_ms": p.ncu_duration_ns / 1e6, "gpu_ms_per": p.ncu_duration_ns / 1e6 / max(p.instances, 1),
            "tflops": math.nan if p.measured_flops_per_s is None else p.measured_flops_per_s / 1e12,
            "gbps": p.measured_dram_bytes / seconds / 1e9 if seconds else math.nan,
            "ai": math.nan if p.measured_intensity_flops_per_byte is None else p.measured_intensity_flops_per_byte,
            "ridge": math.nan, "math_path": p.math_path, "mfu": math.nan,
            "verdict": "measured (ncu)" + (f", tensor cores {p.measured_tensor_flops / p.measured_flops:.0%} of FLOPs"
                                           if p.measured_tensor_flops and p.measured_flops else ""),
            "reason": MEASURED_REASON, "source": MEASURED,
        })
    return pd.DataFrame(rows, columns=COLUMNS), ""


def build(session, mode: str = RANGES, node=None) -> RooflineData:
    """Ranges: every range of the main threads' aggregated tree. Families: the kernel families
    of `node` (default: the first root range, e.g. `step_N`)."""
    roof = context(session)
    model = roof.model
    groups = [g for g in model.aggregated_groups if g.is_main] or model.aggregated_groups
    if mode == RANGES:
        nodes: list[RangeNode] = []
        stack = [n for g in groups for n in reversed(g.roots)]
        while stack and len(nodes) < MAX_RANGES:
            n = stack.pop()
            nodes.append(n)
            stack.extend(reversed(n.children))
        points = [roof.range_point(n.ids, rl.node_path(n.path), label=rl.node_path(n.path)) for n in nodes]
        scope = "every range (aggregated by name path)"
    else:
        if node is None:  # the iteration (step_N), else the first range
            roots = [n for g in groups for n in g.roots]
            node = next((n for n in roots if n.label.rsplit(":", 1)[-1] in ("step_N", "step")), roots[0] if roots else None)
        points = [] if node is None else roof.family_points(node.ids, rl.node_path(node.path))
        if node is not None:
            points += roof.kernel_points(node.ids, rl.node_path(node.path))
        scope = "no range" if node is None else f"kernel families of {rl.node_path(node.path)}"
    pk = roof.peaks.peaks
    roofs = {} if pk is None else {k: v * 1e12 for k, v in pk.tflops.items()}
    frame = _frame(points)
    source_line = roof.source_line()
    if mode == RANGES:
        measured, problem = measured_frame(session)
        if len(measured):
            frame = pd.concat([frame, measured], ignore_index=True) if len(frame) else measured
            source_line += f" · measured points (ncu): {MEASURED_REASON}"
        if problem:
            source_line += f" · {problem}"
    return RooflineData(mode, scope, frame, roof.peaks.note, source_line,
                        None if pk is None or not pk.bandwidth_gbps else pk.bytes_per_s, roofs,
                        roof.source, "" if pk is None else pk.name)


def markdown_rows(data: RooflineData) -> tuple[list[str], list[list]]:
    """The table behind the plot, exact (for `e`)."""
    headers = ["point", "range path", "level", "instances", "GFLOP", "GB", "GPU ms (total ×instances)",
               "GPU ms per instance", "TFLOP/s", "GB/s",
               "AI (FLOP/B)", "ridge (FLOP/B)", "math path", "MFU", "verdict", "deciding numbers", "FLOPs from"]

    def num(v, digits=3):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), digits)

    rows = [[r.label, r.path, r.level, int(r.instances), num(r.gflop), num(r.gb), num(r.gpu_ms), num(r.gpu_ms_per), num(r.tflops),
             num(r.gbps, 1), num(r.ai), num(r.ridge, 2), r.math_path, num(r.mfu, 4), r.verdict, r.reason, r.source]
            for r in data.frame.itertuples()]
    return headers, rows
