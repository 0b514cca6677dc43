"""Reading GPU kernel names: short display names, and the parts encoded in GEMM kernel names.

Over ~600 lines on purpose: it is one grammar of library kernel names (cuBLAS, CUTLASS, nvJet, cuDNN,
Triton, PyTorch's own), each pattern beside the parts it decodes; pure string work, no state.

Two jobs, both pure string work (no trace access):

* `short_kernel_name` turns a demangled C++ kernel name (often 500+ characters of template
  arguments) into something a person can scan, keeping the one part that tells kernels apart:
  the functor. `vectorized_elementwise_kernel<GeluCUDAKernelImpl>` and
  `vectorized_elementwise_kernel<MulFunctor>` are different ops; the vector width, dtypes and
  offset calculators are noise. Short names are for display only: two distinct kernels can share
  one (e.g. the float and bf16 `CUDAFunctor_add`), so never group or key by them.

* `decode_gemm` splits a cuBLAS / cuBLASLt / CUTLASS / Triton matmul kernel name into the
  configuration it encodes (architecture, precision, transposes, tile, stages, ...). Every
  field is read from the name; a field the name does not encode is None, never guessed. The
  meaning of each field, and the real names it was checked against, is written next to the
  parser that reads it.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "short_kernel_name",
    "kernel_functors",
    "decode_gemm",
    "gemm_summary",
    "gemm_detail_lines",
    "table_name",
    "distinct_labels",
    "kernel_dtype",
    "gemm_math",
]

# Names are read up to this many characters. Real kernel names stay under ~20k (CUTLASS 3
# templates); a profile is untrusted input, and a 10 MB name must not cost seconds in every
# function that looks at it. Every pattern here is also linear on any length (tests).
NAME_SCAN_LIMIT = 1 << 16


def scanned(name: str) -> str:
    """The part of a name the name functions read."""
    return name if len(name) <= NAME_SCAN_LIMIT else name[:NAME_SCAN_LIMIT]


# ---------------------------------------------------------------------------------------------
# Short names
# ---------------------------------------------------------------------------------------------

# Identifiers inside template arguments that carry no information for a reader: PyTorch's
# TensorIterator plumbing (gpu_kernel_impl, BinaryFunctor wrapping the real MulFunctor, offset
# calculators, load/store policies), foreach metadata, scalar types, and the words of lambda
# markers. Whatever survives this filter is the functor/op that tells kernels apart.
_BORING = frozenset(
    """
    void const unsigned signed int long char bool float double short auto operator lambda instance
    array tuple pair T Params
    gpu_kernel_impl gpu_kernel_impl_nocast launch_kernel
    BinaryFunctor AUnaryFunctor BUnaryFunctor UnaryFunctor func_wrapper_t ReduceOp
    TrivialOffsetCalculator OffsetCalculator LoadWithCast StoreWithCast LoadWithoutCast
    StoreWithoutCast
    TensorListMetadata TensorListScalarListMetadata FusedOptimizerTensorListMetadata
    OpaqueType CatArrInputTensorMetadata TensorSizeStride TensorInfo IndexToOffset
    BFloat16 Half bfloat16_t half_t half bfloat16 complex ComplexHalf
    Float8_e4m3fn Float8_e5m2 Float8_e4m3fnuz Float8_e5m2fnuz
    uint4 uint2 float4 float2 PhiloxCudaState CUDAGeneratorImpl curandStatePhilox4_32_10
    distribution_nullary_kernel
    Flash_fwd_kernel_traits Flash_bwd_kernel_traits Flash_kernel_traits enable_sm90_or_later
    cublasSplitKParams ncclDevKernelArgsStorage ncclDevComm ncclWork
    """.split()
)
_BORING_RE = re.compile(r"^(?:T\d+|u?int\d+_t|__nv_\w+|c10|at|std|cuda|cute|true|false)$")

_ANON_NS = re.compile(r"\(anonymous namespace\)::|<unnamed>::|\{anonymous\}::")


def _drop_groups(s: str) -> str:
    """Every (...) and [...] group, nested ones included, replaced by a space, in one pass
    (replacing innermost groups until none is left costs a pass per nesting level)."""
    out: list[str] = []
    opened: list[tuple[str, int]] = []  # (bracket, length of out when it opened)
    still_open = {"(": 0, "[": 0}
    closer = {")": "(", "]": "["}
    for ch in s:
        if ch in still_open:
            opened.append((ch, len(out)))
            still_open[ch] += 1
            out.append(ch)
        elif ch in closer and still_open[closer[ch]]:
            want = closer[ch]
            while opened[-1][0] != want:  # an unclosed bracket of the other kind goes with it
                still_open[opened.pop()[0]] -= 1
            at = opened.pop()[1]
            still_open[want] -= 1
            del out[at:]
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)
_QUALIFIED_ID = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")


def _split_top_level_name(s: str) -> tuple[str, str]:
    """Return (qualified name incl. template args, rest) split at the first top-level '('."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth = max(0, depth - 1)
        elif ch == "(":
            if depth == 0:
                return s[:i], s[i:]
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    return s, ""


