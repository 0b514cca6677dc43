"""Short kernel names and GEMM name decoding, checked field by field on real names.

Each expected field is read off the name by hand, following the naming schemes documented in
parsers/kernels/kernel_names.py (CUTLASS's generator, cuBLAS xmma/nvJet/legacy names).
"""
from __future__ import annotations

import sqlite3

import pytest

from nsight_tui.parsers.kernels.families import classify
from nsight_tui.parsers.kernels.kernel_names import (
    decode_gemm,
    gemm_detail_lines,
    gemm_summary,
    kernel_functors,
    short_kernel_name,
)

from conftest import SHARED, sample_traces

XMMA_THREADS = (  # small_ctx128_threads: the top kernel
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas"
)
XMMA_SPLIT_K = (  # xl_ctx256: 240 calls, each right after the same config's execute_kernel
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_"
    "alignc4_execute_split_k_kernel__5x_cublas"
)
CUTLASS_SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)"
NVJET_BIAS = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"  # medium_ctx1024_fwd_flash
NVJET_LM_HEAD = "nvjet_sm90_tst_304x128_64x3_1x2_h_bz_coopA_TNN"  # same trace, 5 calls
NVJET_NO_ARCH = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"  # mfu_2gpu_before
SPLITK_REDUCE = (
    "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, float, float, float, "
    "(bool)0, float, float, float, (bool)1, (bool)0, (bool)0, (bool)0>(cublasLt::cublasSplitKParams"
    "<T6>, const T4 *, const T10 *, T9 *, T5 *, const T6 *, const T6 *, const T11 *, const T4 *, "
    "T11 *, void *, long, T6 *, int *, T6 *, T6 *, const T6 *, const T6 *, const T6 *, const T6 *,"
    " const T6 *)"
)


def _sub(d: dict, **expected) -> None:
    got = {k: d[k] for k in expected}
    assert got == expected


def test_xmma_fields_small_ctx128_threads():
    d = decode_gemm(XMMA_THREADS)
    _sub(
        d,
        library="cuBLAS", kind="xmma", op="gemm", arch="sm80", math="simt",
        precision="f32f32_f32f32_f32", a_type="f32", b_type="f32", math_type="f32",
        accum_type="f32", epilogue_type="f32", c_type=None, layout="tn", layout_c="n",
        tile="64x64x8", stages=3, warps="1x4x1", cluster=None, split_k=False, role="main",
    )
    assert d["flags"] == ["ffma", "aligna4", "alignc4"]
    assert set(d) >= {"arch", "precision", "layout", "tile", "stages", "warps", "split_k", "kind", "library"}


def test_xmma_split_k_pass():
    _sub(decode_gemm(XMMA_SPLIT_K), arch="sm80", layout="nn", tile="256x128x8", stages=3,
         warps="4x2x1", split_k=True, role="split-k reduction")


def test_cutlass_simt_via_cublas():
    d = decode_gemm(CUTLASS_SIMT)
    _sub(d, library="CUTLASS", kind="cutlass2", arch="sm80", math="simt", precision="sgemm",
         a_type="f32", b_type="f32", accum_type="f32", c_type="f32", layout="nn",
         tile="256x128x8", stages=4, warps=None, split_k=False)
    assert "align1" in d["flags"]
    nt = decode_gemm("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(T1::Params)")
    _sub(nt, layout="nt", tile="128x256x8", stages=4)


def test_nvjet_fields():
    d = decode_gemm(NVJET_BIAS)
    _sub(d, library="cuBLAS", kind="nvjet", arch="sm90", tile="256x128x64", stages=4,
         cluster="1x2", layout="tn", layout_c="t", split_k=False)
    assert "bias" in d["flags"] and d["flags"][0] == "tst"
    lm = decode_gemm(NVJET_LM_HEAD)
    _sub(lm, tile="304x128x64", stages=3, layout="tn", layout_c="n")
    assert "bias" not in lm["flags"]  # GPT-2's LM head has no bias
    _sub(decode_gemm(NVJET_NO_ARCH), arch=None, tile="192x192x64", stages=4, cluster="2x1")
    # public vLLM profile: split-K nvJet
    _sub(decode_gemm("nvjet_tst_64x32_64x16_2x2_2cta_h_bz_splitK_TNT"), split_k=True, stages=16,
         tile="64x32x64", cluster="2x2")


