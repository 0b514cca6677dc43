"""Finding Nsight Systems' `nsys` and building the exact command lines the runner runs."""
from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from nsight_tui.capture.errors import CaptureError

# Where installers put nsys, newest version first within each pattern. Nsight Compute ships a
# copy of nsys too (the GPU images here have only that one).
DEFAULT_GLOBS: tuple[str, ...] = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)

# Without --sample=none --cpuctxsw=none a three-step toy run wrote a 2.1 GB raw file.
PROFILE_OPTIONS: tuple[str, ...] = ("--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none")

INSTALL_HINT = ("install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the CUDA toolkit's "
                "nsight-systems package), then put nsys on PATH, set $NSYS, or pass --nsys PATH")


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _version_key(path: str) -> list:
    # "2025.3.1" sorts after "2024.6.2": compare the numbers, not the text.
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def candidate_paths(globs: Iterable[str] | None = None) -> list[Path]:
    found: list[Path] = []
    globs = DEFAULT_GLOBS if globs is None else globs
    for pattern in globs:
        found.extend(Path(p) for p in sorted(glob.glob(pattern), key=_version_key, reverse=True))
    return found


def find_tool(tool: str, title: str, flag: str, variable: str, install_hint: str, explicit: str | None,
              env: Mapping[str, str] | None, globs: Iterable[str]) -> Path:
    """The flag's path, then $VARIABLE, then PATH, then the usual install folders (newest first).

    A path the user named that does not work is an error, not a reason to look elsewhere:
    silently profiling with a different tool than asked for would be worse.
    """
    env = os.environ if env is None else env
    globs = tuple(globs)
    for label, value in ((flag, explicit), (f"${variable}", env.get(variable))):
        if value:
            path = Path(value).expanduser()
            if _is_executable(path):
                return path
            raise CaptureError(f"{label} {value} is not an executable file; {install_hint}")
    on_path = shutil.which(tool, path=env.get("PATH", ""))
    if on_path:
        return Path(on_path)
    for path in candidate_paths(globs):
        if _is_executable(path):
            return path
    tried = f" or in {', '.join(globs)}" if globs else ""
    raise CaptureError(f"{tool} ({title}) not found on PATH, in ${variable}{tried}; {install_hint}")


def find_nsys(explicit: str | None = None, env: Mapping[str, str] | None = None,
              globs: Iterable[str] | None = None) -> Path:
    """--nsys, then $NSYS, then PATH, then the usual install folders."""
    return find_tool("nsys", "Nsight Systems", "--nsys", "NSYS", INSTALL_HINT, explicit, env,
                     DEFAULT_GLOBS if globs is None else globs)


# `--pytorch=autograd-nvtx`: nsys turns on PyTorch's NVTX ranges (every op on the Python thread,
# every backward node on the autograd thread, with sequence numbers that pair them).
AUTOGRAD_NVTX = "--pytorch=autograd-nvtx"
# `--pytorch=autograd-shapes-nvtx`: the same ranges with each op's input shapes in its text (FLOPs
# from shapes, for traces without the capture's counted marks).
AUTOGRAD_SHAPES_NVTX = "--pytorch=autograd-shapes-nvtx"
NSYS_OP_RANGES = {"autograd-nvtx": AUTOGRAD_NVTX, "autograd-shapes-nvtx": AUTOGRAD_SHAPES_NVTX}

# GPU metrics sampling: SM active, tensor active, DRAM bandwidth, ... sampled by the GPU
# into GPU_METRICS. nsys's default rate (10 kHz) wrote 2.3M rows for a 3-second toy run; the
# capture's default is lower so an export stays small and still holds several samples per phase.
GPU_METRICS_DEFAULT_HZ = 2000


def gpu_metrics_options(frequency_hz: int) -> list[str]:
    return ["--gpu-metrics-devices=all", f"--gpu-metrics-frequency={frequency_hz}"]


# GPU memory: every cudaMalloc/cudaFree (PyTorch's caching allocator's segments) as
# CUDA_GPU_MEMORY_USAGE_EVENTS. On by default; `capture --no-memory-usage` leaves it out.
MEMORY_USAGE = "--cuda-memory-usage=true"


def profile_command(nsys: Path | str, report: Path | str, app: Sequence[str],
                    extra: Sequence[str] = ()) -> list[str]:
    """`nsys profile` writing REPORT (a .nsys-rep); options are all `--key=value` so the app starts clearly."""
    return [str(nsys), "profile", *PROFILE_OPTIONS, *extra, f"--output={report}", "--force-overwrite=false", *app]


def export_command(nsys: Path | str, report: Path | str, sqlite_path: Path | str) -> list[str]:
    return [str(nsys), "export", "--type=sqlite", f"--output={sqlite_path}", "--force-overwrite=false",
            str(report)]
