"""Rules on how the kernels use the GPU: fp32 GEMMs off the tensor cores, occupancy-limited
kernels (Nsight Compute), tensor cores idle (sampled GPU metrics)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.read.ids import KERNEL

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.gpu_metrics import GemmCheck


def fp32_gemm(c: StepContext) -> Finding | None:
    from nsight_tui.parsers.analyses import roofline

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
            rows.append({"kernel": name, "count": int((codes == code).sum()), "kernel_ns": ns, "code": int(code)})
    s = c.split()
    if gemm_ns == 0 or gemm_ns < threshold("fp32_gemm_min_share") * s.busy_ns:
        return None
    ratio = pk.tflops["fp32"] / pk.tflops["tf32" if "tf32" in pk.tflops else fast]
    gpu_share = s.busy_ns / (s.window_ns or 1)
    # The step shortens by what the GPU saves only while the CPU waits for the GPU: once faster
    # GEMMs drain the queue the CPU sets the pace (the TF32 twins of the fp32 captures turn
    # launch-bound). So the GEMM time saved, at most the time the CPU waited for the GPU.
    gpu_saved = gemm_ns * (1 - ratio) / c.n
    saved = min(gpu_saved, c.cpu_wait_ns)
    # The pace the CPU keeps once the GPU keeps up is not in an fp32 trace: between twins it moved
    # 0.8-1.3x this capture's CPU work, by run and machine. So the range it can fall in too: at most
    # all the GPU time saved (a CPU that keeps up); at least what is left if the CPU's work and the
    # GPU's remaining work ran back to back, not overlapping at all (step = CPU work + GPU busy − saved).
    cpu_work = c.step_ns - c.cpu_wait_ns
    busy = s.busy_ns / c.n
    low = min(max(c.step_ns - (cpu_work + busy - gpu_saved), 0.0), saved)
    fp32_pos = pos[np.isin(codes, [row.pop("code") for row in rows])]
    claim = intervals.union(t.ops["start"].to_numpy()[fp32_pos], t.ops["end"].to_numpy()[fp32_pos])
    rows.sort(key=lambda x: -x["kernel_ns"])
    return Finding(
        "fp32-gemm-without-tensor-cores", f"fp32 GEMMs on CUDA cores on a GPU with TF32 tensor cores ({pk.name})",
        ["step_N"], to_ms(saved),
        f"estimated, per step of the step period (the GPU's pace): the fp32 GEMM time × (1 − fp32/tf32 peak = "
        f"{pk.tflops['fp32']:g}/{pk.tflops.get('tf32', 0):g}) the GPU saves, at most the time the CPU waited for the "
        "GPU (synchronising calls, launches held by a full queue): below that the CPU sets the pace, taken as this "
        "capture's CPU work per step (step − that wait); a CPU that issues the fixed step more slowly saves less: "
        f"between {to_ms(low):.1f} (its work and the GPU's remaining work back to back) and {to_ms(gpu_saved):.1f} ms "
        "(all the GPU time saved)",
        "TF32 first, torch.set_float32_matmul_precision('high'): as many kernels, on tensor cores; bf16 autocast "
        "halves GEMMs again but adds casts and host work: can be slower where the CPU sets the step (docs/whatif.md)",
        {"fp32_gemm_ns_per_step": gemm_ns / c.n, "fp32_tflops": pk.tflops["fp32"], "tf32_tflops": pk.tflops.get("tf32"),
         "gpu_saved_ns_per_step": gpu_saved, "cpu_wait_ns_per_step": c.cpu_wait_ns,
         # the pace the estimate assumes the CPU keeps once the GPU no longer holds it back
         "cpu_work_ns_per_step": cpu_work, "gpu_busy_ns_per_step": busy, "gpu_busy_share": gpu_share,
         "saving_low_ns_per_step": low, "saving_high_ns_per_step": gpu_saved,
         **_sampled(c.gemm_check)},  # where nsys sampled GPU metrics: Tensor Active over the GEMM-dominated samples
        rows[:10], int(c.t0[0]), int(c.t1[0]), claim=claim, gpu_work=True)


# -- findings from the hardware: ncu's occupancy, sampled tensor activity, elementwise chains ------
def _kernel_claim(c: StepContext, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ops = c.trace.ops
    return intervals.union(ops["start"].to_numpy()[pos], ops["end"].to_numpy()[pos])


def occupancy_limited(c: StepContext) -> list[Finding]:
    """Per kernel name that matters (share of the steps' GPU busy time), one finding where ncu
    measured a theoretical occupancy under occupancy_low_pct and its TheoreticalOccupancy rule
    estimates a speedup: that share of the name's nsys time per step (the real run's clocks, every
    steady-state step, not ncu's replay of one), an upper bound (occupancy hides latency only while
    nothing else limits first). Reads the ncu analysis' JoinedKernel results only."""
    a = c.ncu
    if a is None:
        return []
    from nsight_tui.parsers.analyses.ncu import OCCUPANCY_FIXES, OCCUPANCY_RULE as NCU_OCCUPANCY_RULE

    t = c.trace
    pos = c.step_kernels
    codes = t.ops["name"].to_numpy()[pos]
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    busy = c.split().busy_ns
    name_of = t.ops["name"].to_numpy()
    groups: dict[int, list] = {}
    for k in a.joined:
        groups.setdefault(int(name_of[k.op]), []).append(k)
    out = []
    for code, ks in groups.items():
        theo = [k.figures.theoretical_occupancy_pct for k in ks if k.figures.theoretical_occupancy_pct is not None]
        mine = codes == code
        ns = float(dur[mine].sum())
        if not theo or max(theo) >= threshold("occupancy_low_pct") or not busy or ns < threshold("occupancy_min_share") * busy:
            continue
        # ncu's estimate per profiled instance (0 where its rule did not fire), weighted by nsys's time
        pct = []
        for k in ks:
            rule = next((r for r in k.figures.rules if r.rule == NCU_OCCUPANCY_RULE and r.speedup_pct is not None), None)
            pct.append(float(rule.speedup_pct) if rule is not None and rule.speedup_pct is not None else 0.0)
        w = np.array([k.nsys_duration_ns or 0 for k in ks], dtype=np.float64)
        speedup = float(np.average(pct, weights=w)) if w.sum() else float(np.mean(pct))
        if speedup <= 0:
            continue  # ncu measured the limit but expects nothing from lifting it
        limiters = [k.figures.occupancy_limiter for k in ks if k.figures.occupancy_limiter]
        limiter = max(set(limiters), key=limiters.count) if limiters else "unknown"
        achieved = [k.figures.achieved_occupancy_pct for k in ks if k.figures.achieved_occupancy_pct is not None]
        name = t.op_names[code]
        from nsight_tui.parsers.kernels.kernel_names import table_name

        rows = [{"ncu_index": k.index, "range": k.path, "nsys_duration_ns": k.nsys_duration_ns,
                 "theoretical_occupancy_pct": k.figures.theoretical_occupancy_pct,
                 "achieved_occupancy_pct": k.figures.achieved_occupancy_pct,
                 "occupancy_limiter": k.figures.occupancy_limiter, "ncu_estimated_speedup_pct": p}
                for k, p in zip(ks, pct)]
        first = pos[mine][0] if mine.any() else ks[0].op
        out.append(Finding(
            "occupancy-limited", f"{table_name(name)}: theoretical occupancy {max(theo):.1f}% (limited by {limiter})",
            sorted({k.path for k in ks if k.path}) or ["step_N"], to_ms(speedup / 100 * ns / c.n),
            f"ncu's {NCU_OCCUPANCY_RULE} rule: its estimated speedup ({speedup:.1f}% of the kernel's time, measured by "
            "ncu on the profiled instances, weighted by their nsys time) × the kernel's nsys time per step; "
            "ncu's estimate, an upper bound",
            OCCUPANCY_FIXES.get(limiter, ""),
            {"kernel": name, "nsys_ns_per_step": ns / c.n, "instances_per_step": int(mine.sum()) / c.n,
             "share_of_gpu_busy": ns / busy, "ncu_theoretical_occupancy_pct": max(theo),
             "ncu_achieved_occupancy_pct": float(np.mean(achieved)) if achieved else None,
             "ncu_occupancy_limiter": limiter, "ncu_estimated_speedup_pct": speedup,
             "ncu_blocks_per_sm_by_limit": ks[0].figures.occupancy_limit_blocks, "ncu_profiled_instances": len(ks)},
            rows[:10], int(t.ops["start"].to_numpy()[first]), int(t.ops["end"].to_numpy()[first]),
            claim=_kernel_claim(c, pos[mine]), gpu_work=True))
    return out


