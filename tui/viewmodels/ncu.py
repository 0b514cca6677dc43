"""The Nsight Compute view (`6`, with --ncu FILE.ncu-rep): per kernel name within a range
of the profiled step, the mean over its profiled instances of ncu's figures, beside the export's
own timing and theoretical occupancy. Data: parsers.analyses.ncu. No Textual here.

Every column says whose figure it is: `ncu` is Nsight Compute's replay (its locked clocks, one
kernel at a time); occupancy is theoretical (the export's launch configuration, equal to ncu's)
and achieved (ncu's measurement)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.render.ncu import short_warning
from nsight_tui.tui.table_model import Column


def _num(digits: int):
    def show(v) -> str:
        return "" if v is None or pd.isna(v) else f"{v:,.{digits}f}"
    return show


# At 80 columns the range, the total the rows are sorted by and the limiter stay; the mean, the
# instance count and the wide columns go first.
COLUMNS = [
    Column("range", "Range", 16, "left", text=True, priority=9, md_header="range"),
    Column("kernel", "Kernel", None, "left", text=True, min_width=18, md_header="kernel"),
    Column("instances", "n", 3, priority=5, md_header="instances"),
    Column("total_us", "Σ ncu µs", 9, fmt=_num(1), priority=10,
           md_header="ncu µs, total over the instances (mean × n: the rows' order)"),
    Column("ncu_us", "ncu µs", 8, fmt=_num(1), priority=6, md_header="ncu µs (mean)"),
    Column("sm_pct", "SM %", 5, fmt=_num(0), priority=8, md_header="SM throughput % of peak (ncu)"),
    Column("mem_pct", "Mem %", 5, fmt=_num(0), priority=8, md_header="memory throughput % of peak (ncu)"),
    Column("dram_mb", "DRAM MB", 8, fmt=_num(2), priority=4, md_header="DRAM MB (ncu)"),
    Column("occupancy", "Occ th/ach", 10, priority=7, md_header="occupancy % theoretical / achieved"),
    Column("limiter", "Limiter", 9, "left", text=True, priority=9, md_header="occupancy limiter"),
    Column("stall", "Top stall", 16, "left", text=True, priority=5, md_header="top stall (warps per issued instruction)"),
    Column("rule", "ncu rule (est. speedup)", 22, "left", text=True, priority=4, md_header="ncu rule (mean est. speedup)"),
    Column("gflops", "GFLOP/s", 8, fmt=_num(0), priority=3, md_header="measured GFLOP/s (ncu)"),
    Column("tensor", "Tensor TF/s", 16, "left", text=True, priority=3,
           md_header="tensor cores: measured TFLOP/s (ncu time) and % of the datasheet's dense peak"),
    Column("name", "", show=False, text=True, md_header="name"),
]


@dataclass(frozen=True)
class NcuView:
    frame: pd.DataFrame  # COLUMNS' keys
    summary: str
    warning: str = ""  # the report and the export look like different workloads ("" when not)


def _tensor(r: dict) -> str:
    """`201.5 bf16 20%`: the tensor cores' measured TFLOP/s, precision, % of the datasheet's peak."""
    if not r.get("tensor_flops") or r.get("tensor_flops_per_s") is None:
        return ""
    pct = "" if r.get("tensor_pct_of_peak") is None else f" {r['tensor_pct_of_peak']:.0f}%"
    return f"{r['tensor_flops_per_s'] / 1e12:.1f} {r['tensor_math']}{pct}"


def build(answers: dict) -> NcuView:
    rows = []
    for r in answers["by_name"]:
        rule = max(r["rules"], key=lambda x: x["mean_estimated_speedup_pct"], default=None)
        stall = r["stalls"][0] if r["stalls"] else None
        theo, ach = r["theoretical_occupancy_pct"], r["achieved_occupancy_pct"]
        rows.append({
            "range": r["range"], "kernel": table_name(r["name"]), "instances": r["instances"],
            "ncu_us": None if r["duration_ns"] is None else r["duration_ns"] / 1e3,
            "total_us": None if r["duration_ns"] is None else r["duration_ns"] * r["instances"] / 1e3,
            "sm_pct": r["sm_throughput_pct"], "mem_pct": r["memory_throughput_pct"],
            "dram_mb": None if r["dram_bytes"] is None else r["dram_bytes"] / 1e6,
            "occupancy": "" if theo is None or ach is None else f"{theo:.0f} / {ach:.0f}",
            "limiter": r["occupancy_limiter"],
            "stall": "" if stall is None else f"{stall['reason']} {stall['warps_per_issued_instruction']:.2f}",
            "rule": "" if rule is None else f"{rule['rule']} {rule['mean_estimated_speedup_pct']:.0f}%",
            "gflops": None if r["flops_per_s"] is None else r["flops_per_s"] / 1e9,
            "tensor": _tensor(r),
            "name": r["name"],
        })
    frame = pd.DataFrame(rows, columns=[c.key for c in COLUMNS])
    summary = (f"{answers['joined_kernels']} of {answers['profiled_kernels']} profiled kernels joined to this trace "
               f"({answers['device']}); ncu figures are its replay at locked clocks, means over each name's instances "
               "in the range; occupancy theoretical (launch configuration) / achieved (ncu)"
               + ("; tensor: measured TFLOP/s, % of the datasheet's dense peak"
                  if any(r.get("tensor_flops") for r in answers["by_name"]) else ""))
    return NcuView(frame, summary, short_warning(answers))
