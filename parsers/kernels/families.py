"""Kernel families: which kind of work each GPU op is, decided by one ordered rule table.

Over ~600 lines on purpose: the rule table is one ordered list (an earlier rule decides before a
later one), so it stays in one place with the helpers that apply it.

Users ask "how much of the step is matmul, how much is softmax, how much is copies?". This
module answers the "which family" part for any kernel name nsys records (demangled C++ names,
cuBLAS/Triton names) and for nsys's memcpy/memset op names.

The table RULES is read top to bottom; the first rule whose regex matches wins, and a name no
rule matches is "other". Order matters only where names overlap, and each such place says why
(e.g. attention before GEMM: FlashAttention names contain 'cutlass::' and cuDNN SDPA names
contain 'wgmma'). Every rule carries the real names that justify it: those from the traces in
shared/traces are marked with the trace they come from; the rest come from public profiles of
the same libraries and keep the rule working on traces we do not have.

Decisions worth knowing (the report to the lead repeats them):
* split-K reductions (cublasLt::splitKreduce_kernel, xmma *_execute_split_k_kernel) are GEMM:
  cuBLAS launches them as the second half of one matmul, so counting them as "reduction" would
  make GEMM share depend on cuBLAS's algorithm choice.
* copies, casts, fills, torch.cat and gathers are "memory", not "elementwise": they move bytes
  without math, and the remedy differs (avoid the copy vs. fuse the math).
* log-softmax inside cross-entropy is "softmax" like the attention softmax; the two are told
  apart by NVTX range or by `describe_kernel`, not by family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from nsight_tui.parsers.kernels.kernel_names import kernel_functors, scanned, short_kernel_name

if TYPE_CHECKING:  # pandas/numpy are only needed by family_codes/name_families
    import numpy
    import pandas

__all__ = [
    "Family",
    "Rule",
    "FAMILIES",
    "FAMILY_KEYS",
    "RULES",
    "OTHER",
    "classify",
    "classify_names",
    "family_codes",
    "name_families",
    "family",
    "rule_for",
    "describe_kernel",
]


@dataclass(frozen=True)
class Family:
    key: str
    label: str
    description: str


FAMILIES: tuple[Family, ...] = (
    Family(
        "gemm",
        "GEMM (matmul)",
        "Matrix multiplications (cuBLAS, cuBLASLt, CUTLASS, Triton templates). In a transformer: "
        "the Q/K/V and output projections, the two MLP layers and the LM head, plus the batched "
        "QK^T and attention-times-V products when attention is not fused. In backward each "
        "matmul appears twice (gradient of the input and of the weight).",
    ),
    Family(
        "convolution",
        "Convolution",
        "Convolutions of a CNN (cuDNN, CUTLASS inside cuDNN, PyTorch's own): implicit-GEMM "
        "forward (fprop), data gradient (dgrad) and weight gradient (wgrad), direct, Winograd and "
        "FFT algorithms, depthwise kernels and im2col. Matmul-like work, kept apart from GEMM so a "
        "conv net's share reads as convolution.",
    ),
    Family(
        "attention",
        "Fused attention",
        "Whole-attention kernels (FlashAttention, PyTorch's memory-efficient FMHA, cuDNN SDPA) "
        "that compute softmax(QK^T/sqrt(d))·V in one kernel without writing the T×T score "
        "matrix; they come from F.scaled_dot_product_attention.",
    ),
    Family(
        "softmax",
        "Softmax",
        "Softmax and log-softmax over a row: the attention probabilities when attention is not "
        "fused, and the log-softmax over the vocabulary inside the cross-entropy loss.",
    ),
    Family(
        "elementwise",
        "Elementwise",
        "Pointwise math applied to every element: activations (GELU), residual and bias adds, "
        "scaling, masking, comparisons, dropout, random numbers. Limited by memory bandwidth, "
        "so many small ones are the usual target of fusion (torch.compile).",
    ),
    Family(
        "reduction",
        "Reduction",
        "Sums, means and norms over a dimension: bias gradients (sum over the batch), the loss "
        "reduction, hand-written norm statistics, and the scatter-add of the embedding "
        "gradient.",
    ),
    Family(
        "normalization",
        "Normalization",
        "LayerNorm / RMSNorm / BatchNorm / GroupNorm forward and backward, including the kernels "
        "that compute the gamma/beta gradients: two per transformer block plus the final norm; "
        "one per convolution in a CNN.",
    ),
    Family(
        "optimizer",
        "Optimizer",
        "The optimizer step: PyTorch's foreach (multi_tensor_apply) and fused Adam/AdamW "
        "kernels that update every parameter and its moment estimates once per step.",
    ),
    Family(
        "memory",
        "Memory (copies, fills)",
        "Moving or setting bytes without math: host<->device and device<->device memcpy, "
        "memset, tensor copies and dtype casts (.contiguous(), .to(bfloat16), autocast), "
        "torch.cat, fills (torch.zeros, zero_grad), gathers (the embedding lookup).",
    ),
    Family(
        "layout",
        "Layout transposes",
        "Tensor layout conversions around convolutions: cuDNN's NCHW<->NHWC transposes "
        "(nchwToNhwcKernel, nhwcToNchwKernel) that run when a conv net's activations are NCHW "
        "(contiguous) but the fast kernels want NHWC. torch.channels_last (and bf16/fp16 "
        "activations) removes most of them.",
    ),
    Family(
        "communication",
        "Communication",
        "Data exchange between GPUs (NCCL all-reduce, all-gather, reduce-scatter, send/recv) "
        "from DDP, FSDP, tensor or pipeline parallelism.",
    ),
    Family(
        "other",
        "Other",
        "Kernels no rule recognises: custom CUDA kernels, sorts, top-k and the like.",
    ),
)

FAMILY_KEYS: tuple[str, ...] = tuple(f.key for f in FAMILIES)
OTHER = "other"
COMMUNICATION = "communication"  # the collectives' family (NCCL's and others' all-reduce kernels)
_BY_KEY = {f.key: f for f in FAMILIES}


def family(key: str) -> Family:
    """The Family for a key (KeyError for an unknown key)."""
    return _BY_KEY[key]


@dataclass(frozen=True)
class Rule:
    family: str
    pattern: re.Pattern
    why: str
    examples: tuple[str, ...]  # real names this rule exists for; tests check each one


def _r(family_key: str, regex: str, why: str, *examples: str) -> Rule:
    assert family_key in _BY_KEY and family_key != OTHER, family_key
    return Rule(family_key, re.compile(regex), why, examples)


# Ops TorchInductor fuses into a pointwise kernel that only move data; a triton_poi kernel made
# of nothing else is a copy (triton_poi_fused_clone_0 is the head split of q/k/v in
# small_ctx128_graphs), one that adds any math (triton_poi_fused_gelu_view_1) is elementwise.
_LAYOUT_OPS = (
    "_unsafe_view|_to_copy|as_strided|constant_pad_nd|new_zeros|unsqueeze|transpose|permute|"
    "reshape|squeeze|expand|select|slice|unbind|stack|split|alias|clone|empty|zeros|ones|full|"
    "fill|copy|view|cat|index|embedding|lift_fresh|t"
)

RULES: tuple[Rule, ...] = (
    # --- nsys op names for memory operations (not kernels) ------------------------------------
    _r(
        "memory",
        # (?:\[\s*)? not \[?\s*: two \s* around an optional '[' try every split of a run of spaces
        r"(?i)^\s*(?:\[\s*)?CUDA\s+(?:memcpy|memset|memory|Unified\s+Memory)|^\s*(?:memcpy|memset)\b",
        "nsys's names for copy/set operations (cuda_gpu_mem_time_sum's Operation column, "
        "every oracle CSV).",
        "[CUDA memcpy Host-to-Device]",
        "[CUDA memcpy Device-to-Device]",
        "[CUDA memcpy Device-to-Host]",
        "[CUDA memset]",
    ),
    # --- before anything that looks for 'reduce' ---------------------------------------------
    _r(
        "communication",
        r"(?i)nccl|nvshmem|rccl|cross_device_reduce|userbuffers|all_?reduce|all_?gather|"
        r"reduce_?scatter|all_?to_?all",
        "NCCL collectives and peer kernels (ncclDevKernel_SendRecv in mfu_2gpu_before); custom "
        "all-reduce kernels of vLLM/SGLang. First, because 'AllReduce' would otherwise read as "
        "a reduction.",
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "cross_device_reduce_1stage",
    ),
    # --- before GEMM: attention kernels are built from CUTLASS/wgmma parts ---------------------
    _r(
        "attention",
        r"(?i)flash|fmha|sdpa|attention|_attn_|cudnn::fusion::(?:compute_dot_do_o|convert_dq_to)",
        "FlashAttention 2 (flash::flash_fwd_kernel in mfu_2gpu_before), cuDNN SDPA "
        "(cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_* in "
        "medium_ctx1024_fwd_flash; its backward's two helpers, dO·O per row before it and dQ cast "
        "to 16 bits after, in sample_traces/replay/attention's fused bf16 capture), PyTorch's flash "
        "copy (pytorch_flash::) and memory-efficient "
        "kernel (fmha_cutlassF_*/fmha_cutlassB_* in sample_traces/small_ctx128_fused), Inductor's "
        "flex_attention template, Triton's tutorial _attn_fwd. Before "
        "GEMM because these names contain 'cutlass::' and 'wgmma'.",
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, "
        "(int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, "
        "(int)64, (int)4, cutlass::bfloat16_t>>, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0, "
        "(bool)1, (bool)0, (bool)0>(flash::Flash_fwd_params)",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
        "cga1x1x1_kernel0_0",
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
        "fmha_cutlassF_bf16_aligned_64x128_rf_sm80",
        "fmha_cutlassB_f32_aligned_64x64_k64_sm80",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128",
        "triton_tem_fused_flex_attention_0",
        "void cudnn::fusion::compute_dot_do_o_specialized<(bool)1, (int)64>(const void *, const void *, void *, "
        "void *, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int)",
        "void cudnn::fusion::convert_dq_to_16bits<(bool)1>(const void *, void *, unsigned int, unsigned int)",
    ),
    # --- convolutions: before GEMM, whose words (implicit_gemm, sgemm, cutlass) they contain -----
    _r(
        "convolution",
        r"(?i)[_\d](?:fprop|dgrad|wgrad)_|(?:dgrad|wgrad|fprop)(?:2d|3d)?_(?:engine|grouped|direct)|(?:dgrad|wgrad)[123]d_|"
        r"implicit_?(?:gemm_?)?conv|ImplicitGemmConvolution|(?:implicit|explicit)_convolve|"
        r"convolve_\w{0,64}sgemm|conv(?:1d|2d|3d)_|conv_depthwise|depthwise_?conv|winograd|"
        r"fft2d_(?:r2c|c2r)|(?:im2col|col2im|vol2col|col2vol)_kernel|cudnn::cnn::|"
        r"_cudnn::[^\n]*(?:ReduceSplitK|implicit_gemm)|_[shd]cudnn_\d+x\d+",
        "cuDNN convolution kernels of sample_traces/hw/conv_*: implicit-GEMM fprop "
        "(sm80_xmma_fprop_implicit_gemm_*, cutlass__5x_cudnn::...ImplicitGemmConvolution, "
        "implicit_convolve_sgemm), dgrad (cudnn::detail::dgrad_engine) and wgrad "
        "(cudnn::cnn::wgrad2d_grouped_direct_kernel), the split-K reduction of cuDNN's CUTLASS "
        "(cutlass__5x_cudnn::...ReduceSplitK, as cuBLAS's splitKreduce is GEMM); cuDNN's "
        "legacy volta_scudnn_* implicit GEMMs, Winograd and FFT kernels, PyTorch's depthwise "
        "and im2col kernels from public profiles; a Lightning ResNet-50's bf16 ones (sm90_xmma_*grad*, "
        "cutlass_tensorop_bf16_s16816fprop_*, cudnn::cnn::reduce_wgrad_nchw_helper, the workspace init of "
        "its implicit-GEMM wgrad); timm ConvNeXt's depthwise 7x7 in bf16 channels-last, forward "
        "conv2d_c1_k1_nhwc_specialized and its backward dgrad2d_c1_k1_nhwc_specialized, wgrad2d_c1_k1_nhwc(_reduce) "
        "(bare names, 14% of the backward read as other). After attention (cuDNN SDPA names hold "
        "'fprop'), before GEMM (these names hold 'gemm', 'sgemm', 'cutlass').",
        "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x16x64"
        "_stage1_warpsize4x1x1_g1_tensor16x8x8_alignc4_execute_kernel__5x_cudnn",
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_stage3_warpsize1x2x1"
        "_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
        "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<"
        "cutlass__5x_cudnn::conv::threadblock::ImplicitGemmMultistage<cutlass__5x_cudnn::gemm::GemmShape<"
        "(int)64, (int)64, (int)32>",
        "void implicit_convolve_sgemm<float, float, (int)1024, (int)5, (int)5, (int)3, (int)3, (int)3, "
        "(int)1, (bool)0, (bool)0, (bool)1>(int, int, int, const T1 *, int, T2 *, const T1 *, "
        "kernel_conv_params, unsigned long long, int, float, float, int, const T2 *, const T2 *, bool, int, int)",
        "void cudnn::detail::dgrad_engine<float, (int)512, (int)6, (int)5, (int)3, (int)3, (int)3, "
        "(bool)0>(int, int, int, const T1 *, int, const T1 *, int, T1 *, kernel_grad_params, "
        "unsigned long long, int, unsigned long long, int, float, int, int, int)",
        "void cudnn::cnn::wgrad2d_grouped_direct_kernel<(bool)0, (bool)1, int, float, float, float>("
        "cudnn::cnn::WgradGroupedDirectParams, const T4 *, const T4 *, T4 *, T6, T6)",
        "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<"
        "cutlass__5x_cudnn::MatrixShape<(int)4, (int)128>",
        "sm80_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize2x2x1"
        "_g1_tensor16x8x16_execute_kernel__5x_cudnn",
        "sm80_xmma_wgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x32_stage4_warpsize2x2x1"
        "_g1_tensor16x8x16_execute_kernel__5x_cudnn",
        "volta_scudnn_128x64_relu_interior_nn_v1",
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
        "WinogradDataParams<T1, T2>)",
        "void fft2d_r2c_32x32<float, (bool)0, (unsigned int)1, (bool)0>(float2 *, const float *, int, int, "
        "int, int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
        "void at::native::<unnamed>::conv_depthwise2d_forward_kernel<(int)3, float, int>(at::"
        "GenericPackedTensorAccessor<const T2, (unsigned long)4, at::DefaultPtrTraits, T3>)",
        "void at::native::im2col_kernel<float>(long, const T1 *, long, long, long, long, long, long, "
        "long, long, long, long, long, long, T1 *)",
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>"
        "(T1::Params)",
        "conv2d_c1_k1_nhwc_specialized",
        "dgrad2d_c1_k1_nhwc_specialized",
        "wgrad2d_c1_k1_nhwc",
        "wgrad2d_c1_k1_nhwc_reduce",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_warpgroupsize1x1x1"
        "_g1_execute_segment_k_off_kernel__5x_cudnn",
        "void cudnn::cnn::reduce_wgrad_nchw_helper<float, __nv_bfloat16>(void *, const void *, T1, int, int)",
        "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm::"
        "wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params>>(T1, bool)",
    ),
    # --- matmuls ---------------------------------------------------------------------------------
    _r(
        "gemm",
        r"(?i)gemm|gemv|cublas|nvjet_|^(?:void\s+)?cutlass::(?:Kernel2?|device_kernel)<|"
        r"cutlass_?\d+x?_|^triton_tem_|(?:^|::|\s)_?matmul\w*kernel|"
        r"splitKreduce",
        "cuBLAS xmma kernels (sm80_xmma_gemm_* in every GPT-2 trace and h100_2gpu_1s), cuBLAS "
        "nvJet (nvjet_sm90_tst_* in medium_ctx1024_fwd_flash, nvjet_tst_* in mfu_2gpu_before), "
        "CUTLASS kernels launched by cuBLAS (cutlass::Kernel2<cutlass_80_simt_sgemm_*> in "
        "small_ctx128_* and xl_ctx256), legacy cuBLAS (ampere_sgemm_*, gemmSN_*, gemv2T_*), "
        "Triton/Inductor matmul templates (triton_tem_fused_mm_*), user Triton matmul_kernel "
        "(cuDNN's implicit-GEMM convolutions are convolution, above). cublasLt::splitKreduce_kernel (small_ctx128_*) is "
        "here on purpose: it always directly follows a CUTLASS sgemm on the same stream and sums "
        "that GEMM's K-slices, so it is part of the matmul's cost, not a model reduction.",
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4"
        "_alignc4_execute_kernel__5x_cublas",
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_"
        "aligna4_alignc4_execute_split_k_kernel__5x_cublas",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
        "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, float, float, float, "
        "(bool)0, float, float, float, (bool)1, (bool)0, (bool)0, (bool)0>(cublasLt::"
        "cublasSplitKParams<T6>, const T4 *, const T10 *, T9 *, T5 *, const T6 *, const T6 *, "
        "const T11 *, const T4 *, T11 *, void *, long, T6 *, int *, T6 *, T6 *, const T6 *, "
        "const T6 *, const T6 *, const T6 *, const T6 *)",
        "ampere_sgemm_128x64_tn",
        "void gemmSN_TN_kernel<float, (int)128, (int)16, (int)2, (int)4, (int)4, (int)4, (bool)1>",
        "triton_tem_fused_mm_0",
        "void cutlass::gemm_nn_128x128<float>(float*, float*)",
    ),
    # --- layout transposes: before memory (they are copies, but the remedy is the layout) --------
    _r(
        "layout",
        r"(?i)nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|nchw_?to_?nhwc|nhwc_?to_?nchw",
        "cuDNN's NCHW<->NHWC transposes (cudnn::engines_precompiled::nchwToNhwcKernel and "
        "nhwcToNchwKernel in sample_traces/hw/conv_*): a contiguous (NCHW) conv net's "
        "activations and filters turned round for the NHWC kernels and back. A family of their "
        "own: the fix (channels_last) is not the fix for a copy.",
        "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, (bool)0, (bool)1, "
        "(cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)",
        "void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, (bool)1, (bool)0, "
        "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<T3>, const T1 *, T2 *)",
    ),
    # --- byte movers: before optimizer (foreach Copy) and elementwise (copy lambdas) -----------
    _r(
        "memory",
        # Linear on any name: no \w* before a literal (re-scanned from every start),
        # and `X.*Y` only from the first X (tempered: any X that has a Y after it does).
        r"copy_kernel_cuda|CatArrayBatchedCopy|FillFunctor|(?<!masked_)fill_kernel|"
        r"vectorized_gather_kernel|indexSelect(?:Large|Small)Index|index_elementwise_kernel|(?:nhwc|nchw)AddPadding|"
        r"^(?:(?!multi_tensor_apply_kernel<)[\s\S])*multi_tensor_apply_kernel<[^\n]*\bCopy<|(?i:mem(?:cpy|set))|"
        rf"^triton_poi_fused_(?:(?:{_LAYOUT_OPS})_)+\d+\w*$",
        "Kernels that move or set bytes without math: direct_copy_kernel_cuda (.contiguous(), "
        "copy_) and bfloat16_copy_kernel_cuda (autocast casts) in every PyTorch trace, torch.cat "
        "(CatArrayBatchedCopy in xl_ctx256, mfu_2gpu_before), fills (FillFunctor<float/int/long/"
        "bool>: torch.zeros, zero_grad; 4,532 calls in small_ctx128_graphs), the embedding "
        "lookup (vectorized_gather_kernel), the CUDA-graph input copies done with a foreach Copy "
        "(multi_tensor_apply_kernel<..., Copy<float, float>> inside `forward` in "
        "small_ctx128_graphs, not in `optimizer`), and Inductor kernels fused only from "
        "layout ops (triton_poi_fused_clone_0, triton_poi_fused_clone_transpose_0); cuDNN's channel "
        "padding of a conv's input (nhwcAddPaddingKernel, 3 channels to 8, in a channels-last ResNet-50).",
        "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::"
        "gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
        "[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() "
        "const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int)"
        " (instance 1)]>(int, T3)",
        "void at::native::vectorized_elementwise_kernel<(int)8, at::native::"
        "bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], "
        "std::array<char *, (unsigned long)2>>(int, T2, T3)",
        "void at::native::<unnamed>::CatArrayBatchedCopy<at::native::<unnamed>::OpaqueType<"
        "(unsigned int)4>, unsigned int, (int)3, (int)64, (int)64>(T1 *, at::native::<unnamed>::"
        "CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::TensorSizeStride<T2, "
        "(unsigned int)4>, int, T2)",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<int>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)",
        "void at::native::vectorized_gather_kernel<(int)16, long>(char *, char *, T2 *, int, "
        "long, long, long, long, bool)",
        "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
        "TensorListMetadata<(int)2>, at::native::<unnamed>::UnaryOpFunctor<float, (int)2, (int)1, "
        "(int)1>, at::native::Copy<float, float>>(T1, T2, T3...)",
        "triton_poi_fused_clone_0",
        "triton_poi_fused_clone_transpose_1",
        "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, (bool)1, (cudnnKernelDataType_t)0>(int, int, "
        "int, int, int, int, int, int, const T1 *, T2 *, int, int, int, int, T3, T3, cudnn::reduced_divisor)",
    ),
    # --- before normalization/reduction: triton softmax kernels are persistent reductions ------
    _r(
        "softmax",
        r"(?i)softmax",
        "PyTorch's softmax_warp_forward/backward (attention probabilities in small_ctx128_*, "
        "xl_ctx256, h100_2gpu_1s), cunn_SoftMaxForwardSmem<..., LogSoftMaxForwardEpilogue> "
        "(cross-entropy's log-softmax), Inductor's triton_per_fused__softmax_* (small_ctx128_"
        "graphs). After attention, whose fused kernels also compute a softmax.",
        "void <unnamed>::softmax_warp_forward<float, float, float, (int)6, (bool)0, (bool)0>(T2 "
        "*, const T1 *, int, int, int, const bool *, int, bool)",
        "void <unnamed>::softmax_warp_backward<float, float, float, (int)8, (bool)0, (bool)0>(T2 "
        "*, const T1 *, const T1 *, int, int, int, const bool *)",
        "void at::native::<unnamed>::cunn_SoftMaxForwardSmem<(int)4, float, float, float, at::"
        "native::<unnamed>::LogSoftMaxForwardEpilogue, long>(T4 *, const T2 *, T6)",
        "triton_per_fused__softmax_exp_prepare_softmax_online_sub_0",
        "triton_per_fused__softmax_backward_data_0",
    ),
    _r(
        "normalization",
        r"(?i)layer_?norm|rms_?norm|group_?norm|batch_?norm|instance_?norm|GammaBeta|"
        r"RowwiseMoments|ComputeInternalGradients|ComputeGradientFusedParams|cuComputeGradInput|"
        r"\bbn_(?:fw|bw)",
        "PyTorch LayerNorm forward/backward (vectorized_layer_norm_kernel, "
        "layer_norm_grad_input_kernel_vectorized, GammaBetaBackwardCUDAKernelTemplate in every "
        "GPT-2 trace), Inductor's fused norm kernels (triton_per_fused_native_layer_norm_0, "
        "triton_red_fused_native_layer_norm_backward_view_4 in small_ctx128_graphs), apex/"
        "vLLM RMSNorm kernels. Named ops only: torch.norm's reduce_kernel<NormTwoOps> is a "
        "reduction, and a hand-written RMSNorm shows up as its pow/mean/rsqrt/mul parts.",
        "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2,"
        " const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
        "void at::native::<unnamed>::layer_norm_grad_input_kernel_vectorized<float, float, "
        "(bool)0>(const T1 *, const T1 *, const T2 *, const T2 *, const T1 *, T1 *, int)",
        "void at::native::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<float, float, (unsigned "
        "int)32, (unsigned int)32, (unsigned int)256, (bool)0, (bool)1, (bool)0>(long, long, "
        "const T1 *, const T1 *, const T2 *, const T2 *, T1 *, T1 *)",
        "triton_per_fused_native_layer_norm_0",
        "triton_red_fused_native_layer_norm_backward_view_4",
        "FusedAddRMSNormKernel",
        "void at::native::batch_norm_collect_statistics_kernel<at::native::InvStd, float, float, float, "
        "(int)4>(at::GenericPackedTensorAccessor<const T2, (unsigned long)3, at::RestrictPtrTraits, int>)",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, (int)512, (bool)1, (int)1>(cudnnTensorStruct, "
        "const T1 *, cudnnTensorStruct, T1 *, const T2 *, const T2 *, T2, T2, T2 *, T2 *, T2 *, T2 *, T2, T2)",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, (int)512, (bool)1, (int)1>(T1, T1, T1, T1, "
        "cudnnTensorStruct, const T1 *, cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const T2 *)",
    ),
    _r(
        "optimizer",
        r"multi_tensor_apply|(?i:fused_?adam|adamw?_?(?:math|kernel|functor)|FusedSgd|fused_sgd|"
        r"multi_tensor_(?:adam|sgd|lamb|l2norm|scale|axpby))",
        "torch.optim's foreach path (multi_tensor_apply_kernel with std::multiplies, "
        "LerpFunctor, Sqrt, divides, plus: the AdamW update in small_ctx128_* and xl_ctx256) and "
        "fused=True Adam (FusedAdamMathFunctor); apex multi_tensor_* kernels. After memory, "
        "which keeps foreach Copy (CUDA-graph input copies).",
        "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
        "TensorListMetadata<(int)2>, at::native::<unnamed>::TernaryOpScalarFunctor<float, (int)2, "
        "(int)2, (int)0>, at::native::LerpFunctor<float>, float>(T1, T2, T3...)",
        "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::"
        "TensorListScalarListMetadata<float, (int)3>, at::native::<unnamed>::"
        "PointwiseOpScalarListFunctor<float, (int)3, (int)3, (int)0>, std::divides<float>>(T1, "
        "T2, T3...)",
    ),
    _r(
        "reduction",
        r"reduce_kernel|^triton_(?:red|per)_|Device(?:Segmented)?Reduce|nll_loss_forward|"
        r"embedding_backward|tensor_kernel_scan|DeviceScan|segment_reduce|compute_grad_weight|"
        r"sum_and_scatter",
        "PyTorch's reduce_kernel (sum_functor, MeanOps: bias gradients, losses, hand-written "
        "norms; every PyTorch trace and mock), Inductor reductions (triton_red_*, and "
        "triton_per_* persistent reductions that fit one row per block; small_ctx128_graphs), "
        "the cross-entropy's nll_loss_forward_reduce, and the embedding gradient "
        "(embedding_backward_feature_kernel: a scatter-add of rows by token id). After softmax "
        "and normalization, whose Inductor kernels are also triton_per/red.",
        "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native"
        "::MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)",
        "triton_red_fused_gelu_gelu_backward_sum_view_2",
        "triton_per_fused_sum_view_1",
        "void at::native::<unnamed>::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>("
        "T1 *, T1 *, const T1 *, const T3 *, const T1 *, bool, long, long, long, long)",
        "void at::native::<unnamed>::embedding_backward_feature_kernel<float, float, long>(const "
        "T3 *, const T1 *, T1 *, int, long, int)",
    ),
    _r(
        "elementwise",
        r"(?i)elementwise|^triton_(?:poi|for)_|triu_tril_kernel|nll_loss_backward|dropout|"
        r"rotary|act_and_mul|silu_and_mul|"
        r"^(?:void\s+)?(?:vector_?add|vec_?add|add|saxpy|daxpy|axpy)\s*\(",
        "PyTorch's TensorIterator kernels (elementwise_kernel, vectorized_elementwise_kernel, "
        "unrolled_elementwise_kernel: GELU, add, mul, masked_fill, ... in every PyTorch trace), "
        "elementwise_kernel_with_index (arange) and distribution_elementwise_grid_stride_kernel "
        "(randint), Inductor pointwise kernels (triton_poi_*; small_ctx128_graphs), "
        "triu_tril_kernel (building the causal mask; xl_ctx256), the cross-entropy's "
        "nll_loss_backward_reduce (writes the gradient at the target index), and the classic "
        "hand-written vector add (add(int, float *, float *) in older/nsys2022.2_vectoradd).",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::GeluCUDAKernelImpl("
        "at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() "
        "const::[lambda() (instance 2)]::operator ()() const::[lambda(float) (instance 1)], "
        "std::array<char *, (unsigned long)2>>(int, T2, T3)",
        "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, "
        "std::array<char *, (unsigned long)3>, (int)4, TrivialOffsetCalculator<(int)2, unsigned "
        "int>, TrivialOffsetCalculator<(int)1, unsigned int>, at::native::memory::LoadWithCast<"
        "(int)2>, at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)",
        "triton_poi_fused_gelu_view_1",
        "triton_poi_fused_add_addmm_view_2",
        "void at::native::triu_tril_kernel<bool, int, (bool)1, (int)8, (bool)0>(at::cuda::detail"
        "::TensorInfo<T1, T2>, at::cuda::detail::TensorInfo<const T1, T2>, long, long, T2)",
        "void at::native::<unnamed>::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(T1 *, "
        "const T1 *, const T2 *, const T1 *, const T1 *, bool, int, int, long, long)",
        "add(int, float *, float *)",
        "void at::native::elementwise_add<float>(float*, float*)",
    ),
)


@lru_cache(maxsize=65536)
def _rule_index(name: str) -> int:
    name = scanned(name)  # a 10 MB name is decided by its first 64k characters
    for i, rule in enumerate(RULES):
        if rule.pattern.search(name):
            return i
    return -1


def rule_for(name: str) -> Rule | None:
    """The rule that decides `name`'s family (None: no rule matched, the family is "other")."""
    if not isinstance(name, str) or not name:
        return None
    i = _rule_index(name)
    return RULES[i] if i >= 0 else None


