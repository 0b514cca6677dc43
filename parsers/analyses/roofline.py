"""How far from the hardware: FLOPs and bytes against GPU time, the two roofs, a verdict, MFU.

For a range (one instance, or all instances of an aggregated name path), a kernel family inside
it, or one kernel:

* FLOPs and bytes from the source in force (parsers.flop_counts: given > measured > op shapes >
  analytic);
* achieved FLOP/s and bytes/s over its GPU time: a range's GPU busy time (union of its ops'
  intervals), a family's or kernel's summed kernel durations;
* arithmetic intensity AI = FLOPs / bytes, the GPU's ridge point = peak FLOP/s / bandwidth for
  the math path its GEMMs run on (parsers.peaks), and the attainable FLOP/s min(peak, AI x bw);
* a verdict, tried in this order, with the numbers that decide it:
  - latency/launch-bound when the GPU sat idle more than half of the range's GPU span
    (first op start to last op end: kernels waited on launches), or when its kernels average
    under TINY_KERNEL_NS and reach under half of their attainable throughput (fixed per-kernel
    costs, not a roof, set their time);
  - compute-bound when AI >= ridge, memory-bound when AI < ridge;
* MFU of a range = its FLOPs / (its NVTX time x the peak of the math path of the GEMMs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.kernels import flop_counts, peaks as peak_table, shape_flops
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.kernels.kernel_names import decode_gemm
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.ranges import RangeModel, range_model

# A GPU busy less than this share of the range's GPU span spent the rest waiting for work.
LAUNCH_BUSY_SHARE = 0.5
# Kernels averaging less than this are mostly fixed cost: launch, ramp-up and tail of a kernel
# take 1.5-3 µs on current GPUs whatever it computes (an empty kernel measures ~2 µs).
TINY_KERNEL_NS = 3_000
# ... and are called latency-bound only when they also reach under this share of their roof.
FAR_BELOW_ROOF = 0.5

COMPUTE, MEMORY, LATENCY, UNKNOWN = "compute-bound", "memory-bound", "latency/launch-bound", "unknown"
VERDICTS = (COMPUTE, MEMORY, LATENCY, UNKNOWN)
_N = re.compile(r"\d+$")


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str


@dataclass
class RooflinePoint:
    """One range, family or kernel on the roofline. Rates are per second, sizes in bytes."""

    label: str
    level: str  # range | family | kernel
    path: str  # the range path it belongs to
    gpu_ns: int  # the time the rates are over (see the module doc)
    kernels: int
    instances: int
    flops: float | None
    bytes: float | None
    source: str  # measured | analytic | given | none
    math_path: str
    span_ns: int | None = None  # ranges: first op start to last op end (summed over instances)
    wall_ns: int | None = None  # ranges: the time MFU divides by: the step's period, a phase's GPU time
    peak_flops_per_s: float | None = None
    peak_bytes_per_s: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    intensity_flops_per_byte: float | None = None
    ridge_flops_per_byte: float | None = None
    attainable_flops_per_s: float | None = None
    roof_share: float | None = None  # achieved / attainable
    mfu: float | None = None
    verdict: str = UNKNOWN
    reason: str = ""


def _per_second(amount: float | None, ns: int) -> float | None:
    return None if amount is None or ns <= 0 else amount / (ns / 1e9)


def decide(p: RooflinePoint) -> Verdict:
    """The verdict for a point whose rates are filled in (see the module doc)."""
    if p.gpu_ns <= 0:
        return Verdict(UNKNOWN, "no GPU time")
    if p.span_ns and p.gpu_ns / p.span_ns < LAUNCH_BUSY_SHARE:
        return Verdict(LATENCY, f"GPU busy {p.gpu_ns / p.span_ns:.0%} of the range's GPU span "
                                f"(< {LAUNCH_BUSY_SHARE:.0%}): kernels wait on launches")
    if p.flops is None or p.bytes is None:
        return Verdict(UNKNOWN, "no FLOP/byte counts for it")
    if p.peak_flops_per_s is None or not p.peak_bytes_per_s:
        return Verdict(UNKNOWN, "no peaks for this GPU (--peak-tflops, --peak-gbps)")
    if p.flops == 0 and p.bytes == 0:
        return Verdict(UNKNOWN, "no counted work")
    mean = p.gpu_ns / max(p.kernels, 1)
    share = p.roof_share if p.roof_share is not None else 0.0
    if mean < TINY_KERNEL_NS and share < FAR_BELOW_ROOF:
        roof = _tf(p.attainable_flops_per_s) if p.flops else _gb(p.peak_bytes_per_s)
        return Verdict(LATENCY, f"mean kernel {mean / 1e3:.1f} µs (< {TINY_KERNEL_NS / 1e3:.0f} µs) at "
                                f"{share:.0%} of its roof ({roof}): fixed per-kernel costs")
    ai, ridge = p.intensity_flops_per_byte, p.ridge_flops_per_byte or 0.0
    flops_rate, bytes_rate = p.achieved_flops_per_s or 0.0, p.achieved_bytes_per_s or 0.0
    of_peak = f"{_tf(flops_rate)} = {flops_rate / p.peak_flops_per_s:.0%} of {_tf(p.peak_flops_per_s)} peak"
    if ai is None:  # FLOPs but no bytes counted: only the compute roof applies
        return Verdict(COMPUTE, f"no bytes counted; {of_peak}")
    if ai >= ridge:
        return Verdict(COMPUTE, f"AI {ai:,.1f} ≥ ridge {ridge:,.1f} FLOP/B; {of_peak}")
    return Verdict(MEMORY, f"AI {ai:,.2f} < ridge {ridge:,.1f} FLOP/B; {_gb(bytes_rate)} = "
                           f"{bytes_rate / p.peak_bytes_per_s:.0%} of {_gb(p.peak_bytes_per_s)}")


def _tf(x: float | None) -> str:
    return "–" if x is None else f"{x / 1e12:,.2f} TFLOP/s"


def _gb(x: float | None) -> str:
    return "–" if x is None else f"{x / 1e9:,.0f} GB/s"


def fill(p: RooflinePoint, peaks: peak_table.GpuPeaks | None) -> RooflinePoint:
    """Rates, roofs, MFU and the verdict from the point's counts, times and the peaks."""
    p.achieved_flops_per_s = _per_second(p.flops, p.gpu_ns)
    p.achieved_bytes_per_s = _per_second(p.bytes, p.gpu_ns)
    if p.flops is not None and p.bytes:
        p.intensity_flops_per_byte = p.flops / p.bytes
    if peaks is not None:
        p.peak_flops_per_s = peaks.flops_per_s(p.math_path)
        p.peak_bytes_per_s = peaks.bytes_per_s or None
        p.ridge_flops_per_byte = peaks.ridge(p.math_path)
        if p.peak_flops_per_s and p.peak_bytes_per_s and p.intensity_flops_per_byte:
            p.attainable_flops_per_s = min(p.peak_flops_per_s, p.intensity_flops_per_byte * p.peak_bytes_per_s)
            if p.attainable_flops_per_s > 0 and p.achieved_flops_per_s is not None:
                p.roof_share = p.achieved_flops_per_s / p.attainable_flops_per_s
        if p.roof_share is None and p.achieved_bytes_per_s is not None and p.peak_bytes_per_s:
            p.roof_share = p.achieved_bytes_per_s / p.peak_bytes_per_s  # FLOP-free work: the memory roof
        if p.wall_ns and p.flops is not None and p.peak_flops_per_s:
            p.mfu = p.flops / (p.wall_ns / 1e9 * p.peak_flops_per_s)
    v = decide(p)
    p.verdict, p.reason = v.kind, v.reason
    return p


