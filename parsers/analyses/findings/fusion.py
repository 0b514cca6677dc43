"""Rules on work that fusion would shorten: a per-parameter optimizer loop, attention in pieces,
chains of short elementwise kernels."""
from __future__ import annotations

import re

import numpy as np

from nsight_tui.parsers.kernels.attention import attention_passes
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.analyses.findings.context import StepContext, range_path, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.read.ids import KERNEL


# Kernels of an optimizer that already works on many tensors per launch: PyTorch's foreach path
# (`multi_tensor_apply_kernel`) and its fused AdamW/Adam/SGD kernels (`Fused...Functor`, apex's
# `multi_tensor_adam`). An optimizer whose kernel time is mostly these is not "unfused".
_MULTI_TENSOR = re.compile(r"multi_tensor_apply|multi_tensor_adam|Fused\w*(Adam|Sgd|SGD)|fused_adam", re.IGNORECASE)


def unfused_optimizer(c: StepContext) -> Finding | None:
    opt = c.phase("optimizer")
    if len(opt) == 0:
        return None
    per = int(c.model.kernel_count[opt].sum()) / c.n
    if per < threshold("optimizer_kernels_min"):
        return None
    t = c.trace
    pos = c.model.ops_of(opt)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    multi = np.array([bool(_MULTI_TENSOR.search(t.op_names[int(k)])) for k in range(len(t.op_names))], dtype=bool)
    if len(pos) and int(dur[multi[codes]].sum()) * 2 >= int(dur.sum()):
        return None  # foreach or fused already: many tensors per launch
    # foreach already on where multi-tensor launches run beside the per-tensor ones (AdamW(foreach=True,
    # capturable=True) divides each parameter by its bias correction in a kernel of its own: a ViT-small's
    # 304 DivFunctor launches a step beside 40 multi_tensor_apply ones): advising foreach=True is no fix there
    foreach_on = bool(multi[codes].any())
    multi_per = float(multi[codes].sum()) / c.n
    if foreach_on:
        top = np.unique(codes[~multi[codes]], return_counts=True)
        name = table_name(t.op_names[int(top[0][np.argmax(top[1])])])
        fix = (f"torch.optim.AdamW(params, fused=True): foreach is on already ({multi_per:.0f} multi-tensor launches a "
               f"step); the rest run one kernel per tensor ({per - multi_per:.0f} a step, most of them {name}); fused "
               "does the whole update in a few launches")
    else:
        fix = "torch.optim.AdamW(params, fused=True) (or foreach=True); avoid per-parameter Python loops"
    from nsight_tui.parsers.analyses import roofline

    r = roofline.build(c.trace)
    point = r.range_point(opt, "step_N/optimizer")
    # Its GPU time (its work's first start to last end), not its CPU span: without phase syncs the
    # CPU's optimizer range also holds its wait on a full launch queue behind the backward.
    opt_ns = float(c.model.proj_ns[opt].sum()) / c.n
    cpu_ns = float(c.model.cpu_ns[opt].sum()) / c.n
    pk = r.peaks.peaks
    floor_ns = (point.bytes / len(opt)) / (pk.bandwidth_gbps * 1e9) * 1e9 if point.bytes and pk else None
    saving = opt_ns - (floor_ns or float(c.model.busy_ns[opt].sum()) / c.n)
    basis = ("optimizer GPU time per step (its work's span) − its bytes at the memory roof (a fused optimizer "
             "is memory-bound)" if floor_ns is not None else "optimizer GPU time per step − its GPU busy time")
    return Finding(
        "unfused-optimizer", "optimizer phase of many small per-parameter kernels",
        ["step_N/optimizer"], to_ms(max(saving, 0.0)), basis,
        fix,
        {"kernels_per_step": per, "multi_tensor_kernels_per_step": multi_per,
         "optimizer_ns_per_step": opt_ns, "optimizer_cpu_ns_per_step": cpu_ns,
         "memory_roof_ns_per_step": floor_ns,
         "optimizer_bytes_per_step": None if point.bytes is None else point.bytes / len(opt)},
        [], int(c.model.r_start[opt[0]]), int(c.model.r_end[opt[0]]),
        claim=intervals.union(c.model.gpu_end[opt] - c.model.proj_ns[opt], c.model.gpu_end[opt]))


