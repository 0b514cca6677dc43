"""An Nsight Compute report joined to an nsys export: each profiled kernel in the NVTX tree.

Per profiled kernel: the export's kernel it is (parsers.kernels.ncu_join), the range it ran in
(the export's attribution: backward's kernels, launched by PyTorch's autograd thread with no
NVTX stack of their own, land in `step_N/backward` like every other view of the trace shows them),
ncu's figures for it (parsers.kernels.ncu_metrics) and the theoretical occupancy the export alone
gives (parsers.kernels.occupancy), which should equal ncu's.

Per kernel name within a range: the mean of each figure over its profiled instances. Per range:
the measured roofline point (ncu's FLOPs and DRAM bytes of its kernels, over ncu's durations) beside
the estimated one (analyses.roofline: counted or analytic FLOPs over nsys's GPU time).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.kernels.ncu_join import NcuJoin, join
from nsight_tui.parsers.kernels.ncu_metrics import (DRAM_BYTES, DRAM_RATE_X_TIME, DRAM_READ_WRITE, KernelFigures,
                                                    figures)
from nsight_tui.parsers.kernels.occupancy import trace_occupancy
from nsight_tui.parsers.model.ranges import RangeModel, range_model
from nsight_tui.parsers.read.ncu_rep import NcuReport

WHAT = ("Nsight Compute's replay of one step (its locked clocks, one kernel at a time): durations, "
        "throughputs and FLOP/s are ncu's, not nsys's timing")
MEAN_FIELDS = ("duration_ns", "sm_throughput_pct", "memory_throughput_pct", "dram_bytes", "dram_bytes_per_s",
               "achieved_occupancy_pct", "theoretical_occupancy_pct", "flops", "flops_per_s", "tensor_flops",
               "tensor_flops_per_s", "tensor_pipe_active_pct", "tensor_pct_of_peak")
_N = re.compile(r"\d+$")


@dataclass
class JoinedKernel:
    index: int  # ncu's ID (launch order in the report)
    name: str  # demangled (the export's name)
    function: str  # ncu's short name
    op: int  # the export's op position, -1 if not joined
    path: str  # the export's innermost NVTX range path of the kernel ("" if none or not joined)
    range_ids: tuple[int, ...]  # that range and its ancestors (positions in trace.ranges), innermost first
    ncu_stack: tuple[str, ...]  # ncu's NVTX stack for the launching thread (empty: autograd thread)
    nsys_duration_ns: int | None
    export_occupancy_pct: float | None  # theoretical, from the export's launch configuration
    export_limiter: str
    figures: KernelFigures

    @property
    def joined_by(self) -> str:
        if self.op < 0:
            return "not joined"
        return "launch order and name" + (" (ncu's NVTX stack agrees)" if self.ncu_stack else
                                          " (no NVTX stack in ncu: a thread without ranges)")


@dataclass
class RangePoint:
    """One range instance on both rooflines."""

    range_id: int  # the first instance (positions in trace.ranges)
    path: str
    kernels: int
    ncu_duration_ns: float
    measured_flops: float
    measured_dram_bytes: float
    estimated_flops: float | None = None
    estimated_flops_per_s: float | None = None  # analyses.roofline: FLOPs over nsys's GPU time
    nsys_gpu_ns: int | None = None
    instances: int = 1  # range instances of this path in the profiled window (the 4 layers' attention)
    measured_tensor_flops: float = 0.0  # of measured_flops, the tensor cores' (ncu's ops-path counters)
    tensor_flops_by_math: dict[str, float] = field(default_factory=dict)  # those by precision (peaks.py's path)

    @property
    def math_path(self) -> str:
        """The math path most of the measured FLOPs took: the tensor cores' precision when they did
        most of the work, else fp32 (the CUDA cores)."""
        if self.measured_tensor_flops > self.measured_flops / 2 and self.tensor_flops_by_math:
            return max(self.tensor_flops_by_math, key=lambda m: self.tensor_flops_by_math[m])
        return "fp32"

    @property
    def measured_flops_per_s(self) -> float | None:
        return self.measured_flops / (self.ncu_duration_ns * 1e-9) if self.ncu_duration_ns else None

    @property
    def measured_intensity_flops_per_byte(self) -> float | None:
        return self.measured_flops / self.measured_dram_bytes if self.measured_dram_bytes else None


# Below this agreement (NcuJoin.agreement) the report and the export are taken for different
# workloads: one kernel more or less in a few hundred stays far above it, another model far below.
MIN_AGREEMENT = 0.9


@dataclass
class NcuAnalysis:
    join: NcuJoin
    kernels: list[JoinedKernel]
    ranges: list[RangePoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    export_gpus: list[str] = field(default_factory=list)  # the export's GPU names (device mismatch)

    @property
    def mismatch(self) -> dict:
        """Whether the report and the export look like different workloads, and why: the report's
        device is none of the export's GPUs, or its kernels do not follow the window's launch
        sequence (agreement below MIN_AGREEMENT). Joined figures stand; they may be another run's."""
        device = self.join.report.device
        other_device = bool(device and self.export_gpus and device not in self.export_gpus)
        agreement = self.join.agreement
        return {"device": other_device, "report_device": device, "export_gpus": list(self.export_gpus),
                "sequence": bool(len(self.kernels)) and agreement < MIN_AGREEMENT, "agreement": agreement,
                "matched_span": self.join.matched_span, "window_kernels": len(self.join.window_ops)}

    @property
    def warnings(self) -> list[str]:
        m = self.mismatch
        out = []
        if m["device"]:
            out.append(f"the report was profiled on {m['report_device']}, the export ran on "
                       f"{', '.join(dict.fromkeys(m['export_gpus']))}")
        if m["sequence"]:
            out.append(f"the profiled kernels do not follow the export's launch sequence: {self.join.joined} of "
                       f"{len(self.kernels)} paired by name over a stretch of {m['matched_span']} of the window's "
                       f"{m['window_kernels']} kernels ({m['agreement']:.0%} agree, {MIN_AGREEMENT:.0%} expected "
                       "of one workload)")
        return out

    @property
    def joined(self) -> list[JoinedKernel]:
        return [k for k in self.kernels if k.op >= 0]

    def by_name(self) -> list[dict]:
        """Per (range, kernel name): the mean of each figure over the profiled instances, most
        ncu time first."""
        groups: dict[tuple[str, str], list[JoinedKernel]] = {}
        for k in self.kernels:
            groups.setdefault((k.path, k.name), []).append(k)
        out = []
        for (path, name), ks in groups.items():
            row: dict = {"range": path, "name": name, "function": ks[0].function, "instances": len(ks)}
            for f in MEAN_FIELDS:
                values = [v for k in ks if (v := _figure(k.figures, f)) is not None]
                row[f] = float(np.mean(values)) if values else None
            maths = [k.figures.tensor.tensor_math for k in ks if k.figures.tensor and k.figures.tensor.tensor_math]
            row["tensor_math"] = max(set(maths), key=maths.count) if maths else ""
            peaks = [k.figures.tensor.tensor_peak_flops_per_s for k in ks
                     if k.figures.tensor and k.figures.tensor.tensor_math == row["tensor_math"]]
            row["tensor_peak_flops_per_s"] = peaks[0] if peaks else None
            limiters = [k.figures.occupancy_limiter for k in ks if k.figures.occupancy_limiter]
            row["occupancy_limiter"] = max(set(limiters), key=limiters.count) if limiters else ""
            stalls: dict[str, list[float]] = {}
            for k in ks:
                for reason, v in k.figures.stalls:
                    stalls.setdefault(reason, []).append(v)
            row["stalls"] = [{"reason": r, "warps_per_issued_instruction": float(np.sum(v)) / len(ks)}
                             for r, v in sorted(stalls.items(), key=lambda kv: -sum(kv[1]))[:3]]
            rules: dict[str, list[float]] = {}
            for k in ks:
                for rule in k.figures.rules:
                    if rule.speedup_pct is not None:
                        rules.setdefault(rule.rule, []).append(rule.speedup_pct)
            row["rules"] = [{"rule": r, "mean_estimated_speedup_pct": float(np.mean(v)), "instances": len(v)}
                            for r, v in sorted(rules.items(), key=lambda kv: -float(np.mean(kv[1])))]
            out.append(row)
        return sorted(out, key=lambda r: -(r["duration_ns"] or 0) * r["instances"])