# -- the math path a kernel runs on -----------------------------------------------------------
_TENSOR_TYPES = {"tf32": "tf32", "f32": "tf32", "bf16": "bf16", "f16": "bf16", "e4m3": "fp8", "e5m2": "fp8",
                 "f8": "fp8"}


def config_math_path(config: dict) -> str:
    """The GEMM math path a run's settings imply: bf16 autocast, fp32 with TF32, or plain fp32."""
    if config.get("dtype") == "bf16":
        return "bf16"
    return "tf32" if config.get("tf32") else "fp32"


def kernel_math_path(name: str, config: dict | None = None) -> str:
    """`fp32` (CUDA cores), `tf32`, `bf16` or `fp8` (tensor cores), from the kernel name
    (parsers.kernel_names: ffma/simt = CUDA cores; tensorop/gmma with its multiplier type);
    non-GEMM kernels run on the CUDA cores. A GEMM name that does not say (cuBLAS nvjet) takes
    the run's settings from the config mark."""
    d = decode_gemm(name)
    if d is None or d.get("role") == "split-k reduction":
        return "fp32"
    if d.get("math") == "simt":
        return "fp32"
    if d.get("math") in ("tensorop", "gmma"):
        for token in (d.get("math_type"), d.get("a_type")):
            if token in _TENSOR_TYPES:
                return _TENSOR_TYPES[token]
        precision = d.get("precision") or ""
        if "bf16" in precision or "f16" in precision:
            return "bf16"
        if d.get("kind") == "nvjet":
            # tensor cores whatever the input: the run's settings say which; a run that does not
            # say (no config mark) is taken as 16-bit, the inputs nvJet was seen with, never fp32 CUDA cores
            path = config_math_path(config or {})
            return path if path != "fp32" else "bf16"
    return config_math_path(config or {})


