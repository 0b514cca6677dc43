"""Does the framework's host work run slower when the GPU keeps up with it than when it lags behind?

The TF32 steps of the every-other-step captures ran the framework's unchanged work 5-10% slower than
the fp32 steps beside them, bare too (docs/whatif.md), and not because of what one TF32 call leaves
behind (library_aftereffect.py). Where a TF32 step differs besides its kernels: the GPU keeps up
with the CPU's launches (the step is launch-bound), while behind an fp32 step's long GEMMs it lags
by tens of ms. Here the kernels are the same in every step and only the lag differs: the workload
(capture/workload.py) with `--plant host-sleep --plant-every 2`, its step-start sleep replaced by a
spin kernel of LAG_CYCLES GPU cycles (torch.cuda._sleep) queued at the start of every other step, so
in those steps the whole step's launches queue behind it; run alone, nothing synchronised inside the
step, so each phase's Python clock is the CPU's time to launch it. Writes the workload's status file
(its steps and their phases).
    python3 devruns/gpu_lag.py WORKLOAD-ARGS... --plant host-sleep --plant-every 2 --status-file F"""
from __future__ import annotations

import os
import sys

import torch

from nsight_tui.capture import plant, workload

CYCLES = int(os.environ.get("LAG_CYCLES", "80000000"))  # ~40-45 ms at an H100's clock
_step_start = plant.Planter.step_start


def step_start(self) -> None:
    if self.plant != "host-sleep":
        _step_start(self)
    elif self.on:
        torch.cuda._sleep(CYCLES)


plant.Planter.step_start = step_start  # type: ignore[method-assign]
sys.exit(workload.main(sys.argv[1:]))
