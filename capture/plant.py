"""Known causes of a slow step, planted on purpose in the GPT-2 workload, and their fixed twins.

`nsight-tui capture --plant CAUSE` (with `--no-phase-sync` where the cause hides behind the
workload's per-phase synchronise) makes runs where the cause, and what fixing it saves, are
known: the findings rules (parsers/analyses/findings.py) are tested against them. No torch at import.

| plant            | what it does in each iteration                     | fixed twin         | rule it plants          |
|------------------|----------------------------------------------------|--------------------|-------------------------|
| host-sleep       | `time.sleep(5 ms)` at the step's start (no CUDA)   | (no plant)         | host-bound-gap          |
| item             | `loss.item()` after the forward (a blocking D2H)   | (no plant)         | sync-stall              |
| item-before-step | `loss.item()` after the backward, before the step  | (no plant)         | sync-stall              |
| foreach-off      | AdamW(foreach=False): ~10 kernels per parameter    | fused-optim        | unfused-optimizer       |
| fused-optim      | AdamW(fused=True): one kernel per parameter group  | –                  | (the fix)               |
| pageable-input   | 64 MiB batch from pageable memory, blocking `.to`  | pinned-input       | pageable-memcpy         |
| pinned-input     | the same batch pinned once, `.to(non_blocking=True)`| –                 | (the fix)               |
| capturable       | eager step, AdamW(foreach=True, capturable=True)   | cuda-graph         | launch-bound            |
| cuda-graph       | that step captured once as a CUDA graph, replayed  | –                  | (the fix)               |
| ddp-one-bucket   | DDP, one gradient bucket: all-reduce after backward| (no plant)         | exposed-communication   |
| uneven-batch     | a batch 1.5x the workload's (with --plant-rank R:  | (no plant)         | straggler               |
|                  | that rank's share of uneven data, the others wait) |                    |                         |
| gelu-unfused     | the MLP's GELU as nanoGPT's manual tanh formula:   | gelu-fused         | elementwise-chain       |
|                  | 8 elementwise kernels forward, more in backward    |                    |                         |
| gelu-fused       | the same tanh GELU as one kernel (F.gelu, tanh)    | –                  | (the fix)               |
| fp32-gemm        | fp32 matmuls on the CUDA cores (precision          | `--tf32`           | fp32-gemm-without-      |
|                  | "highest", PyTorch's default); with --plant-every, | (TF32: "high")     | tensor-cores            |
|                  | TF32 ("high") in the other steps                   |                    |                         |
| attention-manual | attention written out (score GEMM, scale, mask,    | `--attention fused`| unfused-attention       |
|                  | softmax, GEMM); with --plant-every,                | (F.scaled_dot_     |                         |
|                  | F.scaled_dot_product_attention in the other steps  | product_attention) |                         |

item-before-step is logging the loss (or checking a grad norm) before `optimizer.step()`: in a
GPU-bound step the CPU runs ahead during the backward, and the sync throws that lead away, so
the optimizer's launches are no longer hidden. cuda-graph replays the same kernels as
capturable (AdamW(capturable=True) in both) with one launch per step. ddp-one-bucket's twin is
DDP's default 25 MB buckets, whose all-reduces overlap the backward. gelu-fused computes the same
function as gelu-unfused (GELU's tanh approximation, `F.gelu(x, approximate='tanh')`), so the twins
differ only in how many kernels compute it; the default model's exact (erf) GELU is also one
kernel of the same size, but another function.

TF32 is the existing `--tf32` switch (planted: fp32 GEMMs on CUDA cores; twin: `--tf32`); the plant
fp32-gemm is the same cause named as a plant, so that `--plant-every` can put the two precisions in
alternate steps of one capture (PyTorch reads the precision at each matmul, so it switches per step).
`cuda-graph` needs CUDA, training, one process and `--no-phase-sync` (nothing may synchronise
inside a captured graph); nsys then records each graph kernel (`--cuda-graph-trace=node`).
`ddp-one-bucket` needs `--ddp N`.
"""
from __future__ import annotations

import time

SLEEP_S = 0.005
INPUT_BYTES = 64 * 2**20
# Larger than any model's gradients (2.7B fp32: 10.8 GB): every parameter lands in one bucket.
ONE_BUCKET_MB = 1 << 20
GRAPH = "cuda-graph"