def _figure(fig: KernelFigures, name: str) -> float | None:
    """A figure of the kernel's, or of its tensor cores' (None where the report has none)."""
    if hasattr(fig, name):
        return getattr(fig, name)
    return getattr(fig.tensor, name) if fig.tensor is not None else None


def _innermost(model: RangeModel, ops: np.ndarray) -> dict[int, int]:
    """Op position -> the deepest range it is attributed to (the model's attribution)."""
    pair_op = np.asarray(model.pair_op, dtype=np.int64)
    pair_range = np.asarray(model.pair_range, dtype=np.int64)
    sel = np.isin(pair_op, ops)
    po, pr = pair_op[sel], pair_range[sel]
    order = np.lexsort((np.asarray(model.depth)[pr], po))  # per op, deepest last
    po, pr = po[order], pr[order]
    last = np.r_[po[1:] != po[:-1], True] if len(po) else np.zeros(0, dtype=bool)
    return dict(zip(po[last].tolist(), pr[last].tolist()))


def _chain(model: RangeModel, rid: int) -> tuple[int, ...]:
    out = []
    while rid >= 0:
        out.append(rid)
        rid = int(model.parent[rid])
    return tuple(out)


def analyse(trace, report: NcuReport, attribution: str = "process") -> NcuAnalysis:
    j = join(trace, report)
    model = range_model(trace, attribution)
    texts = trace.range_texts.objects
    ops = j.op_of[j.op_of >= 0]
    inner = _innermost(model, ops)
    occ = trace_occupancy(trace)
    start, end = trace.ops["start"].to_numpy(), trace.ops["end"].to_numpy()
    kernels = []
    for rk, op in zip(report.kernels, j.op_of.tolist()):
        chain = _chain(model, inner[op]) if op in inner else ()
        path = "/".join(str(texts[i]) for i in reversed(chain))
        occ_pct, occ_lim = None, ""
        if op >= 0 and occ.op_config[op] >= 0:
            cfg = occ.configs.iloc[int(occ.op_config[op])]
            occ_pct, occ_lim = float(cfg["occupancy_pct"]), str(cfg["limiter"])
        kernels.append(JoinedKernel(rk.index, rk.name, rk.function, op, path, chain, rk.nvtx_stack,
                                    int(end[op] - start[op]) if op >= 0 else None, occ_pct, occ_lim, figures(rk)))
    result = NcuAnalysis(j, kernels, notes=list(j.notes) + dram_notes(kernels), export_gpus=list(trace.info.gpus))
    result.ranges = _range_points(trace, model, kernels, attribution, result.notes)
    return result


