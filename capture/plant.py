"""Known causes of a slow step, planted on purpose in the GPT-2 workload, and their fixed twins.

`nsight-tui capture --plant CAUSE` (with `--no-phase-sync` where the cause hides behind the
workload's per-phase synchronise) makes runs where the cause, and what fixing it saves, are
known: the findings rules (parsers/findings.py) are tested against them. No torch at import.

| plant            | what it does in each iteration                     | fixed twin         | rule it plants          |
|------------------|----------------------------------------------------|--------------------|-------------------------|
| host-sleep       | `time.sleep(5 ms)` at the step's start (no CUDA)   | (no plant)         | host-bound-gap          |
| item             | `loss.item()` after the forward (a blocking D2H)   | (no plant)         | sync-stall              |
| foreach-off      | AdamW(foreach=False): ~10 kernels per parameter    | fused-optim        | unfused-optimizer       |
| fused-optim      | AdamW(fused=True): one kernel per parameter group  | –                  | (the fix)               |
| pageable-input   | 64 MiB batch from pageable memory, blocking `.to`  | pinned-input       | pageable-memcpy         |
| pinned-input     | the same batch pinned once, `.to(non_blocking=True)`| –                 | (the fix)               |

TF32 is the existing `--tf32` switch (planted: fp32 GEMMs on CUDA cores; twin: `--tf32`).
"""
from __future__ import annotations

import time

SLEEP_S = 0.005
INPUT_BYTES = 64 * 2**20

PLANTS = {
    "host-sleep": "time.sleep(5 ms) at each step's start, outside any CUDA call",
    "item": "loss.item() after each forward: a blocking device-to-host copy",
    "foreach-off": "AdamW(foreach=False): a loop of small kernels per parameter",
    "fused-optim": "AdamW(fused=True): the fix of foreach-off",
    "pageable-input": "a 64 MiB input batch copied each step from pageable host memory, blocking",
    "pinned-input": "the same batch from pinned memory with non_blocking=True: the fix of pageable-input",
}


def optimizer_kwargs(plant: str) -> dict:
    if plant == "foreach-off":
        return {"foreach": False}
    if plant == "fused-optim":
        return {"fused": True}
    # foreach=True is what CUDA picks by default; asked for explicitly so a CPU run (the
    # tests) takes the same optimizer path and counts the same ops.
    return {"foreach": True}


class Planter:
    """The per-iteration hooks of one plant (nothing for no plant)."""

    def __init__(self, plant: str, torch, device):
        if plant and plant not in PLANTS:
            raise ValueError(f"unknown plant {plant!r}; choose from {', '.join(PLANTS)}")
        self.plant = plant
        self.torch = torch
        self.device = device
        self.host_batch = None
        if plant in ("pageable-input", "pinned-input"):
            n = INPUT_BYTES // 4
            self.host_batch = torch.ones(n, dtype=torch.float32)
            if plant == "pinned-input" and device.type == "cuda":
                self.host_batch = self.host_batch.pin_memory()

    def step_start(self) -> None:
        """At the start of each iteration, inside its range, before the forward."""
        if self.plant == "host-sleep":
            time.sleep(SLEEP_S)
        elif self.host_batch is not None:
            blocking = self.plant == "pageable-input"
            batch = self.host_batch.to(self.device, non_blocking=not blocking)
            batch.add_(1.0)  # used on the GPU, as a real input would be

    def after_forward(self, loss) -> None:
        if self.plant == "item":
            loss.item()
