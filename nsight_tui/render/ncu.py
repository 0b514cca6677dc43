"""Nsight Compute figures joined to the NVTX tree (analyses.ncu's answers) as text and Markdown.

Every column says whose figure it is: `ncu` columns are Nsight Compute's replay (its locked clocks,
one kernel at a time), `nsys` the export's timing; occupancy shows theoretical (the export's launch
configuration, equal to ncu's) / achieved (ncu's measurement) and what limits the theoretical one.
"""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.ncu import WHAT, JoinedKernel, NcuAnalysis, RangePoint, occupancy_findings
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.kernels.ncu_metrics import KernelFigures
from nsight_tui.parsers.kernels.ncu_tensor import BASIS as TENSOR_BASIS
from nsight_tui.parsers.kernels.ncu_tensor import TensorFigures
from nsight_tui.render import safe, tables

KERNEL_HEADERS = ["#", "range", "kernel", "nsys µs", "ncu µs", "SM % peak (ncu)", "mem % peak (ncu)",
                  "DRAM MB (ncu)", "occupancy theor./achieved % (limiter)", "top stalls (warps/issued instr.)",
                  "ncu rule: est. speedup", "measured GFLOP/s (ncu)"]
NAME_HEADERS = ["range", "kernel", "n", "ncu µs (mean)", "SM % peak", "mem % peak", "DRAM MB", "DRAM GB/s",
                "occupancy theor./achieved % (limiter)", "top stalls", "ncu rule: est. speedup (mean)",
                "measured GFLOP/s"]
RANGE_HEADERS = ["range", "instances", "kernels", "ncu ms", "measured GFLOP", "of which tensor cores", "DRAM GB",
                 "measured GFLOP/s (ncu time)",
                 "measured FLOP/B", "estimated GFLOP", "estimated GFLOP/s (nsys time)"]


def _f(x, digits: int = 1):
    return None if x is None else round(float(x), digits)


def _occ(theo, achieved, limiter) -> str:
    if theo is None and achieved is None:
        return ""
    return f"{_f(theo):g} / {_f(achieved):g} ({limiter})" if achieved is not None and theo is not None else \
        f"{_f(theo if theo is not None else achieved):g}"


def _stalls(stalls) -> str:
    return ", ".join(f"{s['reason']} {s['warps_per_issued_instruction']:.2f}" for s in stalls[:2])


def _rule(rules, key: str = "speedup_pct") -> str:
    best = max((r for r in rules if r.get(key) is not None), key=lambda r: r[key], default=None)
    return f"{best['rule']} {best[key]:.0f}%" if best else ""


def _giga(x):
    return None if x is None else round(x / 1e9, 1)


def _tera(x):
    return None if x is None else round(x / 1e12, 1)


TENSOR_HEADERS = ["#", "range", "kernel", "precision", "tensor GFLOP (measured, ncu)", "tensor TFLOP/s (measured, ncu time)",
                  "tensor pipe busy % (measured, ncu)", "peak TFLOP/s (datasheet, dense)", "% of peak"]
TENSOR_NAME_HEADERS = ["range", "kernel", "n", "precision", "tensor GFLOP (measured, mean)",
                       "tensor TFLOP/s (measured, ncu time)", "tensor pipe busy % (measured)",
                       "peak TFLOP/s (datasheet, dense)", "% of peak"]


def tensor_rows(a: dict) -> list[list]:
    """The kernels whose tensor cores did work (the GEMMs), in launch order."""
    return [[k["index"], k["range"], table_name(k["name"]), k["tensor_math"], _giga(k["tensor_flops"]),
             _tera(k["tensor_flops_per_s"]), _f(k["tensor_pipe_active_pct"]), _tera(k["tensor_peak_flops_per_s"]),
             _f(k["tensor_pct_of_peak"])] for k in a["kernels"] if k.get("tensor_flops")]