PLANTS = {
    "host-sleep": "time.sleep(5 ms) at each step's start, outside any CUDA call",
    "item": "loss.item() after each forward: a blocking device-to-host copy",
    "item-before-step": "loss.item() after each backward, before the optimizer step: a blocking copy that "
                        "drains the GPU's queue before the optimizer's launches",
    "foreach-off": "AdamW(foreach=False): a loop of small kernels per parameter",
    "fused-optim": "AdamW(fused=True): the fix of foreach-off",
    "pageable-input": "a 64 MiB input batch copied each step from pageable host memory, blocking",
    "pinned-input": "the same batch from pinned memory with non_blocking=True: the fix of pageable-input",
    "capturable": "the eager step with AdamW(foreach=True, capturable=True): the launch-bound twin of cuda-graph",
    GRAPH: "the step (forward, backward, capturable AdamW) captured once into a CUDA graph and replayed: "
           "the fix of launch-bound",
    "ddp-one-bucket": "DistributedDataParallel with one gradient bucket: its all-reduce waits for the whole "
                      "backward (not overlapped)",
    "uneven-batch": "a batch 1.5x the workload's: with --plant-rank R that rank's share of uneven data, which the "
                    "other ranks wait for in their all-reduces (a GPU-bound straggler of the same kernels)",
    "gelu-unfused": "the MLP's GELU written out as nanoGPT's tanh formula: a chain of elementwise kernels, "
                    "forward and backward",
    "gelu-fused": "the same tanh GELU as one kernel (F.gelu(approximate='tanh')): the fix of gelu-unfused",
    "fp32-gemm": "fp32 matmuls on the CUDA cores (PyTorch's default precision); with --plant-every, TF32 "
                 "tensor-core matmuls in the other steps (the fix, --tf32)",
    "no-autocast": "the forward without bf16 autocast (fp32 activations, TF32 matmuls with --tf32); needs --dtype "
                   "bf16: with --plant-every, bf16 autocast in the other steps (the change most runs make)",
    "attention-manual": "attention written out (score GEMM, scale, mask, softmax, GEMM); with --plant-every, "
                        "F.scaled_dot_product_attention in the other steps (the fix, --attention fused)",
}
# The MLP's activation each plant asks for (capture.model.MLP); the rest keep the model's F.gelu.
ACTIVATION = {"gelu-unfused": "gelu-manual", "gelu-fused": "gelu-tanh"}


# Plants that act inside a step, so they can act on some steps only (`every`): the change and its
# absence in one capture, on the same minute's CPU (a pair of captures measures that CPU as much).
ALTERNATING = ("host-sleep", "item", "item-before-step", "pageable-input", "fp32-gemm", "no-autocast",
               "attention-manual")


def check(plant: str, *, train: bool, cuda: bool, distributed: bool, phase_sync: bool, every: int = 1,
          tf32: bool = False, bf16: bool = False) -> None:
    """ValueError when the plant cannot run in this configuration (before any work starts)."""
    if plant and plant not in PLANTS:
        raise ValueError(f"unknown plant {plant!r}; choose from {', '.join(PLANTS)}")
    if every < 1:
        raise ValueError(f"--plant-every {every}: a number of steps, 1 or more")
    if every > 1 and plant not in ALTERNATING:
        raise ValueError(f"--plant-every needs a plant that acts inside a step: {', '.join(ALTERNATING)}")
    if plant in ("item", "item-before-step", "foreach-off", "fused-optim", "capturable", GRAPH) and not train:
        raise ValueError(f"plant {plant} needs --mode train")
    if plant == "capturable" and not cuda:
        raise ValueError("plant capturable needs CUDA (AdamW(capturable=True) keeps its state on the GPU)")
    if plant == GRAPH:
        if not cuda or distributed or phase_sync:
            raise ValueError("plant cuda-graph needs CUDA, one process and --no-phase-sync (nothing may "
                             "synchronise inside a captured graph)")
    if plant == "fp32-gemm" and tf32:
        raise ValueError("plant fp32-gemm sets the matmul precision step by step: leave out --tf32")
    if plant == "no-autocast" and not bf16:
        raise ValueError("plant no-autocast turns bf16 autocast off step by step: it needs --dtype bf16")
    if plant == "uneven-batch" and not distributed:
        raise ValueError("plant uneven-batch needs data-parallel ranks (--ddp N, and --plant-rank R for one of them)")
    if plant == "ddp-one-bucket" and not distributed:
        raise ValueError("plant ddp-one-bucket needs data-parallel ranks (--ddp N)")


