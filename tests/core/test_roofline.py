"""The roofline on the committed samples and on hand-made points: every figure against a
formula or SQL written here."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from helpers import step_sql
from conftest import SAMPLES, shared_trace
from helpers.xz_samples import plain
from nsight_tui.parsers.kernels import peaks
from nsight_tui.parsers.analyses import roofline as rl
from nsight_tui.parsers.model.iterations import STEP, iteration_ranges, phase_ranges
from nsight_tui.parsers.read.load import load_trace

COUNTED = plain(SAMPLES / "small_ctx128_counts.sqlite.xz")  # measured counts (nsight-tui:flops marks)
PLAIN = SAMPLES / "small_ctx128.sqlite"  # no counts: the analytic formulas
# GPT-2 small as captured: d 768, 12 layers, 12 heads, vocab 10,000, batch 4, ctx 128
D, L, H, V, B, T = 768, 12, 12, 10_000, 4, 128
DH, M = D // H, B * T
H200 = peaks.lookup("NVIDIA H200")
FP32_PEAK, BW = 67e12, 4.8e12
_TRACES: dict = {}


def trace(path):
    if path not in _TRACES:
        _TRACES[path] = load_trace(path)
    return _TRACES[path]


def roof(path, **kw):
    return rl.build(trace(path), **kw)


def sql(path, query, args=()):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(query, args).fetchall()
    finally:
        db.close()


RANGES = """WITH r AS (SELECT e.start, e.end, COALESCE(e.text, s.value) AS name FROM NVTX_EVENTS e
                       LEFT JOIN StringIds s ON e.textId = s.id WHERE e.eventType = 59),
             steps AS (SELECT start, end FROM r WHERE name GLOB 'step_[0-9]*')"""


def kernels_launched_in(path, range_name):
    """(durations) of kernels whose launch call started inside `range_name` within a step."""
    rows = sql(path, RANGES + """, inside AS (SELECT r.start, r.end FROM r, steps WHERE r.name = ?
                   AND r.start >= steps.start AND r.end <= steps.end)
        SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = k.correlationId
        JOIN inside ON a.start >= inside.start AND a.start <= inside.end""", (range_name,))
    return [r[0] for r in rows]


def point(flops, nbytes, ns, kernels=1, span=None, path="fp32"):
    p = rl.RooflinePoint("x", "range", "x", gpu_ns=ns, kernels=kernels, instances=1, flops=flops, bytes=nbytes,
                         source="given", math_path=path, span_ns=span, wall_ns=ns)
    return rl.fill(p, H200)


# -- the verdict rules on hand-made points --------------------------------------------------------
def test_verdicts_follow_the_ridge_and_the_idle_gpu():
    ridge = FP32_PEAK / BW
    compute = point(100e9, 100e9 / (2 * ridge), 3_000_000)  # AI = 2 x ridge
    assert compute.verdict == rl.COMPUTE and compute.intensity_flops_per_byte == pytest.approx(2 * ridge)
    assert compute.achieved_flops_per_s == pytest.approx(100e9 / 3e-3)
    assert compute.mfu == pytest.approx(100e9 / (3e-3 * FP32_PEAK))
    memory = point(1e9, 4e9, 2_000_000)  # AI 0.25
    assert memory.verdict == rl.MEMORY and memory.achieved_bytes_per_s == pytest.approx(4e9 / 2e-3)
    assert memory.attainable_flops_per_s == pytest.approx(0.25 * BW)
    idle = point(100e9, 1e9, 3_000_000, span=7_000_000)  # GPU busy 3/7 of its span
    assert idle.verdict == rl.LATENCY and "43%" in idle.reason
    tiny = point(1e6, 4e6, 2_000, kernels=1)  # 2 µs at 4e6 B / 2 µs = 2 TB/s = 42% of 4.8 TB/s
    assert tiny.verdict == rl.LATENCY and "2.0 µs" in tiny.reason
    busy_tiny = point(1e6, 8e6, 2_000)  # 4 TB/s: 83% of the roof, so the roof is what limits it
    assert busy_tiny.verdict == rl.MEMORY


def test_no_peaks_or_no_counts_is_unknown_with_the_reason():
    p = rl.fill(rl.RooflinePoint("x", "range", "x", 1000, 1, 1, 1e9, 1e9, "given", "fp32"), None)
    assert p.verdict == rl.UNKNOWN and "--peak-tflops" in p.reason and p.mfu is None
    q = rl.fill(rl.RooflinePoint("x", "range", "x", 1000, 1, 1, None, None, "none", "fp32"), H200)
    assert q.verdict == rl.UNKNOWN and "no FLOP/byte counts" in q.reason


# -- math paths from kernel names -------------------------------------------------------------------
@pytest.mark.parametrize("name,path", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", "fp32"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "tf32"),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage3_warpsize2x2x1_tensor16x8x16_kernel", "bf16"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x3_tn_align4>(T1::Params)", "tf32"),
    ("ampere_sgemm_128x64_tn", "fp32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int, T1, T2)", "fp32"),
])
def test_kernel_math_path(name, path):
    assert rl.kernel_math_path(name, {}) == path


def test_undecodable_gemm_takes_the_runs_settings():
    """nvJet names carry no input type: the run's settings say it, and an nvJet GEMM is a tensor-core
    GEMM whatever they say (a run that claims plain fp32, or says nothing: 16-bit)."""
    nvjet = "nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNT"
    assert rl.kernel_math_path(nvjet, {"dtype": "bf16"}) == "bf16"
    assert rl.kernel_math_path(nvjet, {"dtype": "fp32", "tf32": True}) == "tf32"
    assert rl.kernel_math_path(nvjet, {"dtype": "fp32"}) == "bf16"
    assert rl.kernel_math_path(nvjet, {}) == "bf16"


# -- the committed samples -------------------------------------------------------------------------
def test_sample_carries_measured_counts_equal_to_the_hand_formulas():
    r = roof(COUNTED)
    assert r.source == "measured"
    weights = 12 * L * D * D + D * V
    qk = 2 * B * H * T * T * DH
    fwd = 2 * weights * M + L * (2 * qk + 5 * B * H * T * T) + 5 * M * V
    bwd = 2 * (2 * weights * M + L * 2 * qk)
    params = V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D + D * V
    c = r.counts.range_counts
    assert c("step_N/forward").flops == fwd and c("step_N/backward").flops == bwd
    assert c("step_N/optimizer").flops == 14 * params
    assert c("step_N").flops == fwd + bwd + 14 * params
    assert c("step_N/forward/scaled_dot_product_attention/computing_softmax").bytes == 8 * B * H * T * T


def test_sample_families_add_up_to_their_range():
    r = roof(COUNTED)
    for path in ("step_N", "step_N/forward", "step_N/backward"):
        c = r.counts.range_counts(path)
        assert sum(f for f, _ in c.families.values()) == pytest.approx(c.flops, rel=1e-12)
        assert sum(b for _, b in c.families.values()) == pytest.approx(c.bytes, rel=1e-12)
    parts = [r.counts.range_counts(f"step_N/{p}") for p in ("forward", "backward", "optimizer")]
    step = r.counts.range_counts("step_N")
    assert sum(p.flops for p in parts) == step.flops and sum(p.bytes for p in parts) == step.bytes


@pytest.mark.parametrize("path", [COUNTED, PLAIN])
def test_attention_softmax_is_memory_bound(path):
    r = roof(path)
    ids = phase_ranges(r.model, iteration_ranges(r.model, STEP), "computing_softmax")
    p = r.range_point(ids, "step_N/forward/scaled_dot_product_attention/computing_softmax")
    durations = kernels_launched_in(path, "computing_softmax")
    assert len(durations) == 3 * L and p.gpu_ns == sum(durations)  # one softmax kernel per layer per step
    flops, nbytes = 3 * L * 5 * B * H * T * T, 3 * L * 8 * B * H * T * T  # 5 FLOPs, 4 B in + 4 B out each
    assert (p.flops, p.bytes) == (flops, nbytes)
    assert p.intensity_flops_per_byte == 5 / 8 < FP32_PEAK / BW
    assert p.achieved_bytes_per_s == pytest.approx(nbytes / (sum(durations) / 1e9))
    assert p.verdict == rl.MEMORY
    (k,) = r.kernel_points(ids, "step_N/forward/scaled_dot_product_attention/computing_softmax")
    assert "softmax" in k.label and k.verdict == rl.MEMORY


def mlp_gemm_durations(path):
    """Per layer, the GEMMs launched after its attention range: out-projection, then the MLP's
    two (d x 4d, 4d x d); the MLP pair is the 2nd and 3rd. Steady-state steps only."""
    rows = sql(path, RANGES + """
        SELECT a.start, k.end - k.start, k.demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = k.correlationId
        JOIN StringIds n ON n.id = k.demangledName
        JOIN steps ON a.start >= steps.start AND a.start <= steps.end
        WHERE n.value LIKE '%gemm%' ORDER BY a.start""")
    attn = sql(path, RANGES + """SELECT r.end FROM r, steps WHERE r.name = 'scaled_dot_product_attention'
                                 AND r.start >= steps.start AND r.end <= steps.end ORDER BY r.end""")
    starts = np.array([r[0] for r in rows])
    out = []
    for (end,) in attn:
        after = np.flatnonzero(starts > end)[:3]
        out += [rows[i][1] for i in after[1:3]]
    return out


@pytest.mark.parametrize("path", [COUNTED, PLAIN])
def test_large_mlp_gemms_are_compute_bound(path):
    durations = mlp_gemm_durations(path)
    assert len(durations) == 3 * L * 2
    flops = len(durations) * 2 * M * D * 4 * D
    nbytes = len(durations) * 4 * (M * D + 4 * D * D + M * 4 * D)
    assert flops / nbytes > FP32_PEAK / BW
    p = rl.RooflinePoint("MLP GEMMs", "kernel", "step_N/forward", gpu_ns=sum(durations), kernels=len(durations),
                         instances=3, flops=flops, bytes=nbytes, source="given",
                         math_path=rl.kernel_math_path(sql(path, "SELECT value FROM StringIds WHERE value LIKE "
                                                           "'sm80_xmma_gemm%' LIMIT 1")[0][0], {}))
    rl.fill(p, peaks.lookup(trace(path).info.gpus[0]))
    assert p.math_path == "fp32" and p.verdict == rl.COMPUTE
    assert p.achieved_flops_per_s == pytest.approx(flops / (sum(durations) / 1e9))


def test_gemm_family_of_the_step_is_compute_bound():
    r = roof(COUNTED)
    its = iteration_ranges(r.model, STEP)
    gemm = next(p for p in r.family_points(its, "step_N") if p.label == "gemm")
    assert gemm.verdict == rl.COMPUTE and gemm.math_path == "fp32"
    durations = sql(COUNTED, RANGES + """SELECT SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds n ON n.id = k.demangledName, steps WHERE k.start >= steps.start AND k.end <= steps.end
        AND (n.value LIKE '%gemm%' OR n.value LIKE '%splitKreduce%')""")[0][0]  # split-K passes are GEMM
    assert gemm.gpu_ns == durations


def test_step_mfu_over_the_step_period_and_the_fp32_peak():
    """MFU divides by the steps' periods (the step is its period, tests/helpers/step_sql.py)."""
    from nsight_tui.parsers.analyses.roofline import answers

    r = roof(COUNTED)
    periods = sum(it.period for it in step_sql.steps(COUNTED))
    step = next(p for p in answers(r.trace, roof=r).ranges if p.label == "step")
    assert step.wall_ns == periods
    assert step.mfu == pytest.approx(step.flops / (periods / 1e9 * FP32_PEAK))
    its = iteration_ranges(r.model, STEP)
    p = r.range_point(its, "step_N")
    assert p.flops == 3 * r.counts.range_counts("step_N").flops