def tensor_name_rows(a: dict) -> list[list]:
    return [[r["range"], table_name(r["name"]), r["instances"], r["tensor_math"], _giga(r["tensor_flops"]),
             _tera(r["tensor_flops_per_s"]), _f(r["tensor_pipe_active_pct"]), _tera(r["tensor_peak_flops_per_s"]),
             _f(r["tensor_pct_of_peak"])] for r in a["by_name"] if r.get("tensor_flops")]


def tensor_notes(a: dict) -> list[str]:
    """What each tensor figure is, and why there may be none."""
    if not any(k.get("tensor_flops") is not None for k in a["kernels"]):
        busy = [k["tensor_pipe_active_pct"] for k in a["kernels"] if k.get("tensor_pipe_active_pct") is not None]
        return ["this report has no tensor-core FLOP counters (ncu's SpeedOfLight_HierarchicalTensorRooflineChart "
                "section; `capture --ncu` collects it)" + (f"; the tensor pipe was busy at most {max(busy):.1f}% of "
                                                          "any profiled kernel's cycles (measured)" if busy else "")]
    if not any(k.get("tensor_flops") for k in a["kernels"]):
        return ["no profiled kernel ran on the tensor cores (their FLOP counters are 0: CUDA-core math only)"]
    return [f"{key}: {text}" for key, text in a["tensor_basis"].items()]


def kernel_rows(a: dict) -> list[list]:
    return [[k["index"], k["range"], table_name(k["name"]), _f(None if k["nsys_duration_ns"] is None
                                                             else k["nsys_duration_ns"] / 1e3),
             _f(k["duration_ns"] / 1e3 if k["duration_ns"] is not None else None), _f(k["sm_throughput_pct"]),
             _f(k["memory_throughput_pct"]), _f(k["dram_bytes"] / 1e6 if k["dram_bytes"] is not None else None, 2),
             _occ(k["theoretical_occupancy_pct"], k["achieved_occupancy_pct"], k["occupancy_limiter"]),
             _stalls(k["stalls"]), _rule(k["rules"]), _giga(k["flops_per_s"])] for k in a["kernels"]]


def name_rows(a: dict) -> list[list]:
    return [[r["range"], table_name(r["name"]), r["instances"], _f(r["duration_ns"] / 1e3 if r["duration_ns"] else None),
             _f(r["sm_throughput_pct"]), _f(r["memory_throughput_pct"]),
             _f(r["dram_bytes"] / 1e6 if r["dram_bytes"] is not None else None, 2), _giga(r["dram_bytes_per_s"]),
             _occ(r["theoretical_occupancy_pct"], r["achieved_occupancy_pct"], r["occupancy_limiter"]),
             _stalls(r["stalls"]), _rule(r["rules"], "mean_estimated_speedup_pct"), _giga(r["flops_per_s"])]
            for r in a["by_name"]]


def range_rows(a: dict) -> list[list]:
    return [[p["range"], p["instances"], p["kernels"], _f(p["ncu_duration_ns"] / 1e6, 3), _giga(p["measured_flops"]),
             f"{p['measured_tensor_flops'] / p['measured_flops']:.0%} {p['measured_math_path']}"
             if p["measured_flops"] and p["measured_tensor_flops"] else "",
             _f(p["measured_dram_bytes"] / 1e9, 3), _giga(p["measured_flops_per_s"]),
             _f(p["measured_intensity_flops_per_byte"]), _giga(p["estimated_flops"]), _giga(p["estimated_flops_per_s"])]
            for p in a["ranges"]]


SHORT_FIX = {"registers": "fewer registers per thread", "shared memory": "less shared memory per block",
             "blocks": "larger blocks"}  # the whole fix is in the JSON's `fix`
FINDING_HEADERS = ["finding", "range", "kernel", "saving ms/step (ncu's estimate)", "share of step GPU time",
                   "occupancy theor./achieved % (limiter)", "fix"]


