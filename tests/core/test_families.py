"""Kernel families against every kernel name in the real exports.

Expected families below are hand decisions about what each real kernel does (the reasons are
in parsers/kernels/families.py), not values read back from the classifier. Tests on literal names run
everywhere; tests over whole traces skip when ../shared is absent (a user's clone).
"""
from __future__ import annotations

import csv
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsight_tui.parsers.kernels.families import (
    FAMILIES,
    FAMILY_KEYS,
    OTHER,
    RULES,
    classify,
    classify_names,
    describe_kernel,
    family,
    family_codes,
    rule_for,
)

from conftest import SAMPLES, SHARED, sample_traces
from helpers.xz_samples import plain

# "other" may hold at most this share of a trace's distinct kernel names and of its kernel time.
MAX_OTHER_NAMES = 0.05
MAX_OTHER_TIME = 0.01


def _real_traces() -> list[Path]:
    paths: list[Path] = []
    for folder in (SHARED, SHARED / "older"):
        if folder.is_dir():
            paths += sorted(folder.glob("*.sqlite"))
    return paths + sample_traces()


def _kernel_table(path: Path) -> list[tuple[str, int, int]]:
    """(demangled name, instances, total ns) per distinct kernel; [] when the export has no kernels."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return []
        return con.execute(
            "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
        ).fetchall()
    finally:
        con.close()


def _traces_with_kernels() -> list[Path]:
    return [p for p in _real_traces() if _kernel_table(p)]


def _needs_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present (../shared is only beside the team's checkouts)")


# ---------------------------------------------------------------------------------------------
# The table itself
# ---------------------------------------------------------------------------------------------


def test_family_keys_in_display_order():
    assert FAMILY_KEYS == (
        "gemm", "convolution", "attention", "softmax", "elementwise", "reduction",
        "normalization", "optimizer", "memory", "layout", "communication", "other",
    )
    for f in FAMILIES:
        assert f.label and len(f.description) > 40, f
        assert family(f.key) is f
    with pytest.raises(AttributeError):  # frozen
        FAMILIES[0].key = "x"  # type: ignore[misc]


def test_every_rule_names_a_real_family_and_has_examples():
    for rule in RULES:
        assert rule.family in FAMILY_KEYS and rule.family != OTHER
        assert rule.why and rule.examples, rule.family


def test_each_rule_decides_its_own_examples():
    # An example caught by an earlier rule would mean the table's order is wrong.
    for rule in RULES:
        for name in rule.examples:
            assert rule_for(name) is rule, (rule.family, name, rule_for(name))
            assert classify(name) == rule.family


# ---------------------------------------------------------------------------------------------
# Hand-checked real names (literal, always run)
# ---------------------------------------------------------------------------------------------

REAL_NAMES = {
    # GEMM: cuBLAS xmma main and split-K passes, nvJet, CUTLASS via cuBLAS, cuBLASLt split-K.
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas": "gemm",  # small_ctx128_threads
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_"
    "alignc4_execute_split_k_kernel__5x_cublas": "gemm",  # h100_2gpu_1s
    "nvjet_sm90_tst_304x128_64x3_1x2_h_bz_coopA_TNN": "gemm",  # medium_ctx1024_fwd_flash
    "nvjet_tst_96x64_64x10_1x2_h_bz_bias_TNN": "gemm",  # mfu_2gpu_before
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(T1::Params)": "gemm",  # xl
    "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, float, float, float, (bool)0,"
    " float, float, float, (bool)1, (bool)0, (bool)0, (bool)0>(cublasLt::cublasSplitKParams<T6>, "
    "const T4 *, const T10 *, T9 *, T5 *, const T6 *, const T6 *, const T11 *, const T4 *, T11 *, "
    "void *, long, T6 *, int *, T6 *, T6 *, const T6 *, const T6 *, const T6 *, const T6 *, const "
    "T6 *)": "gemm",  # small_ctx128_graphs
    "void cutlass::gemm_nn_128x128<float>(float*, float*)": "gemm",  # healthy_1pct
    "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x3_tn": "gemm",  # public profile
    "triton_tem_fused_mm_0": "gemm",  # public profile (Inductor max-autotune)
    # Attention
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
    "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, "
    "(int)4, cutlass::bfloat16_t>>, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, "
    "(bool)0, (bool)0>(flash::Flash_fwd_params)": "attention",  # mfu_2gpu_before
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
    "cga1x1x1_kernel0_0": "attention",  # medium_ctx1024_fwd_flash
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80": "attention",  # sample_traces/small_ctx128_fused
    "fmha_cutlassB_f32_aligned_64x64_k64_sm80": "attention",  # same trace, backward
    # Softmax (attention probabilities, and cross-entropy's log-softmax)
    "void <unnamed>::softmax_warp_forward<float, float, float, (int)8, (bool)0, (bool)0>(T2 *, "
    "const T1 *, int, int, int, const bool *, int, bool)": "softmax",  # xl_ctx256
    "void at::native::<unnamed>::cunn_SoftMaxBackwardSmem<(int)4, float, float, float, at::native"
    "::<unnamed>::LogSoftMaxBackwardEpilogue>(T2 *, const T4 *, const T4 *, long)": "softmax",
    "triton_per_fused__softmax_backward_data_0": "softmax",  # small_ctx128_graphs
    # Elementwise
    "void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl(at::"
    "TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::"
    "[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::"
    "array<char *, (unsigned long)2>>(int, T2, T3)": "elementwise",  # medium_ctx1024_fwd_flash
    "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast"
    "<at::native::<unnamed>::masked_fill_kernel(at::TensorIterator &, const c10::Scalar &)::"
    "[lambda() (instance 1)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::"
    "[lambda(float, bool) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) "
    "(instance 1)]>(int, T3)": "elementwise",  # masked_fill is math on a mask, not a fill
    "triton_poi_fused_div_masked_fill_view_3": "elementwise",  # small_ctx128_graphs
    "triton_poi_fused_ones_triu_2": "elementwise",  # mixes a fill with triu: not layout-only
    "add(int, float *, float *)": "elementwise",  # older/nsys2022.2_vectoradd
    # Reduction
    "void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float, at::native::"
    "func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::"
    "TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, (int)4, "
    "(int)4>>(T3)": "reduction",  # small_ctx128_threads (bias gradients)
    "triton_red_fused__unsafe_view_cat_clone_sum_transpose_view_0": "reduction",  # has a sum
    "void at::native::<unnamed>::embedding_backward_feature_kernel<float, float, long>(const T3 *,"
    " const T1 *, T1 *, int, long, int)": "reduction",
    # Normalization
    "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2, "
    "const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)": "normalization",
    "triton_per_fused_add_native_layer_norm_native_layer_norm_backward_0": "normalization",
    # Optimizer
    "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
    "TensorListMetadata<(int)2>, at::native::<unnamed>::UnaryOpFunctor<float, (int)2, (int)1, "
    "(int)1>, at::native::Sqrt<float>>(T1, T2, T3...)": "optimizer",  # xl_ctx256
    "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
    "TensorListMetadata<(int)1>, at::native::<unnamed>::BinaryOpScalarFunctor<float, (int)1, "
    "(int)1, (int)0>, std::plus<float>, float>(T1, T2, T3...)": "optimizer",
    # Memory
    "[CUDA memcpy Host-to-Device]": "memory",
    "[CUDA memset]": "memory",
    "void at::native::vectorized_elementwise_kernel<(int)2, at::native::FillFunctor<long>, std::"
    "array<char *, (unsigned long)1>>(int, T2, T3)": "memory",  # h100_2gpu_1s
    "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<"
    "(unsigned int)2>, unsigned int, (int)1, (int)128, (int)1, (int)16, (int)8>(char *, at::native"
    "::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::"
    "TensorSizeStride<T2, (unsigned int)4>, int, T2)": "memory",  # mfu_2gpu_before
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
    "TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 4)]"
    "::operator ()() const::[lambda(long) (instance 1)], std::array<char *, (unsigned long)2>, "
    "(int)4, TrivialOffsetCalculator<(int)1, unsigned int>, TrivialOffsetCalculator<(int)1, "
    "unsigned int>, at::native::memory::LoadWithCast<(int)1>, at::native::memory::StoreWithCast<"
    "(int)1>>(int, T1, T2, T4, T5, T6, T7)": "memory",
    "triton_poi_fused_clone_transpose_0": "memory",
    # Convolution and layout transposes (sample_traces/hw/conv_agshapes), batch norm (cuDNN)
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_stage3_warpsize1x2x1_g1_"
    "ffma_aligna4_alignc4_execute_kernel__5x_cudnn": "convolution",  # 'gemm' must not win
    "void cudnn::cnn::wgrad2d_grouped_direct_kernel<(bool)0, (bool)1, int, float, float, float>(cudnn::cnn::"
    "WgradGroupedDirectParams, const T4 *, const T4 *, T4 *, T6, T6)": "convolution",
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, (bool)0, (bool)1, "
    "(cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)": "layout",
    "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, (bool)1, (int)1>(T2, T2, cudnnTensorStruct, "
    "const T1 *, cudnnTensorStruct, T1 *, const T2 *, const T2 *, const T2 *, const T2 *, T2)": "normalization",
    # Communication
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "communication",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL": "communication",  # 'Reduce' must not win
}


@pytest.mark.parametrize("name,expected", sorted(REAL_NAMES.items()))
def test_hand_checked_real_names(name, expected):
    assert classify(name) == expected


def test_every_family_but_other_has_hand_checked_names():
    assert set(REAL_NAMES.values()) == set(FAMILY_KEYS) - {OTHER}


def test_unknown_and_bad_input_are_other():
    assert classify("my_custom_kernel(float *, int)") == OTHER
    assert classify("") == OTHER
    assert classify(None) == OTHER  # type: ignore[arg-type]
    assert rule_for("my_custom_kernel(float *, int)") is None


def test_classify_names_keeps_order():
    names = ["[CUDA memset]", "triton_tem_fused_mm_0", "nope"]
    assert classify_names(names) == ["memory", "gemm", OTHER]
    assert classify_names(iter(names)) == ["memory", "gemm", OTHER]


# ---------------------------------------------------------------------------------------------
# Descriptions
# ---------------------------------------------------------------------------------------------


def test_describe_well_known_kernels():
    gelu = describe_kernel(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::GeluCUDAKernelImpl(at"
        "::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() "
        "const::[lambda() (instance 2)]::operator ()() const::[lambda(float) (instance 1)], std::"
        "array<char *, (unsigned long)2>>(int, T2, T3)"
    )
    assert "GELU" in gelu and "vectorised" in gelu
    assert "memory-efficient attention" in describe_kernel("fmha_cutlassF_f32_aligned_64x64_rf_sm80")
    assert "split-K" in describe_kernel(
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4"
        "_alignc4_execute_split_k_kernel__5x_cublas"
    )
    assert "cross-entropy" in describe_kernel(
        "void at::native::<unnamed>::cunn_SoftMaxForwardSmem<(int)4, float, float, float, at::"
        "native::<unnamed>::LogSoftMaxForwardEpilogue, long>(T4 *, const T2 *, T6)"
    )
    # A name with no specific line falls back to its family's description.
    assert describe_kernel("my_custom_kernel(float *, int)") == family(OTHER).description


# ---------------------------------------------------------------------------------------------
# Whole traces
# ---------------------------------------------------------------------------------------------


def test_real_traces_are_there():
    _needs_shared()
    assert len(_traces_with_kernels()) >= 8


@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_other_is_small_in_every_trace(path: Path):
    rows = _kernel_table(path)
    if not rows:
        pytest.skip(f"{path.name} has no kernel table")
    total_ns = sum(t for _, _, t in rows)
    other = [(n, t) for n, _, t in rows if classify(n) == OTHER]
    other_ns = sum(t for _, t in other)
    listing = "\n".join(f"  {t:>12} ns  {n[:160]}" for n, t in sorted(other, key=lambda x: -x[1]))
    assert len(other) <= MAX_OTHER_NAMES * len(rows), (
        f"{path.name}: {len(other)}/{len(rows)} distinct kernels are 'other':\n{listing}"
    )
    assert other_ns <= MAX_OTHER_TIME * total_ns, (
        f"{path.name}: 'other' is {other_ns / total_ns:.2%} of kernel time:\n{listing}"
    )


# Compressed samples whose kernels no plain export has: convolution nets (cuDNN's implicit-GEMM
# convolutions, its NCHW<->NHWC transposes).
CONV_SAMPLES = ("hw/conv_agshapes", "thirdparty/lightning_resnet50_b32", "thirdparty/timm_convnext_tiny_b32")


def _all_real_names() -> set[str]:
    names: set[str] = set()
    for path in [*_real_traces(), *(plain(SAMPLES / f"{stem}.sqlite.xz") for stem in CONV_SAMPLES)]:
        names |= {n for n, _, _ in _kernel_table(path)}
    for csv_path in sorted((SHARED / "oracle").glob("*_cuda_gpu_kern_sum.csv")) if SHARED.is_dir() else []:
        with open(csv_path, newline="") as fh:
            names |= {row["Name"] for row in csv.DictReader(fh)}
    names |= _memory_op_names()
    return names


def _memory_op_names() -> set[str]:
    """nsys's memcpy/memset labels: the Operation column of NVIDIA's mem-time CSVs, plus every
    memcpy kind an export's ENUM_CUDA_MEMCPY_OPER can label ("[CUDA memcpy Peer-to-Peer]", ...)."""
    names: set[str] = set()
    if not SHARED.is_dir():
        return names
    for csv_path in sorted((SHARED / "oracle").glob("*_cuda_gpu_mem_time_sum.csv")):
        with open(csv_path, newline="") as fh:
            names |= {row["Operation"] for row in csv.DictReader(fh)}
    for path in _real_traces():
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names |= {f"[CUDA memcpy {label}]" for (label,) in con.execute("SELECT label FROM ENUM_CUDA_MEMCPY_OPER")}
        except sqlite3.OperationalError:
            pass
        finally:
            con.close()
    return names


