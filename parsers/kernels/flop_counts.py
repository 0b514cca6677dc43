"""Where a range's FLOPs and bytes come from: three sources, one shape.

1. **measured**: counted at capture per aten op and NVTX range path (capture.counting),
   recorded in the trace as `nsight-tui:flops {...}` marks, one per range path.
2. **analytic**: the GPT-2 formulas, from the `nsight-tui:config` mark (`analytic_counts`),
   each row with its formula.
3. **given**: a JSON file of range path -> FLOPs and bytes (`--flops FILE.json`):

       {"ranges": {"step_N":         {"flops": 2.1e12, "bytes": 9.0e10},
                   "step_N/forward": {"flops": 7.0e11, "bytes": 3.1e10, "instances": 1}}}

   Paths are range names from the outermost range down, joined by `/`, with trailing numbers
   written `N` (the aggregated tree's names: `step_3` -> `step_N`). The figures are for one
   instance of the range (for `instances` of them, if given), and include everything under it.

4. **shapes**: from PyTorch's op ranges with input shapes (parsers.kernels.shape_flops), for
   traces that `nsight-tui capture` did not make.

All of them answer `range_counts(path)`: FLOPs and bytes of one instance of the range (everything
inside it), with per-family parts where the source knows the ops (measured and analytic).
Paths are matched from the iteration range down (`whole_run/step_N/forward` finds
`step_N/forward`; `warmup_N` uses the counts of `step_N`: the same work).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.errors import TraceError

MARK_PREFIX = conventions.mark_prefix(conventions.FLOPS)
ITERATION = re.compile(r"^(step|warmup)_N$")

SOURCE_WORDS = {
    "measured": "measured at capture (aten ops under a TorchDispatchMode, one iteration)",
    "analytic": "analytic GPT-2 formulas from the capture's config",
    "given": "given by the user (--flops)",
    "shapes": "from the op shapes in PyTorch's NVTX ranges (nsys --pytorch=autograd-shapes-nvtx, "
              "emit_nvtx(record_shapes=True)): matmuls, attention and convolutions only",
}


@dataclass(frozen=True)
class OpCount:
    """One op (measured) or one formula term (analytic) inside a range path, per iteration."""

    path: str
    op: str
    family: str | None  # kernel family key (parsers.families) the op's kernels belong to
    calls: int
    flops: float
    bytes: float
    formula: str = ""


@dataclass(frozen=True)
class RangeCounts:
    """FLOPs and bytes of one instance of a range, everything inside it included."""

    path: str
    flops: float
    bytes: float
    families: dict[str, tuple[float, float]] | None  # family -> (flops, bytes); None: not known
    source: str


@dataclass
class FlopCounts:
    source: str  # measured | analytic | given | shapes
    detail: str
    rows: list[OpCount] = field(default_factory=list)
    instances: dict[str, int] = field(default_factory=dict)  # path -> times opened per iteration
    inclusive: bool = False  # given: each row is already a whole range

    @property
    def source_text(self) -> str:
        return SOURCE_WORDS.get(self.source, self.source)

    def paths(self) -> list[str]:
        return sorted({r.path for r in self.rows} | set(self.instances))

    def _match(self, path: str) -> str | None:
        """The counted path for a range path (see the module doc), or None."""
        parts = [re.sub(r"\d+$", "N", _text(p)) for p in path.split("/") if p]
        starts = [i for i, p in enumerate(parts) if ITERATION.match(p)]
        known = set(self.paths())
        candidates = []
        if starts:
            tail = parts[starts[-1]:]
            candidates += ["/".join(["step_N", *tail[1:]]), "/".join(tail)]
        candidates.append("/".join(parts))
        return next((c for c in candidates if c in known), None)

    def range_counts(self, path: str) -> RangeCounts | None:
        key = self._match(path)
        if key is None:
            return None
        per = max(1, self.instances.get(key, 1))
        if self.inclusive:
            rows = [r for r in self.rows if r.path == key]
        else:
            rows = [r for r in self.rows if r.path == key or r.path.startswith(key + "/")]
        if not rows and self.source == "shapes":
            return None  # shapes count matmuls, attention and convolutions only: a range without any is not counted, not 0
        fams: dict[str, tuple[float, float]] = {}
        for r in rows:
            if r.family is None or not (r.flops or r.bytes):
                continue  # views and bookkeeping: no family gets a row for moving nothing
            f, b = fams.get(r.family, (0.0, 0.0))
            fams[r.family] = (f + r.flops / per, b + r.bytes / per)
        known = all(r.family is not None for r in rows)  # given files know ranges, not families
        return RangeCounts(key, sum(r.flops for r in rows) / per, sum(r.bytes for r in rows) / per,
                           fams if known else None, self.source)

    def table(self) -> pd.DataFrame:
        """Every row, for exports and the report's formula list."""
        return pd.DataFrame([r.__dict__ for r in self.rows])


