"""What to fix first: rules that name a cause of a slow step, with its evidence, a fix in
PyTorch terms and the step time fixing it would save, ranked by that saving.

Each rule reads the results of other analyses (parsers.idle: GPU idle by cause; parsers.roofline
and parsers.peaks: GEMM math paths and peaks; parsers.ranks: exposed communication) plus the
export's memcpy rows, over the steady-state iterations (`step_N`). Figures are per step (the
sum over the steady-state steps divided by their count). Every threshold lives in THRESHOLDS
with the reason for its value. No presentation here (nsight_tui.render.findings makes text).
"""
from __future__ import annotations

import re
from typing import Any
from dataclasses import asdict, dataclass, field

import numpy as np

from nsight_tui.parsers.analysis import STEP, iteration_ranges, phase_ranges
from nsight_tui.parsers.families import name_families
from nsight_tui.parsers.ids import KERNEL
from nsight_tui.parsers.idle import API_LAUNCH, API_SYNC, idle_analysis
from nsight_tui.parsers.load import Trace
from nsight_tui.parsers.model import RangeModel, range_model


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    reason: str


THRESHOLDS: dict[str, Threshold] = {
    "host_gap_min_ns": Threshold(1_000_000, "ns", "a host-bound stretch this long is one piece of Python/data work, "
                                 "not the 10-100 µs of framework dispatch between launch bursts"),
    "launch_min_share": Threshold(0.10, "of the step", "below a tenth of the step, CUDA graphs or a larger batch "
                                  "are not worth their complexity"),
    "optimizer_kernels_min": Threshold(200, "kernels per step", "foreach/fused optimizers launch tens of kernels per "
                                       "step; a per-parameter loop launches ~5-10 per parameter tensor (GPT-2 small: "
                                       "148 tensors, ~1,100 kernels)"),
    "fp32_gemm_min_share": Threshold(0.10, "of the step's GPU busy time", "fp32 GEMMs under a tenth of the GPU's "
                                     "work cannot move the step much"),
    "pageable_min_bytes": Threshold(1 << 20, "bytes per step", "smaller copies (a loss scalar from .item()) cost "
                                    "latency, not bandwidth: sync-stall covers them"),
    "pinned_gbps": Threshold(40.0, "GB/s", "what pinned host<->device copies reach over PCIe Gen4/Gen5 x16 "
                             "(measured 47 GB/s on the H200 of sample_traces/findings)"),
    "comm_min_share": Threshold(0.05, "of the step", "a few percent of exposed communication is the usual "
                                "tail of the last bucket"),
    "warmup_slow_ratio": Threshold(1.5, "x the median step", "a step this much slower than the median is "
                                   "compiling, autotuning or allocating, not steady state"),
    "min_saving_ms": Threshold(0.0, "ms per step", "rules fire whenever their cause is present; the saving "
                               "ranks them"),
}


def _t(key: str) -> float:
    return THRESHOLDS[key].value


@dataclass
class Finding:
    id: str
    title: str
    ranges: list[str]
    saving_ms_per_step: float
    basis: str  # how the saving was estimated, in words
    fix: str
    evidence: dict  # the figures, units in the keys
    rows: list[dict] = field(default_factory=list)  # what the figures stand on (gaps, calls, kernels, copies)
    start_ns: int | None = None  # where to look first (the largest piece of evidence)
    end_ns: int | None = None

    @property
    def range(self) -> str:
        return ", ".join(self.ranges)

    def to_json(self) -> dict:
        return {**asdict(self), "range": self.range}


@dataclass
class StepContext:
    """What every rule needs once: the steady-state steps and the idle analysis."""

    trace: Trace
    model: RangeModel
    steps: np.ndarray  # range positions of step_N
    t0: np.ndarray
    t1: np.ndarray
    device: int

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def step_ns(self) -> float:
        return float((self.t1 - self.t0).mean())

    def phase(self, name: str) -> np.ndarray:
        """The phase's ranges inside the steady-state steps, in time order (whatever the export's row order)."""
        ids = phase_ranges(self.model, self.steps, name)
        return ids[np.argsort(self.model.r_start[ids], kind="stable")]

    def idle(self):
        return idle_analysis(self.trace)

    def split(self):
        return self.idle().ranges(self.model, self.steps, top_gaps=0).devices[0].split

    def range_of(self, t: int) -> str:
        """The innermost range on the main thread open at t (or the step)."""
        m = self.model
        g = m.r_gtid[self.steps[0]]
        mask = (m.r_gtid == g) & (m.r_start <= t) & (m.r_end > t)
        ids = np.flatnonzero(mask)
        if len(ids) == 0:
            return "step_N"
        inner = ids[np.argmax(m.r_start[ids])]
        return _path(m, int(inner))


