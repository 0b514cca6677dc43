"""Section (g) of `report`, "How far from the hardware": the JSON under "roofline" (from
parsers.roofline.answers(), a `RooflineReport`) and its Markdown (from that JSON)."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.kernels.peaks import MATH_PATH_WORDS
from nsight_tui.parsers.analyses.roofline import BASIS, COMPUTE, LATENCY, MEMORY, UNKNOWN, RooflinePoint, RooflineReport
from nsight_tui.render.safe import markdown as md
from nsight_tui.render.tables import markdown as table


def point_json(p: RooflinePoint) -> dict:
    """One range, family or kernel: every field, rates per second, sizes in bytes."""
    return asdict(p)


def roofline_json(r: RooflineReport) -> dict:
    """The JSON under "roofline"."""
    pk = r.peaks
    return {
        "gpu": r.gpu,
        "peaks": None if pk is None else {"name": pk.name, "source": pk.source, "tflops": pk.tflops,
                                          "bandwidth_gbps": pk.bandwidth_gbps},
        "peak_note": r.peak_note,
        "source": r.source,
        "source_detail": r.source_detail,
        "source_line": r.source_line,
        "gemm_math_path": r.gemm_math_path,
        "ranges": [point_json(p) for p in r.ranges],
        "families": {scope: [point_json(p) for p in points] for scope, points in r.families.items()},
        "kernels": [point_json(p) for p in r.kernels],
        "mfu": r.mfu,
        "formulas": [{"path": row.path, "term": row.op, "flops": row.flops, "bytes": row.bytes,
                      "formula": row.formula} for row in r.formulas],
        "basis": r.basis,
        "gemms_unseen": r.gemms_unseen,
    }


def _num(x, fmt: str, scale: float = 1.0) -> str:
    return "–" if x is None else fmt.format(x / scale)


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def point_row(p: dict, per_instance: bool = True) -> list[str]:
    n = max(1, p["instances"]) if per_instance else 1
    return [
        p["label"], str(p["instances"]),
        _num(p["flops"] and p["flops"] / n, "{:,.3f}", 1e9) if p["flops"] is not None else "–",
        _num(p["bytes"] and p["bytes"] / n, "{:,.3f}", 1e9) if p["bytes"] is not None else "–",
        _num(p["gpu_ns"] / n, "{:,.3f}", 1e6),
        _num(p["achieved_flops_per_s"], "{:,.2f}", 1e12),
        _num(p["achieved_bytes_per_s"], "{:,.0f}", 1e9),
        _num(p["intensity_flops_per_byte"], "{:,.2f}"),
        _num(p["ridge_flops_per_byte"], "{:,.1f}"),
        p["math_path"], _pct(p.get("mfu")), p["verdict"], p["reason"],
    ]


HEADERS = ["range", "instances", "GFLOP / instance", "GB / instance", "GPU ms / instance", "TFLOP/s", "GB/s",
           "AI (FLOP/B)", "ridge (FLOP/B)", "math path", "MFU", "verdict", "deciding numbers"]


def roofline_markdown(ro: dict | None) -> str:
    """The section's Markdown; empty when the answers carry no roofline."""
    if not ro:
        return ""
    out = ["## (g) How far from the hardware"]
    pk = ro["peaks"]
    if pk:
        roofs = ", ".join(f"{MATH_PATH_WORDS[k]} {v:,.1f}" for k, v in pk["tflops"].items())
        out.append(f"_GPU: {md(ro['gpu'])} → {md(pk['name'])}: dense peaks (TFLOP/s) {roofs}; memory "
                   f"{pk['bandwidth_gbps']:,.0f} GB/s. Source: {md(pk['source'])}_")
    else:  # the note names the export's GPU: text from the profile
        out.append(f"_{md(ro['peak_note'])}_")
    out.append(f"_{md(ro['source_line'])}_")
    unseen = (" (the run's settings: its CUDA graphs were traced whole, their GEMMs are in no table)"
              if ro.get("gemms_unseen") else "")
    out.append(f"_GEMMs run on: {MATH_PATH_WORDS.get(ro['gemm_math_path'], ro['gemm_math_path'])}{unseen}: MFU and "
               "ridge points use that roof; non-GEMM kernels the FP32 CUDA-core roof._")
    out.append("")
    if ro["ranges"]:
        out.append(table(HEADERS, [point_row(p) for p in ro["ranges"]], title="Ranges (steady-state steps)",
                         notes=[f"TFLOP/s, GB/s: {ro['basis']['achieved']}", f"AI: {ro['basis']['intensity']}",
                                f"ridge: {ro['basis']['ridge']}", f"MFU: {ro['basis']['mfu']}",
                                f"verdict: {ro['basis']['verdict']}"]))
    fam_headers = ["family", *HEADERS[1:]]
    for scope, points in ro["families"].items():
        if points:
            out.append(table(fam_headers, [point_row(p) for p in points], title=f"Kernel families in {scope}",
                             notes=["per instance of the range; time = summed kernel durations; "
                                    "– = the source does not break the range down to this family"]))
    if ro["kernels"]:
        rows = [[p["path"].rsplit("/", 1)[-1], table_name(p["label"]), *point_row(p)[1:]] for p in ro["kernels"]]
        out.append(table(["range", "kernel", *HEADERS[1:]], rows, title="Kernels with their own counts",
                         notes=["a kernel gets its family's counts when it is that family's only kernel in the range"]))
    if ro["formulas"]:
        out.append(table(["range path", "term", "GFLOP / iteration", "GB / iteration", "formula"],
                         [[f["path"], f["term"], f"{f['flops'] / 1e9:,.3f}", f"{f['bytes'] / 1e9:,.3f}", f["formula"]]
                          for f in ro["formulas"]], title="Analytic formulas used"))
    return "\n".join(out)