def test_nsys_memory_op_names_are_memory():
    _needs_shared()
    names = _memory_op_names()
    assert "[CUDA memcpy Host-to-Device]" in names and "[CUDA memset]" in names
    assert {n: classify(n) for n in names} == {n: "memory" for n in names}


def test_oracle_kernel_names_all_have_a_family():
    _needs_shared()
    names = set()
    for csv_path in sorted((SHARED / "oracle").glob("*_cuda_gpu_kern_sum.csv")):
        with open(csv_path, newline="") as fh:
            names |= {row["Name"] for row in csv.DictReader(fh)}
    # NVIDIA's report names are the exports' demangled names: 135 distinct across the 8 traces.
    assert len(names) == 135
    other = sorted(n[:160] for n in names if classify(n) == OTHER)
    assert not other, "kernels left in 'other':\n" + "\n".join(other)


def test_every_rule_is_used_by_real_names():
    # Each rule must be the deciding rule for at least one real name: a rule nothing real
    # reaches is either dead or shadowed by an earlier one.
    _needs_shared()
    used = {id(rule_for(n)) for n in _all_real_names()}
    unused = [f"{r.family}: {r.pattern.pattern[:80]}" for r in RULES if id(r) not in used]
    assert not unused, unused


def test_family_time_by_hand_xl_ctx256():
    # xl_ctx256 is fp32 GPT-2 XL training: cuBLAS/CUTLASS SIMT GEMMs dominate, the foreach AdamW
    # step is the next largest, and there is no fused attention and no communication.
    _needs_shared()
    rows = _kernel_table(SHARED / "xl_ctx256.sqlite")
    total = sum(t for _, _, t in rows)
    by_sql = {}
    con = sqlite3.connect(f"file:{SHARED / 'xl_ctx256.sqlite'}?mode=ro", uri=True)
    for fam, like in (("gemm", "%gemm%"), ("optimizer", "%multi_tensor_apply_kernel%")):
        (by_sql[fam],) = con.execute(
            "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
            "s.id = k.demangledName WHERE s.value LIKE ?", (like,)
        ).fetchone()
    con.close()
    ours = {}
    for n, _, t in rows:
        ours[classify(n)] = ours.get(classify(n), 0) + t
    # Every name with 'gemm' in it is a GEMM, and the foreach kernels there are all AdamW's.
    assert ours["gemm"] == by_sql["gemm"]
    assert ours["optimizer"] == by_sql["optimizer"]
    assert ours["gemm"] / total > 0.8
    assert "attention" not in ours and "communication" not in ours


