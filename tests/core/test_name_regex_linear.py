"""Kernel and range names are untrusted and can be megabytes long: every regex that reads
them must cost linear time (rule 4's `\\w*copy_kernel_cuda` took 30 s on a 100k-
character name and never finished on 10 MB). Each pattern of parsers/kernels/families.py and
parsers/kernels/kernel_names.py, and every public name function, runs here on 1 MB names built to
trigger backtracking (runs of one character, a pattern's own literals repeated, deep
brackets). No timing assertion: a superlinear pattern simply does not finish."""
from __future__ import annotations

import re

import pytest

from nsight_tui.parsers.kernels import families, kernel_names
from nsight_tui.parsers.model import op_ranges
from nsight_tui.parsers.model.ranges import path_key

MB = 1 << 20


def _patterns():
    found = [(f"rule {i} ({r.family})", r.pattern) for i, r in enumerate(families.RULES)]
    found += [(f"describe: {p.pattern[:40]}", p) for p, _ in families._KERNEL_WORDS]
    for module in (families, kernel_names, op_ranges):
        found += [(f"{module.__name__}.{k}", v) for k, v in vars(module).items() if isinstance(v, re.Pattern)]
    return found


def _fill(piece: str, tail: str = "-", size: int = MB) -> str:
    return piece * (size // max(1, len(piece)) + 1) + tail


GENERIC = {
    "spaces": _fill(" "), "letters": _fill("a"), "digits": _fill("1", "x"), "underscores": _fill("_"),
    "a_1x": _fill("a_1x"), "colons": _fill("a::"), "lt": _fill("<"), "nested parens": "(" * (MB // 2) + ")" * (MB // 2),
    "nested brackets": "f<" + "[(" * (MB // 4) + ")]" * (MB // 4) + ">(int)", "unclosed": _fill("(["),
    "1x1": _fill("1x"), "template": "void at::native::k<" + _fill("T1, ") + ">(int)",
}


SHORT = {k: v[:128 << 10] + "-" for k, v in GENERIC.items() if "nested" not in k}
SHORT["nested parens"] = "(" * (64 << 10) + ")" * (64 << 10)


def _own_shapes(pattern: re.Pattern) -> list[str]:
    """Names made of the pattern's own words: they get past its literal prefixes."""
    words = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", pattern.pattern)), key=len, reverse=True)[:6]
    size = 128 << 10
    return [_fill(w + tail, "-", size) for w in words for tail in ("", "_1x ")]


@pytest.mark.parametrize("label,pattern", _patterns(), ids=[p[0] for p in _patterns()])
def test_every_pattern_is_linear_on_long_names(label, pattern):
    """Each pattern alone on 128 KB names (a quadratic one needs ~10^10 steps here); the
    1 MB names go through the public functions below, which run every pattern."""
    for name in [*SHORT.values(), *_own_shapes(pattern)]:
        pattern.search(name)
        pattern.match(name)


@pytest.mark.parametrize("shape", list(GENERIC) + ["cutlass", "triton_tem", "xmma", "nvjet", "legacy", "mangled nccl"])
def test_name_functions_finish_on_1mb_names(shape):
    extra = {
        "cutlass": _fill("cutlass_80_simt_"), "triton_tem": "triton_tem_fused_" + _fill("a_1"),
        "xmma": "sm80_xmma_gemm_" + _fill("f32_tn_"), "nvjet": "nvjet_sm90_tst_" + _fill("1x2_"),
        "legacy": "ampere_sgemm_" + _fill("_x1"), "mangled nccl": _fill("_Z22ncclDevKernel"),
    }
    name = GENERIC.get(shape) or extra[shape]
    families.classify(name)
    families.rule_for(name)
    families.describe_kernel(name)
    kernel_names.short_kernel_name(name)
    kernel_names.kernel_functors(name)
    kernel_names.decode_gemm(name)
    kernel_names.table_name(name)
    path_key(name)
    op_ranges.fold_name(name)


def test_regex_rewrites_keep_their_meaning():
    """The linear forms match what the old ones matched on the names they exist for."""
    assert families.classify("void at::native::<unnamed>::multi_tensor_apply_kernel<M, F, at::native::Copy<float, "
                             "float>>(T1, T2, T3...)") == "memory"
    assert families.classify("void at::native::elementwise_kernel<128, 2, direct_copy_kernel_cuda>") == "memory"
    assert families.classify("  [CUDA memcpy Host-to-Device]") == "memory"
    # cuDNN's convolve_*sgemm kernels, the word run between bounded (an unbounded `\w*` was
    # quadratic on a name of repeated `convolve_`: 19 s on 128 KB)
    assert families.classify("void cudnn::detail::precomputed_convolve_sgemm<float, 1024, 5, 5, 4, 3, 3, 1, "
                             "false>(int, int, int, float const*, int, float*)") == "convolution"
    assert families.classify("void convolve_common_engine_sgemm<float>(int)") == "convolution"
    assert "cuDNN fused attention forward" in families.describe_kernel(
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7")
    assert "CUDA cores" in families.describe_kernel("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_"
                                                    "warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas")
    assert "all-reduce" in families.describe_kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs")
    assert kernel_names.decode_gemm("triton_tem_fused_addmm_1")["op"] == "addmm"
    assert kernel_names.kernel_functors("void k<F<(int)4>, G[2], H<float>>(int)") == ("F", "G", "H")
    assert path_key("step_12") == "step_N" and path_key("a1b22") == "a1bN"


GLOBS = ["*", "**", "a*", "*a", "a*a", "*ab*ba*", "void*kernel*", "*<4, at::*(*", "x", "", "*a*a*a*", "ab*b", "*?*",
         "a[bc]*", "*softmax*", "a**b"]
GLOB_NAMES = ["", "a", "aa", "aba", "abba", "ab", "ba", "void k<4, at::f>(int) kernel", "void kernel", "abab", "xab",
              "softmax_warp", "a_softmax_b", "ac", "abc", "x"]


@pytest.mark.parametrize("pattern", GLOBS)
def test_the_replays_glob_is_fnmatch(pattern):
    """replay.edits.glob_match against the standard library's fnmatchcase, every pair."""
    import fnmatch

    from nsight_tui.parsers.replay.edits import glob_match

    for name in GLOB_NAMES:
        assert glob_match(name, pattern) == fnmatch.fnmatchcase(name, pattern), (name, pattern)


def test_the_replays_glob_on_a_10mb_name():
    """A glob of text and stars on a 10 MB name: it answers (fnmatch's regex backtracks at each star)."""
    from nsight_tui.parsers.replay.edits import glob_match

    name = "void k<" + "b" * (10 * MB) + ">"
    assert not glob_match(name, "*softmax_warp_forward*") and glob_match(name, "void*b>")
    assert not glob_match(name, "*AUnaryFunctor*bool*") and glob_match(name, "*k<b*b*>")