@lru_cache(maxsize=65536)
def classify(name: str) -> str:
    """The family key of one op name (kernel demangled name or nsys memcpy/memset op name)."""
    if not isinstance(name, str) or not name:
        return OTHER
    i = _rule_index(name)
    return RULES[i].family if i >= 0 else OTHER


def classify_names(names: Iterable[str]) -> list[str]:
    """classify() for each name, in order."""
    return [classify(n) for n in names]


def name_families(trace) -> "numpy.ndarray":
    """Family key per op name code of `trace` (classified once, then kept with the trace)."""
    import numpy

    if "name_families" not in trace.derived:
        trace.derived["name_families"] = numpy.array(classify_names(trace.op_names), dtype=object)
    return trace.derived["name_families"]


def device_work_ops(trace) -> "numpy.ndarray":
    """Per trace.ops row: the ops' own work on the GPU, a kernel or a device-to-device copy (a
    `.contiguous()`, unfused attention's copy of its scores; a decode graph's copy first). Host
    copies and memsets are not: their time is the host's memory or the allocator's, not the op's."""
    import numpy

    from nsight_tui.parsers.read.ids import KERNEL, MEMCPY

    if "device_work" not in trace.derived:
        kind, name = trace.ops["kind"].to_numpy(numpy.int64), trace.ops["name"].to_numpy(numpy.int64)
        d2d = numpy.array(["Device-to-Device" in n for n in trace.op_names], bool)
        trace.derived["device_work"] = (kind == KERNEL) | ((kind == MEMCPY) & d2d[name] if len(d2d) else False)
    return trace.derived["device_work"]