def _path(m: RangeModel, i: int) -> str:
    texts = m.trace.ranges["text"].to_numpy()
    parts = []
    while i >= 0:
        parts.append(re.sub(r"\d+$", "N", str(texts[i])))
        i = int(m.parent[i]) if hasattr(m, "parent") else -1
    return "/".join(reversed(parts))


def _ms(ns: float) -> float:
    return float(ns) / 1e6


# -- rules ---------------------------------------------------------------------------------------
def host_bound_gap(c: StepContext) -> Finding | None:
    w = c.idle().ranges(c.model, c.steps, top_gaps=400)
    long = [g for g in w.gaps if g.host_bound_ns >= _t("host_gap_min_ns")]
    if not long:
        return None
    total = sum(g.host_bound_ns for g in long)
    rows = []
    for g in long[:10]:
        before = c.range_of(g.start_ns - 1)
        after = c.range_of(g.end_ns)
        rows.append({"start_ns": g.start_ns, "end_ns": g.end_ns, "host_bound_ns": g.host_bound_ns,
                     "after_range": before, "before_range": after})
    where = sorted({f"{r['after_range']} → {r['before_range']}" for r in rows})
    return Finding(
        "host-bound-gap", "GPU idle while the CPU runs Python/data work with no CUDA call",
        where, _ms(total / c.n),
        f"host-bound idle in gaps ≥ {_t('host_gap_min_ns') / 1e6:.0f} ms, per step (the idle time it explains)",
        "move the work off the step: DataLoader(num_workers>0, pin_memory=True, prefetch), precompute, "
        "or overlap it with GPU work (no CUDA call means nothing is queued behind it)",
        {"gaps": len(long), "host_bound_ns_per_step": total / c.n, "step_ns": c.step_ns},
        rows, long[0].start_ns, long[0].end_ns)


def sync_stall(c: StepContext) -> Finding | None:
    t = c.trace
    api = t.api
    if len(api) == 0:
        return None
    ia = c.idle()
    kind = ia.api_kind
    a_start, a_end = api["start"].to_numpy(), api["end"].to_numpy()
    # a blocking call inside a step with GPU work launched after it in the same step: the GPU
    # drains and waits for the CPU (the one synchronise at a step's end stalls nothing)
    sync = np.flatnonzero(kind == API_SYNC)
    k = np.searchsorted(c.t0, a_start[sync], side="right") - 1
    kk = np.clip(k, 0, None)
    sync, k = sync[(k >= 0) & (a_end[sync] <= c.t1[kk])], kk[(k >= 0) & (a_end[sync] <= c.t1[kk])]
    launches = np.sort(a_start[kind == API_LAUNCH])
    later = np.searchsorted(launches, a_end[sync], side="left") < np.searchsorted(launches, c.t1[k], side="left")
    sync = sync[later]
    if len(sync) == 0:
        return None
    dev = ia.device(c.device)
    ops = t.ops
    on = ops["device"].to_numpy() == c.device
    o_start = np.sort(ops["start"].to_numpy()[on])
    s0, s1 = a_start[sync], a_end[sync]
    nxt = o_start[np.clip(np.searchsorted(o_start, s1), 0, len(o_start) - 1)] if len(o_start) else s1
    nxt = np.maximum(nxt, s1)
    # the GPU idle the sync explains: while the CPU waits and until the next op arrives after it
    parts = dev.split(s0, nxt)
    idle_ns = parts[1] + parts[2]  # host-bound time is host-bound-gap's
    names = [t.api_names[int(x)] for x in api["name"].to_numpy()[sync]]
    rows = [{"call": names[i], "start_ns": int(s0[i]), "end_ns": int(s1[i]), "call_ns": int(s1[i] - s0[i]),
             "gpu_idle_after_ns": int(idle_ns[i]), "range": c.range_of(int(s0[i]))}
            for i in np.argsort(-idle_ns)[:10].tolist()]
    total = float(idle_ns.sum())
    return Finding(
        "sync-stall", "blocking synchronisation inside the step",
        sorted({str(r["range"]) for r in rows}), _ms(total / c.n),
        "GPU idle (sync- and launch-bound) from each blocking call's start until the next GPU op after it returns, per step",
        "drop .item()/.cpu()/print(tensor) and torch.cuda.synchronize() from the step; log losses every N "
        "steps or accumulate them on the GPU; use non_blocking copies and events",
        {"calls_per_step": len(sync) / c.n, "call_ns_per_step": float((s1 - s0).sum()) / c.n,
         "gpu_idle_ns_per_step": total / c.n},
        rows, int(rows[0]["start_ns"]), int(rows[0]["end_ns"]))


