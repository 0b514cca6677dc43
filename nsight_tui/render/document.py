"""The report document (`parsers.analyses.report.Report`) laid out as plain data: the JSON of
`report -f json` and of the MCP `report` tool (the keys the README documents, in its order), which
the Markdown page's sections read too."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.questions import PhaseSummary, Timing
from nsight_tui.parsers.analyses.report import Report
from nsight_tui.parsers.model.inferred.decode import DecodeLoop
from nsight_tui.parsers.model.inferred.result import Inference
from nsight_tui.render.backward_parts import backward_parts_json
from nsight_tui.render.findings import findings_json
from nsight_tui.render.gpu_metrics import gpu_metrics_json
from nsight_tui.render.idle import gpu_idle_json
from nsight_tui.render.memory import memory_json, oom_json
from nsight_tui.render.occupancy import occupancy_json
from nsight_tui.render.ranks import ranks_json
from nsight_tui.render.roofline import roofline_json


class Page(dict):
    """The document as plain data, with the typed report it was laid out from (`page.report`), for
    the Markdown sections that need more than the JSON carries (the ranks' table)."""

    report: Report


def document(report: Report) -> Page:
    """The JSON document of one trace's report."""
    page = Page({
        "file": report.file,
        "attribution": report.attribution,
        "main_threads": report.main_threads,
        "config": report.config,
        # op_ns (kernels + memcpy/memset): what a kernel's share divides by, in the TUI and here
        "ranges": {k: phase(v) for k, v in report.ranges.items()},
        "warmup": {k: phase(v) for k, v in report.warmup.items()},
        "ratios": report.ratios,
        "ratio_basis": report.ratio_basis,
        "timing": timing_json(report.timing),
        "gpu_idle": gpu_idle_json(report.gpu_idle),
        "memory": memory_json(report.memory),
        # a run that ran out of GPU memory: the failed allocation leads
        "oom": None if report.oom is None else oom_json(report.oom),
        "gpu_metrics": gpu_metrics_json(report.gpu_metrics),
        **({"ranks": ranks_json(report.ranks)} if report.ranks is not None else {}),
        "roofline": roofline_json(report.roofline),
        "occupancy": occupancy_json(report.occupancy),
        "findings": findings_json(report.findings),
        "backward_parts": [backward_parts_json(t) for t in report.backward_parts],
        # where the export names no iteration (or nothing inside its iterations): what was inferred
        # from its kernel sequence, or why nothing
        **({"inferred": inferred_json(report.inferred)} if report.inferred is not None else {}),
        "notes": report.notes,
        **({"ncu": _ncu(report)} if report.ncu is not None else {}),
    })
    page.report = report
    return page


def phase(p: PhaseSummary) -> dict:
    """One phase over its instances. range_ns: the CPU's clock (NVTX spans, summed); proj_ns: the
    GPU's (its work's first start to last end, summed, as nsys's nvtx_gpu_proj_sum); period_ns: the
    step's pace; op_ns (kernels + memcpy/memset): what a kernel's share divides by."""
    return {
        "instances": p.instances, "range_ns": p.range_ns, "proj_ns": p.proj_ns,
        **({"period_ns": p.period_ns} if p.period_ns is not None else {}),
        "gpu_lags": p.gpu_lags,
        "busy_ns": p.busy_ns, "kernel_ns": p.kernel_ns, "kernels": p.kernels,
        "top_kernels": p.top_kernels, "families": p.families, "op_ns": p.op_ns,
    }


def timing_json(t: Timing) -> dict:
    """NVTX's clock against the workload's Python clock: per step and the means (ns)."""
    return asdict(t)


def inferred_json(found: Inference) -> dict:
    """What the kernel sequence gave (iterations on the GPU's clock, ns; layers, stages), or why nothing."""
    return {"iterations": [{"name": i.name, "start_ns": i.start_ns, "end_ns": i.end_ns,
                            "duration_ns": i.end_ns - i.start_ns, "kernels": i.kernels} for i in found.iterations],
            "inside_nvtx_iterations": found.inside, "layer_count": found.layer_count,
            "layer_stages": found.layer_stages, "backward_stages": found.backward_stages,
            "period_kernels": found.period_kernels, "micro_batches": found.micro_batches,
            "basis": found.basis, **({"reason": found.reason} if found.reason else {}),
            **({"decode": decode_json(found.decode)} if found.decode is not None else {})}


def decode_json(d: DecodeLoop) -> dict:
    """A generate()-like call's decode loop, on the GPU's clock (ns): prefill, per-token latency, tokens/s."""
    return {"calls": d.calls, "tokens_per_call": d.tokens_per_call, "step_kernels": d.step_kernels,
            "prefill_ns": d.prefill_ns, "median_ns": d.median_ns, "p90_ns": d.p90_ns,
            "mean_ns": d.mean_ns, "tokens_per_s": d.tokens_per_s, "gpu_busy_share": d.gpu_busy_share,
            "launch_bound": d.launch_bound, "anchor": d.anchor, "cuda_graph_steps": d.graph, "basis": d.basis}


def _ncu(report: Report) -> dict:
    from nsight_tui.render.ncu import ncu_json

    assert report.ncu is not None
    return ncu_json(report.ncu)