# The families whose kernels are matrix math a name can place on the tensor cores: a convolution run
# as an implicit GEMM (cuDNN's xmma/CUTLASS names carry their types as a GEMM's do) votes with the
# GEMMs; a depthwise or direct convolution's name decodes to nothing: it runs on the CUDA cores, and
# where the step's FLOPs are the GEMMs' (a ConvNeXt's depthwise convolutions take more time than its
# pointwise GEMMs for a fraction of the FLOPs) it does not vote for the step's path
MATRIX_FAMILIES = ("gemm", "convolution")


def gemm_math_path(trace: Trace, op_positions: np.ndarray, config: dict, direct_conv: str | None = None) -> str:
    """The math path holding the most matrix-math kernel time among these ops: the GEMMs and the
    convolutions whose names say their math, and the others as `direct_conv` (None: not counted);
    the run's settings when there is none."""
    ops = trace.ops
    pos = np.asarray(op_positions, dtype=np.int64)
    pos = pos[ops["kind"].to_numpy()[pos] == KERNEL]
    codes = ops["name"].to_numpy()[pos]
    dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos]
    families = name_families(trace)
    fam = families[codes] if len(codes) else np.array([], dtype=object)
    by_path: dict[str, int] = {}
    # per GEMM name its summed time in one pass (a mask per name was 0.3 s at 2M ops), in int64
    gemm = np.isin(fam, MATRIX_FAMILIES)
    g_codes, g_dur = codes[gemm], dur[gemm]
    order = np.argsort(g_codes, kind="stable")
    g_codes, g_dur = g_codes[order], g_dur[order]
    starts = np.flatnonzero(np.concatenate(([True], g_codes[1:] != g_codes[:-1]))) if len(g_codes) else order[:0]
    sums = np.add.reduceat(g_dur, starts) if len(starts) else g_dur[:0]
    for code, total in zip(g_codes[starts].tolist(), sums.tolist()):
        name = trace.op_names[int(code)]
        path = kernel_math_path(name, config)
        if families[int(code)] != "gemm" and decode_gemm(name) is None:  # not an implicit GEMM
            if direct_conv is None:
                continue
            path = direct_conv
        by_path[path] = by_path.get(path, 0) + int(total)
    if not by_path:
        return config_math_path(config)
    return max(by_path.items(), key=lambda kv: kv[1])[0]