def launch_bound(c: StepContext) -> Finding | None:
    s = c.split()
    per = s.launch_bound_ns / c.n
    if per < _t("launch_min_share") * c.step_ns:
        return None
    kernels = int(c.model.kernel_count[c.steps].sum()) / c.n
    return Finding(
        "launch-bound", "GPU waits on kernel launches: many short kernels issued one by one",
        ["step_N"], _ms(per),
        "launch-bound GPU idle per step (CUDA graphs replay the launches with ~no gaps)",
        "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), "
        "fuse elementwise ops (torch.compile), or raise the batch size so each kernel does more",
        {"launch_bound_ns_per_step": per, "kernels_per_step": kernels, "busy_ns_per_step": s.busy_ns / c.n,
         "step_ns": c.step_ns},
        [], int(c.t0[0]), int(c.t1[0]))


def unfused_optimizer(c: StepContext) -> Finding | None:
    opt = c.phase("optimizer")
    if len(opt) == 0:
        return None
    per = int(c.model.kernel_count[opt].sum()) / c.n
    if per < _t("optimizer_kernels_min"):
        return None
    from nsight_tui.parsers import roofline

    r = roofline.build(c.trace)
    point = r.range_point(opt, "step_N/optimizer")
    opt_ns = float(c.model.cpu_ns[opt].sum()) / c.n
    pk = r.peaks.peaks
    floor_ns = (point.bytes / len(opt)) / (pk.bandwidth_gbps * 1e9) * 1e9 if point.bytes and pk else None
    saving = opt_ns - (floor_ns or float(c.model.busy_ns[opt].sum()) / c.n)
    basis = ("optimizer time per step − its bytes at the memory roof (a fused optimizer is memory-bound)"
             if floor_ns is not None else "optimizer time per step − its GPU busy time")
    return Finding(
        "unfused-optimizer", "optimizer phase of many small per-parameter kernels",
        ["step_N/optimizer"], _ms(max(saving, 0.0)), basis,
        "torch.optim.AdamW(params, fused=True) (or foreach=True); avoid per-parameter Python loops",
        {"kernels_per_step": per, "optimizer_ns_per_step": opt_ns, "memory_roof_ns_per_step": floor_ns,
         "optimizer_bytes_per_step": None if point.bytes is None else point.bytes / len(opt)},
        [], int(c.model.r_start[opt[0]]), int(c.model.r_end[opt[0]]))


def fp32_gemm(c: StepContext) -> Finding | None:
    from nsight_tui.parsers import roofline

    t = c.trace
    pos = c.model.ops_of(c.steps)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    r = roofline.build(t)
    pk = r.peaks.peaks
    if pk is None or "fp32" not in pk.tflops:
        return None
    fast = max((p for p in ("tf32", "bf16") if p in pk.tflops), key=lambda p: pk.tflops[p], default=None)
    if fast is None:
        return None
    rows: list[dict[str, Any]] = []
    gemm_ns = 0
    for code in np.unique(codes[fam == "gemm"]):
        name = t.op_names[int(code)]
        if roofline.kernel_math_path(name, r.config) == "fp32":
            ns = int(dur[codes == code].sum())
            gemm_ns += ns
            rows.append({"kernel": name, "count": int((codes == code).sum()), "kernel_ns": ns})
    s = c.split()
    if gemm_ns == 0 or gemm_ns < _t("fp32_gemm_min_share") * s.busy_ns:
        return None
    ratio = pk.tflops["fp32"] / pk.tflops["tf32" if "tf32" in pk.tflops else fast]
    gpu_share = s.busy_ns / (s.window_ns or 1)
    saved = gemm_ns * (1 - ratio) * gpu_share / c.n
    rows.sort(key=lambda x: -x["kernel_ns"])
    return Finding(
        "fp32-gemm-without-tensor-cores", f"fp32 GEMMs on CUDA cores on a GPU with TF32 tensor cores ({pk.name})",
        ["step_N"], _ms(saved),
        f"fp32 GEMM time × (1 − fp32/tf32 peak = {pk.tflops['fp32']:g}/{pk.tflops.get('tf32', 0):g}) × the share of "
        "the step the GPU is busy (only GPU-bound time shortens the step)",
        "torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision('high')), or bf16 "
        "autocast: torch.autocast('cuda', dtype=torch.bfloat16)",
        {"fp32_gemm_ns_per_step": gemm_ns / c.n, "fp32_tflops": pk.tflops["fp32"], "tf32_tflops": pk.tflops.get("tf32"),
         "gpu_busy_share": gpu_share},
        rows[:10], int(c.t0[0]), int(c.t1[0]))


