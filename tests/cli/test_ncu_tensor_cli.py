"""`nsight-tui ncu --by tensor` and `report --ncu`'s tensor table on the real bf16 pair
(sample_traces/ncu/small4_ctx128_bf16.*): each figure against NVIDIA's `ncu_report` reading of the
raw counters, and every column saying whether it is measured or the datasheet's."""
from __future__ import annotations

import csv
import io
import json

import pytest

from helpers.ncu_pair import BF16_EXPORT_XZ, BF16_STEM, report_xz, reports_read_once, unpack
from nsight_tui.cli import main

OPS = "sm__ops_path_tensor_src_bf16_dst_fp32.sum"


@pytest.fixture(scope="module", autouse=True)
def _each_report_read_once():
    yield from reports_read_once()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_tensor_cli")
    return unpack(report_xz(BF16_STEM), folder / f"{BF16_STEM}.ncu-rep"), unpack(BF16_EXPORT_XZ,
                                                                                  folder / f"{BF16_STEM}.sqlite")


def cli(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def nvidia_gemms(report) -> list[tuple[int, float, float]]:
    """(index, tensor FLOPs, tensor TFLOP/s) of each kernel whose bf16 tensor counter is non-zero,
    as NVIDIA's reader gives them: the counter over gpu__time_duration (ns)."""
    import ncu_report

    rng = ncu_report.load_report(str(report)).range_by_idx(0)
    out = []
    for i in range(rng.num_actions()):
        act = rng.action_by_idx(i)
        ops = act.metric_by_name(OPS).value()
        dur = act.metric_by_name("gpu__time_duration.sum")
        assert dur.unit() in ("ns", "nsecond")
        if ops:
            out.append((i, ops, ops / (dur.value() * 1e-9) / 1e12))
    return out


def test_by_tensor_lists_the_gemms_with_nvidias_figures(files, capsys):
    report, export = files
    out = cli(["ncu", str(report), "--trace", str(export), "--by", "tensor", "-f", "csv"], capsys)
    header, *rows = list(csv.reader(io.StringIO(out)))
    assert "tensor TFLOP/s (measured, ncu time)" in header and "peak TFLOP/s (datasheet, dense)" in header
    got = [(int(r[0]), float(r[header.index("tensor GFLOP (measured, ncu)")]),
            float(r[header.index("tensor TFLOP/s (measured, ncu time)")])) for r in rows]
    want = nvidia_gemms(report)
    assert [g[0] for g in got] == [w[0] for w in want] and len(want) == 7
    for g, w in zip(got, want):
        assert g[1] == round(w[1] / 1e9, 1) and g[2] == round(w[2], 1)
    assert all(r[header.index("precision")] == "bf16" for r in rows)


def test_text_says_what_each_tensor_figure_is(files, capsys):
    report, export = files
    flat = " ".join(cli(["ncu", str(report), "--trace", str(export), "--by", "tensor"], capsys).split())
    for words in ("tensor_flops: measured", "tensor_peak_flops_per_s: datasheet", "tensor_pipe_active_pct: measured",
                  "device: NVIDIA H200"):
        assert words in flat


def test_json_and_report_section(files, capsys):
    report, export = files
    doc = json.loads(cli(["ncu", str(report), "--trace", str(export), "-f", "json"], capsys))
    want = {i: ops for i, ops, _ in nvidia_gemms(report)}
    assert {k["index"]: k["tensor_flops"] for k in doc["kernels"] if k["tensor_flops"]} == want
    assert set(doc["tensor_basis"]) == {"tensor_flops", "tensor_flops_per_s", "tensor_pipe_active_pct",
                                        "tensor_peak_flops_per_s", "tensor_pct_of_peak"}
    assert all(v.startswith(("measured", "datasheet")) for v in doc["tensor_basis"].values())
    step = next(p for p in doc["ranges"] if p["range"] == "step_1")
    assert step["measured_tensor_flops"] == sum(want.values()) and step["measured_math_path"] == "bf16"
    md = cli(["report", str(export), "--ncu", str(report)], capsys)
    assert "### Tensor cores, per GEMM kernel name within a range" in md
    share = f"{step['measured_tensor_flops'] / step['measured_flops']:.0%} bf16"
    assert "| of which tensor cores |" in md and f"| {share} |" in md
    rep = json.loads(cli(["report", str(export), "--ncu", str(report), "-f", "json"], capsys))
    assert rep["ncu"]["kernels"] == doc["kernels"]