def family_codes(names: "pandas.Series") -> "pandas.Series":
    """Family of every row, as a categorical Series (categories in FAMILY_KEYS display order).

    Each distinct name is classified once and mapped back, so a million kernel rows with a few
    hundred distinct names cost a factorize plus a few hundred regex searches. Missing names
    (None/NaN) are "other".
    """
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(names, use_na_sentinel=True)
    key_index = {k: i for i, k in enumerate(FAMILY_KEYS)}
    other = key_index[OTHER]
    fam_of_unique = np.fromiter(
        (key_index[classify(u)] for u in uniques), dtype=np.int8, count=len(uniques)
    )
    lookup = np.append(fam_of_unique, np.int8(other))  # code -1 (missing) -> other
    fam_codes = lookup[np.asarray(codes)]
    cat = pd.Categorical.from_codes(fam_codes, categories=list(FAMILY_KEYS))
    index = names.index if isinstance(names, pd.Series) else None
    return pd.Series(cat, index=index, name="family")


# ---------------------------------------------------------------------------------------------
# Plain-language descriptions
# ---------------------------------------------------------------------------------------------

# What the functor inside a PyTorch elementwise/reduce/foreach kernel does, and where it comes
# from in a training step. Keys are the identifiers kernel_functors() returns.
_FUNCTOR_WORDS = {
    "GeluCUDAKernelImpl": "GELU activation (the MLP block's nonlinearity)",
    "GeluBackwardCUDAKernelImpl": "GELU backward (gradient through the MLP nonlinearity)",
    "CUDAFunctor_add": "add (residual connections, bias adds, gradient accumulation)",
    "CUDAFunctorOnSelf_add": "in-place add (residual adds, gradient accumulation)",
    "MulFunctor": "multiply (scaling, masking, loss/gradient scaling)",
    "DivFunctor": "divide (e.g. attention scores by sqrt(d_head))",
    "div_true_kernel_cuda": "divide (e.g. attention scores by sqrt(d_head))",
    "FillFunctor": "fill with a constant (torch.zeros/ones/full, zero_grad without set_to_none)",
    "direct_copy_kernel_cuda": "copy (.contiguous(), .clone(), copy_ after a transpose/permute)",
    "bfloat16_copy_kernel_cuda": "cast to bfloat16 (autocast converting fp32 weights/activations)",
    "float16_copy_kernel_cuda": "cast to float16 (autocast converting fp32 weights/activations)",
    "masked_fill_kernel": "masked_fill (applying the causal mask to attention scores)",
    "pow_tensor_scalar_kernel_impl": "x ** scalar (variance in a hand-written norm, tanh-GELU)",
    "rsqrt_kernel_cuda": "1/sqrt(x) (hand-written RMSNorm/LayerNorm)",
    "tanh_kernel_cuda": "tanh (tanh-approximate GELU written out by hand)",
    "log_kernel_cuda": "natural log",
    "exp_kernel_cuda": "exp",
    "neg_kernel_cuda": "negation",
    "AbsFunctor": "absolute value",
    "bitwise_not_kernel_cuda": "logical not (inverting a boolean mask, e.g. ~causal_mask)",
    "where_kernel_impl": "torch.where (select between two tensors by a mask)",
    "compare_scalar_kernel": "comparison with a scalar (builds a boolean mask)",
    "CompareEqFunctor": "equality comparison (builds a boolean mask)",
    "minimum_kernel_cuda": "elementwise minimum",
    "maximum_kernel_cuda": "elementwise maximum",
    "arange_cuda_out": "torch.arange (position ids)",
    "random_from_to_kernel": "random integers (torch.randint, e.g. sampling a batch)",
    "sum_functor": "sum",
    "MeanOps": "mean",
    "NormTwoOps": "L2 norm (e.g. gradient clipping)",
    "ArgMaxOps": "argmax",
    "LerpFunctor": "lerp (Adam's first-moment update m = lerp(m, g, 1-beta1))",
    "Sqrt": "sqrt (Adam's sqrt of the second moment)",
    "multiplies": "multiply by a scalar (moment decay, weight decay)",
    "divides": "divide (Adam's m / (sqrt(v) + eps) step)",
    "plus": "add a scalar (Adam's eps)",
    "Copy": "copy a list of tensors (CUDA-graph input copies)",
    "FusedAdamMathFunctor": "the whole Adam/AdamW update in one kernel (fused=True)",
    "FusedAdamMathFunctorMP": "the whole Adam/AdamW update in one kernel (fused=True, mixed precision)",
    "LogSoftMaxForwardEpilogue": "log-softmax (cross-entropy over the vocabulary)",
    "LogSoftMaxBackwardEpilogue": "log-softmax backward (cross-entropy over the vocabulary)",
    "SoftMaxForwardEpilogue": "softmax",
    "SoftMaxBackwardEpilogue": "softmax backward",
}

