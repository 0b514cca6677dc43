"""The peaks table: TARGET_INFO_GPU names to rows, dense figures (half the datasheets' sparse
ones), ridge points, and the unknown-GPU path."""
from __future__ import annotations

import sqlite3

import pytest

from conftest import SHARED, sample_traces
from nsight_tui.parsers.kernels import peaks

NAMES = {
    "NVIDIA H200": "H200 SXM", "NVIDIA H200 NVL": "H200 NVL", "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe", "NVIDIA H100 NVL": "H100 NVL", "NVIDIA A100-SXM4-80GB": "A100 80GB SXM",
    "NVIDIA A100-SXM4-40GB": "A100 40GB", "NVIDIA A100-PCIE-40GB": "A100 40GB",
    "NVIDIA A100 80GB PCIe": "A100 80GB PCIe", "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-16GB": "V100 PCIe", "NVIDIA A10": "A10", "NVIDIA L4": "L4", "NVIDIA L40S": "L40S",
    "NVIDIA GeForce RTX 3090": "RTX 3090", "NVIDIA GeForce RTX 4090": "RTX 4090", "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200 (per GPU)",
}


@pytest.mark.parametrize("name,row", NAMES.items())
def test_gpu_names_find_their_row(name, row):
    assert peaks.lookup(name).name == row


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 3080", "NVIDIA L40", "NVIDIA A40", "", "Quadro P1000"])
def test_other_gpus_are_unknown(name):
    assert peaks.lookup(name) is None


def test_dense_figures_are_half_the_datasheet_sparse_ones():
    # H100/H200 SXM datasheet: TF32 989*, BF16 1,979*, FP8 3,958* (* with sparsity)
    h200 = peaks.lookup("NVIDIA H200")
    assert (h200.tflops["tf32"], h200.tflops["bf16"], h200.tflops["fp8"]) == (989 / 2, 1979 / 2, 3958 / 2)
    assert h200.tflops["fp32"] == 67 and h200.bandwidth_gbps == 4800
    a100 = peaks.lookup("NVIDIA A100-SXM4-80GB")  # TF32 312*, BF16 624*
    assert (a100.tflops["tf32"], a100.tflops["bf16"], a100.bandwidth_gbps) == (312 / 2, 624 / 2, 2039)
    assert "fp8" not in a100.tflops and "tf32" not in peaks.lookup("Tesla V100-SXM2-32GB").tflops


def test_ridge_point_is_peak_over_bandwidth():
    h200 = peaks.lookup("NVIDIA H200")
    assert h200.ridge("fp32") == pytest.approx(67e12 / 4.8e12)
    assert h200.ridge("tf32") == pytest.approx(494.5e12 / 4.8e12)
    assert h200.ridge("fp8") == pytest.approx(1979e12 / 4.8e12)
    assert peaks.lookup("NVIDIA A100-SXM4-40GB").ridge("fp8") is None


def test_every_row_cites_nvidia():
    for row in peaks.GPUS:
        assert "nvidia.com" in row.source and row.bandwidth_gbps > 0 and row.tflops["fp32"] > 0, row.name
        # tensor paths are never slower than the CUDA cores
        assert all(v >= row.tflops["fp32"] for v in row.tflops.values()), row.name


def test_unknown_gpu_has_no_peaks_and_says_how_to_give_them():
    choice = peaks.choose(["NVIDIA GeForce RTX 3080"], export_bandwidth=760.08e9)
    assert choice.peaks is None
    assert "--peak-tflops" in choice.note and "--peak-gbps" in choice.note and "760 GB/s" in choice.note


def test_given_peaks_override_and_fill_in():
    given = peaks.choose(["NVIDIA GeForce RTX 3080"], tflops=29.8, gbps=760).peaks
    assert given.flops_per_s("bf16") == 29.8e12 and given.bytes_per_s == 760e9
    partial = peaks.choose(["NVIDIA H200"], gbps=4000).peaks  # compute roofs from the table
    assert partial.tflops["tf32"] == 494.5 and partial.bandwidth_gbps == 4000


def test_the_samples_name_a_gpu_in_the_table():
    for path in sample_traces() + sorted(SHARED.glob("*.sqlite") if SHARED.exists() else []):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = [r[0] for r in db.execute("SELECT name FROM TARGET_INFO_GPU")]
        except sqlite3.OperationalError:
            continue
        finally:
            db.close()
        for name in names:
            assert (peaks.lookup(name) is None) == ("3080" in name), (path.name, name)