def finding_rows(a: dict) -> list[list]:
    return [[f["id"], f["ranges"][0], table_name(f["name"]), round(f["saving_ms_per_step"], 3),
             f"{100 * f['evidence']['share_of_step_gpu_time']:.1f}%",
             _occ(f["evidence"]["theoretical_occupancy_pct"], f["evidence"]["achieved_occupancy_pct"],
                  f["evidence"]["occupancy_limiter"]), SHORT_FIX.get(f["evidence"]["occupancy_limiter"], "")]
            for f in a.get("findings", [])]


def notes(a: dict) -> list[str]:
    out = [f"{a['joined_kernels']} of {a['profiled_kernels']} profiled kernels joined to the export "
           f"(window: {a['window']}; matched by {a['matched_by']})", a["what"],
           f"device: {a['device']}", "measured FLOPs: ncu's roofline section (FADD + FMUL + 2 FFMA, and fp64 likewise)"
           + (" + the tensor cores' (sm__ops_path_tensor_src_*)" if any(k.get("tensor_flops") for k in a["kernels"])
              else "") + "; estimated: the trace's FLOP counts (analyses.roofline)"]
    return out + list(a["notes"])


def section(a: dict) -> list[str]:
    """The `report` page's section (when --ncu is given): per range, then per kernel name."""
    n = a.get("ncu")
    if not n:
        return []
    safe_rows = [[safe.markdown(c) if isinstance(c, str) else c for c in row] for row in range_rows(n)]
    names = [[safe.markdown(c) if isinstance(c, str) else c for c in row] for row in name_rows(n)[:15]]
    return ["## Below the kernel: Nsight Compute, joined to the NVTX tree", "",
            tables.markdown(RANGE_HEADERS, safe_rows, title="Measured (ncu) vs estimated roofline, per range",
                            notes=notes(n)),
            tables.markdown(NAME_HEADERS, names, title="Per kernel name within a range (mean over profiled "
                            "instances), the 15 with the most ncu time"),
            *([tables.markdown(TENSOR_NAME_HEADERS, [[safe.markdown(c) if isinstance(c, str) else c for c in row]
                                                     for row in tensor_name_rows(n)],
                               title="Tensor cores, per GEMM kernel name within a range (mean over profiled "
                               "instances): measured vs the datasheet's peak", notes=tensor_notes(n))]
              if tensor_name_rows(n) else [f"Tensor cores: {tensor_notes(n)[0]}", ""]),
            *([tables.markdown(FINDING_HEADERS, [[safe.markdown(c) if isinstance(c, str) else c for c in row]
                                                 for row in finding_rows(n)],
                               title="From the hardware: kernels that matter limited by occupancy",
                               notes=[n["findings"][0]["basis"], "the profiled step's view, per range; ranked with "
                                      "the other findings (over every steady-state step, each nanosecond once) in "
                                      "(h) What to fix first as `occupancy-limited`"])] if n.get("findings") else [])]


def short_warning(answers: dict) -> str:
    """warning_line in at most three lines of an 80-column screen (the TUI's box above the table):
    what differs, in figures, and where the whole reason is ("" when nothing does)."""
    m = answers.get("mismatch") or {}
    parts = []
    if m.get("device"):
        parts.append(f"profiled on {m['report_device']}, the export ran on {', '.join(dict.fromkeys(m['export_gpus']))}")
    if m.get("sequence"):
        parts.append(f"only {m['agreement']:.0%} of the profiled kernels follow the export's launch order")
    if not parts:
        return ""
    return "warning: " + "; ".join(parts) + ": likely different runs or workloads (joined anyway; `nsight-tui ncu` says why)"


def warning_line(answers: dict) -> str:
    """One line saying the report and the export look like different workloads ("" when they do not)."""
    reasons = answers.get("warnings") or []
    if not reasons:
        return ""
    return ("warning: " + "; ".join(reasons) + ": the report and the export look like different runs or workloads "
            "(joined anyway; its figures may be another workload's)")