def _text(name: str) -> str:
    """`trainer:step_N` -> `step_N` (ranges in a named domain)."""
    return name.split(":", 1)[1] if ":" in name else name


# -- which kernel family an aten op's kernels fall in -------------------------------------------
_OP_FAMILIES = [
    # convolutions run as implicit GEMMs (cuDNN's xmma fprop/dgrad/wgrad kernels are mostly `gemm`)
    ("gemm", re.compile(r"^(mm|addmm|bmm|baddbmm|addbmm|addmv|mv|_scaled_mm|matmul|linear|_int_mm|"
                        r"convolution|_convolution|convolution_backward|cudnn_convolution\w*|miopen_convolution\w*|"
                        r"mkldnn_convolution|convolution_overrideable)$")),
    ("attention", re.compile(r"^(_scaled_dot_product_\w+|_flash_attention_\w+|_efficient_attention_\w+|"
                             r"_cudnn_attention_\w+)$")),
    ("softmax", re.compile(r"^(_softmax|_log_softmax|_softmax_backward_data|_log_softmax_backward_data)$")),
    ("normalization", re.compile(r"^(native_layer_norm\w*|_fused_rms_norm\w*|native_batch_norm\w*|"
                                 r"native_group_norm\w*)$")),
    ("optimizer", re.compile(r"^(_foreach_\w+|_fused_adamw?_\w*|_fused_sgd_\w*)$")),
    ("reduction", re.compile(r"^(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|nll_loss\w*|"
                             r"embedding_dense_backward|cumsum|prod|var_mean|std_mean)$")),
    ("memory", re.compile(r"^(copy_|_to_copy|clone|cat|embedding|index_select|gather|fill_|zero_|zeros|ones|"
                          r"zeros_like|ones_like|full|full_like|new_zeros|new_ones|new_full|scalar_tensor|"
                          r"_copy_from\w*|contiguous|stack|index|slice_scatter|select_scatter)$")),
    ("communication", re.compile(r"^(all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|send|recv|"
                                 r"allreduce_\w*|_allgather_base_|_reduce_scatter_base_)$")),
]


def op_family(op: str) -> str:
    """Kernel family (parsers.families keys) of an aten op: `aten.bmm` -> gemm. Pointwise math
    (add, mul, gelu, masked_fill, ...) is elementwise."""
    name = op.rsplit(".", 1)[-1]
    for key, rx in _OP_FAMILIES:
        if rx.match(name):
            return key
    return "elementwise"