def _range_points(trace, model: RangeModel, kernels: list[JoinedKernel], attribution: str,
                  notes: list[str]) -> list[RangePoint]:
    texts = trace.range_texts.objects
    points: dict[int, RangePoint] = {}
    for k in kernels:
        for rid in k.range_ids:
            p = points.get(rid)
            if p is None:
                path = "/".join(str(texts[i]) for i in reversed(_chain(model, rid)))
                p = points[rid] = RangePoint(rid, path, 0, 0.0, 0.0, 0.0)
            p.kernels += 1
            p.ncu_duration_ns += k.figures.duration_ns or 0.0
            p.measured_flops += k.figures.flops or 0.0
            t = k.figures.tensor
            if t is not None and t.tensor_flops:
                p.measured_tensor_flops += t.tensor_flops
                p.tensor_flops_by_math[t.tensor_math] = p.tensor_flops_by_math.get(t.tensor_math, 0.0) + t.tensor_flops
            p.measured_dram_bytes += k.figures.dram_bytes or 0.0
    try:
        from nsight_tui.parsers.analyses import roofline

        roof = roofline.build(trace, attribution)
        for p in points.values():
            counts_path = "/".join(_N.sub("N", part) for part in p.path.split("/"))
            est = roof.range_point(np.array([p.range_id]), counts_path)
            p.estimated_flops, p.estimated_flops_per_s, p.nsys_gpu_ns = est.flops, est.achieved_flops_per_s, est.gpu_ns
    except Exception as exc:  # noqa: BLE001 - the estimate is a comparison; the measured point stands alone
        notes.append(f"no estimated roofline beside the measured one: {exc}")
    return sorted(_by_path(points.values()), key=lambda p: (p.path.count("/"), -p.ncu_duration_ns))