def test_cublaslt_split_k_reduce():
    _sub(decode_gemm(SPLITK_REDUCE), library="cuBLASLt", kind="splitKreduce", op="split-k reduce",
         split_k=True, role="split-k reduction", tile=None, arch=None)


def test_hopper_and_tensor_core_names_from_public_profiles():
    bf16 = decode_gemm(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas"
    )
    _sub(bf16, arch="sm90", math="gmma", a_type="bf16", math_type="bf16", accum_type="f32",
         epilogue_type="f32", layout="tn", tile="128x128x64", stages=None)
    assert "segment_k_off" in bf16["flags"]
    tf32 = decode_gemm(
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas"
    )
    _sub(tf32, a_type="f32", math_type="tf32", accum_type="f32", math="gmma")
    f16 = decode_gemm(
        "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize192x128x32_stage3_warpsize4x2x1_tensor16x8x16_kernel"
    )
    _sub(f16, library=None, math="tensorop", a_type="f16", accum_type="f32", tile="192x128x32",
         stages=3, warps="4x2x1")
    legacy = decode_gemm("ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn")
    _sub(legacy, library="cuBLAS", kind="cublas-legacy", arch="sm80", math="tensorop", a_type="f16",
         accum_type="f32", c_type="f16", tile="64x64x64", stages=5, layout="tn")
    assert "sliced1x2" in legacy["flags"]
    _sub(decode_gemm("ampere_sgemm_128x64_tn"), arch="sm80", math="simt", a_type="f32",
         tile="128x64", stages=None, layout="tn")
    _sub(decode_gemm("void gemmSN_TN_kernel<float, (int)128, (int)16, (int)2, (int)4, (int)4, (int)4, (bool)1>"),
         library="cuBLAS", kind="gemmSN", layout="tn", a_type="f32")
    _sub(decode_gemm("triton_tem_fused_mm_0"), library="Triton", op="mm")
    _sub(decode_gemm("triton_tem_fused_addmm_gelu_t_9"), op="addmm")


@pytest.mark.parametrize(
    "name",
    [
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
        "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, "
        "(int)4, cutlass::bfloat16_t>>, (bool)0>(flash::Flash_fwd_params)",
        "triton_poi_fused_add_addmm_view_2",  # the bias add Inductor split off an addmm
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "[CUDA memcpy Host-to-Device]",
        "add(int, float *, float *)",
        "",
        None,
    ],
)
def test_non_gemm_names_decode_to_none(name):
    assert decode_gemm(name) is None


def test_decoded_dict_is_a_fresh_copy():
    d = decode_gemm(XMMA_THREADS)
    d["flags"].append("x")
    d["tile"] = "mutated"
    again = decode_gemm(XMMA_THREADS)
    assert again["tile"] == "64x64x8" and "x" not in again["flags"]


def test_summary_and_detail_lines():
    s = gemm_summary(decode_gemm(XMMA_THREADS))
    assert s.startswith("cuBLAS xmma sm80")
    for part in ("f32 in", "f32 accumulate", "no tensor cores", "tn", "tile 64x64x8", "3 stages", "warps 1x4x1"):
        assert part in s
    assert "split-K reduction" in gemm_summary(decode_gemm(XMMA_SPLIT_K))
    lines = dict(gemm_detail_lines(decode_gemm(XMMA_THREADS)))
    assert lines["transposes"].startswith("tn: A transposed, B not transposed")
    assert lines["pipeline stages"] == "3"
    assert "cluster" not in lines  # unknown fields are left out


def _trace_names() -> list[str]:
    names: set[str] = set()
    shared = [p for folder in (SHARED, SHARED / "older") if folder.is_dir() for p in sorted(folder.glob("*.sqlite"))]
    for path in shared + sample_traces():
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names |= {n for (n,) in con.execute(
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                "ON s.id = k.demangledName")}
        except sqlite3.OperationalError:
            pass  # an export without kernels
        finally:
            con.close()
    return sorted(names)