def _last_component(qualified: str) -> tuple[str, str]:
    """Split `a::b<x::y>::c<args>` into ('c', 'args'); template args of earlier parts are dropped."""
    depth = 0
    start = 0
    i = 0
    while i < len(qualified):
        ch = qualified[i]
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth = max(0, depth - 1)
        elif ch == ":" and depth == 0 and qualified.startswith("::", i):
            start = i + 2
            i += 1
        i += 1
    last = qualified[start:]
    lt = last.find("<")
    if lt < 0:
        return last.strip(), ""
    # The outermost template argument list of the last component.
    depth = 0
    for j in range(lt, len(last)):
        if last[j] == "<":
            depth += 1
        elif last[j] == ">":
            depth -= 1
            if depth == 0:
                return last[:lt].strip(), last[lt + 1 : j]
    return last[:lt].strip(), last[lt + 1 :]


@lru_cache(maxsize=65536)
def kernel_functors(demangled: str) -> tuple[str, ...]:
    """The informative identifiers in a kernel's template arguments, in order of appearance.

    `elementwise_kernel<128, 2, gpu_kernel_impl_nocast<BinaryFunctor<float, float, float,
    MulFunctor<float>>>(...)::[lambda(int)]>` gives ('MulFunctor',); a foreach optimizer kernel
    gives ('BinaryOpScalarFunctor', 'multiplies'). Parameter lists and lambda markers are dropped
    first, so argument types such as TensorIteratorBase never show up.
    """
    s = _ANON_NS.sub("", scanned(demangled or ""))
    s = re.sub(r"^\s*void\s+", "", s)
    qualified, _ = _split_top_level_name(s)
    _, targs = _last_component(qualified)
    if not targs:
        return ()
    targs = _drop_groups(targs)
    seen: list[str] = []
    for q in _QUALIFIED_ID.findall(targs):
        ident = q.rsplit("::", 1)[-1]
        if ident in _BORING or _BORING_RE.match(ident) or ident in seen:
            continue
        seen.append(ident)
    return tuple(seen)


@lru_cache(maxsize=65536)
def short_kernel_name(demangled: str) -> str:
    """A readable name: no return type, no namespaces, template args reduced to the functor(s).

    >>> short_kernel_name("void at::native::vectorized_elementwise_kernel<(int)4, "
    ...     "at::native::CUDAFunctor_add<float>, std::array<char *, (unsigned long)3>>(int, T2, T3)")
    'vectorized_elementwise_kernel<CUDAFunctor_add>'

    Names that are not C++ signatures (`sm80_xmma_gemm_...`, `triton_poi_fused_...`, nsys's
    `[CUDA memcpy Host-to-Device]`) come back unchanged.
    """
    if not demangled:
        return ""
    demangled = scanned(demangled)
    s = demangled.strip()
    if s.startswith("[") or not any(c in s for c in "<(:"):
        return s
    s = _ANON_NS.sub("", s)
    s = re.sub(r"^\s*void\s+", "", s)
    qualified, _ = _split_top_level_name(s)
    base, _ = _last_component(qualified)
    if not base:
        return demangled.strip()
    functors = kernel_functors(demangled)[:2]
    return f"{base}<{', '.join(functors)}>" if functors else base


# ---------------------------------------------------------------------------------------------
# GEMM name decoding
# ---------------------------------------------------------------------------------------------

# The keys every decoded GEMM carries (None where the name does not say).
_FIELDS = (
    "library",  # who ships the kernel: cuBLAS, cuBLASLt, CUTLASS, TensorRT, Triton, ...
    "kind",  # the kernel generator / naming scheme: xmma, nvjet, cutlass2, cublas-legacy, ...
    "op",  # gemm, gemv, split-k reduce, fprop/dgrad/wgrad (implicit-GEMM convolutions)
    "arch",  # the SM the kernel was compiled for (sm80 kernels run on H100/H200 too)
    "math",  # simt (CUDA-core FMA), tensorop (mma.sync), gmma (Hopper warpgroup MMA)
    "precision",  # the raw precision token as spelled in the name
    "a_type",
    "b_type",
    "math_type",  # type fed to the multiplier (tf32 = fp32 data rounded for tensor cores)
    "accum_type",
    "epilogue_type",  # type of the alpha/beta epilogue arithmetic
    "c_type",
    "layout",  # BLAS transposes of A and B: 'tn' = A transposed, B not (column-major view)
    "layout_c",
    "tile",  # CTA tile, 'MxNxK' (or 'MxN' when K is not encoded)
    "stages",  # shared-memory pipeline depth (K-slices in flight)
    "warps",  # warp (or warpgroup) arrangement in the CTA, 'MxNxK'
    "cluster",  # thread-block cluster shape (Hopper)
    "split_k",  # True: the name says split-K; False: it does not
    "role",  # 'main' or 'split-k reduction' (the pass that sums K-slices)
    "flags",  # remaining name tokens, verbatim
)

_TYPE_TOKEN = re.compile(r"tf32|bf16|f16|f32|f64|e4m3|e5m2|s8|u8|s32|i8|i32|f8")
_TYPE_GROUP = re.compile(r"(?:tf32|bf16|f16|f32|f64|e4m3|e5m2|s8|u8|s32|i8|i32|f8)+")

_ARCH_NAMES = {
    "kepler": "sm35",
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "ada": "sm89",
    "hopper": "sm90",
    "blackwell": "sm100",
}

# CUTLASS 2.x core names start with the accumulator's short type letter
# (cutlass/library ShortDataTypeNames): s = f32, d = f64, h = f16, i = s32, c/z = complex.
_ACCUM_LETTER = {"s": "f32", "d": "f64", "h": "f16", "i": "s32", "c": "cf32", "z": "cf64"}

