"""Ranges inferred from the kernel sequence, for traces with no iteration ranges (issue 31).

A compiled program or an unannotated script leaves no `step_N`/`forward`/... NVTX ranges, yet a
training loop's GPU work repeats: every iteration launches the same kernels in the same order,
and inside one, every transformer layer does too. This module finds that structure and writes it
as ranges of the NVTX domain `inferred` (shown `inferred:step_3`, `inferred:layer_7`), added to the
trace's ranges for the range model only: the tree, kernel tables, ratios, timeline, idle time,
findings, diff and the report then work on them unchanged and every view shows the `inferred:`
tag. NVIDIA's own reports (parsers.nsys) read the export's ranges and never see them.

How, on the kernels of the process that launched the most, in launch order (name codes only):
1. The iteration's period: the kernel name whose occurrences are most widely and most regularly
   spaced (every gap but the first within PERIOD_TOLERANCE of their median: the first iteration
   may differ, AdamW making its state) marks one point of each iteration.
2. Where an iteration begins: the point of the cycle where the host paused longest before the
   launch (the loop's synchronise, logging, data loading: median over the steady iterations of
   the gap between consecutive launch calls); every iteration begins with that cycle's first
   HEAD kernels. Kernels before the first iteration (initialisation) belong to none.
3. Verified: the steady iterations' name sequences must repeat exactly (at least MIN_REPEATS
   equal to the most common one), else nothing is inferred and `reason` says why.
4. Layers: inside the most common iteration, the longest run of one kernel name at a constant
   spacing (the per-layer kernel, e.g. the attention softmax) gives the layer length and count;
   a second run of the same count later on is the backward's mirror. A layer starts as late as
   the repeat allows (what it shares with the embedding before it goes to the embedding).
5. Phases and stages: backward begins at the first kernel after the forward layers whose name
   says backward/grad; the optimizer at the first optimizer kernel after the backward layers;
   one forward layer's kernels are named in order from their kinds (layer norm, QKV GEMM,
   attention scores, softmax or fused attention, attention x V, output projection, residual
   add, MLP up, activation, MLP down; the manual attention's three with the capture's names,
   computing_attention_scores, computing_softmax, final_matmul).

A range's CPU span is from the launch of its first kernel to just before the launch of the
kernel after its last (a part that closes its iteration, and the last iteration: to the end of its
last launch call, so the loop's wait between iterations is the iteration's alone), on the thread
that launched the iteration's first kernel, so the process attribution gives each range
exactly its kernels; the iterations' GPU times (`InferredIteration`) are from their first
kernel's start to the next iteration's first kernel's start, the last to its last kernel's end.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK
from nsight_tui.parsers.read.load import Trace

DOMAIN = conventions.INFERRED_DOMAIN
PERIOD_TOLERANCE = 0.05  # a steady iteration's kernel count may differ from the median by this much
MIN_REPEATS = 2  # iterations whose kernel sequence is the most common one
MIN_KERNELS = 20  # fewer kernels than this: no iteration to find
HEAD = 16  # kernels that mark an iteration's start
MIN_LAYER_KERNELS = 4  # a layer launches at least this many kernels (a transformer layer: dozens)

# One forward layer's stages, by kernel kind (on the demangled name). The kernel families
# (parsers.kernels.families) sit above this layer and answer another question (what kind of work,
# for shares); a stage is a place in the layer, told by the order the kinds come in.
_KINDS: tuple[tuple[str, re.Pattern], ...] = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|mha_|_mha", re.I)),
    ("norm", re.compile(r"layer_?norm|rms_?norm|LayerNorm", re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    ("gemm", re.compile(r"gemm|xmma|cutlass|cublas|nvjet|splitKreduce|matmul|wgmma|hmma|Kernel2", re.I)),
    ("activation", re.compile(r"gelu|relu|silu|swish|tanh|sigmoid", re.I)),
    ("add", re.compile(r"CUDAFunctor_add|AddFunctor|add_kernel|\badd\b", re.I)),
)
# The manual attention's three stages carry the capture's range names (conventions.ATTENTION_PARTS),
# so the report's softmax-versus-matmul ratio reads them as it reads an annotated capture's.
SCORES, SOFTMAX, FINAL_MATMUL = conventions.ATTENTION_PARTS
_BACKWARD = re.compile(r"backward|_grad|grad_|Backward", re.I)
_OPTIMIZER = re.compile(r"multi_tensor_apply|adam|_sgd|sgd_", re.I)
# The loss's forward kernels (cross-entropy's log-softmax and NLL): the backward begins after them,
# with the loss gradient's own kernels (a fill of ones) before the first one named backward.
_LOSS = re.compile(r"nll_loss_forward|cross_entropy|log_softmax|SoftMaxForward", re.I)


@dataclass(frozen=True)
class InferredIteration:
    name: str  # the range's text: warmup_N (leading iterations unlike the steady one) or step_N
    start_ns: int  # GPU clock: its first kernel's start
    end_ns: int  # the next iteration's first kernel's start; the last: its last kernel's end
    kernels: int

    def to_json(self) -> dict:
        return {"name": self.name, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "duration_ns": self.end_ns - self.start_ns, "kernels": self.kernels}


@dataclass
class Inference:
    """What was inferred from one trace's kernel sequence (empty `iterations`: nothing; `reason`)."""

    iterations: list[InferredIteration] = field(default_factory=list)
    layer_count: int = 0
    layer_stages: list[str] = field(default_factory=list)  # one forward layer's stages, in order
    backward_stages: list[str] = field(default_factory=list)  # one backward layer's, in order (`... (grad)`)
    period_kernels: int = 0
    basis: str = ""
    reason: str = ""
    ranges: pd.DataFrame | None = field(default=None, repr=False)  # the rows added to trace.ranges

    inside: bool = False  # the export's own iteration ranges, with the parts inferred inside them

    @property
    def found(self) -> bool:
        return self.ranges is not None and len(self.ranges) > 0

    def to_json(self) -> dict:
        return {"iterations": [i.to_json() for i in self.iterations], "inside_nvtx_iterations": self.inside,
                "layer_count": self.layer_count,
                "layer_stages": self.layer_stages, "backward_stages": self.backward_stages, "period_kernels": self.period_kernels,
                "basis": self.basis, **({"reason": self.reason} if self.reason else {})}