def section(answers: dict) -> list[str]:
    """Section (g) for render.report.SECTIONS."""
    text = roofline_markdown(answers.get("roofline"))
    return [text] if text else []


# -- the sweep report's tables (rows model, columns ctx), from answers["roofline"] ---------------
def _range(a: dict, name: str) -> dict | None:
    ro = a.get("roofline") or {}
    return next((p for p in ro.get("ranges", []) if p["label"] == name), None)


def _mfu_cell(a: dict) -> str:
    p = _range(a, "step") or _range(a, "forward")
    if not p or p["mfu"] is None:
        return "–"
    return f"{100 * p['mfu']:.1f}% ({p['math_path']})"


def _tflops_cell(a: dict) -> str:
    rates = [(_range(a, n) or {}).get("achieved_flops_per_s") for n in ("forward", "backward")]
    return " / ".join("–" if not r else f"{r / 1e12:.1f}" for r in rates)


def _gemm_cell(a: dict) -> str:
    fams = (a.get("roofline") or {}).get("families", {}).get("step", [])
    g = next((f for f in fams if f["label"] == "gemm"), None)
    if not g or not g["achieved_flops_per_s"] or not g["peak_flops_per_s"]:
        return "–"
    return f"{g['achieved_flops_per_s'] / 1e12:.1f} ({100 * g['achieved_flops_per_s'] / g['peak_flops_per_s']:.0f}%)"


_SHORT = {COMPUTE: "compute", MEMORY: "memory", LATENCY: "latency", UNKNOWN: "?"}


def _bound_cell(a: dict) -> str:
    return " / ".join(_SHORT.get((_range(a, n) or {}).get("verdict", UNKNOWN), "?")
                      for n in ("forward", "backward", "step"))


SWEEP_QUESTIONS = [
    ("MFU of the step (math path of its GEMMs)", BASIS["mfu"], _mfu_cell),
    ("Achieved TFLOP/s: forward / backward", "FLOPs / GPU busy time of the range", _tflops_cell),
    ("GEMM TFLOP/s in the step (share of the math path's peak)", "GEMM FLOPs / GEMM kernel time", _gemm_cell),
    ("Bound: forward / backward / step", BASIS["verdict"], _bound_cell),
]