_C_TYPES = {
    "float": "f32",
    "double": "f64",
    "__half": "f16",
    "half": "f16",
    "c10::Half": "f16",
    "__nv_bfloat16": "bf16",
    "c10::BFloat16": "bf16",
    "int": "s32",
}


def _empty(**kw) -> dict:
    d = dict.fromkeys(_FIELDS)
    d["split_k"] = False
    d["role"] = "main"
    d["flags"] = []
    d.update(kw)
    return d


def _types(group: str) -> list[str]:
    return _TYPE_TOKEN.findall(group)


# cuBLAS "xmma" kernels, e.g. (small_ctx128_threads, xl_ctx256, h100_2gpu_1s)
#   sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas
# and, from public profiles (not in our traces),
#   sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas
#   sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas
#   sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize192x128x32_stage3_warpsize4x2x1_tensor16x8x16_kernel
# Fields:
#   smNN        compile target. Our traces ran on H100/H200 (sm90) yet use sm80 kernels: cuBLAS
#               has no Hopper-specific FP32-FFMA kernel, so arch is the build target, not the GPU.
#   3 precision groups  {A}{B}_{math}{accum}_{epilogue}. The middle group cannot be the output
#               type: in 'f32f32_tf32f32_f32' it reads tf32, which no tensor is stored as; it is
#               the type the multiplier consumes. The last group is f32 even for bf16 GEMMs whose
#               output is bf16 ('bf16bf16_bf16f32_f32' is the top kernel of bf16 training runs),
#               so it is the alpha/beta epilogue type, not C's storage type (not encoded).
#   tn_n        BLAS transposes of A and B (column-major convention), then C's layout letter.
#   tilesizeMxNxK  CTA tile. stageN  cp.async pipeline depth. warpsizeMxNxK  warps per CTA along
#               M, N, K (1x4x1 = 4 warps); warpgroupsize is the Hopper analogue (groups of 4 warps
#               issuing wgmma), so its presence means gmma math.
#   ffma        FP32 fused multiply-add on CUDA cores: no tensor cores (fp32 matmul, TF32 off).
#   tensorMxNxK mma.sync instruction shape on tensor cores.
#   alignaN/alignc N  vector width (elements) of A and C accesses.
#   execute_split_k_kernel  the split-K reduction pass: in every one of our traces it directly
#               follows an execute_kernel of the identical configuration on the same stream
#               (small_ctx128_threads: 84+84, xl_ctx256: 240, h100_2gpu_1s: 240+14) and takes a
#               few microseconds against the main kernel's tens to hundreds.
#   segment_k_on/off  Hopper cuBLAS segment-K (stream-K style K splitting) switch.
#   __5x_cublas / _trt  which library the kernel ships in.
_XMMA = re.compile(r"^(?P<arch>sm\d+)_xmma_(?P<op>gemm|fprop|dgrad|wgrad)_(?P<rest>.*)$")


def _decode_xmma(name: str) -> dict | None:
    m = _XMMA.match(name)
    if not m:
        return None
    rest = m.group("rest")
    d = _empty(kind="xmma", arch=m.group("arch"), op=m.group("op"))
    if rest.endswith("_cublas"):
        d["library"] = "cuBLAS"
    elif rest.endswith("_trt"):
        d["library"] = "TensorRT"
    elif m.group("op") != "gemm":
        d["library"] = "cuDNN"
    if "execute_split_k_kernel" in rest:
        d["split_k"] = True
        d["role"] = "split-k reduction"
        rest = rest.replace("execute_split_k_kernel", "")
    for tag in ("segment_k_off", "segment_k_on"):
        if tag in rest:
            d["flags"].append(tag)
            rest = rest.replace(tag, "")
    groups: list[str] = []
    for tok in rest.split("_"):
        if not tok:
            continue
        if _TYPE_GROUP.fullmatch(tok) and len(groups) < 3 and d["layout"] is None:
            groups.append(tok)
        elif tok in ("nn", "nt", "tn", "tt") and d["layout"] is None:
            d["layout"] = tok
        elif tok in ("n", "t") and d["layout"] is not None and d["layout_c"] is None:
            d["layout_c"] = tok
        elif mm := re.fullmatch(r"tilesize(\d+x\d+x\d+)", tok):
            d["tile"] = mm.group(1)
        elif mm := re.fullmatch(r"stage(\d+)", tok):
            d["stages"] = int(mm.group(1))
        elif mm := re.fullmatch(r"warpsize(\d+x\d+x\d+)", tok):
            d["warps"] = mm.group(1)
        elif mm := re.fullmatch(r"warpgroupsize(\d+x\d+x\d+)", tok):
            d["warps"] = mm.group(1) + " warpgroups"
            d["math"] = "gmma"
        elif mm := re.fullmatch(r"(?:cga|cluster)size(\d+x\d+x\d+)", tok):
            d["cluster"] = mm.group(1)
        elif tok in ("ffma", "hfma2", "dfma"):
            d["math"] = "simt"
            d["flags"].append(tok)
        elif mm := re.fullmatch(r"tensor(\d+x\d+x\d+)", tok):
            d["math"] = d["math"] or "tensorop"
            d["flags"].append(tok)
        elif tok == "gmma":
            d["math"] = "gmma"
        elif mm := re.fullmatch(r"align([a-c])(\d+)", tok):
            d["flags"].append(tok)
        elif tok in ("execute", "kernel", "5x", "cublas", "trt", "cudnn"):
            continue
        else:
            d["flags"].append(tok)
    if groups:
        d["precision"] = "_".join(groups)
        ab = _types(groups[0])
        d["a_type"] = ab[0] if ab else None
        d["b_type"] = ab[1] if len(ab) > 1 else d["a_type"]
    if len(groups) > 1:
        mid = _types(groups[1])
        d["math_type"] = mid[0] if mid else None
        d["accum_type"] = mid[1] if len(mid) > 1 else d["math_type"]
    if len(groups) > 2:
        d["epilogue_type"] = _types(groups[2])[0]
    if d["math"] is None and d["math_type"] in ("tf32", "bf16", "f16", "e4m3", "e5m2", "s8"):
        d["math"] = "tensorop"  # these types only exist as tensor-core inputs
    return d


