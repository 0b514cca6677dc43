"""Model sizes, the defaults and the output naming, shared by runner and workload (no torch here)."""
from __future__ import annotations

from dataclasses import dataclass

# name -> (d_model, n_layers, n_heads), the GPT-2 family plus a 2.7B model; `tiny` is for tests
# and smoke runs on a CPU.
MODEL_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (64, 2, 2),
    "small": (768, 12, 12),
    "medium": (1024, 24, 16),
    "large": (1280, 36, 20),
    "xl": (1600, 48, 25),
    "2.7B": (2560, 32, 32),
}
CONTEXT_LENGTHS = (128, 256, 512, 1024)
VOCAB = 10_000
DEFAULT_BATCH = 4
MODES = ("train", "forward")
DTYPES = ("fp32", "bf16")
ATTENTIONS = ("manual", "fused")

# The workload exits with this code (and writes its status file) when the GPU runs out of memory.
OOM_EXIT_CODE = 3


def output_stem(model: str, ctx: int, mode: str = "train", dtype: str = "fp32",
                attention: str = "manual", batch: int = DEFAULT_BATCH, tf32: bool = False) -> str:
    """`large_ctx512`, with a suffix for each non-default choice: `_fwd`, `_bf16`, `_tf32`,
    `_fused`, `_b8`."""
    stem = f"{model}_ctx{ctx}"
    if mode == "forward":
        stem += "_fwd"
    if dtype == "bf16":
        stem += "_bf16"
    if tf32:
        stem += "_tf32"
    if attention == "fused":
        stem += "_fused"
    if batch != DEFAULT_BATCH:
        stem += f"_b{batch}"
    return stem


@dataclass(frozen=True)
class RunSettings:
    """What one capture runs: shared by the runner's config and the workload child's."""

    model: str = "small"
    ctx: int = 128
    mode: str = "train"
    dtype: str = "fp32"
    attention: str = "manual"
    batch: int = DEFAULT_BATCH
    steps: int = 3
    warmup: int = 2
    tf32: bool = False  # TF32 tensor-core matmuls for fp32 tensors

    def metadata(self) -> dict:
        """The `nsight-tui:config` mark's keys (the workload adds device and torch); an OOM
        record carries the same, so it reads like a trace's config."""
        d_model, n_layers, n_heads = MODEL_SIZES[self.model]
        return {"model": self.model, "d_model": d_model, "n_layers": n_layers, "n_heads": n_heads,
                "vocab": VOCAB, "batch": self.batch, "ctx": self.ctx, "dtype": self.dtype, "mode": self.mode,
                "attention": self.attention, "steps": self.steps, "warmup": self.warmup, "tf32": self.tf32}