# Kernel-level descriptions, first match wins; matched against the full demangled name.
_KERNEL_WORDS: tuple[tuple[re.Pattern, str], ...] = tuple(
    (re.compile(p), text)
    for p, text in (
        (
            r"^\s*\[CUDA memcpy Host-to-Device",
            "copy from host (CPU) memory to the GPU: input batches, weights at start-up",
        ),
        (r"^\s*\[CUDA memcpy Device-to-Host", "copy from the GPU to host memory: .item(), .cpu(), logging"),
        (r"^\s*\[CUDA memcpy Device-to-Device", "copy between two GPU buffers (tensor copies done by the copy engine)"),
        (r"^\s*\[CUDA memcpy Peer-to-Peer", "copy between two GPUs"),
        (r"^\s*\[CUDA memset", "set a GPU buffer to a byte value (zeroing new allocations)"),
        (r"^\s*\[CUDA graph", "a CUDA graph's launch traced whole (nsys --cuda-graph-trace=graph, its default): all "
         "its nodes' GPU work as one item; capture with --cuda-graph-trace=node (as `nsight-tui capture` does) "
         "to see its kernels"),
        (
            r"fmha_cutlassF",
            "PyTorch's memory-efficient attention forward (xFormers CUTLASS FMHA): softmax(QK^T)V "
            "in one kernel, chosen by scaled_dot_product_attention when FlashAttention cannot run "
            "(e.g. fp32 inputs)",
        ),
        (r"fmha_cutlassB", "PyTorch's memory-efficient attention backward (xFormers CUTLASS FMHA)"),
        (
            r"flash_fwd|FlashAttnFwd",
            "FlashAttention forward: softmax(QK^T/sqrt(d))V tile by tile in on-chip memory, "
            "never writing the TxT score matrix; from scaled_dot_product_attention",
        ),
        (r"flash_bwd|FlashAttnBwd", "FlashAttention backward (recomputes the attention tiles to get dQ, dK, dV)"),
        (r"(?i)^(?:(?!cudnn)[\s\S])*cudnn(?:(?!sdpa)[^\n])*sdpa[^\n]*fprop",
         "cuDNN fused attention forward (scaled_dot_product_attention's cuDNN backend)"),
        (r"(?i)^(?:(?!cudnn)[\s\S])*cudnn(?:(?!sdpa)[^\n])*sdpa[^\n]*bprop",
         "cuDNN fused attention backward (scaled_dot_product_attention's cuDNN backend)"),
        (r"flex_attention", "Inductor's FlexAttention template (fused attention with a custom score mod)"),
        (
            r"_execute_split_k_kernel",
            "cuBLAS split-K reduction pass: sums the K-slices computed by the GEMM kernel just "
            "before it on the same stream",
        ),
        (
            r"splitKreduce_kernel",
            "cuBLASLt split-K reduction: sums the partial products of the GEMM kernel just "
            "before it and applies alpha/beta (and bias)",
        ),
        (r"^(?:(?!_xmma_gemm_)[\s\S])*_xmma_gemm_[^\n]*_ffma_",
         "cuBLAS matmul on CUDA cores (FP32 FMA, no tensor cores: fp32 with TF32 off)"),
        (r"_xmma_gemm_", "cuBLAS matmul (xmma kernel)"),
        (r"^nvjet_", "cuBLAS matmul (nvJet kernel for Hopper and newer)"),
        (
            r"cutlass_\d+_simt_",
            "CUTLASS matmul on CUDA cores (SIMT); cuBLAS ships such kernels and launches them itself",
        ),
        (
            r"cutlass_\d+_(?:wmma_)?tensorop_",
            "CUTLASS matmul on tensor cores; cuBLAS ships such kernels and launches them itself",
        ),
        (r"^triton_tem_", "Triton matmul generated by torch.compile (Inductor template), epilogue ops fused"),
        (r"(?i)^\w+_sgemm_", "cuBLAS FP32 matmul on CUDA cores"),
        (
            r"(?i)^(?:trt_)?(?:kepler|maxwell|pascal|volta|turing|ampere|ada|hopper)_\w*gemm",
            "cuBLAS matmul (kernel named after the GPU generation it was tuned for)",
        ),
        (r"gemmSN_", "cuBLAS matmul for small/skinny shapes"),
        (r"gemv", "cuBLAS matrix-vector product"),
        (r"softmax_warp_forward", "softmax over the last dimension, one warp per row (attention probabilities)"),
        (r"softmax_warp_backward", "softmax backward, one warp per row (gradient of the attention probabilities)"),
        (r"^(?:(?!triton_)[\s\S])*triton_\w*_fused__softmax_backward", "Inductor-fused softmax backward"),
        (r"^(?:(?!triton_)[\s\S])*triton_\w*_fused__softmax", "Inductor-fused softmax (attention probabilities)"),
        (r"cunn_SoftMax", "row softmax/log-softmax for long rows (the vocabulary in cross-entropy)"),
        (r"vectorized_layer_norm_kernel", "LayerNorm forward (normalise each token's vector, scale and shift)"),
        (r"layer_norm_grad_input", "LayerNorm backward: gradient with respect to the input"),
        (r"GammaBetaBackward", "LayerNorm backward: gradients of the scale (gamma) and shift (beta)"),
        (r"^(?:(?!triton_)[\s\S])*triton_\w*native_layer_norm_backward", "Inductor-fused LayerNorm backward"),
        (r"^(?:(?!triton_)[\s\S])*triton_\w*native_layer_norm", "Inductor-fused LayerNorm"),
        (r"CatArrayBatchedCopy", "torch.cat: copies the inputs side by side into one output tensor"),
        (r"vectorized_gather_kernel|indexSelect", "gather rows by index (embedding lookup, index_select)"),
        (r"embedding_backward", "embedding backward: adds each token's gradient into its row of the table"),
        (r"nll_loss_forward", "cross-entropy: picks each target's log-probability and averages"),
        (r"nll_loss_backward", "cross-entropy backward: writes the gradient at each target index"),
        (r"triu_tril_kernel", "torch.triu/tril: builds the causal attention mask"),
        (r"(?i)^(?:(?!nccl)[\s\S])*nccl\w*AllReduce", "NCCL all-reduce: sums a buffer across GPUs (DDP gradient sync)"),
        (r"(?i)^(?:(?!nccl)[\s\S])*nccl\w*AllGather", "NCCL all-gather: every GPU gets every shard (FSDP parameter gather)"),
        (r"(?i)^(?:(?!nccl)[\s\S])*nccl\w*ReduceScatter", "NCCL reduce-scatter: sum across GPUs, each keeps a shard (FSDP gradients)"),
        (r"(?i)^(?:(?!nccl)[\s\S])*nccl\w*SendRecv", "NCCL send/receive between two GPUs (pipeline parallelism, all-to-all pieces)"),
        (r"^triton_poi_", "Inductor-generated pointwise kernel (several elementwise ops fused)"),
        (r"^triton_red_", "Inductor-generated reduction (a reduction with its neighbouring ops fused)"),
        (r"^triton_per_", "Inductor-generated persistent reduction (whole row per block, ops fused)"),
        (r"^(?:void\s+)?add\s*\(", "hand-written elementwise vector add"),
    )
)