# -- the context: counts and peaks in force for one trace -------------------------------------------
@dataclass
class Roofline:
    """What the roofline of one trace stands on."""

    trace: Trace
    model: RangeModel
    counts: flop_counts.FlopCounts | None
    peaks: peak_table.PeakChoice
    config: dict
    notes: list[str] = field(default_factory=list)
    _gemm_paths: dict = field(default_factory=dict, repr=False)

    @property
    def source(self) -> str:
        return self.counts.source if self.counts else "none"

    def source_line(self) -> str:
        if self.counts is None:
            return f"FLOPs/bytes: none — {NO_FLOPS}"
        return f"FLOPs/bytes: {self.counts.source} — {self.counts.source_text}"

    def math_path_of(self, op_positions: np.ndarray, key=None, direct_conv: str | None = None) -> str:
        if key is not None and key in self._gemm_paths:
            return self._gemm_paths[key]
        path = gemm_math_path(self.trace, op_positions, self.config, direct_conv)
        if key is not None:
            self._gemm_paths[key] = path
        return path

    # -- points --------------------------------------------------------------------------------
    def range_point(self, ids: np.ndarray, path: str, label: str | None = None,
                    wall_ns: int | None = None) -> RooflinePoint:
        """A range (its instances `ids`, all with name path `path`). `wall_ns`: the time MFU divides
        by (an iteration's period); by default the range's GPU time (its work's span: on a capture
        without phase syncs the CPU span of a phase is not when its work ran)."""
        m = self.model
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        pos = m.ops_of(ids)
        rc = self.counts.range_counts(path) if self.counts else None
        n = len(ids)
        p = RooflinePoint(
            label=label or path.rsplit("/", 1)[-1], level="range", path=path,
            gpu_ns=int(m.busy_ns[ids].sum()), kernels=int(m.kernel_count[ids].sum()), instances=n,
            flops=None if rc is None else rc.flops * n, bytes=None if rc is None else rc.bytes * n,
            source=self.source if rc is not None else "none",
            math_path=self.math_path_of(pos, ("range", path, tuple(ids[:3].tolist()), n)),
            span_ns=int(m.proj_ns[ids].sum()), wall_ns=int(m.proj_ns[ids].sum()) if wall_ns is None else wall_ns,
        )
        return fill(p, self.peaks.peaks)

    def family_points(self, ids: np.ndarray, path: str) -> list[RooflinePoint]:
        """One point per kernel family with GPU time in the range; FLOPs/bytes where the source
        breaks the range down by op (measured, analytic)."""
        m, t = self.model, self.trace
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        pos = m.ops_of(ids)
        pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
        rc = self.counts.range_counts(path) if self.counts else None
        fams = name_families(t)[t.ops["name"].to_numpy()[pos]] if len(pos) else np.array([], dtype=object)
        dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
        n = len(ids)
        out = []
        for fam in sorted(set(fams.tolist()), key=lambda f: -int(dur[fams == f].sum())):
            sel = fams == fam
            fb = rc.families.get(fam) if rc is not None and rc.families is not None else None
            p = RooflinePoint(
                label=fam, level="family", path=path, gpu_ns=int(dur[sel].sum()), kernels=int(sel.sum()),
                instances=n, flops=None if fb is None else fb[0] * n, bytes=None if fb is None else fb[1] * n,
                source=self.source if fb is not None else "none",
                math_path=(self.math_path_of(pos[sel], ("family", path, fam, n), "fp32")
                           if fam in MATRIX_FAMILIES else "fp32"),
            )
            out.append(fill(p, self.peaks.peaks))
        return out

    def kernel_points(self, ids: np.ndarray, path: str) -> list[RooflinePoint]:
        """Kernels whose counts can be attributed: the only kernel name of its family in the
        range gets that family's FLOPs and bytes (e.g. the softmax kernel of computing_softmax)."""
        m, t = self.model, self.trace
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        pos = m.ops_of(ids)
        pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
        codes = t.ops["name"].to_numpy()[pos]
        fams = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
        families = {f.label: f for f in self.family_points(ids, path)}
        out = []
        for fam, fp in families.items():
            names = np.unique(codes[fams == fam])
            if len(names) != 1 or fp.flops is None:
                continue
            name = t.op_names[int(names[0])]
            p = RooflinePoint(label=name, level="kernel", path=path, gpu_ns=fp.gpu_ns, kernels=fp.kernels,
                              instances=fp.instances, flops=fp.flops, bytes=fp.bytes, source=fp.source,
                              math_path=kernel_math_path(name, self.config))
            out.append(fill(p, self.peaks.peaks))
        return out


