"""Answers to the questions people profile for: family shares, the ratios between ranges,
softmax against the attention matmuls (runtime and FLOPs), NVTX against Python timing.

Every ratio carries its basis (what it divides by), so a table can say it.
Steady state (`step_N`) and warmup (`warmup_N`) are kept apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.kernels import families, occupancy
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.conventions import INFERRED_PART_OF
from nsight_tui.parsers.model.steps import ATTENTION_PARTS, PHASES, STEP, gpu_lags, steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.analyses.ratios import _ratio, family_shares



# -- per-phase summaries over iterations -------------------------------------------------
@dataclass
class PhaseSummary:
    name: str
    instances: int
    range_ns: int
    proj_ns: int
    busy_ns: int
    kernel_ns: int
    op_ns: int
    kernels: int
    top_kernels: list[dict] = field(default_factory=list)
    families: dict[str, float] = field(default_factory=dict)
    family_ns: dict[str, int] = field(default_factory=dict)
    period_ns: int | None = None  # iterations only: the summed step periods (model.steps.StepTimes)

    @property
    def gpu_lags(self) -> bool:
        """Its GPU work outlasts its CPU span: the CPU ran ahead (no synchronise at its end)."""
        return gpu_lags(self.proj_ns, self.range_ns)


def summarize(model: RangeModel, ids: np.ndarray, name: str, top: int = 5) -> PhaseSummary | None:
    if len(ids) == 0:
        return None
    pos = model.ops_of(ids)
    ks = model.kernel_summary(pos)
    shares = family_shares(model, pos)
    top_rows = ks[ks["kind"] == "kernel"].head(top)
    occ = occupancy.by_kernel_name(model.trace, pos)  # theoretical, from the launch configuration
    return PhaseSummary(
        name=name, instances=len(ids), range_ns=int(model.cpu_ns[ids].sum()), proj_ns=int(model.proj_ns[ids].sum()),
        busy_ns=int(model.busy_ns[ids].sum()), kernel_ns=int(model.kernel_ns[ids].sum()),
        op_ns=int(model.op_ns[ids].sum()), kernels=int(model.kernel_count[ids].sum()),
        top_kernels=[{"name": r.name, "short": table_name(r.name), "total_ns": int(r.total_ns), "instances": int(r.instances),
                      "family": families.classify(r.name), **_occupancy_of(occ, r.name)} for r in top_rows.itertuples()],
        families={r.family: round(float(r.share), 6) for r in shares.itertuples()},
        family_ns={r.family: int(r.total_ns) for r in shares.itertuples()},
    )


def _occupancy_of(occ, name: str) -> dict:
    """A kernel's theoretical occupancy (its configuration with the most GPU time in the range)."""
    if name not in occ.index:
        return {"theoretical_occupancy_pct": None, "occupancy_limiter": None}
    row = occ.loc[name]
    return {"theoretical_occupancy_pct": round(float(row["occupancy_pct"]), 3), "occupancy_limiter": row["limiter"]}


def phases(model: RangeModel, warmup: bool = False) -> dict[str, PhaseSummary]:
    """`step` (the iteration itself) and forward/backward/optimizer/attention parts within it: over
    the steady-state steps, or the warm-ups."""
    steps = steps_of(model)
    iters = steps.warmup if warmup else steps.steady
    out: dict[str, PhaseSummary] = {}
    if len(iters) == 0:
        # Not a step-annotated trace: summarise ranges with those names wherever they are.
        for name in (*PHASES, *ATTENTION_PARTS, "scaled_dot_product_attention"):
            alias = INFERRED_PART_OF.get(name, name)
            s = summarize(model, np.union1d(steps.named(name), steps.named(alias)), name)
            if s:
                out[name] = s
        return out
    step = summarize(model, iters, "step")
    if step:
        step.period_ns = int(steps.times(iters).period_ns.sum())
        out["step"] = step
    for name in (*PHASES, "scaled_dot_product_attention", *ATTENTION_PARTS):
        s = summarize(model, steps.phase(name, iters), name)
        if s:
            out[name] = s
    return out


# -- FLOPs of attention -------------------------------------------------------------------
def attention_flops(batch: int, heads: int, ctx: int, d_head: int) -> dict[str, float]:
    """FLOPs of one attention layer's pieces: QK^T and attn@V are matmuls (2 FLOPs per
    multiply-add), softmax is ~5 per score (max, subtract, exp, sum, divide)."""
    scores = 2.0 * batch * heads * ctx * ctx * d_head
    return {"scores": scores, "softmax": 5.0 * batch * heads * ctx * ctx, "final_matmul": scores}