# -- 1. measured --------------------------------------------------------------------------------
def from_marks(marks: pd.DataFrame) -> FlopCounts | None:
    """The `nsight-tui:flops` marks of a trace (None when it has none)."""
    rows: list[OpCount] = []
    instances: dict[str, int] = {}
    formulas: dict[str, str] = {}
    found = False
    for text in marks["text"] if len(marks) else []:
        if not isinstance(text, str) or not text.startswith(MARK_PREFIX):
            continue
        try:
            entry = json.loads(text[len(MARK_PREFIX):])
            path = str(entry["path"])
            if path in instances:
                continue  # every rank of a data-parallel run records the same counts: keep one
            instances[path] = int(entry.get("instances", 1))
            formulas.update(entry.get("formulas") or {})
            for op, (calls, flops, moved) in (entry.get("ops") or {}).items():
                rows.append(OpCount(path, op, op_family(op), int(calls), float(flops), float(moved)))
            found = True
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # a damaged mark (or one nested thousands deep) loses that range's counts, not the trace
    if not found:
        return None
    rows = [OpCount(r.path, r.op, r.family, r.calls, r.flops, r.bytes, formulas.get(r.op, "")) for r in rows]
    return FlopCounts("measured", "one iteration counted per aten op at capture: FLOPs from PyTorch's "
                      "flop formulas (matmuls, attention) and nsight-tui's per-element softmax/AdamW "
                      "formulas; bytes = tensors read + written (a lower bound)", rows, instances)


