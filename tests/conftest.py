"""Where the real traces live. ../shared/traces is there in CI and on the team's machines,
not in a user's clone: tests that need it skip cleanly."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
SHARED = ROOT.parent / "shared" / "traces"

REPORTS = ("nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
           "cuda_gpu_mem_time_sum")


def shared_trace(name: str) -> Path:
    path = SHARED / f"{name}.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is only beside the team's checkouts)")
    return path


def sample_traces() -> list[Path]:
    return sorted(SAMPLES.glob("*.sqlite"))


def oracle_cases() -> list[tuple[Path, Path, str]]:
    """(trace, NVIDIA's CSV, report) for every trace that has NVIDIA's CSVs beside it."""
    cases = []
    rank_folders = sorted(p for p in SAMPLES.iterdir() if p.is_dir() and (p / "oracle").is_dir())
    for folder in (SAMPLES, *rank_folders, SHARED):
        for trace in sorted(folder.glob("*.sqlite")) if folder.exists() else []:
            for report in REPORTS:
                csv_path = folder / "oracle" / f"{trace.stem}_{report}.csv"
                if csv_path.exists():
                    cases.append((trace, csv_path, report))
    return cases