def unfused_attention(c: StepContext) -> Finding | None:
    t = c.trace
    attn = c.phase("scaled_dot_product_attention")
    if len(attn) == 0:
        return None
    pos = c.model.ops_of(attn)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    if not (fam == "softmax").any() or (fam == "attention").any():
        return None
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    # what fusion removes: the memory round trips of the scores (softmax, masking, scaling)
    unfused = fam != "gemm"
    ns = float(dur[unfused].sum())
    s = c.split()
    gpu_share = s.busy_ns / (s.window_ns or 1)
    saved = 3 * ns * gpu_share / c.n
    return Finding(
        "unfused-attention", "attention as separate score / softmax / matmul kernels (memory-bound softmax)",
        ["step_N/forward/scaled_dot_product_attention"], _ms(saved),
        "3 × the forward attention's non-GEMM kernel time (forward + backward ≈ 3× forward) × the share of "
        "the step the GPU is busy",
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) (FlashAttention / "
        "memory-efficient kernels)",
        {"softmax_kernels_per_step": int((fam == "softmax").sum()) / c.n, "non_gemm_ns_per_step": ns / c.n,
         "gpu_busy_share": gpu_share},
        [], int(c.model.r_start[attn[0]]), int(c.model.r_end[attn[0]]))


_MEMCPY_SQL = """
SELECT m.start, m.end, m.bytes, m.copyKind, m.srcKind, m.dstKind, r.start, r.end, s.value
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
  AND (r.globalTid >> 24) = (m.globalPid >> 24)
LEFT JOIN StringIds s ON s.id = r.nameId
WHERE m.deviceId = ? ORDER BY m.start"""


def _memcpys(c: StepContext) -> np.ndarray | None:
    from nsight_tui.parsers.source import connect_readonly

    if not c.trace.schema.has("CUPTI_ACTIVITY_KIND_MEMCPY", "srcKind"):
        return None
    con = connect_readonly(c.trace.path)
    try:
        rows = con.execute(_MEMCPY_SQL, (c.device,)).fetchall()
    finally:
        con.close()
    if not rows:
        return None
    a = np.array([r[:8] for r in rows], dtype=object)
    names = np.array([r[8] or "" for r in rows], dtype=object)
    start = a[:, 6].astype(np.float64)
    k = np.searchsorted(c.t0, np.nan_to_num(start, nan=-1), side="right") - 1
    in_step = (k >= 0) & (start < c.t1[np.clip(k, 0, None)])
    return np.array([(*r[:8], n) for r, n, keep in zip(rows, names, in_step) if keep], dtype=object) \
        if in_step.any() else None


def pageable_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    pageable = (m[:, 4] == 0) | (m[:, 5] == 0)
    host = np.isin(m[:, 3], (1, 2))  # HtoD, DtoH
    sel = m[pageable & host]
    if len(sel) == 0:
        return None
    nbytes = float(sel[:, 2].sum())
    if nbytes / c.n < _t("pageable_min_bytes"):
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    pinned_ns = nbytes / (_t("pinned_gbps") * 1e9) * 1e9
    saved = max(call_ns - pinned_ns, 0.0) / c.n
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "copy_ns": int(r[1] - r[0]), "call_ns": int(r[7] - r[6]),
             "direction": {1: "HtoD", 2: "DtoH"}[int(r[3])], "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "pageable-memcpy", "host<->device copies from pageable memory (staged, blocking the CPU)",
        sorted({str(r["range"]) for r in rows}), _ms(saved),
        f"time in the copies' CUDA calls − their bytes at {_t('pinned_gbps'):g} GB/s (pinned), per step",
        "pin the host buffers (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
        ".to(device, non_blocking=True)",
        {"copies_per_step": len(sel) / c.n, "bytes_per_step": nbytes / c.n, "call_ns_per_step": call_ns / c.n,
         "copy_ns_per_step": float((sel[:, 1] - sel[:, 0]).sum()) / c.n},
        rows, int(sel[0][6]), int(sel[0][7]))