# cuBLAS nvJet kernels (cuBLAS 12.x on Hopper+), e.g.
#   nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT  (medium_ctx1024_fwd_flash: the 96
#       nn.Linear calls per forward, which all have a bias)
#   nvjet_sm90_tst_304x128_64x3_1x2_h_bz_coopA_TNN       (same trace: the LM head, no bias)
#   nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN       (mfu_2gpu_before)
# NVIDIA does not document this scheme; only fields with evidence are decoded:
#   MxN         CTA tile.
#   KxS         K-tile and pipeline stages: S falls as the tile grows so that S*(M+N)*K*2 bytes
#               stays near the ~200 KiB of shared memory (256x128_64x4: 192 KiB, 304x128_64x3:
#               162 KiB, 96x64_64x10: 200 KiB, 64x8_64x16: 144 KiB).
#   AxB         thread-block cluster shape (Hopper); kept as 'cluster'.
#   bias        bias add fused into the epilogue: present exactly on the GEMMs of nn.Linear
#               layers with a bias, absent on GPT-2's bias-less LM head in the same trace.
#   splitK      split-K variant (seen in public vLLM profiles).
#   TNT/TNN     first two letters: transposes of A and B, as in xmma's 'tn'; the third letter
#               is kept verbatim in layout_c (its meaning is not documented).
#   tst, h/v, bz/badd, coopA/coopB, 2cta  kept verbatim in 'flags' (variant first).
_NVJET = re.compile(
    r"^nvjet_(?:(?P<arch>sm\d+)_)?(?P<variant>[a-z]+)_(?P<m>\d+)x(?P<n>\d+)_(?P<k>\d+)x(?P<s>\d+)"
    r"_(?P<cluster>\d+x\d+)(?P<rest>(?:_[A-Za-z0-9]+)*?)_(?P<layout>[TN]{2})(?P<c>[TN])$"
)


def _decode_nvjet(name: str) -> dict | None:
    m = _NVJET.match(name)
    if not m:
        return None
    flags = [m.group("variant")] + [t for t in m.group("rest").split("_") if t]
    d = _empty(
        library="cuBLAS",
        kind="nvjet",
        op="gemm",
        arch=m.group("arch"),
        tile=f"{m.group('m')}x{m.group('n')}" + (f"x{m.group('k')}" if m.group("k") else ""),
        stages=int(m.group("s")) if m.group("s") else None,
        cluster=m.group("cluster"),
        layout=m.group("layout").lower(),
        layout_c=m.group("c").lower(),
        flags=flags,
    )
    d["split_k"] = "splitK" in flags
    # nvJet is cuBLASLt's JIT-built GEMM for Hopper and later: warpgroup MMA on the tensor cores
    # (the `h`/`v` and `bz` tokens are raster order and beta = 0, not a type). The name does not
    # carry the input type: the run's settings say it (bf16/fp16 autocast, TF32). Seen on H100/H200
    # for bf16 autocast (sample_traces/async/small_ctx512_bf16_b8_async); fp32 without TF32 ran
    # sm80_xmma ffma and CUTLASS simt kernels, TF32 sm90_xmma tf32 kernels.
    d["math"] = "gmma"
    return d


# CUTLASS 2.x kernels, e.g. (small_ctx128_threads, small_ctx128_graphs, xl_ctx256)
#   void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)
# The template argument is CUTLASS's procedural name (cutlass/library generator:
# "cutlass_${opcode_class}_${extended_name}_${M}x${N}_${K}x${stages}_${layout}_align${alignment}",
# with layout letters n = column-major, t = row-major for A then B, alignment = A's, in
# elements). The extended name is '[{C type}_]{accum letter}{mma shape}{math type}gemm[_{A type}]'.
# In our traces cuBLAS itself launches these: each call is followed on the same stream by
# cublasLt::splitKreduce_kernel (175/175 in small_ctx128_threads, 200/200 in small_ctx128_graphs).
# cuBLAS's Turing-generation kernels leave the `_KxS` out: `cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nt_align1`
# (bf16 in and out, fp32 accumulate, mma 16x8x8 on the tensor cores: the batched matmuls of timm's
# manual attention under bf16 autocast, sample_traces/thirdparty/vitattn_r1_vit_b64_bf16_manual); read as no GEMM
# name, they were taken for fp32 on CUDA cores.
_CUTLASS2 = re.compile(
    r"cutlass_(?P<arch>\d+)_(?P<opclass>simt|tensorop|wmma_tensorop|sparse_tensorop)_"
    r"(?P<ext>\w{1,64}?)_(?P<m>\d+)x(?P<n>\d+)(?:_(?P<k>\d+)x(?P<s>\d+))?_(?P<layout>[nt]{2})"
    r"(?:_align(?P<align>\d+))?(?P<rest>\w*)"
)
_CUTLASS_EXT = re.compile(
    r"^(?:(?P<c>[a-z]+\d+)_)?(?P<acc>[sdhicz])(?P<shape>\d*)(?P<mt>[a-z]+\d+)?gemm(?:_(?P<a>[a-z]+\d+))?$"
)


