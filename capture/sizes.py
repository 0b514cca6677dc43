"""Model sizes, the defaults and the output naming, shared by runner and workload (no torch here)."""
from __future__ import annotations

from dataclasses import dataclass

from nsight_tui.parsers.read.conventions import DEFAULT_BATCH, OP_RANGE_SUFFIX

# name -> (d_model, n_layers, n_heads), the GPT-2 family plus a 2.7B model; `tiny` is for tests
# and smoke runs on a CPU. `small4` is GPT-2 small's width and heads with 4 layers instead of 12:
# the same kernels (real GEMM shapes, real occupancy) at a third of a step's kernel count, so an
# Nsight Compute pass over a whole training step (`capture --ncu`, ~20-40 replays per kernel)
# stays around a minute and a report of a few MB.
MODEL_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (64, 2, 2),
    "small4": (768, 4, 12),
    "small": (768, 12, 12),
    "medium": (1024, 24, 16),
    "large": (1280, 36, 20),
    "xl": (1600, 48, 25),
    "2.7B": (2560, 32, 32),
}
CONTEXT_LENGTHS = (128, 256, 512, 1024)
VOCAB = 10_000
MODES = ("train", "forward")
DTYPES = ("fp32", "bf16")
ATTENTIONS = ("manual", "fused")
# Op-level NVTX ranges from PyTorch: none; nsys's `--pytorch=autograd-nvtx` (nsys turns on
# PyTorch's NVTX ranges); or `torch.autograd.profiler.emit_nvtx()` around the loop (the workload
# does it). Both give `aten::…, seq = N, op_id = M` on the Python thread and the backward
# nodes' ranges on the autograd thread; nsys's `--pytorch=autograd-shapes-nvtx` adds the ops' input
# shapes to the same text.
OP_RANGES = tuple(OP_RANGE_SUFFIX)

# The workload exits with this code (and writes its status file) when the GPU runs out of memory.
OOM_EXIT_CODE = 3


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
    processes: int = 1  # >1: data-parallel, one process per GPU under torchrun (capture/ddp.py)
    op_ranges: str = "none"  # one of OP_RANGES
    backward_ranges: bool = False  # `backward:<part>` ranges on the autograd thread (module hooks)
    plant: str = ""  # a known cause planted on purpose (capture/plant.py)
    plant_every: int = 1  # the plant on every Nth iteration only (plant.Planter.begin)
    phase_sync: bool = True  # synchronise after every phase (False: once, at the step's end)
    # False: nothing synchronises inside any NVTX range, as in real training (the CPU runs ahead of
    # the GPU); the step's one synchronise comes after its range closes, so the Python step time
    # (the `nsight-tui:step` mark) is still the GPU's pace. Only with phase_sync False.
    range_sync: bool = True
    # The iteration (`step_1`) the workload brackets with cudaProfilerStart/Stop for Nsight
    # Compute (`capture --ncu`); empty: none.
    profile_step: str = ""
    # False: no NVTX range and no mark at all (a trace whose iterations, layers and
    # stages must be inferred from the kernel sequence); the step times go to the status file only.
    nvtx: bool = True

    def metadata(self) -> dict:
        """The `nsight-tui:config` mark's keys (the workload adds device and torch); an OOM
        record carries the same, so it reads like a trace's config."""
        d_model, n_layers, n_heads = MODEL_SIZES[self.model]
        return {"model": self.model, "d_model": d_model, "n_layers": n_layers, "n_heads": n_heads,
                "vocab": VOCAB, "batch": self.batch, "ctx": self.ctx, "dtype": self.dtype, "mode": self.mode,
                "attention": self.attention, "steps": self.steps, "warmup": self.warmup,
                **({"tf32": True} if self.tf32 else {}),
                **({"processes": self.processes} if self.processes > 1 else {}),
                **({"plant": self.plant} if self.plant else {}),
                **({"plant_every": self.plant_every} if self.plant_every > 1 else {}),
                **({"phase_sync": False} if not self.phase_sync else {}),
                **({"range_sync": False} if not self.range_sync else {}),
                **({"nvtx": False} if not self.nvtx else {}),
                # how the backward was annotated, only when it was (older traces have neither key)
                **({"op_ranges": self.op_ranges} if self.op_ranges != "none" else {}),
                **({"backward_ranges": True} if self.backward_ranges else {}),
                # the iteration an Nsight Compute report of the same workload profiled (capture --ncu)
                **({"profile_step": self.profile_step} if self.profile_step else {})}