# -- 3. given -----------------------------------------------------------------------------------
def from_file(path: str | Path) -> FlopCounts:
    """`--flops FILE.json` (see the module doc). TraceError on a bad file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the FLOPs file ({exc.strerror})") from None
    except ValueError as exc:
        raise TraceError(f"{path}: not JSON ({exc})") from None
    except RecursionError:  # arrays or objects nested thousands deep: no FLOPs file is
        raise TraceError(f"{path}: nested too deep to be a FLOPs file") from None
    ranges = data.get("ranges") if isinstance(data, dict) else None
    if not isinstance(ranges, dict) or not ranges:
        raise TraceError(f'{path}: expected {{"ranges": {{"step_N/forward": {{"flops": F, "bytes": B}}, ...}}}}')
    rows, instances = [], {}
    for key, value in ranges.items():
        try:
            flops = float(value["flops"])
            moved = float(value.get("bytes", 0) or 0)
            count = int(value.get("instances", 1))
        except (TypeError, KeyError, ValueError):
            raise TraceError(f"{path}: range {key!r} needs numeric 'flops' (and optional 'bytes', 'instances')") from None
        if flops < 0 or moved < 0 or count < 1:
            raise TraceError(f"{path}: range {key!r}: flops and bytes must be >= 0, instances >= 1")
        norm = "/".join(re.sub(r"\d+$", "N", _text(p)) for p in str(key).split("/") if p)
        rows.append(OpCount(norm, "given", None, 1, flops, moved, f"from {path.name}"))
        instances[norm] = count
    return FlopCounts("given", f"from {path}", rows, instances, inclusive=True)


# -- 2. analytic --------------------------------------------------------------------------------
def analytic_counts(config: dict) -> FlopCounts | None:
    """GPT-2 FLOPs and bytes per range path from the capture's config (None without one).

    Shapes: d = d_model, L = n_layers, H = n_heads, d_h = d/H, V = vocab, B = batch, T = ctx,
    M = B·T tokens; P = 12·L·d² + d·V weights in matmuls (per block: QKV 3d², out d², MLP 8d²;
    the LM head d·V). FLOPs count a multiply-add as 2. Bytes: each matmul reads its inputs and
    writes its output once; e = 4 bytes for fp32, 2 for bf16 autocast (softmaxes run in fp32).
    """
    try:
        d, L, H = int(config["d_model"]), int(config["n_layers"]), int(config["n_heads"])
        V, B, T = int(config["vocab"]), int(config["batch"]), int(config["ctx"])
    except (KeyError, TypeError, ValueError):
        return None
    if min(d, L, H, V, B, T) < 1 or d % H:
        return None
    dh, M = d // H, B * T
    e = 2 if config.get("dtype") == "bf16" else 4
    train = config.get("mode", "train") != "forward"
    fused = config.get("attention") == "fused"
    P = 12 * L * d * d + d * V
    linears = [(d, 3 * d)] * L + [(d, d)] * L + [(d, 4 * d)] * L + [(4 * d, d)] * L + [(d, V)]
    lin_bytes = sum(e * (M * k + k * n + M * n) for k, n in linears)
    rows: list[OpCount] = []
    it, fwd, attn = "step_N", "step_N/forward", "step_N/forward/scaled_dot_product_attention"

    def add(path, op, family, calls, flops, moved, formula):
        rows.append(OpCount(path, op, family, calls, float(flops), float(moved), formula))

    add(fwd, "linear layers", "gemm", 4 * L + 1, 2 * P * M, lin_bytes,
        f"FLOPs 2·P·B·T, P = 12·L·d² + d·V = {P:,} matmul weights; bytes e·Σ(M·K + K·N + M·N) over the "
        f"{4 * L + 1} linears")
    add(fwd, "loss log-softmax", "softmax", 1, 5 * M * V, 8 * M * V, "FLOPs 5·B·T·V; bytes 8·B·T·V (fp32 in + out)")
    qk_flops, qk_bytes = 2 * B * H * T * T * dh, e * (2 * B * H * T * dh + B * H * T * T)
    instances = {it: 1, fwd: 1, attn: L}
    if fused:
        add(attn, "fused attention", "attention", L, L * 4 * B * H * T * T * dh, L * 4 * e * B * H * T * dh,
            "FLOPs 4·B·H·T²·d_h per layer (QKᵀ and attn@V; causal masking not discounted); "
            "bytes 4·e·B·H·T·d_h (q, k, v in, out; no T×T matrix)")
    else:
        for part in ("computing_attention_scores", "computing_softmax", "final_matmul"):
            instances[f"{attn}/{part}"] = L
        add(f"{attn}/computing_attention_scores", "QKᵀ", "gemm", L, L * qk_flops, L * qk_bytes,
            "FLOPs 2·B·H·T²·d_h per layer; bytes e·(2·B·H·T·d_h + B·H·T²)")
        add(f"{attn}/computing_softmax", "softmax", "softmax", L, L * 5 * B * H * T * T, L * 8 * B * H * T * T,
            "FLOPs 5·B·H·T² per layer (max, subtract, exp, sum, divide); bytes 8·B·H·T² (fp32 in + out)")
        add(f"{attn}/final_matmul", "attn@V", "gemm", L, L * qk_flops, L * qk_bytes,
            "FLOPs 2·B·H·T²·d_h per layer; bytes e·(B·H·T² + 2·B·H·T·d_h)")
    if train:
        bwd, opt = "step_N/backward", "step_N/optimizer"
        instances.update({bwd: 1, opt: 1})
        add(bwd, "linear layers (grad input + grad weight)", "gemm", 2 * (4 * L + 1), 4 * P * M, 2 * lin_bytes,
            "2x forward: FLOPs 4·P·B·T; bytes 2x forward's")
        if fused:
            add(bwd, "fused attention backward", "attention", L, L * 10 * B * H * T * T * dh,
                L * 8 * e * B * H * T * dh,
                "FLOPs 10·B·H·T²·d_h per layer (recomputes QKᵀ: 2.5x forward, PyTorch's formula); "
                "bytes 8·e·B·H·T·d_h")
        else:
            add(bwd, "attention matmuls backward", "gemm", 4 * L, L * 4 * qk_flops, L * 4 * qk_bytes,
                "2x forward: FLOPs 8·B·H·T²·d_h per layer")
        n_params = gpt2_parameters(d, L, V, T)
        add(opt, "AdamW", "optimizer", 1, 14 * n_params, 28 * n_params,
            f"FLOPs 14 per parameter (PyTorch's foreach AdamW), bytes 28 per parameter (p, g, m, v read; "
            f"p, m, v written, fp32), {n_params:,} parameters")
    return FlopCounts("analytic", "GPT-2 formulas from the capture's config mark: " + ", ".join(
        f"{k}={config[k]}" for k in ("d_model", "n_layers", "n_heads", "vocab", "batch", "ctx") if k in config),
        rows, instances)


def gpt2_parameters(d: int, L: int, V: int, T: int) -> int:
    """Parameters of capture.model.GPT2: embeddings V·d + T·d; per block QKV 3d²+3d, out d²+d,
    MLP 8d²+5d, two LayerNorms 4d; final LayerNorm 2d; LM head d·V (no bias)."""
    return V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d + d * V
