"""The real nsys + Nsight Compute pair of one workload (devruns/gpu_ncu.sh, sample_traces/ncu/) and
NVIDIA's own readings of it, for the ncu tests (a module of its own, not conftest).

The export, the report (`.ncu-rep.xz`, 4.7 MB) and the oracles are committed; tests that need the
report skip cleanly where NVIDIA's reader (`pip install 'nsight-tui[ncu]'`) is not installed.
"""
from __future__ import annotations

import csv
import io
import json
import lzma
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "sample_traces" / "ncu"
STEM = "small4_ctx128"
EXPORT_XZ = FOLDER / f"{STEM}.sqlite.xz"
# the bf16 pair (devruns/gpu_tensorroof.sh): tensor-core GEMMs, the tensor roofline section, 40 kernels
BF16_STEM = "small4_ctx128_bf16"
BF16_EXPORT_XZ = FOLDER / f"{BF16_STEM}.sqlite.xz"
REPORT_PLACES = (FOLDER,)


def unpack(source: Path, target: Path) -> Path:
    """`source` (`.xz`) decompressed at `target`: a copy of the per-user decompressed one
    (xz_samples.plain: decompressing the 135 MB report takes seconds, copying it a tenth of one)."""
    from helpers.xz_samples import plain

    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(plain(source), partial)
        os.chmod(partial, 0o644)
        partial.replace(target)
    return target


def unpacked(folder: Path):
    """The pair decompressed into `folder` and read: (export, report, trace, its report's reading by
    NVIDIA's reader, the report joined to the trace by analyses.ncu)."""
    from nsight_tui.parsers.analyses import ncu
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.read.ncu_rep import read_ncu_report

    report = unpack(report_xz(), folder / f"{STEM}.ncu-rep")
    export = unpack(EXPORT_XZ, folder / f"{STEM}.sqlite")
    trace = load_trace(export)
    rep = read_ncu_report(report)
    return export, report, trace, rep, ncu.analyse(trace, rep)


def report_xz(stem: str = STEM) -> Path:
    pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report package is not installed")
    for folder in REPORT_PLACES:
        path = folder / f"{stem}.ncu-rep.xz"
        if path.exists():
            return path
    pytest.skip(f"{stem}.ncu-rep.xz is not in {', '.join(str(p) for p in REPORT_PLACES)}")


def oracle_kernels() -> list[dict]:
    """Per kernel, as the ncu_report module of Nsight Compute 2025.3.1 (extras/python) read it on the
    GPU machine: names, NVTX stacks, the metrics the tests check (value, unit), the rule results."""
    with lzma.open(FOLDER / "oracle" / f"{STEM}.ncu_report.json.xz", "rt") as f:
        return json.load(f)["kernels"]


def oracle_raw_csv() -> list[dict]:
    """`ncu --import R --page raw --csv`: one row per kernel, after a row of units."""
    with lzma.open(FOLDER / "oracle" / f"{STEM}.ncu_raw.csv.xz", "rt") as f:
        rows = list(csv.reader(io.StringIO(f.read())))
    header, units = rows[0], rows[1]
    return [{h: (v, u) for h, v, u in zip(header, row, units)} for row in rows[2:]]


def reports_read_once():
    """For a module fixture of the command-line tests (`yield from reports_read_once()`): each
    report the commands open is read by NVIDIA's reader once for the module (~2 s a read) and the
    same reading handed to every later command; nothing changes a reading once made. Keyed by the
    path as given, its size and mtime; a failed read is not kept. What the reader gives is tested
    in tests/core/test_ncu.py; these tests test what the commands make of it."""
    from nsight_tui.parsers.read import ncu_rep

    real = ncu_rep.read_ncu_report
    kept: dict = {}

    def read(path):
        try:
            st = Path(path).stat()
        except OSError:
            return real(path)
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in kept:
            kept[key] = real(path)
        return kept[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ncu_rep, "read_ncu_report", read)
        yield