def _gemm_kernels(c: StepContext) -> np.ndarray:
    t = c.trace
    pos = c.step_kernels
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    return pos[fam == "gemm"]


def _sampled(check: GemmCheck | None) -> dict:
    """The sampled GPU metrics' figures on the GEMMs, for a finding's evidence."""
    if check is None:
        return {}
    from nsight_tui.parsers.analyses.gpu_metrics import GEMM_SHARE

    return {"sampled_tensor_active_pct": check.tensor_active_pct, "sampled_gemm_samples": check.gemm_samples,
            "sampled_gemm_share_min": GEMM_SHARE, "sampled_verdict": check.verdict, "sampled_text": check.text}


def tensor_cores_idle(c: StepContext) -> Finding | None:
    """GEMMs named as tensor-core kernels (TF32/bf16/fp8 by name, or by the run's settings where the
    names do not say) while the sampled Tensor Active over the GEMM-dominated samples is ~0
    (gpu_metrics.gemm_check: refuted). GEMMs whose names say fp32, or say nothing on a run set to
    fp32, are fp32-gemm-without-tensor-cores' (its evidence carries the same samples)."""
    from nsight_tui.parsers.analyses import roofline
    from nsight_tui.parsers.analyses.gpu_metrics import TENSOR_PATHS

    check = c.gemm_check
    if check is None or check.verdict != "refuted" or check.named_path not in TENSOR_PATHS:
        return None
    t = c.trace
    gemm = _gemm_kernels(c)
    if not len(gemm):
        return None
    gemm_ns = float((t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[gemm].sum())
    s = c.split()
    if gemm_ns < threshold("fp32_gemm_min_share") * s.busy_ns:
        return None  # GEMMs under a tenth of the GPU's work: whichever units ran them, the step hardly moves
    pk = roofline.build(t).peaks.peaks
    fast = pk.tflops.get(check.named_path) if pk is not None else None
    slow = pk.tflops.get("fp32") if pk is not None else None
    ratio = slow / fast if fast and slow else None
    gpu_saved = gemm_ns * (1 - ratio) / c.n if ratio is not None else 0.0
    return Finding(
        "tensor-cores-idle", f"GEMMs named as {check.named_path} tensor-core kernels, but the sampled tensor cores sat idle",
        ["step_N"], to_ms(min(gpu_saved, c.cpu_wait_ns)),
        (f"GEMM time per step × (1 − fp32/{check.named_path} peak = {slow:g}/{fast:g}), at most the time the CPU waited "
         "for the GPU per step; an estimate: the samples say the tensor cores did not run them" if ratio is not None
         else "no peak for this GPU: the saving cannot be estimated"),
        "check the math mode really in force where the GEMMs run (torch.backends.cuda.matmul.allow_tf32, "
        "torch.set_float32_matmul_precision('high'), autocast's scope and dtype); profile with --gpu-metrics again",
        {"gemm_ns_per_step": gemm_ns / c.n, "gemm_share_of_gpu_busy": gemm_ns / (s.busy_ns or 1),
         "named_path": check.named_path, "gpu_saved_ns_per_step": gpu_saved, "cpu_wait_ns_per_step": c.cpu_wait_ns,
         **_sampled(check)},
        [], int(c.t0[0]), int(c.t1[0]), claim=_kernel_claim(c, gemm), gpu_work=True)
