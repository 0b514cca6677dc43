"""The rows of devruns/gpu_repeat_twins.sh's captures (and gpu_graph_holdout.sh's) (docs/whatif.md, "Repeated pairs"): each pair
rK of a set as tests/helpers/twins_table.py computes a committed pair's row, then the set's row
(repeats_row: medians over the pairs, the noise from their spread).

    PYTHONPATH=$PWD python3 devruns/repeat_twins_table.py [--old] FOLDER [SET ...]   (default: every set found)

--old: the findings rule's own estimate beside each row (the old subtraction; "not raised" without it).

FOLDER holds SET_rK_NAME.sqlite.xz as the script writes them (tf32rev's are named tf32_rK_...;
decodegraphb: decodegraph's pairs of the later call, gpu_thirdparty_twins_memset.log, renamed)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.replay_twins import Repeats, Twin  # noqa: E402
from helpers.twins_table import markdown, repeats_row, row  # noqa: E402

SETS = {  # set: (base stem, twin stem, edits, rule)
    "input": ("small_ctx128_pageable-input", "small_ctx128_pinned-input", ("pin",), "pageable-memcpy"),
    "item": ("small_ctx128_nosync_item", "small_ctx128_nosync", ("nosync:cudaStreamSynchronize",), "sync-stall"),
    "tf32": ("small_ctx512", "small_ctx512_tf32", ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    # devruns/gpu_graph_holdout.sh
    "graph256": ("small_ctx256_b1_async_capturable", "small_ctx256_b1_async_cuda-graph", ("graph",), "launch-bound"),
    "graphmed": ("medium_ctx128_b1_async_capturable", "medium_ctx128_b1_async_cuda-graph", ("graph",), "launch-bound"),
    # devruns/gpu_thirdparty_twins.sh: workloads nobody here wrote
    "vitgraph": ("vit_b8_eager", "vit_b8_graph", ("graph",), "launch-bound"),
    "vitgraphsleep": ("vit_b8_sleep_eager", "vit_b8_sleep_graph", ("graph",), "launch-bound"),
    "vitphasegraph": ("vit_b8_eager", "vit_b8_phasegraph", ("fix:launch-bound",), "launch-bound"),
    "decodegraph": ("decode_eager", "decode_graph", ("graph",), "launch-bound"),
    "decodegraphb": ("decode_eager", "decode_graph", ("graph",), "launch-bound"),  # the memset call's pairs beside
    "decodecopy": ("decode_copy_eager", "decode_copy_graph", ("graph",), "launch-bound"),
    "decode18": ("decode18_eager", "decode18_graph", ("graph",), "launch-bound"),
    "decodememset": ("decode_memset_eager", "decode_memset_graph", ("graph",), "launch-bound"),
    "vitinfer": ("vit_infer_eager", "vit_infer_graph", ("graph",), "launch-bound"),
    # held out from the segment rule (docs/whatif.md, "When a graph's GPU work starts")
    "decode12": ("decode12_eager", "decode12_graph", ("graph",), "launch-bound"),
    "decodefp32": ("decode_fp32_eager", "decode_fp32_graph", ("graph",), "launch-bound"),
    "vitbgraph": ("vitb_b8_eager", "vitb_b8_graph", ("graph",), "launch-bound"),
    "vitoptim": ("vit_b32_foreach-off", "vit_b32_fused", ("kernels-from:{twin}",), "unfused-optimizer"),
    "vitoptimfix": ("vit_b32_foreach-off", "vit_b32_fused", ("fix:unfused-optimizer",), "unfused-optimizer"),
    "vittf32": ("vit_b64_fp32", "vit_b64_tf32", ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    "vittf32fix": ("vit_b64_fp32", "vit_b64_tf32", ("fix:fp32-gemm-without-tensor-cores",),
                   "fp32-gemm-without-tensor-cores"),
    # held out: HF Trainer (devruns/gpu_thirdparty_twins.sh hfoptim hftf32)
    "hfoptim": ("hf_foreach-off", "hf_fused", ("kernels-from:{twin}",), "unfused-optimizer"),
    "hfoptimfix": ("hf_foreach-off", "hf_fused", ("fix:unfused-optimizer",), "unfused-optimizer"),
    "hftf32": ("hf_fp32", "hf_tf32", ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    "hftf32fix": ("hf_fp32", "hf_tf32", ("fix:fp32-gemm-without-tensor-cores",), "fp32-gemm-without-tensor-cores"),
    # held out: TF32 -> bf16 autocast, a change that inserts kernels (devruns/gpu_thirdparty_twins.sh hfbf16 vitbf16 gpt2bf16)
    "hfbf16": ("hf_tf32", "hf_bf16", ("kernels-from:{twin}",), ""),
    "vitbf16": ("vit_b64_tf32", "vit_b64_bf16", ("kernels-from:{twin}",), ""),
    "gpt2bf16": ("small_ctx512_tf32_b8_async", "small_ctx512_bf16_tf32_b8_async", ("kernels-from:{twin}",), ""),
    # devruns/gpu_combined_twins.sh: two fixes at once, replayed together
    "combined": ("small_ctx512_b8_async_host-sleep", "small_ctx512_tf32_b8_async", ("kernels-from:{twin}", "nohost:-5ms"),
                 ""),
    "combinedfix": ("small_ctx512_b8_async_host-sleep", "small_ctx512_tf32_b8_async",
                    ("fix:fp32-gemm-without-tensor-cores", "fix:host-bound-gap"), ""),
    # the same script with PLANT=pageable-input FIX=pinned-input (held out): TF32 and pinned input together
    "combinedpin": ("small_ctx512_b8_async_pageable-input", "small_ctx512_tf32_b8_async_pinned-input",
                    ("kernels-from:{twin}", "pin"), ""),
    "combinedpinfix": ("small_ctx512_b8_async_pageable-input", "small_ctx512_tf32_b8_async_pinned-input",
                       ("fix:fp32-gemm-without-tensor-cores", "fix:pageable-memcpy"), ""),
    # held out: a real input pipeline, the loader's workers (devruns/gpu_thirdparty_twins.sh loader loader2)
    "loader": ("loader_w0", "loader_w12", ("fix:host-bound-gap",), "host-bound-gap"),
    "loader2": ("loader_w0", "loader_w2", ("fix:host-bound-gap",), "host-bound-gap"),
    # the same pairs with the workers the twin ran: `workers:N` (the work nohost removes, N workers beside the step)
    "loaderw": ("loader_w0", "loader_w12", ("fix:host-bound-gap", "workers:12"), "host-bound-gap"),
    "loader2w": ("loader_w0", "loader_w2", ("fix:host-bound-gap", "workers:2"), "host-bound-gap"),
    # held out: the pageable-memcpy finding's fix in the same pipeline, 12 workers keeping up (loaderpin)
    "loaderpin": ("loader_w12", "loader_w12_pin", ("fix:pageable-memcpy",), "pageable-memcpy"),
    # held out after `pin` read a DataLoader's workers: ResNet-50, 192 px, batch 96, the batch held to the next fetch
    "loaderpin2": ("loader_r50_w12", "loader_r50_w12_pin", ("fix:pageable-memcpy",), "pageable-memcpy"),
    # held out after the pauses were capped at two passes of their copy: ResNet-34, batch 128 (77 MB)
    "loaderpin3": ("loader_r34_w12", "loader_r34_w12_pin", ("fix:pageable-memcpy",), "pageable-memcpy"),
    # held out: HF Trainer's default NaN/inf filter, a host read of the loss each step, against none (hfnan)
    "hfnan": ("hf_nanfilter", "hf_nonanfilter", ("fix:sync-stall",), "sync-stall"),
    # held out: the unfused-attention finding's fix (devruns/gpu_thirdparty_twins.sh attn512 attn512tf32 attn1024)
    "attn512": ("small_ctx512_b8_async", "small_ctx512_fused_b8_async", ("fix:unfused-attention",), "unfused-attention"),
    "attn512tf32": ("small_ctx512_tf32_b8_async", "small_ctx512_tf32_fused_b8_async", ("fix:unfused-attention",),
                    "unfused-attention"),
    "attn1024": ("small_ctx1024_tf32_b8_async", "small_ctx1024_tf32_fused_b8_async", ("fix:unfused-attention",),
                 "unfused-attention"),
    "hfattn": ("hf_eager", "hf_sdpa", ("fix:unfused-attention",), "unfused-attention"),
    # held out after the attention edit (flash SDPA on the tensor cores, as the GEMMs)
    "attn1024bf16": ("small_ctx1024_bf16_tf32_b8_async", "small_ctx1024_bf16_tf32_fused_b8_async", ("fix:unfused-attention",),
                     "unfused-attention"),
    "attn512bf16": ("small_ctx512_bf16_tf32_b8_async", "small_ctx512_bf16_tf32_fused_b8_async", ("fix:unfused-attention",),
                    "unfused-attention"),
    "hfattnk": ("hf_eager", "hf_sdpa", ("kernels-from:{twin}",), ""),
    # the same pairs with the twin's kernels and their host time (kernels-from: what the fix changes, carried)
    "attn512k": ("small_ctx512_b8_async", "small_ctx512_fused_b8_async", ("kernels-from:{twin}",), ""),
    "attn512tf32k": ("small_ctx512_tf32_b8_async", "small_ctx512_tf32_fused_b8_async", ("kernels-from:{twin}",), ""),
    "attn1024k": ("small_ctx1024_tf32_b8_async", "small_ctx1024_tf32_fused_b8_async", ("kernels-from:{twin}",), ""),
    # held out after the device copies joined the passes (GPT-2 medium fp32; small at ctx 2048, batch 4, bf16)
    "attnmed512": ("medium_ctx512_b8_async", "medium_ctx512_fused_b8_async", ("fix:unfused-attention",), "unfused-attention"),
    "attn2048bf16": ("small_ctx2048_bf16_tf32_async", "small_ctx2048_bf16_tf32_fused_async", ("fix:unfused-attention",),
                     "unfused-attention"),
    # held out after the fp32 SDPA's factor over TF32 GEMMs was set (FP32_SDPA_OVER_TF32)
    "attnmed512tf32": ("medium_ctx512_tf32_b8_async", "medium_ctx512_tf32_fused_b8_async", ("fix:unfused-attention",),
                       "unfused-attention"),
    "attn2048tf32": ("small_ctx2048_tf32_async", "small_ctx2048_tf32_fused_async", ("fix:unfused-attention",),
                     "unfused-attention"),
    "attnmed512k": ("medium_ctx512_b8_async", "medium_ctx512_fused_b8_async", ("kernels-from:{twin}",), ""),
    "attn2048bf16k": ("small_ctx2048_bf16_tf32_async", "small_ctx2048_bf16_tf32_fused_async", ("kernels-from:{twin}",), ""),
    # held out after round three, attention that is not causal (timm's ViT, fused_attn off / on)
    "vitattn": ("vit_b64_bf16_manual", "vit_b64_bf16_sdpa", ("fix:unfused-attention",), "unfused-attention"),
    "vitattntf32": ("vit_b64_tf32_manual", "vit_b64_tf32_sdpa", ("fix:unfused-attention",), "unfused-attention"),
    "vitattnrev": ("vit_b64_bf16_manual", "vit_b64_bf16_sdpa", ("fix:unfused-attention",), "unfused-attention"),
    # held out after the flash factor over bf16 GEMMs was set (HALF_SDPA_OVER_GEMMS): a step the GPU holds
    "attn1024bf16b32": ("small_ctx1024_bf16_tf32_b32_async", "small_ctx1024_bf16_tf32_fused_b32_async", ("fix:unfused-attention",),
                        "unfused-attention"),
}
FOLDER_SET = {"vittf32fix": "vittf32", "vitoptimfix": "vitoptim", "combinedfix": "combined",
              "combinedpinfix": "combinedpin", "hfoptimfix": "hfoptim", "hftf32fix": "hftf32",
              "loaderw": "loader", "loader2w": "loader2",
              "attn512k": "attn512", "attn512tf32k": "attn512tf32", "attn1024k": "attn1024",
              "hfattnk": "hfattn", "attnmed512k": "attnmed512", "attn2048bf16k": "attn2048bf16"}  # sets that read another set's captures


def main(argv: list[str]) -> int:
    old = "--old" in argv
    argv = [a for a in argv if a != "--old"]
    folder, names = Path(argv[0]), argv[1:] or list(SETS)
    for name in names:
        base, twin, edits, rule = SETS[name]
        files = FOLDER_SET.get(name, name)
        pairs = tuple(Twin(f"{name} r{k}", folder / f"{files}_r{k}_{base}.sqlite.xz", folder / f"{files}_r{k}_{twin}.sqlite.xz",
                           edits, rule) for k in (1, 2, 3) if (folder / f"{files}_r{k}_{base}.sqlite.xz").is_file())
        if not pairs:
            continue
        for t in pairs:
            print(markdown([row(t, old=old)]).splitlines()[2])
        print(markdown([repeats_row(Repeats(f"{name}, {len(pairs)} pairs", pairs), old=old)]).splitlines()[2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
