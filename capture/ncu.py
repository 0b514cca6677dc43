"""Finding Nsight Compute's `ncu` and building the command that profiles one training step.

`capture --ncu` runs the same workload a second time under ncu (after the nsys capture), with the
workload bracketing one steady-state iteration by cudaProfilerStart/Stop; ncu starts with
`--profile-from-start off` and so profiles that iteration's kernels from every thread (backward's
on PyTorch's autograd thread included), and records each kernel's NVTX stack (`--nvtx`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

from nsight_tui.capture.nsys import find_tool

DEFAULT_GLOBS: tuple[str, ...] = (
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/bin/ncu",
)

# Few sections, each replayed per kernel (ncu's cost is ~20-40 replays of every kernel): speed of
# light (SM and memory throughput vs peak), the roofline's FLOP counters and DRAM bytes,
# occupancy (theoretical, achieved, limiters), launch statistics (registers, shared memory, grid)
# and the warp states (stall reasons); and the tensor cores' roofline: the hierarchical tensor
# section is the one that counts tensor-core operations by input precision
# (sm__ops_path_tensor_src_*: the FLOPs of HMMA/HGMMA instructions, which the SASS FP32 counters of
# the plain roofline never see) with their per-cycle peak; ncu picks that architecture's counters.
SECTIONS: tuple[str, ...] = ("SpeedOfLight", "SpeedOfLight_RooflineChart", "Occupancy", "LaunchStats",
                             "WarpStateStats", "SpeedOfLight_HierarchicalTensorRooflineChart")
# Collected beside the sections, by name, because the join and the tests read them directly.
METRICS: tuple[str, ...] = ("dram__bytes.sum", "sm__maximum_warps_per_active_cycle_pct", "gpu__time_duration.sum")

DEFAULT_KERNEL_LIMIT = 400  # ncu -c: a bound on the report's size should the window hold more
INSTALL_HINT = ("install Nsight Compute (https://developer.nvidia.com/nsight-compute, or the CUDA toolkit), "
                "then put ncu on PATH, set $NCU, or pass --ncu-path PATH")


def find_ncu(explicit: str | None = None, env: Mapping[str, str] | None = None,
             globs: Iterable[str] | None = None) -> Path:
    """--ncu-path, then $NCU, then PATH, then the usual install folders (newest first)."""
    return find_tool("ncu", "Nsight Compute", "--ncu-path", "NCU", INSTALL_HINT, explicit, env,
                     DEFAULT_GLOBS if globs is None else globs)


def ncu_command(ncu: Path | str, report: Path | str, app: Sequence[str],
                kernel_limit: int = DEFAULT_KERNEL_LIMIT) -> list[str]:
    """`ncu` writing REPORT (a .ncu-rep, named with its extension so ncu adds none)."""
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    return [str(ncu), "--profile-from-start", "off", "--nvtx", "-c", str(kernel_limit), *sections,
            "--metrics", ",".join(METRICS), "--export", str(report), "--force-overwrite", *app]