def test_decoder_and_families_agree_on_every_real_name():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present (../shared is only beside the team's checkouts)")
    names = _trace_names()
    assert len(names) >= 136  # 135 in the current exports + older/'s add()
    gemm_not_decoded = [n for n in names if classify(n) == "gemm" and decode_gemm(n) is None]
    decoded_not_gemm = [n for n in names if classify(n) != "gemm" and decode_gemm(n) is not None]
    assert not gemm_not_decoded and not decoded_not_gemm
    # The cuBLAS/CUTLASS names of real traces decode completely: arch, tile and layout known.
    for n in names:
        d = decode_gemm(n)
        if d and d["kind"] in ("xmma", "cutlass2", "nvjet"):
            assert d["tile"] and d["layout"] and d["stages"], n


# ---------------------------------------------------------------------------------------------
# Short names
# ---------------------------------------------------------------------------------------------

SHORT = {
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::GeluCUDAKernelImpl(at::"
    "TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::"
    "[lambda() (instance 2)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *,"
    " (unsigned long)2>>(int, T2, T3)": "vectorized_elementwise_kernel<GeluCUDAKernelImpl>",
    "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast"
    "<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>"
    ">>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)":
        "elementwise_kernel<MulFunctor>",
    "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, std::array<"
    "char *, (unsigned long)3>, (int)4, TrivialOffsetCalculator<(int)2, unsigned int>, "
    "TrivialOffsetCalculator<(int)1, unsigned int>, at::native::memory::LoadWithCast<(int)2>, at::"
    "native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)":
        "unrolled_elementwise_kernel<CUDAFunctor_add>",
    "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::"
    "MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)":
        "reduce_kernel<MeanOps>",
    "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata"
    "<(int)2>, at::native::<unnamed>::TernaryOpScalarFunctor<float, (int)2, (int)2, (int)0>, at::"
    "native::LerpFunctor<float>, float>(T1, T2, T3...)":
        "multi_tensor_apply_kernel<TernaryOpScalarFunctor, LerpFunctor>",
    "void <unnamed>::softmax_warp_forward<float, float, float, (int)6, (bool)0, (bool)0>(T2 *, const"
    " T1 *, int, int, int, const bool *, int, bool)": "softmax_warp_forward",
    "void at::native::<unnamed>::cunn_SoftMaxForwardSmem<(int)4, float, float, float, at::native::"
    "<unnamed>::LogSoftMaxForwardEpilogue, long>(T4 *, const T2 *, T6)":
        "cunn_SoftMaxForwardSmem<LogSoftMaxForwardEpilogue>",
    CUTLASS_SIMT: "Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>",
    SPLITK_REDUCE: "splitKreduce_kernel",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
    "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, "
    "(int)4, cutlass::bfloat16_t>>, (bool)0>(flash::Flash_fwd_params)": "flash_fwd_kernel",
    "void <unnamed>::elementwise_kernel_with_index<int, at::native::arange_cuda_out(const c10::"
    "Scalar &, const c10::Scalar &, const c10::Scalar &, at::Tensor &)::[lambda() (instance 1)]::"
    "operator ()() const::[lambda() (instance 4)]::operator ()() const::[lambda(long) (instance 1)]"
    ">(T1, T2, function_traits<T2>::result_type *)": "elementwise_kernel_with_index<arange_cuda_out>",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "ncclDevKernel_SendRecv",
    "add(int, float *, float *)": "add",
    XMMA_THREADS: XMMA_THREADS,
    "triton_poi_fused_gelu_view_1": "triton_poi_fused_gelu_view_1",
    "[CUDA memcpy Host-to-Device]": "[CUDA memcpy Host-to-Device]",
    "": "",
}


@pytest.mark.parametrize("name,short", sorted(SHORT.items()))
def test_short_kernel_name(name, short):
    assert short_kernel_name(name) == short


def test_functors_tell_copies_from_casts():
    copy = ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::"
            "gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
            "[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() "
            "const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::"
            "[lambda(int) (instance 1)]>(int, T3)")
    cast = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::"
            "bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], "
            "std::array<char *, (unsigned long)2>>(int, T2, T3)")
    assert kernel_functors(copy) == ("direct_copy_kernel_cuda",)
    assert kernel_functors(cast) == ("bfloat16_copy_kernel_cuda",)


def test_every_real_name_gets_a_short_name():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present (../shared is only beside the team's checkouts)")
    for n in _trace_names():
        s = short_kernel_name(n)
        assert s and not s.startswith("void "), (n, s)
        # C++ signatures shrink to something scannable; flat names (xmma, triton) stay whole.
        assert s == n or len(s) <= 100, (n, s)
