"""The tensor cores' roofline (parsers.kernels.ncu_tensor, analyses.ncu) on the real bf16 pair
(devruns/gpu_tensorroof.sh: GPT-2 small width with 4 layers, batch 4, ctx 128, bf16 autocast, the
first 40 kernels of step_1 under ncu with the hierarchical tensor roofline section).

Truths: NVIDIA's `ncu_report` module reading the report's raw metrics in this test; the GEMMs'
FLOPs by hand from the model's shapes (2·M·N·K per matmul); the capture's own FLOP counts (the
export's marks) for the attention parts; the datasheet's dense peak."""
from __future__ import annotations

import json

import pytest

from helpers.ncu_pair import BF16_EXPORT_XZ, BF16_STEM, STEM, report_xz, unpack

# small4 (capture/sizes.py): GPT-2 small's width and heads, 4 layers; the capture's batch and ctx
D_MODEL, HEADS, BATCH, CTX = 768, 12, 4, 128
TOKENS, D_HEAD = BATCH * CTX, D_MODEL // HEADS
H200_BF16_DENSE = 1979e12 / 2  # NVIDIA H200 SXM datasheet: BF16 tensor 1,979 TFLOPS with 2:4 sparsity


def mm(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * batch * m * n * k


# one transformer layer's forward GEMMs in launch order, then the next layer's first
LAYER_GEMMS = [mm(TOKENS, 3 * D_MODEL, D_MODEL),  # QKV projection
               mm(CTX, CTX, D_HEAD, BATCH * HEADS),  # attention scores Q·Kᵀ
               mm(CTX, D_HEAD, CTX, BATCH * HEADS),  # scores · V
               mm(TOKENS, D_MODEL, D_MODEL),  # output projection
               mm(TOKENS, 4 * D_MODEL, D_MODEL),  # MLP up
               mm(TOKENS, D_MODEL, 4 * D_MODEL),  # MLP down
               mm(TOKENS, 3 * D_MODEL, D_MODEL)]  # layer 1's QKV


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_tensor")
    return unpack(report_xz(BF16_STEM), folder / f"{BF16_STEM}.ncu-rep"), unpack(BF16_EXPORT_XZ,
                                                                                  folder / f"{BF16_STEM}.sqlite")


@pytest.fixture(scope="module")
def nvidia(files):
    """Per profiled kernel, every metric as NVIDIA's reader gives it: name -> (value, unit)."""
    import ncu_report

    ctx = ncu_report.load_report(str(files[0]))
    out = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            out.append({n: (act.metric_by_name(n).value(), act.metric_by_name(n).unit()) for n in act.metric_names()})
    return out


@pytest.fixture(scope="module")
def analysis(files):
    from nsight_tui.parsers.analyses import ncu
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.read.ncu_rep import read_ncu_report

    return ncu.analyse(load_trace(files[1]), read_ncu_report(files[0]))


def test_tensor_flops_are_the_gemms_shapes(analysis, nvidia):
    """Every kernel's tensor FLOPs == NVIDIA's bf16 ops-path counter; the GEMMs' == 2·M·N·K by hand."""
    assert len(analysis.kernels) == len(nvidia) == 40
    gemms = []
    for k, m in zip(analysis.kernels, nvidia):
        t = k.figures.tensor
        assert t is not None and t.tensor_flops == m["sm__ops_path_tensor_src_bf16_dst_fp32.sum"][0]
        for other in ("tf32_dst_fp32", "fp16", "fp8_sparsity_off", "fp64"):
            assert m[f"sm__ops_path_tensor_src_{other}.sum"][0] == 0
        if t.tensor_flops:
            gemms.append(int(t.tensor_flops))
            assert t.tensor_math == "bf16"
    assert gemms == LAYER_GEMMS


def test_tensor_rates_pipe_and_peak_are_nvidias(analysis, nvidia):
    to_s = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}
    checked = 0
    for k, m in zip(analysis.kernels, nvidia):
        t = k.figures.tensor
        assert t.tensor_pipe_active_pct == m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"][0]
        if not t.tensor_flops:
            assert t.tensor_pct_of_peak in (0.0, None)
            continue
        value, unit = m["gpu__time_duration.sum"]
        rate = m["sm__ops_path_tensor_src_bf16_dst_fp32.sum"][0] / (value * to_s[unit])
        assert t.tensor_flops_per_s == pytest.approx(rate, rel=1e-12)
        # ncu's own rate of the same counter agrees (its per-second is over the same elapsed time)
        assert t.tensor_flops_per_s == pytest.approx(m["sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second"][0],
                                                     rel=1e-6)
        assert t.tensor_peak_flops_per_s == H200_BF16_DENSE
        assert t.tensor_pct_of_peak == pytest.approx(100 * rate / H200_BF16_DENSE, rel=1e-12)
        # the pipe's busy share is the ops counter's own % of ncu's peak, doubled: ncu's ops-path peak
        # (8,192 per SM per cycle) is twice the dense rate the pipe runs at (why the datasheet's is used)
        assert m["sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained"][0] / \
            m["device__attribute_multiprocessor_count"][0] == 8192
        assert t.tensor_pipe_active_pct == pytest.approx(
            2 * m["sm__ops_path_tensor_src_bf16_dst_fp32.sum.pct_of_peak_sustained_elapsed"][0], rel=1e-9)
        assert k.figures.flops_per_s == pytest.approx(rate + (k.figures.fp32_flops_per_s or 0)
                                                      + (k.figures.fp64_flops_per_s or 0), rel=1e-12)
        checked += 1
    assert checked == len(LAYER_GEMMS)


def test_attention_parts_measured_equal_counted(analysis, files):
    """Per range: the tensor cores' measured FLOPs == the capture's counted FLOPs (the export's
    marks, the estimate) == the hand formula, for the two attention matmuls."""
    ranges = {p.path.rsplit("/", 1)[-1]: p for p in analysis.ranges}
    for part, flops in (("computing_attention_scores", LAYER_GEMMS[1]), ("final_matmul", LAYER_GEMMS[2])):
        p = ranges[part]
        assert p.measured_tensor_flops == flops == p.estimated_flops
        assert p.math_path == "bf16"
    step = ranges["step_1"]
    assert step.measured_tensor_flops == sum(LAYER_GEMMS)
    assert step.measured_tensor_flops / step.measured_flops > 0.9 and step.math_path == "bf16"


def test_fp32_report_has_no_tensor_counters_but_says_the_pipe(tmp_path):
    from nsight_tui.parsers.analyses import ncu
    from nsight_tui.parsers.read.ncu_rep import read_ncu_report
    from nsight_tui.render import ncu as text

    report = read_ncu_report(unpack(report_xz(STEM), tmp_path / f"{STEM}.ncu-rep"))
    doc = json.loads(json.dumps(text.report_only_json(ncu.report_only(report))))
    assert all(k["tensor_flops"] is None and k["tensor_pipe_active_pct"] is not None for k in doc["kernels"])
    assert text.tensor_rows(doc) == []
    assert "no tensor-core FLOP counters" in text.tensor_notes(doc)[0]