_CONTAINER_WORDS = (
    ("vectorized_elementwise_kernel", "PyTorch pointwise kernel, vectorised (contiguous tensors)"),
    ("unrolled_elementwise_kernel", "PyTorch pointwise kernel, unrolled (needs casts or is not vectorisable)"),
    ("elementwise_kernel_with_index", "PyTorch kernel filling each element from its index"),
    ("distribution_elementwise", "PyTorch random-number kernel"),
    ("elementwise_kernel", "PyTorch pointwise kernel, general strides (non-contiguous or broadcast inputs)"),
    ("reduce_kernel", "PyTorch reduction over a dimension"),
    ("multi_tensor_apply_kernel", "PyTorch foreach kernel: one op over a whole list of tensors in one launch"),
)


@lru_cache(maxsize=65536)
def describe_kernel(name: str) -> str:
    """One line in plain language: what this kernel does and where it comes from.

    Well-known kernels get a specific line (FlashAttention, cuBLAS split-K, LayerNorm backward,
    ...); PyTorch's generic elementwise/reduction/foreach kernels are described by their functor
    (vectorized_elementwise_kernel<GeluCUDAKernelImpl> -> GELU); anything else falls back to
    its family's description.
    """
    if not isinstance(name, str) or not name:
        return _BY_KEY[OTHER].description
    for pattern, text in _KERNEL_WORDS:
        if pattern.search(scanned(name)):
            return text
    base = short_kernel_name(name).split("<", 1)[0]
    for container, words in _CONTAINER_WORDS:
        if base.startswith(container):
            ops = [_FUNCTOR_WORDS[f] for f in kernel_functors(name) if f in _FUNCTOR_WORDS]
            return f"{words}: {'; '.join(ops)}" if ops else words
    return _BY_KEY[classify(name)].description