def _decode_cutlass2(name: str) -> dict | None:
    m = _CUTLASS2.search(name)
    if not m:
        return None
    opclass = m.group("opclass")
    d = _empty(
        library="CUTLASS",
        kind="cutlass2",
        op="gemm",
        arch=f"sm{m.group('arch')}",
        math="simt" if opclass == "simt" else "tensorop",
        precision=m.group("ext"),
        tile=f"{m.group('m')}x{m.group('n')}" + (f"x{m.group('k')}" if m.group("k") else ""),
        stages=int(m.group("s")) if m.group("s") else None,
        layout=m.group("layout"),
    )
    if m.group("align"):
        d["flags"].append(f"align{m.group('align')}")
    if "splitk" in (m.group("rest") or ""):
        d["split_k"] = True
    e = _CUTLASS_EXT.match(m.group("ext"))
    if e:
        acc = _ACCUM_LETTER[e.group("acc")]
        d["accum_type"] = acc
        # Absent suffixes mean "same as the accumulator" in CUTLASS's naming.
        d["a_type"] = e.group("a") or acc
        d["b_type"] = d["a_type"]
        d["c_type"] = e.group("c") or acc
        d["math_type"] = e.group("mt") or d["a_type"]
        if d["math"] == "tensorop" and not e.group("mt") and d["a_type"] == "f32":
            # fp32 data on tensor cores is multiplied as tf32 (`tensorop_s1688gemm`: mma 16x8x8,
            # the TF32 instruction; small_ctx512_tf32 has these next to cuBLAS' tf32 kernels)
            d["math_type"] = "tf32"
        if e.group("shape"):
            d["flags"].append(f"mma{e.group('shape')}")
    return d


# Pre-xmma cuBLAS kernels named after the GPU generation, e.g. (public profiles)
#   ampere_sgemm_128x64_tn, ampere_sgemm_32x32_sliced1x4_tn,
#   ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x3_tn, volta_h884gemm_64x64_ldg8_nn
# Same conventions as CUTLASS 2 (accumulator letter, mma shape, '_KxS' after 'stages'),
# 'slicedAxB' = warps that split K inside the CTA, 'ldgN' = N-element global loads.
_LEGACY = re.compile(
    r"^(?:trt_)?(?P<gen>kepler|maxwell|pascal|volta|turing|ampere|ada|hopper)_"
    r"(?:(?P<in>fp16|bf16|int8|tf32|fp32)_)?(?P<acc>[sdhic])(?P<shape>\d*)gemm"
    r"(?:_(?P<out>fp16|bf16|int8|fp32))?_(?P<m>\d+)x(?P<n>\d+)(?P<rest>(?:_[a-z0-9x]+?)*?)"
    r"_(?P<layout>[nt]{2})(?:_v\d+)?$"
)
_LEGACY_TYPES = {"fp16": "f16", "bf16": "bf16", "int8": "s8", "tf32": "tf32", "fp32": "f32"}


def _decode_legacy(name: str) -> dict | None:
    m = _LEGACY.match(name)
    if not m:
        return None
    acc = _ACCUM_LETTER[m.group("acc")]
    a = _LEGACY_TYPES.get(m.group("in") or "", acc)
    d = _empty(
        library="TensorRT" if name.startswith("trt_") else "cuBLAS",
        kind="cublas-legacy",
        op="gemm",
        arch=_ARCH_NAMES[m.group("gen")],
        math="tensorop" if m.group("shape") else "simt",
        accum_type=acc,
        a_type=a,
        b_type=a,
        c_type=_LEGACY_TYPES.get(m.group("out") or "", a),
        layout=m.group("layout"),
    )
    tile = f"{m.group('m')}x{m.group('n')}"
    rest = m.group("rest") or ""
    if st := re.search(r"_stages_(\d+)x(\d+)", rest):
        tile += f"x{st.group(1)}"
        d["stages"] = int(st.group(2))
        rest = rest.replace(st.group(0), "")
    d["tile"] = tile
    if m.group("shape"):
        d["flags"].append(f"mma{m.group('shape')}")
    d["flags"] += [t for t in rest.split("_") if t]
    return d


# cuBLAS small-shape kernels (public profiles): gemv2T_kernel_val / gemv2N_kernel /
# gemvNSP_kernel (matrix-vector), gemmSN_TN_kernel<float, 128, 16, ...> / gemmSN_NN_kernel
# (skinny GEMMs), gemmk1_kernel (K = 1). The letters after the underscore are A/B transposes;
# gemmSN's first template argument is the element type.
_SMALL = re.compile(
    r"^(?:void\s+)?(?:\w+::)*(?P<kind>gemvNSP|gemv2?|gemmSN|gemmk1)"
    r"(?P<tr>[TN]?)_?(?P<tr2>[TN]{2})?_?\w*(?:<(?P<targ>[^,>]+))?"
)