def _by_path(points) -> list[RangePoint]:
    """The instances of one range path (each layer's `scaled_dot_product_attention`) summed:
    FLOPs, bytes and times add; the rates are then the totals' ratios."""
    out: dict[str, RangePoint] = {}
    for p in points:
        q = out.get(p.path)
        if q is None:
            out[p.path] = RangePoint(p.range_id, p.path, p.kernels, p.ncu_duration_ns, p.measured_flops,
                                     p.measured_dram_bytes, p.estimated_flops, None, p.nsys_gpu_ns,
                                     measured_tensor_flops=p.measured_tensor_flops,
                                     tensor_flops_by_math=dict(p.tensor_flops_by_math))
            continue
        q.instances += 1
        q.kernels += p.kernels
        q.ncu_duration_ns += p.ncu_duration_ns
        q.measured_flops += p.measured_flops
        q.measured_tensor_flops += p.measured_tensor_flops
        for m, v in p.tensor_flops_by_math.items():
            q.tensor_flops_by_math[m] = q.tensor_flops_by_math.get(m, 0.0) + v
        q.measured_dram_bytes += p.measured_dram_bytes
        q.estimated_flops = None if q.estimated_flops is None or p.estimated_flops is None else \
            q.estimated_flops + p.estimated_flops
        q.nsys_gpu_ns = None if q.nsys_gpu_ns is None or p.nsys_gpu_ns is None else q.nsys_gpu_ns + p.nsys_gpu_ns
    for q in out.values():
        q.estimated_flops_per_s = (q.estimated_flops / (q.nsys_gpu_ns * 1e-9)
                                   if q.estimated_flops is not None and q.nsys_gpu_ns else None)
    return list(out.values())


def dram_notes(kernels: list[JoinedKernel]) -> list[str]:
    """Where a kernel's DRAM bytes are not ncu's dram__bytes.sum: how they were had, and for how many."""
    counts: dict[str, int] = {}
    for k in kernels:
        counts[k.figures.dram_bytes_from] = counts.get(k.figures.dram_bytes_from, 0) + 1
    notes = []
    for how in (DRAM_READ_WRITE, DRAM_RATE_X_TIME):
        if counts.get(how):
            notes.append(f"DRAM bytes of {counts[how]} of {len(kernels)} kernels are {how} (the report has no "
                         f"{DRAM_BYTES})")
    if counts.get(""):
        notes.append(f"{counts['']} of {len(kernels)} kernels have no DRAM figures in the report (neither {DRAM_BYTES} "
                     f"nor its rate): their DRAM bytes count as 0 in the ranges' totals")
    return notes


def report_only(report: NcuReport) -> NcuAnalysis:
    """The report without an export: ncu's NVTX stack stands for the range (empty for kernels
    launched by a thread without ranges), no nsys timing, no estimate, no export occupancy."""
    kernels = [JoinedKernel(k.index, k.name, k.function, -1, "/".join(k.nvtx_stack), (), k.nvtx_stack, None, None, "",
                            figures(k)) for k in report.kernels]
    return NcuAnalysis(NcuJoin(report, np.full(len(kernels), -1, dtype=np.int64), "", np.zeros(0, dtype=np.int64), ""),
                       kernels, notes=dram_notes(kernels))