def sync_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    sync = np.array(["Async" not in str(n) and str(n).startswith(("cudaMemcpy", "cuMemcpy")) for n in m[:, 8]],
                    dtype=bool)
    sel = m[sync]
    if len(sel) == 0:
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    copy_ns = float((sel[:, 1] - sel[:, 0]).sum())
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "call_ns": int(r[7] - r[6]), "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "sync-memcpy", "synchronous copies inside the step",
        sorted({str(r["range"]) for r in rows}), _ms(max(call_ns - copy_ns, 0.0) / c.n),
        "time the CPU spent in the copies' calls beyond the copies themselves, per step",
        "use cudaMemcpyAsync semantics: tensor.to(device, non_blocking=True) from pinned memory",
        {"copies_per_step": len(sel) / c.n, "call_ns_per_step": call_ns / c.n}, rows,
        int(sel[0][6]), int(sel[0][7]))


def exposed_communication(c: StepContext) -> Finding | None:
    from nsight_tui.parsers.ranks import ranks_of_trace

    try:
        run = ranks_of_trace(c.trace)
    except Exception:  # noqa: BLE001 - a trace without ranks has nothing to expose
        return None
    rows = [{"rank": s.rank.rank, "exposed_comm_ns": s.exposed_comm_ns, "comm_ns": s.comm_ns,
             "steps": len(s.steps_ns)} for s in run.ranks if s.comm_kernels]
    if not rows:
        return None
    worst = max(run.ranks, key=lambda s: s.exposed_comm_ns)
    steps = max(len(worst.steps_ns), 1)
    per = worst.exposed_comm_ns / steps
    if per < _t("comm_min_share") * c.step_ns:
        return None
    return Finding(
        "exposed-communication", "collective communication not hidden behind compute",
        ["step_N/backward"], _ms(per), "exposed communication time per step of the worst rank",
        "overlap it: DDP(bucket_cap_mb=..., gradient_as_bucket_view=True), no_sync() for accumulation, "
        "FSDP prefetch; check the interconnect (NCCL_DEBUG=INFO)",
        {"exposed_comm_ns_per_step": per, "ranks": len(run.ranks)}, rows)


def warmup_in_window(c: StepContext) -> Finding | None:
    d = (c.t1 - c.t0).astype(np.float64)
    if len(d) < 3:
        return None
    med = float(np.median(d))
    slow = np.flatnonzero(d > _t("warmup_slow_ratio") * med)
    if len(slow) == 0:
        return None
    extra = float((d[slow] - med).sum())
    return Finding(
        "warmup-in-window", "compilation/autotuning inside what is taken as steady state",
        ["step_N"], _ms(extra / c.n), "the slow steps' time above the median step, spread over the steps",
        "run more warm-up iterations before the profiled ones (torch.compile, cuDNN/cuBLAS autotuning, the "
        "caching allocator), or start the capture later (nsys --capture-range=nvtx / cudaProfilerStart)",
        {"slow_steps": len(slow), "median_step_ns": med},
        [{"step": int(i), "step_ns": int(d[i])} for i in slow], int(c.t0[slow[0]]), int(c.t1[slow[0]]))


RULES = {
    "host-bound-gap": host_bound_gap,
    "sync-stall": sync_stall,
    "launch-bound": launch_bound,
    "unfused-optimizer": unfused_optimizer,
    "fp32-gemm-without-tensor-cores": fp32_gemm,
    "unfused-attention": unfused_attention,
    "pageable-memcpy": pageable_memcpy,
    "sync-memcpy": sync_memcpy,
    "exposed-communication": exposed_communication,
    "warmup-in-window": warmup_in_window,
}
RULE_IDS = tuple(RULES)


def context(trace: Trace, attribution: str = "process") -> StepContext | None:
    model = range_model(trace, attribution)
    steps = iteration_ranges(model, STEP)
    if len(steps) == 0:
        return None
    steps = steps[np.argsort(model.r_start[steps])]
    devices = idle_analysis(trace).devices_of_process(int(model.r_gtid[steps[0]]))
    if not devices:
        return None
    return StepContext(trace, model, steps, model.r_start[steps], model.r_end[steps], devices[0])


def findings(trace: Trace, attribution: str = "process", rules: dict | None = None) -> list[Finding]:
    """Every rule that fires on the trace's steady-state steps, largest saving first."""
    c = context(trace, attribution)
    if c is None:
        return []
    out = [f for rule in (rules or RULES).values() if (f := rule(c)) is not None
           and f.saving_ms_per_step >= _t("min_saving_ms")]
    return sorted(out, key=lambda f: (-f.saving_ms_per_step, f.id))


def answers(trace: Trace, attribution: str = "process") -> dict:
    """The JSON under "findings" in `report -f json`."""
    c = context(trace, attribution)
    return {"step_ns": None if c is None else c.step_ns, "steps": 0 if c is None else c.n,
            "findings": [f.to_json() for f in findings(trace, attribution)],
            "thresholds": {k: asdict(v) for k, v in THRESHOLDS.items()}}