def _decode_small(name: str) -> dict | None:
    m = _SMALL.match(name)
    if not m:
        return None
    kind = m.group("kind")
    d = _empty(library="cuBLAS", kind=kind, op="gemv" if kind.startswith("gemv") else "gemm")
    if m.group("tr2"):
        d["layout"] = m.group("tr2").lower()
    elif m.group("tr"):
        d["layout"] = m.group("tr").lower()
    if m.group("targ") and kind == "gemmSN":  # gemv's leading template args are index types
        t = _C_TYPES.get(m.group("targ").strip())
        d["a_type"] = d["b_type"] = t
    return d


def _decode_splitk_reduce(name: str) -> dict | None:
    # void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, ...>
    # (small_ctx128_threads/_graphs): always right after a CUTLASS Kernel2 sgemm on the same
    # stream, it sums the K-slice partial products and applies alpha/beta (and bias).
    if "splitKreduce_kernel" not in name:
        return None
    return _empty(
        library="cuBLASLt" if "cublasLt" in name else "cuBLAS",
        kind="splitKreduce",
        op="split-k reduce",
        split_k=True,
        role="split-k reduction",
    )


def _decode_triton(name: str) -> dict | None:
    # TorchInductor matmul templates: triton_tem_fused_mm_0, triton_tem_fused_addmm_1, ...
    # the lookahead checks "all word characters" once: `_\d+\w*$` retried at every `_\d` is quadratic
    m = re.match(r"^triton_tem_fused_(?=\w+$)(?P<ops>\w+?)_\d", name)
    if not m:
        return None
    ops = m.group("ops").split("_")
    op = next((o for o in ops if o in ("mm", "addmm", "bmm", "baddbmm", "convolution")), "gemm")
    return _empty(library="Triton", kind="triton-template", op=op, flags=ops)


_GEMMISH = re.compile(r"(?i)gemm|gemv|cublas|cutlass|nvjet|matmul|triton_tem_")
_NOT_GEMM = re.compile(r"(?i)flash|fmha|sdpa|attention|_attn_|^\[")


def _decode_generic(name: str) -> dict | None:
    if not _GEMMISH.search(name) or _NOT_GEMM.search(name):
        return None
    lib = (
        "cuBLASLt"
        if "cublasLt" in name
        else "cuBLAS"
        if "cublas" in name.lower()
        else "CUTLASS"
        if "cutlass" in name.lower()
        else None
    )
    d = _empty(library=lib, kind="unknown", op="gemm")
    if a := re.search(r"sm_?(\d{2,3})", name):
        d["arch"] = f"sm{a.group(1)}"
    if t := re.search(r"(?<![\dx])(\d+x\d+(?:x\d+)?)(?![\dx])", name):
        d["tile"] = t.group(1)
    if lay := re.search(r"(?:^|_)(nn|nt|tn|tt)(?:_|<|$)", name):
        d["layout"] = lay.group(1)
    return d


_DECODERS = (
    _decode_xmma,
    _decode_nvjet,
    _decode_cutlass2,
    _decode_legacy,
    _decode_splitk_reduce,
    _decode_triton,
    _decode_small,
    _decode_generic,
)


@lru_cache(maxsize=16384)
def _decode_cached(name: str) -> tuple | None:
    name = scanned(name).strip()
    if _NOT_GEMM.search(name):
        return None  # FlashAttention/cuDNN SDPA names contain 'cutlass'/'wgmma' but are attention
    for dec in _DECODERS:
        d = dec(name)
        if d is not None:
            return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items())
    return None


def decode_gemm(name: str) -> dict | None:
    """The configuration a GEMM kernel's name encodes, or None if the name is not a GEMM.

    Keys (always all present, None when the name does not encode them): library, kind, op,
    arch, math, precision, a_type, b_type, math_type, accum_type, epilogue_type, c_type, layout,
    layout_c, tile, stages, warps, cluster, split_k, role, flags. See the comments above each
    decoder for what each part means and which real names show it.
    """
    if not isinstance(name, str) or not name:
        return None
    t = _decode_cached(name)
    if t is None:
        return None
    d = dict(t)
    d["flags"] = list(d["flags"])
    return d


_MATH_WORDS = {
    "simt": "CUDA cores (FMA), no tensor cores",
    "tensorop": "tensor cores (mma.sync)",
    "gmma": "Hopper tensor cores (warpgroup wgmma)",
}


def gemm_summary(d: dict) -> str:
    """One line for a decoded GEMM, e.g. 'cuBLAS xmma sm80 · f32 (FFMA, CUDA cores) · tn · ...'."""
    parts = [" ".join(p for p in (d.get("library"), d.get("kind"), d.get("arch")) if p)]
    prec = []
    if d.get("a_type"):
        prec.append(f"{d['a_type']} in")
    if d.get("math_type") and d.get("math_type") != d.get("a_type"):
        prec.append(f"{d['math_type']} math")
    if d.get("accum_type"):
        prec.append(f"{d['accum_type']} accumulate")
    if d.get("math"):
        prec.append(_MATH_WORDS.get(d["math"], d["math"]))
    if prec:
        parts.append(", ".join(prec))
    if d.get("layout"):
        parts.append(d["layout"])
    if d.get("tile"):
        parts.append(f"tile {d['tile']}")
    if d.get("stages"):
        parts.append(f"{d['stages']} stages")
    if d.get("warps"):
        parts.append(f"warps {d['warps']}")
    if d.get("cluster"):
        parts.append(f"cluster {d['cluster']}")
    if d.get("role") == "split-k reduction":
        parts.append("split-K reduction pass")
    elif d.get("split_k"):
        parts.append("split-K")
    return " · ".join(p for p in parts if p)


