"""A memory model over a sweep: why a configuration runs out of GPU memory, and the
largest context length and batch that fit.

What PyTorch's caching allocator reserves at its most (the measured figure: its segments in nsys's
memory events, else torch's max_memory_reserved from the step marks) is modelled as

    fixed                        16 B x parameters: fp32 weights, their gradients and AdamW's two
                                 moments (known from the parameter count, not fitted)
  + a x batch.ctx.layers.d_model     activations kept for backward, growing with the tokens, the
                                     depth and the width
  + c x batch.heads.ctx^2.layers     the attention scores and softmax weights of manual attention
                                     (none with fused attention)

with a and c (bytes per element) fitted by least squares to the configurations that ran. The model
then says, for each configuration that ran out, what it would reserve, which term grew the most from
the largest run of the same model that fit, and by how much the sum is over the GPU's memory
(TARGET_INFO_GPU.totalMemory, less what is held outside torch's allocator: cuBLAS's handles and
static globals, measured). Every run that fit is also predicted by the fit on the *other* runs
(leave one out): how well the model predicts a configuration it did not see.

Plain data in and out: `sweep.memory_points` makes the points from a sweep's runs.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

FIXED_BYTES_PER_PARAM = 16  # fp32 weight + gradient + AdamW exp_avg + exp_avg_sq
TERMS = ("fixed", "activations", "attention_scores")
DEFINITIONS = {
    "measured_bytes": "the most PyTorch's caching allocator reserved (its segments in nsys's memory events; torch's "
                      "max_memory_reserved from the step marks where the export has no events)",
    "fixed": "16 B x parameters (fp32 weights, gradients, AdamW's two moments), from the parameter count",
    "activations": "a x batch.ctx.layers.d_model, a fitted (bytes per element kept for backward)",
    "attention_scores": "c x batch.heads.ctx^2.layers, c fitted (manual attention's scores and softmax weights)",
    "predicted_bytes": "fixed + activations + attention_scores: what the allocator would reserve",
    "gpu_bytes": "TARGET_INFO_GPU.totalMemory of the sweep's GPU",
    "beside_allocator_bytes": "held outside torch's allocator (cuBLAS handles, static globals; nsys, median over "
                              "the runs): the allocator has the GPU's memory less this",
    "leave_one_out_bytes": "the run predicted by the fit on the sweep's other runs (it did not see this one)",
}


def parameter_count(d_model: int, n_layers: int, vocab: int, ctx: int) -> int:
    """The capture's GPT-2 (capture/model.py): token embedding and an untied LM head (2 V d), learned
    positions (ctx d), per block 12 d^2 + 13 d (two LayerNorms, qkv, proj, the MLP's 4d), a final LayerNorm."""
    return 2 * vocab * d_model + ctx * d_model + n_layers * (12 * d_model * d_model + 13 * d_model) + 2 * d_model


@dataclass
class ConfigPoint:
    """One configuration of the sweep, as the model sees it."""

    file: str
    model: str | None
    ctx: int
    batch: int
    d_model: int
    n_layers: int
    n_heads: int
    vocab: int
    attention: str = "manual"
    status: str = "ok"  # ok (ran) | oom (ran out)
    measured_bytes: int | None = None
    measured_source: str = ""  # "nsys" (allocator's segments) | "torch" (step marks)
    beside_allocator_bytes: int | None = None
    gpu_bytes: int | None = None

    @property
    def params(self) -> int:
        return parameter_count(self.d_model, self.n_layers, self.vocab, self.ctx)

    @property
    def fixed_bytes(self) -> int:
        return FIXED_BYTES_PER_PARAM * self.params

    @property
    def activation_elements(self) -> float:
        return float(self.batch * self.ctx * self.n_layers * self.d_model)

    @property
    def score_elements(self) -> float:
        return float(self.batch * self.n_heads * self.ctx * self.ctx * self.n_layers) if self.attention == "manual" else 0.0


@dataclass
class Fit:
    bytes_per_activation: float | None  # a
    bytes_per_score: float | None  # c
    files: list[str]  # the runs it was fitted to
    rms_error: float | None = None  # root mean square of (predicted - measured) / measured over those runs


@dataclass
class Prediction:
    file: str
    model: str | None
    ctx: int
    batch: int
    status: str
    terms: dict[str, int]  # TERMS -> bytes
    predicted_bytes: int
    measured_bytes: int | None = None
    error: float | None = None  # (predicted - measured) / measured
    leave_one_out_bytes: int | None = None
    leave_one_out_error: float | None = None


@dataclass
class OutOfMemoryCell:
    """Why a configuration ran out: its predicted terms against the GPU, and what grew."""

    file: str
    model: str | None
    ctx: int
    batch: int
    predicted_bytes: int
    room_bytes: int  # the GPU's memory less what is held outside torch's allocator
    over_bytes: int  # predicted - room (> 0: does not fit)
    terms: dict[str, int]
    reference: str | None = None  # the largest run of the same model that fit
    growth: dict[str, int] = field(default_factory=dict)  # term -> bytes more than in the reference
    grew_most: str | None = None  # the term that grew the most (what outgrew the GPU)


@dataclass
class Limit:
    """The largest context length (at this batch) and the largest batch (at each context length) that fit."""

    model: str
    batch: int
    max_ctx: int | None
    max_batch_by_ctx: dict[int, int]


@dataclass
class CellPrediction:
    """A cell of the sweep's model x ctx grid that no run filled: what the fit predicts there."""

    model: str
    batch: int
    ctx: int
    predicted_bytes: int


@dataclass
class MemoryModel:
    fit: Fit | None
    gpu_bytes: int | None
    beside_allocator_bytes: int
    room_bytes: int | None
    predictions: list[Prediction] = field(default_factory=list)
    out_of_memory: list[OutOfMemoryCell] = field(default_factory=list)
    limits: list[Limit] = field(default_factory=list)
    cells_not_run: list[CellPrediction] = field(default_factory=list)  # the model x ctx grid's empty cells
    left_out: list[str] = field(default_factory=list)  # runs not modelled, and why
    note: str = ""  # why there is no fit


def fit(points: list[ConfigPoint]) -> Fit | None:
    """Least squares of (measured - fixed) on the activation and score elements; None with too few runs."""
    used = [p for p in points if p.measured_bytes is not None]
    manual = any(p.score_elements > 0 for p in used)
    unknowns = 2 if manual else 1
    if len(used) < unknowns:
        return None
    a = np.array([[p.activation_elements, p.score_elements][:unknowns] for p in used], dtype=np.float64)
    y = np.array([float(p.measured_bytes or 0) - p.fixed_bytes for p in used], dtype=np.float64)
    if np.linalg.matrix_rank(a) < unknowns:
        return None
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    out = Fit(float(coef[0]), float(coef[1]) if manual else 0.0, [p.file for p in used])
    errors = [(predict(out, p) - p.measured_bytes) / p.measured_bytes for p in used if p.measured_bytes]
    out.rms_error = float(math.sqrt(sum(e * e for e in errors) / len(errors))) if errors else None
    return out


def terms(f: Fit, p: ConfigPoint) -> dict[str, int]:
    return {"fixed": p.fixed_bytes, "activations": round((f.bytes_per_activation or 0.0) * p.activation_elements),
            "attention_scores": round((f.bytes_per_score or 0.0) * p.score_elements)}


def predict(f: Fit, p: ConfigPoint) -> int:
    return sum(terms(f, p).values())


def _with(p: ConfigPoint, **changes) -> ConfigPoint:
    return ConfigPoint(**{**asdict(p), **changes})


def largest_ctx(f: Fit, p: ConfigPoint, room: int) -> int | None:
    """The largest ctx whose prediction fits `room` at p's batch: fixed grows by 16 d per position,
    activations linearly, scores quadratically."""
    c2 = (f.bytes_per_score or 0.0) * p.batch * p.n_heads * p.n_layers if p.attention == "manual" else 0.0
    c1 = (f.bytes_per_activation or 0.0) * p.batch * p.n_layers * p.d_model + FIXED_BYTES_PER_PARAM * p.d_model
    c0 = FIXED_BYTES_PER_PARAM * parameter_count(p.d_model, p.n_layers, p.vocab, 0) - room
    if c0 >= 0:
        return None  # the weights and the optimizer's state alone do not fit
    if c2 <= 0:
        return int(-c0 / c1) if c1 > 0 else None
    return int((-c1 + math.sqrt(c1 * c1 - 4 * c2 * c0)) / (2 * c2))


def largest_batch(f: Fit, p: ConfigPoint, room: int) -> int:
    per_sample = predict(f, _with(p, batch=1)) - p.fixed_bytes
    spare = room - p.fixed_bytes
    return max(0, int(spare // per_sample)) if per_sample > 0 else 0


def _explain(f: Fit, p: ConfigPoint, room: int, fitted: list[ConfigPoint]) -> OutOfMemoryCell:
    t = terms(f, p)
    cell = OutOfMemoryCell(p.file, p.model, p.ctx, p.batch, sum(t.values()), room, sum(t.values()) - room, t)
    same = [q for q in fitted if (q.d_model, q.n_layers, q.n_heads) == (p.d_model, p.n_layers, p.n_heads)]
    if not same:  # no run of this model fit: against the largest run that did
        same = fitted
    if same:
        ref = max(same, key=lambda q: q.measured_bytes or 0)
        rt = terms(f, ref)
        cell.reference = ref.file
        cell.growth = {k: t[k] - rt[k] for k in TERMS}
        cell.grew_most = max(TERMS, key=lambda k: cell.growth[k])
    return cell


def model_sweep(points: list[ConfigPoint]) -> MemoryModel:
    """Fit the runs that fit, predict each (and each by the others), explain each OOM, give the limits."""
    left_out = []
    usable = []
    for p in points:
        if p.status == "ok" and p.measured_bytes is None:
            left_out.append(f"{p.file}: no memory figure (no memory events and no torch marks)")
        else:
            usable.append(p)
    ran = [p for p in usable if p.status == "ok"]
    gpus = [p.gpu_bytes for p in points if p.gpu_bytes]
    gpu = max(gpus) if gpus else None
    beside = [p.beside_allocator_bytes for p in ran if p.beside_allocator_bytes is not None]
    beside_bytes = int(np.median(beside)) if beside else 0
    room = gpu - beside_bytes if gpu else None
    f = fit(ran)
    out = MemoryModel(f, gpu, beside_bytes, room, left_out=left_out)
    if f is None:
        manual = any(p.score_elements > 0 for p in ran)
        if not ran:
            out.note = ("no training run with a memory figure (nsys's memory events or torch's step marks; "
                        "`nsight-tui capture` records both by default)")
        elif len(ran) < (2 if manual else 1):
            out.note = (f"{len(ran)} run(s) with a memory figure: too few to fit the activation and attention-score "
                        "terms (two unknowns with manual attention, one with fused)")
        else:  # scores / activations = ctx / d_head: runs at one ctx (GPT-2's d_head is 64 throughout) cannot part them
            out.note = (f"the {len(ran)} runs cannot tell activations from attention scores apart (their ratio is "
                        "ctx / d_head, the same in every run): add a run at another context length")
        return out
    for p in usable:
        t = terms(f, p)
        pred = Prediction(p.file, p.model, p.ctx, p.batch, p.status, t, sum(t.values()), p.measured_bytes)
        if p.measured_bytes:
            pred.error = (pred.predicted_bytes - p.measured_bytes) / p.measured_bytes
            others = fit([q for q in ran if q is not p])
            if others is not None:
                pred.leave_one_out_bytes = predict(others, p)
                pred.leave_one_out_error = (pred.leave_one_out_bytes - p.measured_bytes) / p.measured_bytes
        out.predictions.append(pred)
    if room is not None:
        out.out_of_memory = [_explain(f, p, room, ran) for p in usable if p.status == "oom"]
        seen = set()
        for p in sorted(usable, key=lambda q: (q.n_layers * q.d_model, q.ctx)):
            key = (p.model, p.d_model, p.n_layers, p.batch)
            if key in seen:
                continue
            seen.add(key)
            ctxs = sorted({q.ctx for q in usable})
            out.limits.append(Limit(p.model or p.file, p.batch, largest_ctx(f, p, room),
                                    {c: largest_batch(f, _with(p, ctx=c), room) for c in ctxs}))
    filled = {(p.model or p.file, p.batch, p.ctx) for p in usable}
    rows = {(p.model or p.file, p.batch): p for p in usable}
    for (model, batch), like in rows.items():
        for ctx in sorted({q.ctx for q in usable}):
            if (model, batch, ctx) not in filled:
                out.cells_not_run.append(CellPrediction(model, batch, ctx, predict(f, _with(like, ctx=ctx))))
    return out
