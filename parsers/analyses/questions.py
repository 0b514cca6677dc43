"""Answers to the questions people profile for: family shares, the ratios between ranges,
softmax against the attention matmuls (runtime and FLOPs), NVTX against Python timing.

Every ratio carries its basis (what it divides by), so a table can say it.
Steady state (`step_N`) and warmup (`warmup_N`) are kept apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.model import main_thread as main_threads
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode, range_model

STEP, WARMUP = conventions.STEP_RANGE, conventions.WARMUP_RANGE
PHASES, ATTENTION_PARTS = conventions.PHASES, conventions.ATTENTION_PARTS


@dataclass
class Ratio:
    label: str
    value: float | None
    unit: str  # how to read `value`: "fraction" (0..1), "ns", "count", "per_instance", "x"
    basis: str  # what the value divides by, in words


def op_families(trace: Trace, op_positions: np.ndarray) -> np.ndarray:
    """Family key of each op (memcpy/memset are `memory`)."""
    return families.name_families(trace)[trace.ops["name"].to_numpy()[op_positions]]


def family_shares(model: RangeModel, op_positions: np.ndarray) -> pd.DataFrame:
    """Per family: GPU time (sum of op durations), share of the total, op count.

    Always lists every family, in the families table's order, so tables line up.
    """
    trace = model.trace
    pos = np.asarray(op_positions, dtype=np.int64)
    dur = (trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy())[pos]
    # Sum per op name first (integer codes: a few thousand), then per family: comparing the
    # family strings of 10^6 ops, family by family, cost a quarter of a second.
    codes = trace.ops["name"].to_numpy()[pos]
    n_names = len(trace.op_names)
    per_name_ns = np.zeros(n_names, dtype=np.int64)
    np.add.at(per_name_ns, codes, dur)
    per_name_n = np.bincount(codes, minlength=n_names)
    name_family = families.name_families(trace)
    total = int(dur.sum())
    rows = []
    for f in families.FAMILIES:
        sel = name_family == f.key
        t = int(per_name_ns[sel].sum())
        rows.append({"family": f.key, "label": f.label, "total_ns": t, "share": t / total if total else 0.0,
                     "kernels": int(per_name_n[sel].sum())})
    return pd.DataFrame(rows)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _child(node: RangeNode, text: str) -> RangeNode | None:
    for c in node.children:
        if _text(c) == text:
            return c
    return None


def _text(node: RangeNode) -> str:
    """Range name without its domain (`trainer:step_N` -> `step_N`)."""
    return node.name.split(":", 1)[1] if ":" in node.name else node.name


def ratio_panel(model: RangeModel, node: RangeNode) -> list[Ratio]:
    """The ratios shown beside a range: families, GPU busy vs CPU, latency, phase ratios."""
    out: list[Ratio] = []
    pos = node.op_positions()
    shares = family_shares(model, pos)
    for row in shares.itertuples():
        if row.total_ns or row.family == "gemm":
            out.append(Ratio(f"{row.label} share", row.share, "fraction", "kernel + memory op time in range"))
    busy = _ratio(node.busy_ns, node.cpu_ns)
    out.append(Ratio("GPU busy / CPU time", busy, "fraction",
                     "CPU (NVTX) range time; low means the GPU waited on the CPU (launch-bound)"))
    out.append(Ratio("kernels", float(node.kernels), "count", "count of kernels attributed"))
    if node.instances > 1:
        out.append(Ratio("kernels / instance", node.kernels / node.instances, "per_instance",
                         f"{node.instances} instances"))
    timing = launch_timing(model, pos)
    if timing is not None:
        overhead_ns, queue_ns = timing
        out.append(Ratio("launch overhead (median)", overhead_ns, "ns",
                         "the launching API call's own duration (cudaLaunchKernel…), median over kernels"))
        out.append(Ratio("queue delay / CPU lead (median)", queue_ns, "ns",
                         "kernel start − launching call start, median over kernels: how far the CPU ran "
                         "ahead, i.e. how long the kernel waited behind earlier GPU work"))
    fwd, bwd, opt = (_child(node, p) for p in PHASES)
    if fwd is not None and bwd is not None:
        r = _ratio(bwd.kernel_ns, fwd.kernel_ns)
        out.append(Ratio("backward / forward", r, "x", "forward kernel time"))
    if opt is not None and node.kernel_ns:
        r = _ratio(opt.kernel_ns, node.kernel_ns)
        out.append(Ratio("optimizer share", r, "fraction", f"kernel time of {node.label}"))
    return out


def launch_timing(model: RangeModel, op_positions: np.ndarray) -> tuple[float, float] | None:
    """(launch overhead, queue delay) in ns, medians over the kernels at these positions that
    have a launching API call. Launch overhead is the call's own duration (end − start); queue
    delay, or CPU lead, is kernel start − call start: large when the GPU is busy with earlier
    work, which is healthy, not an overhead."""
    trace = model.trace
    ops = trace.ops
    pos = np.asarray(op_positions, dtype=np.int64)
    pos = pos[(ops["kind"].to_numpy()[pos] == KERNEL) & (ops["api"].to_numpy()[pos] >= 0)]
    if len(pos) == 0 or trace.api.empty:
        return None
    call = ops["api"].to_numpy()[pos]
    call_start = trace.api["start"].to_numpy()[call]
    overhead = trace.api["end"].to_numpy()[call] - call_start
    queue = ops["start"].to_numpy()[pos] - call_start
    return float(np.median(overhead)), float(np.median(queue))


# -- per-phase summaries over iterations -------------------------------------------------
def iteration_ranges(model: RangeModel, pattern: re.Pattern) -> np.ndarray:
    """Positions of iteration ranges (`step_N` or `warmup_N`), one per iteration: where a
    domain-tagged copy nests the same iteration, the innermost is kept."""
    if model.n == 0:
        return np.zeros(0, dtype=np.int64)
    texts = model.trace.ranges["text"].to_numpy()
    hit = np.array([bool(pattern.match(t)) for t in texts], dtype=bool)
    ids = np.flatnonzero(hit)
    inner = np.array([i for i in ids if not any(hit[c] for c in _children_ids(model, int(i)))], dtype=np.int64)
    return inner[np.lexsort((model.r_gtid[inner], model.r_start[inner]))]  # time order, whatever the rows' order


def _children_ids(model: RangeModel, i: int) -> np.ndarray:
    return np.array(model.children_index.get(int(i), []), dtype=np.int64)


def phase_ranges(model: RangeModel, iterations: np.ndarray, text: str) -> np.ndarray:
    """Ranges named `text` inside the given iterations (any depth)."""
    texts = model.trace.ranges["text"].to_numpy()
    out = []
    stack = [int(i) for i in iterations]
    while stack:
        i = stack.pop()
        for c in _children_ids(model, i).tolist():
            if texts[c] == text:
                out.append(c)
            stack.append(c)
    return np.array(sorted(out), dtype=np.int64)


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

    def to_json(self) -> dict:
        return {
            "instances": self.instances, "range_ns": self.range_ns, "proj_ns": self.proj_ns,
            "busy_ns": self.busy_ns, "kernel_ns": self.kernel_ns, "kernels": self.kernels,
            "top_kernels": self.top_kernels, "families": self.families,
        }


def summarize(model: RangeModel, ids: np.ndarray, name: str, top: int = 5) -> PhaseSummary | None:
    if len(ids) == 0:
        return None
    pos = model.ops_of(ids)
    ks = model.kernel_summary(pos)
    shares = family_shares(model, pos)
    top_rows = ks[ks["kind"] == "kernel"].head(top)
    return PhaseSummary(
        name=name, instances=len(ids), range_ns=int(model.cpu_ns[ids].sum()), proj_ns=int(model.proj_ns[ids].sum()),
        busy_ns=int(model.busy_ns[ids].sum()), kernel_ns=int(model.kernel_ns[ids].sum()),
        op_ns=int(model.op_ns[ids].sum()), kernels=int(model.kernel_count[ids].sum()),
        top_kernels=[{"name": r.name, "short": table_name(r.name), "total_ns": int(r.total_ns), "instances": int(r.instances),
                      "family": families.classify(r.name)} for r in top_rows.itertuples()],
        families={r.family: round(float(r.share), 6) for r in shares.itertuples()},
        family_ns={r.family: int(r.total_ns) for r in shares.itertuples()},
    )


def phases(model: RangeModel, pattern: re.Pattern = STEP) -> dict[str, PhaseSummary]:
    """`step` (the iteration itself) and forward/backward/optimizer/attention parts within it."""
    iters = iteration_ranges(model, pattern)
    out: dict[str, PhaseSummary] = {}
    if len(iters) == 0:
        # Not a step-annotated trace: summarise ranges with those names wherever they are.
        texts = model.trace.ranges["text"].to_numpy() if model.n else np.array([])
        for name in (*PHASES, *ATTENTION_PARTS, "scaled_dot_product_attention"):
            s = summarize(model, np.flatnonzero(texts == name), name)
            if s:
                out[name] = s
        return out
    step = summarize(model, iters, "step")
    if step:
        out["step"] = step
    for name in (*PHASES, "scaled_dot_product_attention", *ATTENTION_PARTS):
        s = summarize(model, phase_ranges(model, iters, name), name)
        if s:
            out[name] = s
    return out


# -- FLOPs of attention -------------------------------------------------------------------
def attention_flops(batch: int, heads: int, ctx: int, d_head: int) -> dict[str, float]:
    """FLOPs of one attention layer's pieces: QK^T and attn@V are matmuls (2 FLOPs per
    multiply-add), softmax is ~5 per score (max, subtract, exp, sum, divide)."""
    scores = 2.0 * batch * heads * ctx * ctx * d_head
    return {"scores": scores, "softmax": 5.0 * batch * heads * ctx * ctx, "final_matmul": scores}


def _ratios(ph: dict[str, PhaseSummary], config: dict) -> dict:
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
        "gpu_busy_over_cpu_step": _ratio(ph["step"].busy_ns, ph["step"].range_ns) if "step" in ph else None,
    }
    mm = (k("computing_attention_scores") or 0) + (k("final_matmul") or 0)
    if k("computing_softmax") is not None and mm:
        out["softmax_over_matmul_runtime"] = k("computing_softmax") / mm
    dims = attention_dims(config)
    if dims:
        f = attention_flops(*dims)
        out["softmax_over_matmul_flops"] = f["softmax"] / (f["scores"] + f["final_matmul"])
    return out


RATIO_BASIS = {
    "backward_over_forward": "backward kernel time / forward kernel time (steady-state steps)",
    "gemm_share_forward": "GEMM kernel time / all GPU op time in forward",
    "gemm_share_step": "GEMM kernel time / all GPU op time in the step",
    "optimizer_share_step": "optimizer kernel time / step kernel time",
    "softmax_over_matmul_runtime": "computing_softmax kernel time / (computing_attention_scores + final_matmul) kernel time",
    "softmax_over_matmul_flops": "softmax FLOPs (5·B·H·T²) / matmul FLOPs (QKᵀ + attn@V = 4·B·H·T²·d_head)",
    "gpu_busy_over_cpu_step": "GPU busy time (union of ops) / NVTX step time",
}


def attention_dims(config: dict) -> tuple[int, int, int, int] | None:
    try:
        batch, heads, ctx = int(config["batch"]), int(config["n_heads"]), int(config["ctx"])
        d_head = int(config.get("d_head") or int(config["d_model"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return batch, heads, ctx, d_head


def timing(trace: Trace, model: RangeModel) -> dict:
    """NVTX step and phase times against the times the capture measured in Python."""
    meta = trace.meta()
    iters = iteration_ranges(model, STEP)
    texts = trace.ranges["text"].to_numpy() if model.n else np.array([])
    nvtx = {texts[i]: int(model.cpu_ns[i]) for i in iters}
    rows = []
    for step in meta.steps:
        name = step.get("name")
        if name in nvtx and isinstance(step.get("seconds"), (int, float)):
            py = int(round(step["seconds"] * 1e9))
            rows.append({"step": name, "nvtx_ns": nvtx[name], "python_ns": py, "diff_ns": nvtx[name] - py,
                         "nvtx_over_python": nvtx[name] / py if py else None})
    phase_py = {}
    for ph in PHASES:
        vals = [s["phases"][ph] for s in meta.steps
                if isinstance(s.get("phases"), dict) and ph in s["phases"] and STEP.match(str(s.get("name", "")))]
        if vals:
            phase_py[ph] = int(round(np.mean(vals) * 1e9))
    return {
        "steps": rows,
        "nvtx_step_mean_ns": int(np.mean(list(nvtx.values()))) if nvtx else None,
        "python_step_mean_ns": int(np.mean([r["python_ns"] for r in rows])) if rows else None,
        "python_phase_mean_ns": phase_py,
    }


def _gpu_idle(model: RangeModel) -> dict:
    from nsight_tui.parsers.analyses.idle_report import phase_idle  # it builds on this module

    return phase_idle(model)


def questions(trace: Trace, attribution: str = "process", dims: dict | None = None,
              main_thread: str | None = None, roofline_options: dict | None = None) -> dict:
    """Everything `nsight-tui report` says about one trace, as plain data (the JSON).
    `roofline_options`: flops_file, peak_tflops, peak_gbps for parsers.roofline.answers."""
    from nsight_tui.parsers.analyses.findings import answers as findings_answers
    from nsight_tui.parsers.analyses.roofline import answers as roofline_answers

    model = range_model(trace, attribution, main_thread)
    config = dict(trace.meta().config)
    if dims:
        config.update({k: v for k, v in dims.items() if v is not None})
    steady = phases(model, STEP)
    warm = phases(model, WARMUP) if len(iteration_ranges(model, WARMUP)) else {}
    return {
        "file": str(trace.path),
        "attribution": attribution,
        "main_threads": main_threads.as_json(trace, model.main_info),
        "config": config,
        "ranges": {k: v.to_json() for k, v in steady.items()},
        "warmup": {k: v.to_json() for k, v in warm.items()},
        "ratios": _ratios(steady, config),
        "ratio_basis": RATIO_BASIS,
        "timing": timing(trace, model),
        "gpu_idle": _gpu_idle(model),
        **_ranks(trace),
        "roofline": roofline_answers(trace, attribution, **(roofline_options or {})),
        "findings": findings_answers(trace, attribution),
    }


def _ranks(trace: Trace) -> dict:
    """Per-rank figures where the export holds several ranks (processes x GPUs)."""
    from nsight_tui.parsers.analyses.ranks import ranks_of_trace

    run = ranks_of_trace(trace)
    return {"ranks": run.to_json(), "_ranks": run} if len(run.ranks) > 1 else {}