def gemm_math(name: str) -> str:
    """What a GEMM multiplies in and on which units, from its name (`tf32, tensor cores`,
    `f32, CUDA cores`); "" for a name that is no GEMM or does not say."""
    d = decode_gemm(name)
    if not d:
        return ""
    prec = d.get("math_type") or d.get("a_type") or ""
    units = {"simt": "CUDA cores", "tensorop": "tensor cores", "gmma": "tensor cores"}.get(d.get("math") or "", "")
    return ", ".join(p for p in (prec, units) if p)


_LAYOUT_WORDS = {"n": "not transposed", "t": "transposed"}


def gemm_detail_lines(d: dict) -> list[tuple[str, str]]:
    """(label, plain-language value) pairs for a kernel-detail pane; only fields that are known."""
    out: list[tuple[str, str]] = []

    def add(label: str, value) -> None:
        if value not in (None, "", []):
            out.append((label, str(value)))

    add("library", d.get("library"))
    add("kernel kind", d.get("kind"))
    add("operation", d.get("op"))
    if d.get("arch"):
        add("compiled for", f"{d['arch']} (can run on newer GPUs)")
    add("math units", _MATH_WORDS.get(d.get("math") or "", d.get("math")))
    add("precision token", d.get("precision"))
    if d.get("a_type"):
        add("A / B types", f"{d['a_type']} / {d.get('b_type') or d['a_type']}")
    add("multiplies in", d.get("math_type"))
    add("accumulates in", d.get("accum_type"))
    add("epilogue (alpha/beta) in", d.get("epilogue_type"))
    add("C type", d.get("c_type"))
    lay = d.get("layout")
    if lay and len(lay) == 2:
        add("transposes", f"{lay}: A {_LAYOUT_WORDS[lay[0]]}, B {_LAYOUT_WORDS[lay[1]]} (BLAS, column-major)")
    elif lay:
        add("transpose", lay)
    add("CTA tile (MxNxK)", d.get("tile"))
    add("pipeline stages", d.get("stages"))
    add("warps per CTA (MxNxK)", d.get("warps"))
    add("cluster", d.get("cluster"))
    if d.get("role") == "split-k reduction":
        add("split-K", "this kernel is the reduction pass that sums the K-slices of the GEMM before it")
    elif d.get("split_k"):
        add("split-K", "yes")
    add("other name tokens", " ".join(d.get("flags") or []))
    return out


# Scalar types as they appear in PyTorch kernels' template arguments (the tensor's dtype).
_DTYPE_WORDS = {
    "float": "f32", "double": "f64", "Half": "f16", "__half": "f16", "half": "f16",
    "BFloat16": "bf16", "__nv_bfloat16": "bf16", "bfloat16": "bf16",
    "long": "i64", "int64_t": "i64", "int": "i32", "int32_t": "i32", "short": "i16",
    "bool": "bool", "int8_t": "i8", "uint8_t": "u8",
    "Float8_e4m3fn": "e4m3", "Float8_e5m2": "e5m2", "ComplexFloat": "c64",
}
_DTYPE_TOKEN = re.compile(r"(?<![\w:])(?:c10::)?(" + "|".join(sorted(_DTYPE_WORDS, key=len, reverse=True)) + r")(?!\w)")
# What is not a dtype: casts of template values ((int)4, (unsigned long)3), unsigned index types,
# char pointers, and TensorIterator's index lambda.
_NOT_DTYPE = re.compile(r"\((?:unsigned |signed )?(?:int|long|short|char|bool)\)\s*-?\d+|unsigned (?:int|long|short|char)"
                        r"|(?:signed )?char\s*\*|\[lambda\(int\) \(instance \d+\)\]|lambda\(int\)")


_FLOAT_TYPES = frozenset({"f32", "f64", "f16", "bf16", "e4m3", "e5m2", "c64"})


def kernel_dtype(demangled: str) -> str:
    """The first scalar type among a C++ kernel's template arguments (`f32`, `bf16`, `i64`...), the
    data type it works on; "" when the name says none (GEMM names: `decode_gemm`)."""
    s = _ANON_NS.sub("", scanned(demangled or ""))
    s = re.sub(r"^\s*void\s+", "", s)
    qualified, _ = _split_top_level_name(s)
    lt = qualified.find("<")
    if lt < 0:
        return ""
    found = [_DTYPE_WORDS[m.group(1)] for m in _DTYPE_TOKEN.finditer(_NOT_DTYPE.sub(" ", qualified[lt:]))]
    # a floating type is the data; an integer beside it is an index or a count (splitKreduce<int, float>)
    return next((t for t in found if t in _FLOAT_TYPES), found[0] if found else "")