def unfused_attention(c: StepContext) -> Finding | None:
    attn = c.phase("scaled_dot_product_attention")
    if len(attn) == 0:
        return _unfused_attention_by_order(c)
    t = c.trace
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
        "unfused-attention", ATTENTION_TITLE,
        ["step_N/forward/scaled_dot_product_attention"], to_ms(saved),
        "3 × the forward attention's non-GEMM kernel time (forward + backward ≈ 3× forward) × the share of "
        "the step the GPU is busy",
        ATTENTION_FIX,
        {"softmax_kernels_per_step": int((fam == "softmax").sum()) / c.n, "non_gemm_ns_per_step": ns / c.n,
         "gpu_busy_share": gpu_share},
        [], int(c.model.r_start[attn[0]]), int(c.model.r_end[attn[0]]),
        claim=intervals.union(t.ops["start"].to_numpy()[pos[unfused]], t.ops["end"].to_numpy()[pos[unfused]]),
        gpu_work=True)


ATTENTION_TITLE = "attention as separate score / softmax / matmul kernels (memory-bound softmax)"
ATTENTION_FIX = ("torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) (FlashAttention / "
                 "memory-efficient kernels; in transformers, attn_implementation=\"sdpa\")")


def _order_passes(c: StepContext) -> np.ndarray:
    """The steps' attention passes found by kernel order (kernels.attention), without NVTX."""
    inside = np.zeros(len(c.trace.ops), bool)
    inside[c.step_kernels] = True
    return attention_passes(c.trace, inside, c.n)


def _unfused_attention_by_order(c: StepContext) -> Finding | None:
    """A capture without the attention's NVTX range (a third-party model's, one without NVTX): the
    passes between each attention's two GEMMs, forward and backward, found by the kernels' order; the
    saving is their measured time (both directions) × the share of the step the GPU is busy."""
    t = c.trace
    pos = _order_passes(c)
    if len(pos) == 0:
        return None
    fam = name_families(t)[t.ops["name"].to_numpy()[pos]]
    ns = float((t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos].sum())
    s = c.split()
    gpu_share = s.busy_ns / (s.window_ns or 1)
    return Finding(
        "unfused-attention", ATTENTION_TITLE, ["step_N"], to_ms(ns * gpu_share / c.n),
        "the passes over the scores between each attention's two GEMMs (found by kernel order, forward and "
        "backward) × the share of the step the GPU is busy",
        ATTENTION_FIX,
        {"softmax_kernels_per_step": int((fam == "softmax").sum()) / c.n, "non_gemm_ns_per_step": ns / c.n,
         "gpu_busy_share": gpu_share},
        [], int(c.model.r_start[c.steps[0]]), int(c.model.r_end[c.steps[0]]),
        claim=intervals.union(t.ops["start"].to_numpy()[pos], t.ops["end"].to_numpy()[pos]), gpu_work=True)


# The families a fused elementwise pass stands for (kernels.families): pointwise math and reductions
# (sums, means, norms of a row). Copies/casts ("memory") and normalisations are other fixes.
CHAIN_FAMILIES = ("elementwise", "reduction")


def _innermost(c: StepContext, pos: np.ndarray) -> np.ndarray:
    """Per op (positions `pos`): the deepest range it is attributed to, -1 if none."""
    m = c.model
    pair_op, pair_range = np.asarray(m.pair_op, dtype=np.int64), np.asarray(m.pair_range, dtype=np.int64)
    sel = np.isin(pair_op, pos)
    po, pr = pair_op[sel], pair_range[sel]
    order = np.lexsort((np.asarray(m.depth)[pr], po))  # per op, deepest last
    po, pr = po[order], pr[order]
    last = np.r_[po[1:] != po[:-1], True] if len(po) else np.zeros(0, dtype=bool)
    where = dict(zip(po[last].tolist(), pr[last].tolist()))
    return np.array([where.get(int(p), -1) for p in pos.tolist()], dtype=np.int64)


def _unfused_attention_ops(c: StepContext) -> np.ndarray:
    """The kernels unfused-attention's saving stands on (the manual attention's scale/mask/softmax/
    dropout kernels), empty where it does not fire: the elementwise-chain rule leaves them to it."""
    attn = c.phase("scaled_dot_product_attention")
    if len(attn) == 0:
        return _order_passes(c)
    t = c.trace
    pos = c.model.ops_of(attn)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    fam = name_families(t)[t.ops["name"].to_numpy()[pos]] if len(pos) else np.array([], dtype=object)
    if not (fam == "softmax").any() or (fam == "attention").any():
        return np.zeros(0, dtype=np.int64)
    return pos[fam != "gemm"]


def _memory_bound_names(c: StepContext) -> dict[int, bool] | None:
    """Per export kernel name code: ncu measured it memory-bound (memory % of peak > SM %, the mean
    over its profiled instances); None without a report."""
    if c.ncu is None:
        return None
    name_of = c.trace.ops["name"].to_numpy()
    mem: dict[int, list[float]] = {}
    sm: dict[int, list[float]] = {}
    for k in c.ncu.joined:
        if k.figures.memory_throughput_pct is not None and k.figures.sm_throughput_pct is not None:
            mem.setdefault(int(name_of[k.op]), []).append(k.figures.memory_throughput_pct)
            sm.setdefault(int(name_of[k.op]), []).append(k.figures.sm_throughput_pct)
    return {code: float(np.mean(mem[code])) > float(np.mean(sm[code])) for code in mem}