def _is_iteration_text(texts: pd.Series | np.ndarray) -> np.ndarray:
    """Per range text: `step_N` or `warmup_N` (tested once per distinct text: 10^6 op ranges share few;
    the Series as it is: Arrow factorizes its strings in C, an object array first is 10x slower)."""
    if not len(texts):
        return np.zeros(0, dtype=bool)
    codes, uniques = pd.factorize(texts)
    hit = np.array([isinstance(t, str) and bool(conventions.STEP_RANGE.match(t) or conventions.WARMUP_RANGE.match(t))
                    for t in uniques], dtype=bool)
    return hit[codes] & (codes >= 0)


def has_iteration_ranges(trace: Trace) -> bool:
    return bool(_is_iteration_text(trace.ranges["text"]).any()) if len(trace.ranges) else False


def inference(trace: Trace) -> Inference:
    """The trace's inferred structure (computed once, kept with the trace). Nothing is inferred
    where the trace names its iterations itself or its GPU work is not read yet."""
    key = "inferred_ranges"
    if key not in trace.derived:
        if trace.info.gpu_pending:
            return Inference(reason="GPU work not read yet")
        if has_iteration_ranges(trace):
            found = _infer_inside(trace) if _bare_iterations(trace) else \
                Inference(reason="the trace has its own iteration ranges (step_N/warmup_N)")
        else:
            found = _infer(trace)
        trace.derived[key] = found
    return trace.derived[key]


def with_inferred_ranges(trace: Trace) -> Trace:
    """`trace` itself, or (ranges inferred) a copy whose ranges hold the inferred ones after the
    export's; both share what is derived from their GPU work (`derived`)."""
    found = inference(trace)
    if not found.found or found.ranges is None:
        return trace
    key = "with_inferred_ranges"
    if key not in trace.derived:
        ranges = pd.concat([trace.ranges, found.ranges], ignore_index=True) if len(trace.ranges) \
            else found.ranges.reset_index(drop=True)
        trace.derived[key] = replace(trace, ranges=ranges, derived=trace.derived)
    return trace.derived[key]


# -- the sequence -----------------------------------------------------------------------------
@dataclass
class _Sequence:
    pos: np.ndarray  # op positions, in launch order
    codes: np.ndarray  # their name codes
    launch: np.ndarray  # launch call start (CPU clock; GPU start where no call is linked)
    launch_end: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    gtid: np.ndarray  # the launching thread (-1: unknown)


def _processes(trace: Trace) -> list[int]:
    """The processes with kernels, the one with the most first."""
    ops = trace.ops
    gpid = ops["gpid"].to_numpy()[ops["kind"].to_numpy() == KERNEL]
    values, counts = np.unique(gpid, return_counts=True)
    return [int(v) for v in values[np.argsort(-counts, kind="stable")]]


