"""A kernel's kind from its demangled name, and the names that mark the phases (backward,
optimizer, the loss) in an inferred iteration."""
from __future__ import annotations

import functools
import re

from nsight_tui.parsers.read import conventions

# One forward layer's stages, by kernel kind (on the demangled name). The kernel families
# (parsers.kernels.families) sit above this layer and answer another question (what kind of work,
# for shares); a stage is a place in the layer, told by the order the kinds come in.
_KINDS: tuple[tuple[str, re.Pattern], ...] = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|mha_|_mha", re.I)),
    # a hand-written RMSNorm (a Llama's in eager PyTorch): pow, mean, add, rsqrt, mul: its rsqrt tells it
    ("norm", re.compile(r"layer_?norm|rms_?norm|LayerNorm|batch_?norm|group_?norm|instance_?norm|\bbn_(?:fw|bw)|rsqrt",
                        re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    # a CNN's: before GEMM (cuDNN's implicit-GEMM convolutions' names hold 'gemm', 'cutlass')
    ("layout", re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw", re.I)),
    ("conv", re.compile(r"[_\d](?:fprop|dgrad|wgrad)_|cudnn::cnn::|(?:dgrad|wgrad)(?:2d)?_|Convolution|convolve|conv(?:1d|2d|3d)_|"
                        r"conv_depthwise|winograd|fft2d_|im2col|_[shd]cudnn_", re.I)),
    ("gemm", re.compile(r"gemm|xmma|cutlass|cublas|nvjet|splitKreduce|matmul|wgmma|hmma|Kernel2", re.I)),
    # ReLU in eager PyTorch is a clamp at 0 (launch_clamp_scalar)
    ("activation", re.compile(r"gelu|relu|silu|swish|tanh|sigmoid|clamp_scalar|clamp_min|hardswish|mish", re.I)),
    ("add", re.compile(r"CUDAFunctor_add|AddFunctor|add_kernel|\badd\b", re.I)),
)
# The manual attention's three stages, named for what they do (conventions.INFERRED_ATTENTION_PARTS);
# model.iterations.phase_ranges meets them under the capture's names too, so the report's
# softmax-versus-matmul ratio and the roofline read them as they read an annotated capture's.
SCORES, SOFTMAX, FINAL_MATMUL = conventions.INFERRED_ATTENTION_PARTS
BACKWARD = re.compile(r"backward|_grad|grad_|Backward", re.I)
# An optimizer's kernels: a foreach or fused one's by name; a per-parameter Adam/AdamW/RMSprop's
# (foreach=False: plain elementwise kernels, one set a parameter) by its `param.addcdiv_`, an op that
# models' own code hardly uses.
OPTIMIZER = re.compile(r"multi_tensor_apply|adam|_sgd|sgd_|addcdiv", re.I)
# The loss's forward kernels (cross-entropy's log-softmax and NLL): the backward begins after them,
# with the loss gradient's own kernels (a fill of ones) before the first one named backward.
LOSS = re.compile(r"nll_loss_forward|cross_entropy|log_softmax|SoftMaxForward", re.I)
# The fill of ones `loss.backward()` launches first (the loss's gradient).
FILL = re.compile(r"FillFunctor|fill_kernel", re.I)


# The same three asked of every kernel of a cycle, position by position: each name's answer kept.
@functools.lru_cache(maxsize=1 << 16)
def is_backward(name: str) -> bool:
    return BACKWARD.search(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def is_optimizer(name: str) -> bool:
    return OPTIMIZER.search(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def is_loss(name: str) -> bool:
    return LOSS.search(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def is_fill(name: str) -> bool:
    return FILL.search(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def kernel_kind(name: str) -> str:
    """Asked once per launch, of a few hundred names: each name's answer is kept (the patterns on a
    long templated name cost tens of microseconds a launch, seconds on a generate() capture)."""
    for kind, pattern in _KINDS:
        if pattern.search(name):
            return kind
    return ""