# -- findings from the hardware ----------------------------------------------
OCCUPANCY_LIMITED = "occupancy-limited"
LOW_THEORETICAL_PCT = 50.0  # below this, the launch configuration caps the warps the SM can hold
MATTERS_SHARE = 0.02  # a kernel name's share of the profiled step's GPU time (nsys) worth a finding
OCCUPANCY_RULE = "TheoreticalOccupancy"
OCCUPANCY_FIXES = {
    "registers": "fewer registers per thread (__launch_bounds__, -maxrregcount, a smaller tile); for a library GEMM "
                 "(cuBLAS/CUTLASS pick the kernel), another shape or math mode (TF32, bf16) selects another kernel",
    "shared memory": "less shared memory per block (smaller tiles), or a larger carve-out "
                     "(cudaFuncAttributePreferredSharedMemoryCarveout)",
    "blocks": "larger blocks: the SM's block limit is reached with warps to spare",
    "warps": "",
}


def occupancy_findings(a: NcuAnalysis) -> list[dict]:
    """Kernels that matter whose theoretical occupancy, limited by their launch configuration,
    is low: per (range, kernel name), ncu's own estimate of what lifting the limit saves
    (its TheoreticalOccupancy rule, a share of the kernel's time) times the kernel's time in the
    step as nsys timed it (the real run's clocks, not ncu's replay). The saving is ncu's estimate,
    an upper bound: occupancy hides latency only while something else does not limit first."""
    joined = a.joined
    step_ns = sum(k.nsys_duration_ns or 0 for k in joined)
    groups: dict[tuple[str, str], list[JoinedKernel]] = {}
    for k in joined:
        groups.setdefault((k.path, k.name), []).append(k)
    out = []
    for (path, name), ks in groups.items():
        nsys_ns = sum(k.nsys_duration_ns or 0 for k in ks)
        theo = [k.figures.theoretical_occupancy_pct for k in ks if k.figures.theoretical_occupancy_pct is not None]
        if not step_ns or nsys_ns < MATTERS_SHARE * step_ns or not theo or max(theo) >= LOW_THEORETICAL_PCT:
            continue
        saved_ns = 0.0
        rows = []
        for k in ks:
            rule = next((r for r in k.figures.rules if r.rule == OCCUPANCY_RULE and r.speedup_pct is not None), None)
            pct = rule.speedup_pct if rule is not None and rule.speedup_pct is not None else 0.0
            saved_ns += (k.nsys_duration_ns or 0) * pct / 100
            rows.append({"ncu_index": k.index, "nsys_duration_ns": k.nsys_duration_ns,
                         "theoretical_occupancy_pct": k.figures.theoretical_occupancy_pct,
                         "achieved_occupancy_pct": k.figures.achieved_occupancy_pct,
                         "occupancy_limiter": k.figures.occupancy_limiter, "ncu_estimated_speedup_pct": pct})
        if not saved_ns:
            continue
        limiters = [k.figures.occupancy_limiter for k in ks]
        limiter = max(set(limiters), key=limiters.count)
        achieved = [k.figures.achieved_occupancy_pct for k in ks if k.figures.achieved_occupancy_pct is not None]
        out.append({
            "id": OCCUPANCY_LIMITED,
            "title": f"{table_name(name)} in {path}: theoretical occupancy {max(theo):.1f}% "
                     f"(limited by {limiter})",
            "ranges": [path], "name": name,
            "saving_ms_per_step": saved_ns / 1e6,
            "basis": (f"ncu's {OCCUPANCY_RULE} rule: its estimated speedup (share of the kernel's time) if the "
                      "occupancy limit were lifted, times each instance's time in the step as nsys timed it; "
                      "ncu's estimate, an upper bound"),
            "fix": OCCUPANCY_FIXES.get(limiter, ""),
            "evidence": {"instances": len(ks), "nsys_ms_per_step": nsys_ns / 1e6, "share_of_step_gpu_time": nsys_ns / step_ns,
                         "theoretical_occupancy_pct": max(theo),
                         "achieved_occupancy_pct": float(np.mean(achieved)) if achieved else None,
                         "occupancy_limiter": limiter,
                         "blocks_per_sm_by_limit": ks[0].figures.occupancy_limit_blocks},
            "rows": rows,
        })
    return sorted(out, key=lambda f: -f["saving_ms_per_step"])