# -- the `ncu` document (`report --ncu`'s section, `nsight-tui ncu -f json`, the MCP ncu tool) --------
def figures_json(f: KernelFigures) -> dict:
    """One profiled kernel's figures (ncu's replay): its own, its tensor cores', FLOP/s and intensity."""
    out = asdict(f)
    out["stalls"] = [{"reason": r, "warps_per_issued_instruction": v} for r, v in f.stalls]
    out["rules"] = [asdict(r) for r in f.rules]
    tensor = out.pop("tensor")
    out.update(tensor if tensor is not None else dict.fromkeys(TensorFigures.__dataclass_fields__))
    out["flops_per_s"], out["flops"] = f.flops_per_s, f.flops
    out["intensity_flops_per_byte"] = f.intensity_flops_per_byte
    return out


def kernel_json(k: JoinedKernel) -> dict:
    return {"index": k.index, "name": k.name, "function": k.function, "op": k.op,
            "range": k.path, "ncu_nvtx_stack": list(k.ncu_stack), "joined_by": k.joined_by,
            "nsys_duration_ns": k.nsys_duration_ns,
            "export_theoretical_occupancy_pct": k.export_occupancy_pct,
            "export_occupancy_limiter": k.export_limiter, **figures_json(k.figures)}


def range_json(p: RangePoint) -> dict:
    """One range on both rooflines: measured (ncu's FLOPs and DRAM bytes over ncu's time) and
    estimated (the roofline's FLOPs over nsys's GPU time)."""
    return {"range": p.path, "instances": p.instances, "kernels": p.kernels, "ncu_duration_ns": p.ncu_duration_ns,
            "measured_flops": p.measured_flops, "measured_tensor_flops": p.measured_tensor_flops,
            "measured_math_path": p.math_path,
            "measured_dram_bytes": p.measured_dram_bytes,
            "measured_flops_per_s": p.measured_flops_per_s,
            "measured_intensity_flops_per_byte": p.measured_intensity_flops_per_byte,
            "estimated_flops": p.estimated_flops, "estimated_flops_per_s": p.estimated_flops_per_s,
            "nsys_gpu_ns": p.nsys_gpu_ns}


def ncu_json(a: NcuAnalysis) -> dict:
    """The report joined to an export: the `ncu` key of `report -f json` (and `nsight-tui ncu -f json`)."""
    report = a.join.report
    return {
        "what": WHAT,
        "report": str(report.path),
        "device": report.device,
        "profiled_kernels": len(a.kernels),
        "joined_kernels": len(a.joined),
        "window": a.join.window,
        "matched_by": f"{a.join.key} name, in launch order",
        "notes": a.notes,
        # a report of another workload or GPU joins too (its names recur): said, not refused
        "warnings": a.warnings,
        "mismatch": a.mismatch,
        "tensor_basis": TENSOR_BASIS,
        "kernels": [kernel_json(k) for k in a.kernels],
        "by_name": a.by_name(),
        "ranges": [range_json(p) for p in a.ranges],
        "findings": occupancy_findings(a),
    }


def report_only_json(a: NcuAnalysis) -> dict:
    """The same keys for a report read alone (analyses.ncu.report_only): ranges are ncu's NVTX stacks."""
    rows = [kernel_json(k) for k in a.kernels]
    for row in rows:
        row["range"] = row["range"] or "(no NVTX stack in ncu)"
        row["joined_by"] = "no export given (--trace)"
    by_name = a.by_name()
    for row in by_name:
        row["range"] = row["range"] or "(no NVTX stack in ncu)"
    report = a.join.report
    return {"what": WHAT, "report": str(report.path), "device": report.device, "profiled_kernels": len(a.kernels),
            "joined_kernels": 0, "window": "", "matched_by": "", "warnings": [], "mismatch": None,
            "tensor_basis": TENSOR_BASIS, "notes": [
                "no export given: ranges are ncu's NVTX stacks; kernels PyTorch's autograd thread launched have none "
                "(--trace FILE.sqlite joins them to the export's ranges)", *a.notes],
            "kernels": rows, "by_name": by_name, "ranges": [], "findings": []}