def elementwise_chains(c: StepContext) -> list[tuple[np.ndarray, int]]:
    """Runs of at least chain_min_kernels consecutive kernels on one stream (no other kernel of that
    stream between them) inside one range instance, each an elementwise/reduction kernel no longer
    than chain_kernel_max_ns and, with an ncu report, measured memory-bound by ncu (a name ncu did
    not profile counts by its family); the manual attention's kernels unfused-attention claims are
    left out. Each chain: (its op positions in order, its range instance)."""
    t = c.trace
    pos = c.step_kernels
    if not len(pos):
        return []
    ops = t.ops
    codes = ops["name"].to_numpy()[pos]
    dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos]
    fam = name_families(t)[codes]
    ok = np.isin(fam, CHAIN_FAMILIES) & (dur <= threshold("chain_kernel_max_ns")) & ~np.isin(pos, _unfused_attention_ops(c))
    bound = _memory_bound_names(c)
    if bound is not None:
        ok &= np.array([bound.get(int(k), True) for k in codes.tolist()], dtype=bool)
    inner = _innermost(c, pos)
    stream = ops["stream"].to_numpy()[pos]
    out = []
    for s in np.unique(stream).tolist():
        on = np.flatnonzero(stream == s)  # in time order (pos is)
        run: list[int] = []
        for i in on.tolist() + [-1]:
            if i >= 0 and ok[i] and inner[i] >= 0 and (not run or inner[i] == inner[run[0]]):
                run.append(i)
                continue
            if len(run) >= threshold("chain_min_kernels"):
                out.append((pos[run], int(inner[run[0]])))
            run = [i] if i >= 0 and ok[i] and inner[i] >= 0 else []
    return out


def elementwise_chain(c: StepContext) -> Finding | None:
    chains = elementwise_chains(c)
    if not chains:
        return None
    t = c.trace
    ops = t.ops
    start, end, name_code = ops["start"].to_numpy(), ops["end"].to_numpy(), ops["name"].to_numpy()
    groups: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # per (range path, names): [count, ns, saving]
    saved = chain_ns = 0.0
    shorter: list[np.ndarray] = []
    first = None
    for p, rid in chains:
        d = (end[p] - start[p]).astype(np.float64)
        keep = int(np.argmax(d))
        chain_ns += float(d.sum())
        saved += float(d.sum() - d[keep])
        shorter.append(np.delete(p, keep))
        names = tuple(t.op_names[int(k)] for k in name_code[p])
        g = groups.setdefault((range_path(c.model, rid), names), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += float(d.sum())
        g[2] += float(d.sum() - d[keep])
        if first is None or d.sum() > first[2]:
            first = (int(start[p[0]]), int(end[p[-1]]), float(d.sum()))
    rows = [{"range": path, "kernels": len(names), "names": [table_name(n) for n in names],
             "chains_per_step": g[0] / c.n, "chain_ns_per_step": g[1] / c.n, "saving_ns_per_step": g[2] / c.n}
            for (path, names), g in sorted(groups.items(), key=lambda kv: -kv[1][2])]
    kernels = sum(len(p) for p, _ in chains)
    how = "memory-bound by ncu's figures (memory % of peak > SM %)" if c.ncu is not None else \
        "memory-bound by family (elementwise/reduction: a pass over memory per kernel)"
    assert first is not None
    return Finding(
        "elementwise-chain", "chains of short elementwise kernels, each a round trip through memory (fusion candidates)",
        sorted({str(r["range"]) for r in rows})[:10], to_ms(saved / c.n),
        f"per chain, its kernels' time − its longest kernel's (one fused pass), per step; an estimate. Chains: ≥ "
        f"{threshold('chain_min_kernels'):g} consecutive elementwise/reduction kernels on one stream in one range instance, each "
        f"≤ {threshold('chain_kernel_max_ns') / 1e3:g} µs, {how}; the manual attention's kernels are unfused-attention's",
        "fuse them: torch.compile(model) (Inductor fuses pointwise chains), a fused op (F.gelu, fused LayerNorm), "
        "or a custom Triton kernel",
        {"chains_per_step": len(chains) / c.n, "kernels_per_step": kernels / c.n, "chain_ns_per_step": chain_ns / c.n,
         "memory_bound_by": "ncu" if c.ncu is not None else "family"},
        rows[:10], first[0], first[1], claim=intervals.union(
            start[np.concatenate(shorter)], end[np.concatenate(shorter)]), gpu_work=True)
