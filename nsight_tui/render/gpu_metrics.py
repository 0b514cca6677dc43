"""The report's GPU metrics section: nsys's sampled SM / tensor / DRAM activity per range
name, and whether tensor activity confirms the GEMMs' math path. Reads `answers["gpu_metrics"]`
(parsers.analyses.gpu_metrics.GpuMetricsReport.to_json)."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.gpu_metrics import GpuMetricsReport
from nsight_tui.render import safe, tables

# Columns of the table: these metrics, by name (unit aside), when the export has them.
SHOWN = ("SMs Active", "Tensor Active", "SM Issue", "DRAM Read Bandwidth", "DRAM Write Bandwidth")


def _pct(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def section(a: dict) -> list[str]:
    g = a.get("gpu_metrics")
    if not g or not g.get("present"):
        return []
    out = ["## GPU metrics (sampled)"]
    rate = g.get("rate_hz")
    taken = f"{rate:,.0f} samples a second, " if rate else ""
    out.append(f"_Measured by sampling ({taken}{g['total_samples']:,} samples), not per kernel: "
               f"{safe.markdown(g['definition'])}_")
    out.append("")
    metrics = [m for name in SHOWN for m in g["metrics"] if m["name"] == name]
    head = ["range", "instances", "samples"] + [f"{m['name']} [{m['unit']}]" for m in metrics]
    rows = [[safe.markdown(r["name"]), str(r["instances"]), str(r["samples"])]
            + [_pct(r["means"].get(m["full_name"])) for m in metrics] for r in g["ranges"]]
    out.append(tables.markdown(head, rows))
    gemm = g.get("gemm")
    if gemm:
        mark = {"confirmed": "Confirmed", "refuted": "**Refuted**"}.get(gemm["verdict"], "Unknown")
        out += ["", f"GEMM math path from the kernel names vs tensor activity: {mark}: {safe.markdown(gemm['text'])}."]
    out.append("")
    return out


def gpu_metrics_json(g: GpuMetricsReport) -> dict:
    """The report's `gpu_metrics` section as plain data (sampled percentages, ns, the GEMM check)."""
    return asdict(g)