def activation(plant: str) -> str:
    return ACTIVATION.get(plant, "gelu")


def batch(plant: str, size: int) -> int:
    """The batch this process runs: 1.5x under uneven-batch (at least one more)."""
    return max(size * 3 // 2, size + 1) if plant == "uneven-batch" else size


def ddp_kwargs(plant: str) -> dict:
    return {"bucket_cap_mb": ONE_BUCKET_MB} if plant == "ddp-one-bucket" else {}


def nsys_options(plant: str) -> list[str]:
    # nsys traces a graph launch as one item unless asked for its kernels one by one
    return ["--cuda-graph-trace=node"] if plant == GRAPH else []


def optimizer_kwargs(plant: str) -> dict:
    if plant == "foreach-off":
        return {"foreach": False}
    if plant == "fused-optim":
        return {"fused": True}
    if plant in ("capturable", GRAPH):
        # graph capture needs the optimizer's step count on the GPU; the eager twin runs the same
        return {"foreach": True, "capturable": True}
    # foreach=True is what CUDA picks by default; asked for explicitly so a CPU run (the
    # tests) takes the same optimizer path and counts the same ops.
    return {"foreach": True}


class Planter:
    """The per-iteration hooks of one plant (nothing for no plant)."""

    def __init__(self, plant: str, torch, device, every: int = 1):
        if plant and plant not in PLANTS:
            raise ValueError(f"unknown plant {plant!r}; choose from {', '.join(PLANTS)}")
        self.plant = plant
        self.torch = torch
        self.device = device
        self.every = every
        self.on = True  # the plant acts in this iteration (begin)
        self.host_batch = self.pinned_batch = None
        if plant in ("pageable-input", "pinned-input"):
            n = INPUT_BYTES // 4
            self.host_batch = torch.ones(n, dtype=torch.float32)
            if device.type == "cuda" and (plant == "pinned-input" or every > 1):
                # pageable on the plant's steps, the fix (pinned, non_blocking) on the others
                self.pinned_batch = self.host_batch.pin_memory()
                if plant == "pinned-input":
                    self.host_batch = self.pinned_batch

    def begin(self, name: str) -> None:
        """An iteration named `name` (`step_3`, `warmup_0`) starts: with `every` N, the plant acts
        in the iterations whose number is N-1 modulo N (step_1, step_3, ... for 2) and not in the others."""
        number = name.rsplit("_", 1)[-1]
        self.on = self.every == 1 or (number.isdigit() and int(number) % self.every == self.every - 1)
        if self.plant == "fp32-gemm":
            # "highest" keeps fp32 GEMMs on the CUDA cores; "high" lets cuBLAS use TF32 tensor cores
            self.torch.set_float32_matmul_precision("highest" if self.on else "high")

    def step_start(self) -> None:
        """At the start of each iteration, inside its range, before the forward."""
        if self.plant == "host-sleep":
            if self.on:
                time.sleep(SLEEP_S)
        elif self.host_batch is not None:
            pageable = self.plant == "pageable-input" and self.on
            source = self.host_batch if pageable or self.pinned_batch is None else self.pinned_batch
            batch = source.to(self.device, non_blocking=not pageable)
            batch.add_(1.0)  # used on the GPU, as a real input would be

    @property
    def attention(self) -> str | None:
        """This iteration's attention (capture.model's "manual" or "fused") where the plant sets it step by
        step (attention-manual: written out where it acts, fused in the other steps); None for the others."""
        if self.plant != "attention-manual":
            return None
        return "manual" if self.on else "fused"

    @property
    def autocast_off(self) -> bool:
        """This iteration's forward runs without the run's bf16 autocast (the no-autocast plant)."""
        return self.plant == "no-autocast" and self.on

    def after_forward(self, loss) -> None:
        if self.plant == "item" and self.on:
            loss.item()

    def before_optimizer(self, loss) -> None:
        if self.plant == "item-before-step" and self.on:
            loss.item()