def _sequence(trace: Trace, gpid: int) -> _Sequence | None:
    ops = trace.ops
    kernels = np.flatnonzero((ops["kind"].to_numpy() == KERNEL) & (ops["gpid"].to_numpy() == gpid))
    if len(kernels) < MIN_KERNELS:
        return None
    start, end = ops["start"].to_numpy()[kernels], ops["end"].to_numpy()[kernels]
    api_pos = ops["api"].to_numpy()[kernels].astype(np.int64)
    linked = api_pos >= 0
    api = trace.api
    launch, launch_end, gtid = start.astype(np.int64), end.astype(np.int64), np.full(len(kernels), -1, np.int64)
    if len(api) and linked.all():
        launch = api["start"].to_numpy()[api_pos].astype(np.int64)
        launch_end = api["end"].to_numpy()[api_pos].astype(np.int64)
        gtid = api["gtid"].to_numpy()[api_pos].astype(np.int64)
    order = np.lexsort((start, launch))
    return _Sequence(kernels[order], ops["name"].to_numpy()[kernels][order].astype(np.int64), launch[order],
                     launch_end[order], start[order].astype(np.int64), end[order].astype(np.int64), gtid[order])


def _anchor(codes: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Occurrences of the name most widely and regularly spaced, and their median spacing."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
    best: tuple[np.ndarray, int] | None = None
    n = len(codes)
    for group in np.split(order, cuts):
        if len(group) < 3 or len(group) > n // 4:
            continue
        gaps = np.diff(group)  # positions are in order within a group (stable sort)
        steady = gaps[1:]
        median = int(np.median(steady))
        if median < 4 or np.any(np.abs(steady - median) > PERIOD_TOLERANCE * median):
            continue
        if (median * len(group)) < n // 2:  # the repeats must cover most of the run
            continue
        if best is None or median > best[1]:
            best = (group, median)
    return best


def _starts(seq: _Sequence, anchors: np.ndarray, period: int) -> np.ndarray:
    """Where each iteration begins (positions in the sequence)."""
    codes = seq.codes
    steady = anchors[1:]
    offsets = np.arange(period)
    at = steady[:, None] - offsets[None, :]
    valid = at >= 1
    gap = np.zeros(len(codes), dtype=np.float64)
    gap[1:] = np.diff(seq.launch)
    pause = np.where(valid, gap[np.clip(at, 0, None)], np.nan)
    with np.errstate(all="ignore"):
        back = int(np.nanargmax(np.nanmedian(pause, axis=0)))
    first = int(steady[-1] - back)
    k = min(HEAD, max(1, period // 4))
    head = codes[first:first + k]
    hits = np.flatnonzero(codes[: len(codes) - k + 1] == head[0])
    if len(head) > 1 and len(hits):
        windows = np.lib.stride_tricks.sliding_window_view(codes, k)[hits]
        hits = hits[(windows == head).all(axis=1)]
    starts: list[int] = []
    for h in hits.tolist():
        if not starts or h - starts[-1] >= period // 2:
            starts.append(h)
    return np.array(starts, dtype=np.int64)


def _infer(trace: Trace) -> Inference:
    """Each process on its own (a data-parallel run's ranks each run the loop); what is said of the
    run is said of the process with the most kernels, the others' ranges are added too."""
    found = [_infer_process(trace, gpid) for gpid in _processes(trace)] or [_infer_process(trace, -1)]
    first = found[0]
    others = [f for f in found[1:] if f.found]
    if not first.found or not others:
        return first
    ranges = pd.concat([first.ranges, *[f.ranges for f in others]], ignore_index=True)
    ranges["rowid"] = -1 - np.arange(len(ranges), dtype=np.int64)
    first.ranges = ranges
    first.basis += f"; and {len(others)} other process{'es' if len(others) > 1 else ''} likewise"
    return first


def _infer_process(trace: Trace, gpid: int) -> Inference:
    seq = _sequence(trace, gpid)
    if seq is None:
        return Inference(reason=f"fewer than {MIN_KERNELS} kernels: no iteration to find")
    found = _anchor(seq.codes)
    if found is None:
        return Inference(reason="no kernel recurs at a steady spacing: the kernel sequence has no period")
    anchors, period = found
    starts = _starts(seq, anchors, period)
    if len(starts) < MIN_REPEATS:
        return Inference(reason="the kernel sequence does not repeat: no period")
    ends = np.append(starts[1:], min(len(seq.codes), int(starts[-1]) + int(np.median(np.diff(starts)))
                                     if len(starts) > 1 else len(seq.codes)))
    seqs = [tuple(seq.codes[a:b].tolist()) for a, b in zip(starts.tolist(), ends.tolist())]
    common = max(set(seqs), key=lambda s: (seqs.count(s), -seqs.index(s)))
    repeats = seqs.count(common)
    if repeats < MIN_REPEATS:
        return Inference(reason=f"{len(seqs)} candidate iterations, but no two launch the same kernels in the same "
                         "order: no period")
    leading = next(i for i, s in enumerate(seqs) if s == common)
    recorded = _recorded_warmups(trace, len(seqs))
    if recorded is not None:  # the capture's own record says how many warm-ups led the run
        leading = recorded
    names = [f"{conventions.WARMUP_PREFIX}{i}" if i < leading else f"{conventions.STEP_PREFIX}{i - leading}"
             for i in range(len(seqs))]
    template = np.array(common, dtype=np.int64)
    op_names = trace.op_names
    kinds = [_kind(op_names[c]) for c in template.tolist()]
    layers = _layers(template, kinds)
    iterations = []
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        gpu_end = int(seq.gpu_start[b]) if b < len(seq.codes) and i + 1 < len(starts) else int(seq.gpu_end[a:b].max())
        iterations.append(InferredIteration(names[i], int(seq.gpu_start[a]), gpu_end, b - a))
    stages = _layer_stages(template, kinds, layers)
    backward = _backward_stages(template, kinds, op_names, layers, stages)
    named = " (warm-ups as the capture recorded them)" if recorded is not None else ""
    basis = (f"inferred from the kernel sequence (process {gpid >> 24 & 0xFFFFFF}"
             f", launch order): {len(seqs)} iterations of ~{len(template):,} kernels, the name "
             f"'{_short(op_names[int(seq.codes[anchors[0]])])}' once per iteration; {repeats} launch the same kernels in "
             f"the same order{named}" + (f"; {layers[0][1]} layers of {layers[0][2]} kernels (the kernel "
                                  f"'{_short(op_names[int(template[layers[0][3]])])}' at a steady spacing)"
                                  if layers else "; no repeated layer found"))
    ranges = _ranges(trace, seq, starts, ends, names, seqs, common, layers, kinds, stages, backward=backward)
    return Inference(iterations=iterations, layer_count=layers[0][1] if layers else 0,
                     layer_stages=[s for s, _, _ in stages], backward_stages=[s for s, _, _ in backward],
                     period_kernels=len(template), basis=basis, ranges=ranges)


def _recorded_warmups(trace: Trace, iterations: int) -> int | None:
    """The warm-up count the capture recorded (`capture --no-nvtx`'s STEM.steps.json), when its
    iteration count is the one inferred; None otherwise (then the leading iterations unlike the
    steady one are the warm-ups)."""
    steps = trace.meta().steps
    if len(steps) != iterations:
        return None
    warm = [str(s.get("name", "")).startswith(conventions.WARMUP_PREFIX) for s in steps]
    return sum(warm) if warm == sorted(warm, reverse=True) else None


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


def _kind(name: str) -> str:
    for kind, pattern in _KINDS:
        if pattern.search(name):
            return kind
    return ""


# -- layers -----------------------------------------------------------------------------------
def _runs(template: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Per name: its longest run of occurrences at one spacing, (first, count, spacing, anchor)."""
    order = np.argsort(template, kind="stable")
    cuts = np.flatnonzero(np.diff(template[order])) + 1
    out = []
    for group in np.split(order, cuts):
        if len(group) < 2:
            continue
        gaps = np.diff(group)
        best = (0, 0, 0)  # (length in gaps, first gap index, spacing)
        i = 0
        while i < len(gaps):
            j = i
            while j + 1 < len(gaps) and gaps[j + 1] == gaps[i]:
                j += 1
            if gaps[i] >= MIN_LAYER_KERNELS and (j - i + 1) > best[0]:
                best = (j - i + 1, i, int(gaps[i]))
            i = j + 1
        if best[0]:
            out.append((int(group[best[1]]), best[0] + 1, best[2], int(group[best[1]])))
    return out


def _layers(template: np.ndarray, kinds: list[str]) -> list[tuple[int, int, int, int]]:
    """The forward layers and, when present, the backward's: (first kernel, count, kernels each,
    the anchor kernel's position), in template order.

    Each spacing with a run of N occurrences is one layered region of N layers (the backward's
    layers are longer than the forward's); the layer count is the N whose regions, laid without
    overlap, cover the most kernels (runs of three or more first: two occurrences at one spacing
    are no evidence of a layer). A backward layer whose two halves launch the same kernels makes
    a run of 2N at half the spacing; the forward has no such run, so N covers more. The earliest
    region is the forward, the next one the backward."""
    runs = [r for r in _runs(template) if r[1] >= 2]
    if not runs:
        return []
    best: tuple[tuple, list] | None = None
    for count in sorted({r[1] for r in runs}):
        regions = []
        for g in sorted({r[2] for r in runs if r[1] == count}):
            earliest = min((r for r in runs if r[1] == count and r[2] == g), key=lambda r: r[0])
            region = _aligned(template, kinds, earliest)
            if region is not None and region[1] == count:
                regions.append(region)
        if not regions:
            continue
        regions.sort()
        laid = [regions[0]]
        for region in regions[1:]:
            if region[0] >= laid[-1][0] + count * laid[-1][2]:
                laid.append(region)
        laid = laid[:2]
        score = (count >= 3, sum(r[1] * r[2] for r in laid), count)
        if best is None or score > best[0]:
            best = (score, laid)
    return best[1] if best is not None else []


def _aligned(template: np.ndarray, kinds: list[str], run: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """The run's layers placed where the repeat allows: the region where the sequence equals
    itself one spacing on reaches from `lo` to `hi`, and N layers fit in it with some slack (the
    embedding's add is the same kernel as a layer's residual add, the final layer norm as a
    layer's first). A layer starts at a layer norm where one fits (a pre-LN transformer's layer
    begins with it), else as early as the repeat allows."""
    first, count, g, anchor = run
    lo = first
    while lo - 1 >= 0 and lo - 1 + g < len(template) and template[lo - 1] == template[lo - 1 + g] and lo > first - g + 1:
        lo -= 1
    hi = first + (count - 1) * g  # the last occurrence; extend while the repeat holds
    while hi + 1 < len(template) and hi + 1 - g >= 0 and template[hi + 1] == template[hi + 1 - g]:
        hi += 1
    count = min(count, (hi + 1 - lo) // g)  # whole layers only: the repeat must hold for all of each
    if count < 2:
        return None
    latest = hi + 1 - count * g
    start = next((x for x in range(lo, latest + 1) if kinds[x] == "norm"), lo)
    return (start, count, g, anchor)


def _layer_stages(template: np.ndarray, kinds: list[str], layers) -> list[tuple[str, int, int]]:
    """One forward layer's stages, (name, first, end) as positions in the template, in order.

    A GEMM stage is a run of GEMM kernels (cuBLAS's split-K reduce follows its GEMM); which one
    it is follows from where it comes: before the attention's softmax the QKV projection, then
    the scores; after it the product with V (a fused attention has none), then the output
    projection; after the second layer norm the MLP's up and, past the activation, down GEMM."""
    if not layers:
        return []
    first, _, g, _ = layers[0]
    if not any(k in ("softmax", "attention") for k in kinds[first:first + g]):
        return _plain_stages(kinds, first, g)  # no attention: no transformer layer to name the parts of
    names: list[str] = []
    attention = activation = False
    norms = groups = 0  # layer norms seen; GEMM groups in the current part
    prev = ""
    for kind in kinds[first:first + g]:
        name = ""
        if kind == "norm":
            norms += 1
            groups = 0
            name = "layer norm"
        elif kind in ("softmax", "attention"):
            attention, groups = True, 0
            name = SOFTMAX if kind == "softmax" else "fused attention"
        elif kind == "activation":
            activation = True
            name = "activation"
        elif kind == "add":
            name = "residual add"
        elif kind == "gemm":
            if prev == "gemm":
                name = names[-1]  # the same matmul (split-K reduce, a second kernel of one GEMM)
            else:
                groups += 1
                if norms >= 2:
                    name = "MLP down GEMM" if activation else "MLP up GEMM"
                elif not attention:
                    name = "QKV GEMM" if groups == 1 else SCORES
                elif "fused attention" in names:
                    name = "output projection"
                else:
                    name = FINAL_MATMUL if groups == 1 else "output projection"
        names.append(name)
        prev = kind
    return _runs_of(names, kinds, first, g)


GRAD = " (grad)"  # a backward stage: the forward stage's name with this suffix
# Kernels that finish the gradient of the stage before them: a Linear's bias gradient (a sum over
# the batch, after its two GEMMs; cuBLAS's split-K reduce), a layer norm's weight and bias gradient
_FINISHES = {"gemm": re.compile(r"reduce_kernel.*sum_functor|splitKreduce", re.I),
             "norm": re.compile(r"GammaBeta|gamma_beta|layer_norm.*backward|LayerNormBackward", re.I)}


def _backward_stages(template: np.ndarray, kinds: list[str], op_names: list[str], layers,
                     forward: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """One backward layer's stages, (name, first, end) in the template: the forward layer's stages
    met in reverse, each named `<forward stage> (grad)`.

    The backward runs the layer's operations last to first, so its GEMM groups (a Linear's two
    gradient GEMMs, dX and dW, back to back; a batched matmul's two) are the forward's GEMM stages
    in reverse order: named so where the counts agree, else by kind. The norms', activation's,
    softmax's and adds' gradient kernels are told by kind; a bias's or a norm weight's gradient goes
    with the stage before it. Other kernels (the gradients of a stage's copies, scaling and masks)
    come before the stage's own: they join the stage after them (the forward's after-the-matmul
    scaling and mask are the scores' gradient's first kernels), those last in the layer the one
    before."""
    if len(layers) < 2 or not forward:
        return []
    first, _, g, _ = layers[1]
    f_first, _, f_g, _ = layers[0]
    f_kinds = kinds[f_first:f_first + f_g]
    # the forward's GEMM stages in order (a stage is a GEMM one when a GEMM kernel is in it)
    gemm_stages = [name for name, a, b in forward if "gemm" in f_kinds[a - f_first:b - f_first]]
    part = kinds[first:first + g]
    groups = sum(1 for i, k in enumerate(part) if k == "gemm" and (i == 0 or part[i - 1] != "gemm"))
    reverse = list(reversed(gemm_stages)) if groups == len(gemm_stages) else []
    plain = {n for n, _, _ in forward}
    names: list[str] = []
    group, last_kind = -1, ""  # the kind of the last kernel that had one
    for i, kind in enumerate(part):
        name = ""
        finishes = _FINISHES.get(last_kind)
        if kind == "gemm" and i and part[i - 1] == "gemm":
            name = names[-1]  # the matmul's second gradient GEMM
        elif names and names[-1] and finishes is not None and finishes.search(op_names[int(template[first + i])]):
            name = names[-1]
        elif kind == "gemm":
            group += 1
            name = reverse[group] if reverse else "GEMM"
        elif kind == "norm":
            name = "layer norm"
        elif kind == "softmax":
            name = SOFTMAX if SOFTMAX in plain else "softmax"
        elif kind == "attention":
            name = "fused attention"
        elif kind == "activation":
            name = "activation"
        elif kind == "add":
            name = "residual add" if "residual add" in plain else "add"
        names.append(name)
        last_kind = (kind or last_kind) if name else ""
    if not any(names):
        return []
    following = ""
    for i in range(len(names) - 1, -1, -1):
        following = names[i] = names[i] or following
    for i in range(1, len(names)):
        names[i] = names[i] or names[i - 1]
    return [(name + GRAD, a, b) for name, a, b in _runs_of(names, kinds, first, g)]


_PLAIN = {"gemm": "GEMM", "norm": "layer norm", "activation": "activation", "add": "add", "softmax": "softmax"}


def _plain_stages(kinds: list[str], first: int, g: int) -> list[tuple[str, int, int]]:
    """A layer without attention: its parts named by kind alone (GEMM, activation, add, ...)."""
    names = [_PLAIN.get(k, "") for k in kinds[first:first + g]]
    return _runs_of(names, kinds, first, g) if any(names) else []


def _runs_of(names: list[str], kinds: list[str], first: int, g: int) -> list[tuple[str, int, int]]:
    """Consecutive kernels of one stage name as one stage, (name, first, end) in the template."""
    names = list(names)
    # Kernels of no stage kind (copies, scaling, masks) join the stage after them when it is a
    # matmul (the copies that lay out its operands: q @ k.T's contiguous copies), else the one before
    # them (the scores' scaling and mask); those first in the layer, the next.
    gemm_stage = {n for n, k in zip(names, kinds[first:first + g]) if k == "gemm"}
    following = ""
    for i in range(len(names) - 1, -1, -1):
        if names[i]:
            following = names[i]
        elif following in gemm_stage:
            names[i] = following
    for i in range(1, len(names)):
        names[i] = names[i] or names[i - 1]
    following = next((x for x in names if x), "layer")
    names = [x or following for x in names]
    out: list[tuple[str, int, int]] = []
    for i, name in enumerate(names):
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1], first + i + 1)
        else:
            out.append((name, first + i, first + i + 1))
    return out


# -- the ranges -------------------------------------------------------------------------------
def _phases(template: np.ndarray, op_names: list[str], layers) -> list[tuple[str, int, int]]:
    """forward/backward/optimizer as template positions (forward only: the whole iteration)."""
    n = len(template)
    after_fwd = layers[0][0] + layers[0][1] * layers[0][2] if layers else 0
    bwd = next((i for i in range(after_fwd, n) if _BACKWARD.search(op_names[int(template[i])])), None)
    if bwd is None:
        return [("forward", 0, n)]
    loss = [i for i in range(after_fwd, bwd) if _LOSS.search(op_names[int(template[i])])]
    if loss:
        bwd = loss[-1] + 1
    after_bwd = layers[1][0] + layers[1][1] * layers[1][2] if len(layers) > 1 else bwd
    opt = next((i for i in range(after_bwd, n) if _OPTIMIZER.search(op_names[int(template[i])])), None)
    out = [("forward", 0, bwd), ("backward", bwd, opt if opt is not None else n)]
    if opt is not None:
        out.append(("optimizer", opt, n))
    return out


def _bare_iterations(trace: Trace) -> bool:
    """The export names its iterations and nothing else on their threads (NVTX around the
    iteration only): the parts inside can be inferred."""
    r = trace.ranges
    is_iteration = _is_iteration_text(r["text"])
    threads = np.unique(r["gtid"].to_numpy()[is_iteration])
    return not (np.isin(r["gtid"].to_numpy(), threads) & ~is_iteration).any()


def _infer_inside(trace: Trace) -> Inference:
    """Phases, layers and stages inside the export's own iteration ranges (of the process with the
    most kernels): the kernels each range's thread launched inside it, the most common sequence
    of them the steady iteration."""
    processes = _processes(trace)
    seq = _sequence(trace, processes[0]) if processes else None
    if seq is None:
        return Inference(reason=f"fewer than {MIN_KERNELS} kernels: nothing to infer inside the iterations")
    r = trace.ranges
    texts = r["text"].to_numpy()
    mine = (r["gtid"].to_numpy() >> 24) == (processes[0] >> 24)
    hit = np.flatnonzero(mine & _is_iteration_text(texts))
    hit = hit[np.argsort(r["start"].to_numpy()[hit], kind="stable")]
    starts = np.searchsorted(seq.launch, r["start"].to_numpy()[hit], side="left")
    ends = np.searchsorted(seq.launch, r["end"].to_numpy()[hit], side="right")
    seqs = [tuple(seq.codes[a:b].tolist()) for a, b in zip(starts.tolist(), ends.tolist())]
    nonempty = [s for s in seqs if s]
    if not nonempty:
        return Inference(reason="the iteration ranges hold no kernels")
    common = max(set(nonempty), key=lambda s: (seqs.count(s), -seqs.index(s)))
    if seqs.count(common) < MIN_REPEATS:
        return Inference(reason="no two iteration ranges launch the same kernels in the same order: nothing inferred "
                         "inside them")
    template = np.array(common, dtype=np.int64)
    kinds = [_kind(trace.op_names[c]) for c in template.tolist()]
    layers = _layers(template, kinds)
    stages = _layer_stages(template, kinds, layers)
    backward = _backward_stages(template, kinds, trace.op_names, layers, stages)
    gtids = r["gtid"].to_numpy()[hit]
    rows = _ranges(trace, seq, starts, ends, [str(t) for t in texts[hit]], seqs, common, layers, kinds, stages,
                   iterations=False, gtids=gtids, limits=r["end"].to_numpy()[hit], backward=backward)
    basis = (f"inferred inside the export's {len(hit)} iteration ranges from their kernel sequence: "
             f"{seqs.count(common)} launch the same {len(template):,} kernels in the same order"
             + (f"; {layers[0][1]} layers of {layers[0][2]} kernels" if layers else "; no repeated layer found"))
    return Inference(layer_count=layers[0][1] if layers else 0, layer_stages=[s for s, _, _ in stages],
                     backward_stages=[s for s, _, _ in backward],
                     period_kernels=len(template), basis=basis, ranges=rows, inside=True)


def _ranges(trace: Trace, seq: _Sequence, starts, ends, names, seqs, common, layers, kinds, stages,
            iterations: bool = True, gtids: np.ndarray | None = None, limits: np.ndarray | None = None,
            backward: list[tuple[str, int, int]] | None = None) -> pd.DataFrame:
    """The inferred ranges as rows like trace.ranges': parents before children (`iterations`
    False: the parts only, inside the export's own iteration ranges, on their threads `gtids`)."""
    op_names = trace.op_names
    template = np.array(common, dtype=np.int64)
    phases = _phases(template, op_names, layers)
    fwd_layers = layers[0] if layers else None
    bwd_layers = layers[1] if len(layers) > 1 else None
    rows: list[tuple[str, int, int]] = []  # (text, first, end) as sequence positions
    first_row: list[int] = []  # per iteration, its first row
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        first_row.append(len(rows))
        if iterations:
            rows.append((names[i], a, b))
        if seqs[i] != common:
            continue  # an iteration unlike the steady one: no parts inferred inside it
        for phase, p0, p1 in phases:
            rows.append((phase, a + p0, a + p1))
            if phase == "forward" and fwd_layers:
                f0, count, g, _ = fwd_layers
                if f0 > p0:
                    rows.append(("embedding", a + p0, a + f0))
                for j in range(count):
                    rows.append((f"layer_{j}", a + f0 + j * g, a + f0 + (j + 1) * g))
                    for stage, s0, s1 in stages:
                        rows.append((stage, a + s0 + j * g, a + s1 + j * g))
                if f0 + count * g < p1:
                    rows.append(("head and loss", a + f0 + count * g, a + p1))
            if phase == "backward" and bwd_layers:
                b0, count, g, _ = bwd_layers
                if b0 > p0:
                    rows.append(("head and loss backward", a + p0, a + b0))
                for j in range(count):  # the backward visits the layers last to first
                    rows.append((f"layer_{count - 1 - j}", a + b0 + j * g, a + b0 + (j + 1) * g))
                    for stage, s0, s1 in backward or []:
                        rows.append((stage, a + s0 + j * g, a + s1 + j * g))
                if b0 + count * g < p1:
                    rows.append(("embedding backward", a + b0 + count * g, a + p1))
    last = len(seq.codes)
    n = len(rows)
    owner = np.searchsorted(np.array(first_row, dtype=np.int64), np.arange(n), side="right") - 1
    r_start = np.array([seq.launch[a] for _, a, _ in rows], dtype=np.int64)
    # to just before the next kernel's launch: the next range holds that one (attribution counts
    # a call that starts at a range's end as inside it)
    r_end = np.array([seq.launch[b] - 1 if b < last else seq.launch_end[b - 1] for _, _, b in rows], dtype=np.int64)
    # A part that closes its iteration (the optimizer, a forward-only run's head) ends with its own
    # last launch call: the wait after it (the step's synchronise, logging, the next batch) is the
    # iteration's, not the part's, as an annotated part's range would end when its code returns.
    closing = np.array([b == ends[o] for (_, _, b), o in zip(rows, owner.tolist())], dtype=bool)
    if iterations:
        closing[np.array(first_row, dtype=np.int64)] = False  # the iteration itself keeps its whole span
    r_end = np.where(closing, seq.launch_end[np.array([b - 1 for _, _, b in rows], dtype=np.int64)], r_end)
    if limits is not None:  # inside the export's iteration ranges: never past their end
        r_end = np.minimum(r_end, np.asarray(limits, dtype=np.int64)[owner])
    r_end = np.maximum(r_end, r_start)
    texts = np.array([t for t, _, _ in rows], dtype=object)
    thread = np.full(n, _thread(trace, seq, starts), dtype=np.int64) if gtids is None else \
        np.asarray(gtids, dtype=np.int64)[owner]
    return pd.DataFrame({
        "rowid": -1 - np.arange(n, dtype=np.int64), "start": r_start, "end": r_end, "end_sum": r_end,
        "gtid": thread, "cross": np.zeros(n, dtype=bool), "pushpop": np.ones(n, dtype=bool),
        "name": np.array([f"{DOMAIN}:{t}" for t in texts], dtype=object), "domain": np.full(n, DOMAIN, dtype=object),
        "text": texts, "unended": np.zeros(n, dtype=bool),
    })


def _thread(trace: Trace, seq: _Sequence, starts: np.ndarray) -> int:
    """The thread that launched most iterations' first kernels: the loop's (PyTorch's autograd
    thread launches the backward; the iteration starts on the Python thread)."""
    known = seq.gtid[starts][seq.gtid[starts] >= 0]
    if not len(known):  # no launch calls: the process itself stands for its thread
        return int(trace.ops["gpid"].to_numpy()[seq.pos[0]]) & PID_MASK
    values, counts = np.unique(known, return_counts=True)
    return int(values[np.argmax(counts)])
