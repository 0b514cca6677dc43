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


def oracle_csv(folder: Path, stem: str, report: str) -> Path | None:
    """NVIDIA's CSV for one report: `oracle/STEM_REPORT.csv`, or `.csv.xz` (the op-range
    samples' NVTX reports hold a row per op instance: megabytes that xz makes tens of KB)."""
    for suffix in (".csv", ".csv.xz"):
        path = folder / "oracle" / f"{stem}_{report}{suffix}"
        if path.exists():
            return path
    return None


def read_oracle(path: Path) -> str:
    if path.suffix == ".xz":
        import lzma

        return lzma.decompress(path.read_bytes()).decode()
    return path.read_text()


def oracle_cases() -> list[tuple[Path, Path, str]]:
    """(trace, NVIDIA's CSV, report) for every trace that has NVIDIA's CSVs beside it."""
    cases = []
    rank_folders = sorted(p for p in SAMPLES.iterdir() if p.is_dir() and (p / "oracle").is_dir())
    for folder in (SAMPLES, *rank_folders, SHARED):
        for trace in sorted(folder.glob("*.sqlite")) if folder.exists() else []:
            for report in REPORTS:
                csv_path = oracle_csv(folder, trace.stem, report)
                if csv_path is not None:
                    cases.append((trace, csv_path, report))
    return cases