def table_name(name: str) -> str:
    """A name people can tell apart in a table cell, the part that differs first (a narrow cell
    cuts the end). cuBLAS/CUTLASS names differ only in the middle (`..._nt_n_tilesize64x64x8_...`),
    which truncation hides, so decoded GEMMs show library, layout, tile and the type multiplied
    (`cuBLAS gemm tn 64x64x8 f32`; `tf32` where fp32 data is rounded for tensor cores). PyTorch's
    template kernels show the functor, then the data type, then the kernel
    (`MulFunctor f32 · vectorized_elementwise`: seven rows of `vectorized_elementwise_kernel<…`
    cut at 30 columns read the same). Two kernels can still share a label (a scalar vs a tensor
    operand): `distinct_labels` tells them apart within one table."""
    if not isinstance(name, str) or not name:
        return ""
    d = decode_gemm(name)
    if d and d.get("library") and d.get("layout") and d.get("tile"):
        prec = d.get("a_type") or ""
        if d.get("math_type") and d.get("math_type") != d.get("a_type"):
            prec = d["math_type"]  # fp32 data, tf32 math: the tensor-core path
        parts = [d["library"], d.get("op") or "gemm", d["layout"], d["tile"], prec]
        label = " ".join(p for p in parts if p)
        if d.get("role") == "split-k reduction":
            label += " split-K reduce"
        return label
    short = short_kernel_name(name)
    if short == name.strip() or "<" not in name:
        return short
    base = short.split("<", 1)[0]
    if not re.fullmatch(r"[A-Za-z_]\w*", base):
        return short  # not a C++ kernel's name (an odd or hostile string): as short_kernel_name reads it
    if base.endswith("_kernel") and len(base) > len("_kernel"):
        base = base[: -len("_kernel")]
    functors = kernel_functors(name)[:2]
    dtype = kernel_dtype(name)
    if functors:
        return f"{' '.join(functors)}{' ' + dtype if dtype else ''} · {base}"
    return f"{base} {dtype}" if dtype else short


_WORDS = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+")


def _gemm_traits(name: str) -> list[str] | None:
    d = decode_gemm(name)
    if not d:
        return None
    out = [str(f) for f in d.get("flags") or []]
    for key, fmt in (("arch", "{}"), ("kind", "{}"), ("math", "{}"), ("stages", "{} stages"), ("warps", "warps {}"),
                     ("cluster", "cluster {}"), ("epilogue_type", "epilogue {}"), ("c_type", "C {}"),
                     ("accum_type", "accumulate {}")):
        if d.get(key) not in (None, ""):
            out.append(fmt.format(d[key]))
    return out


def _words(name: str) -> list[tuple[str, str]]:
    """The name's words and numbers, each with the text just before it (namespaces dropped)."""
    s = re.sub(r"\b[A-Za-z_]\w*::", "", _ANON_NS.sub("", scanned(name)))
    out = []
    for m in _WORDS.finditer(s):
        left = s[max(0, m.start() - 14):m.start()]
        out.append((m.group(), ("…" if m.start() > 14 else "") + left + m.group()))
    return out


def _tag_word(word: str) -> str:
    return word[: -len("Functor")] if word.endswith("Functor") and len(word) > len("Functor") else word


def _tagged(label: str, tag: str) -> str:
    """The tag where a narrow cell still shows it: before ` · kernel` (`MulFunctor f32 BUnary ·
    vectorized_elementwise`), else at the end."""
    head, sep, base = label.partition(" · ")
    return f"{head} {tag}{sep}{base}" if sep else f"{label} {tag}"


def distinct_labels(names) -> tuple[list[str], list[str]]:
    """`table_name` of each name, made distinct: names (distinct strings) whose labels collide
    get a tag, the word that differs (`BUnary`, `segment_k_on`) where one tells
    them apart, else `#1`, `#2`... (in name order); and a note for each saying how it differs
    from the others ("" for a label alone). One table's names at a time."""
    names = [str(n) for n in names]
    labels = [table_name(n) for n in names]
    notes = [""] * len(names)
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    for label, rows in groups.items():
        if len(rows) < 2 or len({names[i] for i in rows}) < 2:
            continue
        rows = sorted(rows, key=lambda i: names[i])
        traits = [_gemm_traits(names[i]) for i in rows]
        gemms = [t for t in traits if t is not None]
        if len(gemms) == len(traits):
            common = set.intersection(*(set(t) for t in gemms))
            differ = [[(w, w) for w in t if w not in common] for t in gemms]
        else:
            words = [_words(names[i]) for i in rows]
            if len({len(w) for w in words}) == 1:  # same shape: the positions that differ
                at = [k for k in range(len(words[0])) if len({w[k][0] for w in words}) > 1]
                differ = [[w[k] for k in at] for w in words]
            else:
                common = set.intersection(*({x for x, _ in w} for w in words))
                differ = [[(x, c) for x, c in dict(w[::-1]).items() if x not in common][::-1] for w in words]
        # A word tells them apart (BUnaryFunctor / BinaryFunctor); numbers alone do not read.
        wordy = [[_tag_word(x) for x, _ in d if not x.isdigit() and len(x) >= 3][:2] for d in differ]
        tags = [" ".join(w) for w in wordy]
        use_words = all(tags) and len(set(tags)) == len(tags) and max(len(t) for t in tags) <= 14
        for k, i in enumerate(rows):
            labels[i] = _tagged(label, tags[k] if use_words else f"#{k + 1}")
        for k, i in enumerate(rows):
            others = ", ".join(labels[j] for j in rows if j != i)
            what = ", ".join(c for _, c in differ[k][:3])
            notes[i] = (f"same kernel as {others} but for: {what}" if what
                        else f"another instantiation than {others} (d: full names)")
    return labels, notes
