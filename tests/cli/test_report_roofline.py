"""`report` section (g) and its JSON, the sweep's MFU/bound tables, and the roofline options."""
from __future__ import annotations

import json
import shutil

import pytest

from helpers import step_sql
from conftest import SAMPLES, shared_trace
from helpers.xz_samples import plain
from nsight_tui.cli import main

COUNTED = plain(SAMPLES / "small_ctx128_counts.sqlite.xz")
D, L, H, V, B, T = 768, 12, 12, 10_000, 4, 128


def report(capsys, *args):
    code = main(["report", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_markdown_has_section_g(capsys):
    code, out, _ = report(capsys, COUNTED)
    assert code == 0
    section = out.split("## (g) How far from the hardware", 1)[1].split("## Ratios", 1)[0]
    assert "H200 SXM" in section and "FLOPs/bytes: measured" in section and "nvidia.com" in section
    softmax = next(line for line in section.splitlines() if line.startswith("| computing_softmax |"))
    assert "memory-bound" in softmax and "| 0.62 |" in softmax  # AI 5 / 8
    gemm = next(line for line in section.splitlines() if line.startswith("| gemm |"))
    assert "compute-bound" in gemm


def test_json_keys_and_figures(capsys):
    code, out, _ = report(capsys, COUNTED, "-f", "json")
    ro = json.loads(out)["roofline"]
    assert set(ro) >= {"gpu", "peaks", "peak_note", "source", "source_line", "gemm_math_path", "ranges",
                       "families", "kernels", "mfu", "formulas", "basis"}
    assert ro["gpu"] == "NVIDIA H200" and ro["source"] == "measured" and ro["gemm_math_path"] == "fp32"
    step = next(p for p in ro["ranges"] if p["label"] == "step")
    weights, qk = 12 * L * D * D + D * V, 2 * B * H * T * T * (D // H)
    params = V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D + D * V
    per_step = 3 * (2 * weights * B * T) + L * (3 * 2 * qk + 5 * B * H * T * T) + 5 * B * T * V + 14 * params
    assert step["flops"] == 3 * per_step and step["instances"] == 3
    periods = sum(it.period for it in step_sql.steps(COUNTED))  # the step is its period
    assert ro["mfu"]["step"] == step["mfu"] == pytest.approx(step["flops"] / (periods / 1e9 * 67e12))
    assert ro["peaks"]["tflops"]["fp32"] == 67.0 and ro["peaks"]["bandwidth_gbps"] == 4800.0


def test_analytic_source_shows_its_formulas(capsys):
    code, out, _ = report(capsys, SAMPLES / "small_ctx128.sqlite")
    assert "FLOPs/bytes: analytic" in out and "### Analytic formulas used" in out and "2·P·B·T" in out


def test_flops_file(tmp_path, capsys):
    f = tmp_path / "flops.json"
    f.write_text(json.dumps({"ranges": {"step_N": {"flops": 3e11, "bytes": 1.2e10}}}))
    code, out, _ = report(capsys, COUNTED, "-f", "json", "--flops", f)
    ro = json.loads(out)["roofline"]
    step = next(p for p in ro["ranges"] if p["label"] == "step")
    assert ro["source"] == "given" and step["flops"] == 3 * 3e11 and step["bytes"] == 3 * 1.2e10
    forward = next(p for p in ro["ranges"] if p["label"] == "forward")
    assert forward["flops"] is None and forward["verdict"] in ("unknown", "latency/launch-bound")


@pytest.mark.parametrize("content,needle", [("{", "not JSON"), ('{"ranges": {"x": {"bytes": 1}}}', "numeric 'flops'"),
                                            ('{"other": 1}', "expected")])
def test_bad_flops_file_is_one_line(tmp_path, capsys, content, needle):
    f = tmp_path / "flops.json"
    f.write_text(content)
    code, out, err = report(capsys, COUNTED, "--flops", f)
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1 and needle in err


@pytest.mark.parametrize("flag,value,said", [("--peak-gbps", "-5", "--peak-gbps must be a positive number"),
                                             ("--peak-tflops", "inf", "--peak-tflops must be a positive number"),
                                             ("--peak-tflops", "nan", "--peak-tflops must be a positive number"),
                                             # a zero divided the softmax/matmul ratio (an internal error)
                                             ("--batch", "0", "--batch must be a positive whole number"),
                                             ("--heads", "-2", "--heads must be a positive whole number"),
                                             ("--d-head", "0", "--d-head must be a positive whole number")])
def test_bad_number_is_one_line_naming_its_flag(capsys, flag, value, said):
    code, out, err = report(capsys, COUNTED, flag, value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and said in err


def test_fail_on_given_no_id_is_refused(capsys):
    """A CI gate whose id list came out empty must not pass silently."""
    code, _, err = report(capsys, COUNTED, "--fail-on", "")
    assert code == 2 and "--fail-on: no finding is called ''" in err


def test_unknown_gpu_line_and_given_peaks(capsys):
    mock = shared_trace("mock")
    code, out, _ = report(capsys, mock)
    assert code == 0 and "not in the peaks table" in out and "--peak-tflops" in out
    code, out, _ = report(capsys, mock, "-f", "json", "--peak-tflops", "29.8", "--peak-gbps", "760")
    assert json.loads(out)["roofline"]["peaks"]["bandwidth_gbps"] == 760.0


def test_sweep_gains_mfu_and_bound_tables(tmp_path, capsys):
    shutil.copyfile(COUNTED, tmp_path / "small_ctx128.sqlite")
    code, single, _ = report(capsys, tmp_path / "small_ctx128.sqlite", "-f", "json")
    step = next(p for p in json.loads(single)["roofline"]["ranges"] if p["label"] == "step")
    code, out, _ = report(capsys, tmp_path)
    assert code == 0
    mfu = out.split("### MFU of the step", 1)[1].split("###", 1)[0]
    assert f"| small | {100 * step['mfu']:.1f}% (fp32) |" in mfu
    bound = out.split("### Bound: forward / backward / step", 1)[1].split("###", 1)[0]
    assert "| small | latency / compute / latency |" in bound