NO_FLOPS = ("this trace has no FLOP counts: no nsight-tui:flops marks (`nsight-tui capture`), no op shapes "
            "(nsys --pytorch=autograd-shapes-nvtx, or emit_nvtx(record_shapes=True)), no GPT-2 config mark; "
            "give them with --flops FILE.json")


def shape_counts(trace: Trace, model: RangeModel, config: dict) -> flop_counts.FlopCounts | None:
    """FLOPs from the op shapes in the NVTX text, at the element size the GEMMs' math path implies
    (the text has no dtypes): 2 bytes where they run bf16/fp16/fp8 tensor cores, else 4."""
    if not shape_flops.has_shapes(model):
        return None
    path = gemm_math_path(trace, np.arange(len(trace.ops)), config) if len(trace.ops) else config_math_path(config)
    size = 2 if path in ("bf16", "fp8") else 4
    return shape_flops.from_op_shapes(model, size, f" (the GEMM kernels' math path is {path})")


def build(trace: Trace, attribution: str = "process", flops_file=None, peak_tflops: float | None = None,
          peak_gbps: float | None = None) -> Roofline:
    """The roofline context of a trace: counts from `flops_file`, else the trace's marks, else
    its op shapes, else the analytic formulas; peaks from the table, or the user's."""
    from nsight_tui.parsers.read.target_info import gpu_memory_bandwidth

    config = dict(trace.meta().config)
    model = range_model(trace, attribution)
    counts = flop_counts.from_file(flops_file) if flops_file else None
    if counts is None:
        counts = flop_counts.from_marks(trace.marks)
    if counts is None:
        counts = shape_counts(trace, model, config)
    if counts is None:
        counts = flop_counts.analytic_counts(config)
    bandwidth = gpu_memory_bandwidth(trace)
    choice = peak_table.choose(trace.info.gpus, peak_tflops, peak_gbps, bandwidth)
    return Roofline(trace, model, counts, choice, config)


def node_path(labels) -> str:
    """A range tree node's path (`RangeNode.path`) as the counts key it: `step_3` -> `step_N`."""
    return "/".join(_N.sub("N", label) for label in labels)


# -- what `report` says -----------------------------------------------------------------------
PHASE_PATHS = (
    ("step", "step_N"),
    ("forward", "step_N/forward"),
    ("backward", "step_N/backward"),
    ("optimizer", "step_N/optimizer"),
    ("scaled_dot_product_attention", "step_N/forward/scaled_dot_product_attention"),
    ("computing_attention_scores", "step_N/forward/scaled_dot_product_attention/computing_attention_scores"),
    ("computing_softmax", "step_N/forward/scaled_dot_product_attention/computing_softmax"),
    ("final_matmul", "step_N/forward/scaled_dot_product_attention/final_matmul"),
)
MFU_PHASES = ("step", "forward", "backward", "optimizer")
BASIS = {
    "achieved": "FLOPs (bytes) / GPU time: a range's GPU busy time (union of its ops), a family's or "
                "kernel's summed kernel durations",
    "intensity": "FLOPs / bytes (bytes: tensors read + written, a lower bound of DRAM traffic)",
    "ridge": "peak FLOP/s of the math path / memory bandwidth: below it the memory roof is lower",
    "mfu": "FLOPs / (time × peak FLOP/s of the math path the GEMMs run on); time: the step's period (each step's "
           "start to the next's), a phase's GPU time (its work's first start to last end)",
    "verdict": f"latency/launch-bound if the GPU is busy < {LAUNCH_BUSY_SHARE:.0%} of the range's GPU span, "
               f"or kernels average < {TINY_KERNEL_NS / 1e3:.0f} µs at < {FAR_BELOW_ROOF:.0%} of their roof; "
               "else compute-bound if AI ≥ ridge, memory-bound if AI < ridge",
}