# ---------------------------------------------------------------------------------------------
# Vectorised classification
# ---------------------------------------------------------------------------------------------


def test_family_codes_matches_classify_on_a_real_trace():
    _needs_shared()
    con = sqlite3.connect(f"file:{SHARED / 'small_ctx128_graphs.sqlite'}?mode=ro", uri=True)
    names = pd.read_sql(
        "SELECT s.value AS name FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
        "s.id = k.demangledName ORDER BY k.start", con
    )["name"]
    con.close()
    assert len(names) == 13611  # README: 13,611 kernels
    codes = family_codes(names)
    assert list(codes.cat.categories) == list(FAMILY_KEYS)
    assert codes.index.equals(names.index)
    assert codes.astype(str).tolist() == [classify(n) for n in names]


def test_family_codes_million_rows_quickly_and_missing_names():
    base = list(REAL_NAMES)
    names = pd.Series(np.array(base, dtype=object)[np.arange(1_000_000) % len(base)])
    t0 = time.process_time()  # CPU time: another test process on the same cores does not count
    codes = family_codes(names)
    elapsed = time.process_time() - t0
    assert elapsed < 3.0, f"family_codes took {elapsed:.2f} s of CPU for 10^6 rows"
    expected = [REAL_NAMES[b] for b in base]
    assert codes.iloc[: len(base)].astype(str).tolist() == expected
    assert codes.iloc[len(base)] == REAL_NAMES[base[0]]

    odd = pd.Series(["[CUDA memset]", None, np.nan, "ampere_sgemm_128x64_tn"], index=[5, 6, 7, 8])
    out = family_codes(odd)
    assert out.astype(str).tolist() == ["memory", OTHER, OTHER, "gemm"]
    assert out.index.tolist() == [5, 6, 7, 8]
    assert family_codes(pd.Series([], dtype=object)).empty