def _ratios(ph: dict[str, PhaseSummary], config: dict, counts=None) -> dict:
    def k(name):
        return ph[name].kernel_ns if name in ph else None

    def share(name, fam):
        return ph[name].families.get(fam) if name in ph else None

    out = {
        "backward_over_forward": _ratio(k("backward"), k("forward")) if k("forward") and k("backward") is not None else None,
        "gemm_share_forward": share("forward", "gemm"),
        "gemm_share_step": share("step", "gemm"),
        "optimizer_share_step": _ratio(k("optimizer"), k("step")) if k("step") and k("optimizer") is not None else None,
        "softmax_over_matmul_runtime": None,
        "softmax_over_matmul_flops": None,
        "gpu_busy_over_step": _ratio(ph["step"].busy_ns, ph["step"].period_ns or ph["step"].range_ns) if "step" in ph else None,
    }
    # the matmuls are the GEMM kernels of the two ranges: the score range also holds the scaling,
    # masking and copies (elementwise), which are no matmul
    def gemm(name):
        return ph[name].family_ns.get("gemm", 0) if name in ph else 0

    mm = gemm("computing_attention_scores") + gemm("final_matmul")
    if k("computing_softmax") is not None and mm:
        out["softmax_over_matmul_runtime"] = k("computing_softmax") / mm
    dims = attention_dims(config)
    if dims:
        f = attention_flops(*dims)
        out["softmax_over_matmul_flops"] = f["softmax"] / (f["scores"] + f["final_matmul"])
    elif counts is not None:
        out["softmax_over_matmul_flops"] = _counted_flop_ratio(counts)
    return out


def _counted_flop_ratio(counts) -> float | None:
    """softmax / (scores + final matmul) FLOPs from counted or given FLOPs (`--flops`, the
    capture's counts), by the attention parts' range names, per iteration."""
    per: dict[str, float] = {}
    for part in ATTENTION_PARTS:
        rows = [p for p in counts.paths() if p.rsplit("/", 1)[-1] == part]
        got = [rc.flops for p in rows if (rc := counts.range_counts(p)) is not None and rc.flops is not None]
        if got:
            per[part] = float(sum(got))
    mm = per.get("computing_attention_scores", 0.0) + per.get("final_matmul", 0.0)
    return per["computing_softmax"] / mm if "computing_softmax" in per and mm else None


RATIO_BASIS = {
    "backward_over_forward": "backward kernel time / forward kernel time (steady-state steps)",
    "gemm_share_forward": "GEMM kernel time / all GPU op time in forward",
    "gemm_share_step": "GEMM kernel time / all GPU op time in the step",
    "optimizer_share_step": "optimizer kernel time / step kernel time",
    "softmax_over_matmul_runtime": "computing_softmax kernel time / GEMM kernel time of computing_attention_scores + "
                                   "final_matmul (the score range's scaling, masking and copies are no matmul)",
    "softmax_over_matmul_flops": "softmax FLOPs (5·B·H·T²) / matmul FLOPs (QKᵀ + attn@V = 4·B·H·T²·d_head), from the "
                                 "dimensions (config mark or --batch/--heads/--ctx/--d-head), else from counted or "
                                 "given FLOPs (--flops) of the three ranges",
    "gpu_busy_over_step": "GPU busy time (union of ops) / step period (each step's start to the next's)",
}


@dataclass(frozen=True)
class StepTiming:
    """One steady-state step on NVTX's clock against the workload's Python clock (ns): its CPU span
    (nvtx), its period (its start to the next step's) = own (start to its work's end) + between,
    its GPU work's span, and the ratios to the Python clock (None without one)."""

    step: str
    nvtx_ns: int
    period_ns: int
    gpu_ns: int
    own_ns: int
    between_ns: int
    python_ns: int
    diff_ns: int
    nvtx_over_python: float | None
    period_over_python: float | None
    own_over_python: float | None