def test_analytic_source_on_a_trace_without_counts():
    r = roof(PLAIN)
    assert r.source == "analytic"
    assert r.counts.range_counts("step_N").flops == roof(COUNTED).counts.range_counts("step_N").flops


def test_given_flops_file_wins(tmp_path):
    f = tmp_path / "flops.json"
    f.write_text('{"ranges": {"step_N/forward": {"flops": 1e11, "bytes": 2e9}, "step_3/backward": {"flops": 3e11}}}')
    r = roof(COUNTED, flops_file=f)
    assert r.source == "given"
    assert r.counts.range_counts("step_N/forward").flops == 1e11
    assert r.counts.range_counts("step_N/backward").bytes == 0
    assert r.counts.range_counts("step_N/optimizer") is None


def test_unknown_gpu_gives_figures_without_peaks():
    r = rl.build(load_trace(shared_trace("mock")))
    assert r.peaks.peaks is None and "RTX 3080" in r.peaks.note and "--peak-gbps" in r.peaks.note
    given = rl.build(load_trace(shared_trace("mock")), peak_tflops=29.8, peak_gbps=760)
    assert given.peaks.peaks.flops_per_s("fp32") == 29.8e12


@pytest.mark.parametrize("path", [PLAIN, COUNTED], ids=lambda p: p.stem)
def test_gemm_math_path_from_sql_time_per_gemm_name(path):
    """The math path holding the most GEMM time, over the whole trace and over each half of it:
    the time per kernel name summed by SQL (per half: the kernels starting before / from the
    median start), each GEMM name's path from its name."""
    t = trace(path)
    config = roof(path).config
    fams = rl.name_families(t)
    family = {t.op_names[c]: fams[c] for c in range(len(t.op_names))}

    def expected(rows) -> str:
        by_path: dict[str, int] = {}
        for name, ns in rows:
            if family.get(name) == "gemm":
                p = rl.kernel_math_path(name, config)
                by_path[p] = by_path.get(p, 0) + int(ns)
        return max(by_path.items(), key=lambda kv: kv[1])[0] if by_path else rl.config_math_path(config)

    whole = sql(path, "SELECT s.value, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                      "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value")
    kernels = t.ops["kind"].to_numpy() == rl.KERNEL
    assert rl.gemm_math_path(t, np.flatnonzero(kernels), config) == expected(whole)
    starts = t.ops["start"].to_numpy()
    checked = 0
    # halves of the trace by kernel start: two subsets whose GEMM mixes differ
    mid = int(np.median(starts[kernels]))
    for where, pos in (("<", np.flatnonzero(kernels & (starts < mid))), (">=", np.flatnonzero(kernels & (starts >= mid)))):
        rows = sql(path, f"SELECT s.value, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                         f"ON s.id = k.demangledName WHERE k.start {where} ? GROUP BY s.value", (mid,))
        assert rl.gemm_math_path(t, pos, config) == expected(rows)
        checked += 1
    assert checked == 2


CONV_NETS = [SAMPLES / "thirdparty" / "lightning_resnet50_b32.sqlite.xz",  # cuDNN implicit GEMMs in bf16
             SAMPLES / "thirdparty" / "timm_convnext_tiny_b32.sqlite.xz"]  # mostly depthwise: CUDA cores


def _hand_conv_path(name: str) -> str | None:
    """A convolution kernel's math, by hand from its name: the element types an implicit GEMM's name
    carries, fp32 (CUDA cores) where it carries none; None for a kernel that is no convolution."""
    low = name.lower()
    if not any(w in low for w in ("fprop", "dgrad", "wgrad", "conv")) or "nchwtonhwc" in low or "nhwctonchw" in low:
        return None
    if "bf16" in low or "f16" in low:
        return "bf16"
    return "tf32" if "tf32" in low else "fp32"


@pytest.mark.parametrize("path", CONV_NETS, ids=lambda p: p.name.split(".")[0])
def test_convolutions_judged_on_the_roof_their_names_say(path):
    """The convolution family's point takes the math path holding most of its time (SQL over the
    export's kernels, each name's path by hand): a conv net's bf16 implicit GEMMs are judged against
    the bf16 tensor-core roof, not the fp32 one; depthwise kernels stay on the CUDA cores."""
    rows = sql(plain(path), "SELECT s.value, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value")
    by_path: dict[str, int] = {}
    for name, ns in rows:
        p = _hand_conv_path(name)
        if p is not None:
            by_path[p] = by_path.get(p, 0) + int(ns)
    expected = max(by_path.items(), key=lambda kv: kv[1])[0]
    report = rl.answers(trace(path))
    conv = [p for p in report.families["step"] if p.label == "convolution"]
    assert len(conv) == 1 and conv[0].math_path == expected
    # the two nets differ: one's convolutions are tensor-core GEMMs, the other's mostly not
    assert expected == ("bf16" if "resnet" in path.name else "fp32")
