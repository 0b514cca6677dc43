"""A GPT-2 style decoder LM whose attention is wrapped in NVTX ranges.

Each annotated part is a module (`Part`): its forward runs inside an NVTX range of its name
and, with backward ranges on, full backward pre/post hooks start and end `backward:<name>` on
the thread that runs its backward (PyTorch's autograd thread), so the backward of each part
can be found by name.

Imported only inside the workload process: it needs torch, which the viewer never does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nsight_tui.capture.annotate import Annotator, NullAnnotator
from nsight_tui.parsers.read.conventions import BACKWARD_PREFIX
from nsight_tui.capture.sizes import VOCAB


@dataclass(frozen=True)
class ModelDims:
    d_model: int
    n_layers: int
    n_heads: int
    ctx: int
    vocab: int = VOCAB


class Part(nn.Module):
    """`fn` run inside the NVTX range `name` (the forward's annotated parts)."""

    def __init__(self, name: str, fn, annotator: Annotator):
        super().__init__()
        self.part_name = name
        self.fn = fn
        self.nvtx = annotator

    def forward(self, *args):
        with self.nvtx.range(self.part_name):
            return self.fn(*args)


def add_backward_ranges(model: nn.Module, annotator: Annotator) -> int:
    """`backward:<part>` around each Part's backward: started when the gradient of its output
    arrives (full backward pre-hook), ended when its inputs' gradients are done (full
    backward hook). Backward runs a module's parts in reverse, so the ranges nest as the
    forward's did. Start/end ranges (see Annotator.start). Returns how many parts got hooks."""
    parts = [m for m in model.modules() if isinstance(m, Part)]
    for part in parts:
        name = BACKWARD_PREFIX + part.part_name
        open_ranges: list = []  # a stack: a part's backward could run again before it ends

        def begin(module, grad_output, name=name, open_ranges=open_ranges):
            open_ranges.append(annotator.start(name))

        def end(module, grad_input, grad_output, open_ranges=open_ranges):
            annotator.end(open_ranges.pop())

        part.register_full_backward_pre_hook(begin)
        part.register_full_backward_hook(end)
    return len(parts)


class CausalSelfAttention(nn.Module):
    def __init__(self, dims: ModelDims, attention: str, annotator: Annotator):
        super().__init__()
        if dims.d_model % dims.n_heads:
            raise ValueError(f"d_model {dims.d_model} is not divisible by n_heads {dims.n_heads}")
        self.n_heads = dims.n_heads
        self.head_dim = dims.d_model // dims.n_heads
        self.qkv = nn.Linear(dims.d_model, 3 * dims.d_model)
        self.proj = nn.Linear(dims.d_model, dims.d_model)
        self.attention = attention
        self.nvtx = annotator
        self.core = Part("scaled_dot_product_attention", self._core, annotator)
        self.scores = Part("computing_attention_scores", self._scores, annotator)
        self.softmax = Part("computing_softmax", lambda scores: torch.softmax(scores, dim=-1), annotator)
        self.final = Part("final_matmul", lambda weights, v: weights @ v, annotator)
        # Built once so the mask costs no kernels per step.
        mask = torch.tril(torch.ones(dims.ctx, dims.ctx, dtype=torch.bool))
        self.causal: torch.Tensor
        self.register_buffer("causal", mask.view(1, 1, dims.ctx, dims.ctx), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=2)
        q, k, v = (t.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        out = self.core(q, k, v)
        out = out.transpose(1, 2).contiguous().view(batch, seq, d_model)
        return self.proj(out)

    def _core(self, q, k, v) -> torch.Tensor:
        if self.attention == "fused":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.final(self.softmax(self.scores(q, k)), v)

    def _scores(self, q, k) -> torch.Tensor:
        seq = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        return scores.masked_fill(~self.causal[:, :, :seq, :seq], float("-inf"))


ACTIVATIONS = ("gelu", "gelu-tanh", "gelu-manual")


def manual_gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation written out in tensor ops, as nanoGPT's `new_gelu` does: eight
    elementwise kernels in the forward and more in the backward, each a pass over the activation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class MLP(nn.Module):
    """`activation`: gelu (F.gelu, erf: one kernel), gelu-tanh (F.gelu(approximate='tanh'): the same
    function as gelu-manual in one kernel), gelu-manual (manual_gelu: a chain of kernels)."""

    def __init__(self, d_model: int, activation: str = "gelu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, not {activation!r}")
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.activation = activation

    def act(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "gelu-manual":
            return manual_gelu(x)
        return F.gelu(x, approximate="tanh" if self.activation == "gelu-tanh" else "none")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block, as in GPT-2."""

    def __init__(self, dims: ModelDims, attention: str, annotator: Annotator, activation: str = "gelu"):
        super().__init__()
        self.ln1 = nn.LayerNorm(dims.d_model)
        self.attn = CausalSelfAttention(dims, attention, annotator)
        self.ln2 = nn.LayerNorm(dims.d_model)
        self.mlp = MLP(dims.d_model, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self, dims: ModelDims, attention: str = "manual", annotator: Annotator | None = None,
                 activation: str = "gelu"):
        super().__init__()
        if attention not in ("manual", "fused"):
            raise ValueError(f"attention must be 'manual' or 'fused', not {attention!r}")
        annotator = annotator or NullAnnotator()
        self.dims = dims
        self.wte = nn.Embedding(dims.vocab, dims.d_model)
        self.wpe = nn.Embedding(dims.ctx, dims.d_model)
        self.blocks = nn.ModuleList(Block(dims, attention, annotator, activation) for _ in range(dims.n_layers))
        self.ln_f = nn.LayerNorm(dims.d_model)
        self.lm_head = nn.Linear(dims.d_model, dims.vocab, bias=False)
        self.positions: torch.Tensor
        self.register_buffer("positions", torch.arange(dims.ctx), persistent=False)

    def set_attention(self, attention: str) -> None:
        """Every block's attention from now on: "manual" (written out) or "fused" (SDPA); the weights are
        the same either way, so a run can switch between steps (the attention-manual plant)."""
        if attention not in ("manual", "fused"):
            raise ValueError(f"attention must be 'manual' or 'fused', not {attention!r}")
        for block in self.blocks:
            assert isinstance(block, Block)
            block.attn.attention = attention

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        if seq > self.dims.ctx:
            raise ValueError(f"sequence of {seq} tokens is longer than the context length {self.dims.ctx}")
        x = self.wte(tokens) + self.wpe(self.positions[:seq])
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