def _targets(r: Roofline) -> list[tuple[str, np.ndarray, str]]:
    """(name, range positions, counts path) of the ranges the report covers: steady-state
    steps and their phases, or, without `step_N` iterations, the main thread's top two levels."""
    m = r.model
    steps = steps_of(m)
    out = []
    if steps.found:
        for name, path in PHASE_PATHS:
            ids = steps.steady if name == "step" else steps.phase(name)
            if len(ids):
                out.append((name, ids, path))
        return out
    for group in m.aggregated_groups:
        if not group.is_main:
            continue
        for node in group.roots:
            out.append((node.label, node.ids, node_path(node.path)))
            out += [(f"{node.label}/{c.label}", c.ids, node_path(c.path)) for c in node.children]
    return out


@dataclass(frozen=True)
class RooflineReport:
    """Section (g) of `report` (render.roofline lays it out under "roofline"). gpu: the export's
    GPU; peaks: the roofs in force (None: none known, peak_note says how to give them); source:
    where the FLOPs and bytes come from (source_detail, source_line: in words); gemm_math_path:
    the roof MFU and ridge points use; ranges: the steady-state steps and their phases (or the main
    thread's top two levels); families: per scope its kernel families; kernels: the attention's
    kernels (or every kernel where there is no step); mfu: per phase, 0..1; formulas: the analytic
    counts' terms (empty for other sources); basis: how each figure is computed; gemms_unseen: the
    capture traced CUDA graphs whole (their kernels, GEMMs included, in no table)."""

    gpu: str
    peaks: peak_table.GpuPeaks | None
    peak_note: str
    source: str
    source_detail: str
    source_line: str
    gemm_math_path: str
    ranges: list[RooflinePoint]
    families: dict[str, list[RooflinePoint]]
    kernels: list[RooflinePoint]
    mfu: dict[str, float | None]
    formulas: list[flop_counts.OpCount]
    basis: dict[str, str]
    # the capture traced CUDA graphs whole: their GEMMs are in no table, so where the steps' GEMMs ran
    # inside them the math path is the run's settings', not read off kernels
    gemms_unseen: bool = False


def answers(trace: Trace, attribution: str = "process", flops_file=None, peak_tflops: float | None = None,
            peak_gbps: float | None = None, roof: Roofline | None = None) -> RooflineReport:
    """Section (g) of `report`, typed."""
    r = roof or build(trace, attribution, flops_file, peak_tflops, peak_gbps)
    targets = _targets(r)
    ranges = [r.range_point(ids, path, label=name,
                            wall_ns=int(steps_of(r.model).times(ids).period_ns.sum()) if name == "step" else None)
              for name, ids, path in targets]
    by_name = {p.label: p for p in ranges}
    families: dict[str, list[RooflinePoint]] = {}
    kernels: list[RooflinePoint] = []
    for name, ids, path in targets:
        if name in ("step", "forward", "backward") or (name.count("/") == 0 and name not in by_name):
            families[name] = r.family_points(ids, path)
        if name in ("computing_attention_scores", "computing_softmax", "final_matmul") or \
                not any(n == "step" for n, _, _ in targets):
            kernels += r.kernel_points(ids, path)
    if not families and targets:
        name, ids, path = targets[0]
        families[name] = r.family_points(ids, path)
    step = by_name.get("step")
    return RooflineReport(
        gpu=r.peaks.gpu, peaks=r.peaks.peaks, peak_note=r.peaks.note, source=r.source,
        source_detail=r.counts.detail if r.counts else "", source_line=r.source_line(),
        gemm_math_path=step.math_path if step else (ranges[0].math_path if ranges else config_math_path(r.config)),
        ranges=ranges, families=families, kernels=kernels,
        mfu={n: by_name[n].mfu for n in MFU_PHASES if n in by_name},
        formulas=list(r.counts.rows) if r.counts and r.counts.source == "analytic" else [],
        basis=BASIS, gemms_unseen=bool(trace.info.graphs_whole))