@dataclass(frozen=True)
class Timing:
    """NVTX step and phase times against the times the capture measured in Python: per step, the
    means over the steady-state steps (ns; None without steps), which figure the Python clock
    reads like (python_clock_covers: "own", "period" or None), whether the GPU lags the CPU, and
    the Python clock's mean per phase."""

    steps: list[StepTiming]
    nvtx_step_mean_ns: int | None
    step_period_mean_ns: int | None
    step_own_mean_ns: int | None  # its own time (start to its work's end); period = own + between
    between_steps_mean_ns: int | None
    python_clock_covers: str | None
    gpu_lags: bool
    python_step_mean_ns: int | None
    python_phase_mean_ns: dict[str, int]
    # a phase's ranges in each steady step where every step holds the same number, more than one: gradient
    # accumulation (forward and backward once per micro-batch, one optimizer: the step is the optimizer step)
    phases_per_step: dict[str, int] = field(default_factory=dict)

    @property
    def micro_batches(self) -> int:
        """Forward ranges a step (1 without gradient accumulation)."""
        return self.phases_per_step.get("forward", 1)


def _clock_covers(rows: list[StepTiming]) -> str | None:
    """Which of the step's figures the workload's Python clock reads like: "period" (a clock around the
    whole loop body: the next batch included) or "own" (a clock inside the step, as a trainer's batch
    hooks take it: the loop's work between steps left out); None where they cannot be told apart (the
    steps' time between them under 2% of their period) or no Python times."""
    if not rows:
        return None
    period = float(np.mean([r.period_ns for r in rows]))
    own = float(np.mean([r.own_ns for r in rows]))
    py = float(np.mean([r.python_ns for r in rows]))
    if period - own < 0.02 * period:
        return None
    return "own" if abs(own - py) < abs(period - py) else "period"


def attention_dims(config: dict) -> tuple[int, int, int, int] | None:
    try:
        batch, heads, ctx = int(config["batch"]), int(config["n_heads"]), int(config["ctx"])
        d_head = int(config.get("d_head") or int(config["d_model"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return batch, heads, ctx, d_head


def timing(trace: Trace, model: RangeModel) -> Timing:
    """NVTX step and phase times against the times the capture measured in Python."""
    from nsight_tui.parsers.model.inferred import inference

    # a record that clocked each micro-batch, regrouped one entry an inferred iteration
    record = inference(trace).record or trace.meta().steps
    times = steps_of(model).steady_times
    texts = model.trace.range_texts.objects if model.n else np.array([])  # inferred ranges too
    nvtx = {texts[i]: int(c) for i, c in zip(times.ids, times.cpu_ns)}
    period = {texts[i]: int(p) for i, p in zip(times.ids, times.period_ns)}
    gpu = {texts[i]: int(g) for i, g in zip(times.ids, times.gpu_ns)}
    own = {texts[i]: int(o) for i, o in zip(times.ids, times.period_ns - times.between_ns)}
    rows = []
    for step in record:
        name = step.get("name")
        if name in nvtx and isinstance(step.get("seconds"), (int, float)):
            py = int(round(step["seconds"] * 1e9))
            rows.append(StepTiming(step=str(name), nvtx_ns=nvtx[name], period_ns=period[name], gpu_ns=gpu[name],
                                   own_ns=own[name], between_ns=period[name] - own[name],
                                   python_ns=py, diff_ns=nvtx[name] - py,
                                   nvtx_over_python=nvtx[name] / py if py else None,
                                   period_over_python=period[name] / py if py else None,
                                   own_over_python=own[name] / py if py else None))
    steps = steps_of(model)
    per_step = {}
    for ph in PHASES:
        counts = {len(steps.phase(ph, np.array([i]))) for i in steps.steady.tolist()}
        if len(counts) == 1 and (k := counts.pop()) > 1:
            per_step[ph] = k
    phase_py = {}
    for ph in PHASES:
        vals = [s["phases"][ph] for s in record
                if isinstance(s.get("phases"), dict) and ph in s["phases"] and STEP.match(str(s.get("name", "")))]
        if vals:
            phase_py[ph] = int(round(np.mean(vals) * 1e9))
    return Timing(
        steps=rows,
        nvtx_step_mean_ns=int(np.mean(list(nvtx.values()))) if nvtx else None,
        step_period_mean_ns=int(times.period_ns.mean()) if times.n else None,
        step_own_mean_ns=int((times.period_ns - times.between_ns).mean()) if times.n else None,
        between_steps_mean_ns=int(times.between_ns.mean()) if times.n else None,
        python_clock_covers=_clock_covers(rows),
        gpu_lags=times.gpu_lags(),
        python_step_mean_ns=int(np.mean([r.python_ns for r in rows])) if rows else None,
        python_phase_mean_ns=phase_py,
        phases_per_step=per_step,
    )
