#!/usr/bin/env bash
# Third-party twins (docs/whatif.md, "Beyond GPT-2: third-party twins"): the `graph` edit and the
# fp32 finding's fix checked on workloads nobody here wrote, each pair one change apart, captured
# back to back with `nsight-tui capture -- CMD`, pairs alternating A B, B A, ... (since the ViT's attention
# pairs; A B A B before), on one machine in one call:
#   vitgraph     timm ViT-small training, batch 8, TF32: eager step / the step as one CUDA graph
#   decodegraph  a greedy decode loop over transformers' Llama (static cache, bf16, batch 1):
#                eager token / the token as one CUDA graph (a probe first: skipped if it cannot graph)
#   vittf32      timm ViT-small training, batch 64: fp32 / TF32
# and what sets when a graph's GPU work starts (its first node right after the call starts, or only
# after the call ends):
#   decodecopy   decodegraph's pair with a device-to-device copy first in each token
#   decode18     decodegraph's pair with 18 layers (a graph of ~950 nodes, no copy first)
#   decodememset decodegraph's pair with a cudaMemsetAsync first in each token (a probe first)
#   decodekinds  the decode graph alone in fp32 (TF32), and in bf16 without cuDNN's attention
#   decodeforeach  the decode graph alone ending with a _foreach_mul_ (a multi_tensor_apply kernel), and without
#   decodenvtx   the decode graph alone with an NVTX range pushed inside what it captures, and without
#   vitoptim     timm ViT-small training, batch 32, TF32: AdamW(foreach=False) / AdamW(fused=True)
#   vitinfer     timm ViT-small inference (the forward alone), batch 8, TF32: eager / one CUDA graph
#   gpt2graph    nsight-tui's GPT-2 small, ctx 128, batch 1: --plant capturable / cuda-graph
# and held out from the segment rule (parsers/replay/cudagraph.py), captured after it was written:
#   decode12     decodegraph's pair with 12 layers
#   decodefp32   decodegraph's pair in fp32 (TF32 matmuls)
#   vitbgraph    vitgraph's pair with ViT-base (a training step's graph, cut by memsets)
# and after `graph` (the step) kept the loop's own long pauses (docs/whatif.md, `graph[:RANGE]`):
#   vitgraphsleep  vitgraph's pair with a 10 ms time.sleep at each step's start, eager and graphed alike
# and the form launch-bound's fix replays, each phase its own graph:
#   vitphasegraph  vitgraph's eager step / forward, backward and optimizer each one CUDA graph
# and held out on a trainer nobody here wrote (HF Trainer over a Qwen2-shaped model, 4 layers, batch 8,
# seq 512), captured after the replay was written:
#   hfoptim      bf16, AdamW passed to the Trainer: foreach=False / fused=True
#   hftf32       fp32: TrainingArguments(tf32=False) / tf32=True
#   hfnan        bf16: the Trainer's default logging_nan_inf_filter=True (a host read of the loss each step) / False
# and held out on the change users make most, which inserts kernels (autocast's casts) as well as
# renaming them, captured after the replay was written:
#   hfbf16       TrainingArguments(tf32=True) / bf16=True (autocast, fp32 master weights)
#   vitbf16      timm ViT-small training, batch 64: TF32 / bf16 autocast
#   gpt2bf16     nsight-tui's GPT-2 small, ctx 512, batch 8, nothing synchronised in a step: --tf32 / --dtype bf16
# and held out on a real input pipeline (torchvision's ResNet-18 fed by FakeData through the usual
# crop/flip/normalize on the CPU, 40 steps), the change host-bound-gap's fix names:
#   loader       DataLoader(num_workers=0) / num_workers=12
#   loader2      DataLoader(num_workers=0) / num_workers=2 (too few workers to keep up)
#   loadersample num_workers=2 alone, batch 32, 12 steps (committed: steps that alternate)
# and held out on the pageable-memcpy finding's fix in a real input pipeline (the same, 12 workers keeping up):
#   loaderpin    DataLoader(num_workers=12), pageable batches copied blocking / pin_memory=True, non_blocking
#   loaderpin2   held out after `pin` took a DataLoader's workers into account: ResNet-50 at 192 px, batch 96,
#                the batch held until the next fetch (--keep-batch), pageable / pin_memory=True
#   loaderpin3   held out after the pauses were capped at two passes of the copy: ResNet-34, 224 px, batch 128
#                (77 MB a batch, the workers near their pace), pageable / pin_memory=True
# and held out on the unfused-attention finding's fix (attention written out as score GEMM, scale, mask,
# softmax and GEMM, against F.scaled_dot_product_attention), nsight-tui's GPT-2 small, batch 8, nothing
# synchronised in a step:
#   attn512      ctx 512, fp32 (GPU-bound): --attention manual / fused
#   attn512tf32  ctx 512, TF32 (the CPU's step): --attention manual / fused
#   attn1024     ctx 1024, TF32: --attention manual / fused
#   hfattn       HF Trainer (Qwen2-shaped, bf16): attn_implementation eager / sdpa
# and, held out after the attention edit was written, where SDPA runs flash on the tensor cores as the GEMMs do:
#   attn1024bf16 ctx 1024, bf16 autocast (TF32 elsewhere): --attention manual / fused
#   attn512bf16  the same at ctx 512
# and, after the ViT's pairs (vitattn, vitattntf32, always written out first) missed:
#   vitattnrev   vitattn's pairs the other way round: SDPA first
#   vitattnint, vitattntf32int  one capture each, 24 steps, the attention written out in the odd steps and SDPA
#                in the even ones (--alternate-attn: both sides on the same minute's CPU; their rows by
#                devruns/interleaved_table.py, their stems ending attention-manual-every2)
#   attnmed512   GPT-2 medium, ctx 512, fp32 (held out after the device copies joined the passes)
#   attn2048bf16 GPT-2 small, ctx 2048, batch 4, bf16 autocast (the same)
#   attnmed512tf32, attn2048tf32  the two above at TF32 (held out after the fp32 SDPA's factor was set)
#   vitattn, vitattntf32  timm ViT-small training, batch 64, bf16 autocast and TF32: its attention written out
#                (`fused_attn = False`, no mask: not causal) / SDPA (held out after round three)
#   attn1024bf16b32  GPT-2 small, ctx 1024, batch 32, bf16 autocast: a step the GPU still holds after the
#                fix (held out after the flash factor over bf16 GEMMs was set)
# Exports `xz -9`, one tar in $OUT: SET_rK_STEM.sqlite.xz (+ .steps.json), as
# devruns/repeat_twins_table.py reads them. New captures stop after $BUDGET_S seconds (default 470).
# Run: WHL=.whl DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_thirdparty_twins.sh [PAIRS] [SET ...]
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_thirdparty_twins}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
python3 -c "import torch, timm, torchvision, transformers; print('torch', torch.__version__, 'timm', timm.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
T=devruns/thirdparty
PAIRS=${1:-3}; shift || true
SETS=("${@:-vitgraph decodegraph vittf32}")
read -r -a SETS <<< "${SETS[*]}"
if [[ " ${SETS[*]} " == *" decodegraph "* ]]; then
  stamp "probe decode"
  if ! timeout 120 python3 $T/hf_decode_llama.py --graph --probe 2>&1 | tail -5 | grep -q "probe ok"; then
    timeout 120 python3 $T/hf_decode_llama.py --graph --probe 2>&1 | tail -20
    echo "decodegraph skipped: the decode loop does not graph here"
    SETS=("${SETS[@]/decodegraph}")
  fi
fi
if [[ " ${SETS[*]} " == *" decodememset "* ]]; then
  stamp "probe decode --memset-first"
  timeout 120 python3 $T/hf_decode_llama.py --graph --probe --memset-first 2>&1 | tail -3
fi
capnow() {  # set, k, stem, command...
  local set=$1 k=$2 stem=$3; shift 3
  if (( $(date +%s) - T0 > ${BUDGET_S:-470} )); then echo "out of time: $set r$k $stem not captured"; return; fi
  stamp "$set r$k $stem"; cpu_probe 6
  timeout 150 python3 -m nsight_tui capture --out "$W" --name "${set}_r${k}_${stem}" --no-open -- "$@" 2>&1 \
    | grep -E '^(step_|wrote)|rror|out of' | tr '\n' ' '; echo
}
# A set's captures are queued and run in order in odd rounds, the other way round in even ones (A B, B A):
# where the CPU holds the step the second of two back-to-back captures ran ~10 ms a step slower on an H200
# (the ViT's attention pairs, docs/whatif.md "Held out after round three"), so pairs alternate their order.
QUEUE=()
cap() { QUEUE+=("$(printf '%q ' "$@")"); }
run_queue() {  # k
  local i n=${#QUEUE[@]}
  if (( $1 % 2 == 0 )); then for (( i = n - 1; i >= 0; i-- )); do eval "capnow ${QUEUE[i]}"; done
  else for (( i = 0; i < n; i++ )); do eval "capnow ${QUEUE[i]}"; done; fi
  QUEUE=()
}
for k in $(seq 1 "$PAIRS"); do
  for s in "${SETS[@]}"; do
    case $s in
      vitgraph) cap $s $k vit_b8_eager python3 $T/timm_vit_twins.py --batch 8 --tf32
                cap $s $k vit_b8_graph python3 $T/timm_vit_twins.py --batch 8 --tf32 --graph ;;
      vitphasegraph) cap $s $k vit_b8_eager python3 $T/timm_vit_twins.py --batch 8 --tf32
                     cap $s $k vit_b8_phasegraph python3 $T/timm_vit_twins.py --batch 8 --tf32 --graph-phases ;;
      vitgraphsleep) cap $s $k vit_b8_sleep_eager python3 $T/timm_vit_twins.py --batch 8 --tf32 --sleep-ms 10
                     cap $s $k vit_b8_sleep_graph python3 $T/timm_vit_twins.py --batch 8 --tf32 --sleep-ms 10 --graph ;;
      decodegraph) cap $s $k decode_eager python3 $T/hf_decode_llama.py
                   cap $s $k decode_graph python3 $T/hf_decode_llama.py --graph ;;
      decodecopy) cap $s $k decode_copy_eager python3 $T/hf_decode_llama.py --copy-first
                  cap $s $k decode_copy_graph python3 $T/hf_decode_llama.py --copy-first --graph ;;
      decodememset) cap $s $k decode_memset_eager python3 $T/hf_decode_llama.py --memset-first
                    cap $s $k decode_memset_graph python3 $T/hf_decode_llama.py --memset-first --graph ;;
      decodekinds) cap $s $k decode_fp32_graph python3 $T/hf_decode_llama.py --dtype fp32 --graph
                   cap $s $k decode_nocudnn_graph python3 $T/hf_decode_llama.py --no-cudnn-sdpa --graph
                   cap $s $k decode_graph python3 $T/hf_decode_llama.py --graph ;;
      decodeforeach) cap $s $k decode_foreach_graph python3 $T/hf_decode_llama.py --foreach-last --graph
                     cap $s $k decode_graph python3 $T/hf_decode_llama.py --graph ;;
      decodenvtx) cap $s $k decode_nvtx_graph python3 $T/hf_decode_llama.py --nvtx-inside --graph
                  cap $s $k decode_graph python3 $T/hf_decode_llama.py --graph ;;
      vitoptim) cap $s $k vit_b32_foreach-off python3 $T/timm_vit_twins.py --batch 32 --tf32 --optim foreach-off
                cap $s $k vit_b32_fused python3 $T/timm_vit_twins.py --batch 32 --tf32 --optim fused ;;
      vitinfer) cap $s $k vit_infer_eager python3 $T/timm_vit_twins.py --batch 8 --tf32 --inference
                cap $s $k vit_infer_graph python3 $T/timm_vit_twins.py --batch 8 --tf32 --inference --graph ;;
      decode18) cap $s $k decode18_eager python3 $T/hf_decode_llama.py --layers 18
                cap $s $k decode18_graph python3 $T/hf_decode_llama.py --layers 18 --graph ;;
      gpt2graph) for p in capturable cuda-graph; do
                   stamp "$s r$k $p"; mkdir -p "$W/tmp"
                   timeout 150 python3 -m nsight_tui capture --warmup 3 --steps 5 --no-sync --no-count --batch 1 \
                     --model small --ctx 128 --plant $p --out "$W/tmp" 2>&1 | grep -E 'wrote|rror'
                   for f in "$W"/tmp/*.sqlite; do mv "$f" "$W/${s}_r${k}_$(basename "$f")"; done; rm -rf "$W/tmp"
                 done ;;
      decode12) cap $s $k decode12_eager python3 $T/hf_decode_llama.py --layers 12
                cap $s $k decode12_graph python3 $T/hf_decode_llama.py --layers 12 --graph ;;
      vitbgraph) cap $s $k vitb_b8_eager python3 $T/timm_vit_twins.py --model vit_base_patch16_224 --batch 8 --tf32
                 cap $s $k vitb_b8_graph python3 $T/timm_vit_twins.py --model vit_base_patch16_224 --batch 8 --tf32 --graph ;;
      decodefp32) cap $s $k decode_fp32_eager python3 $T/hf_decode_llama.py --dtype fp32
                  cap $s $k decode_fp32_graph python3 $T/hf_decode_llama.py --dtype fp32 --graph ;;
      hfoptim) cap $s $k hf_foreach-off python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --optim foreach-off
               cap $s $k hf_fused python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --optim fused ;;
      hftf32) cap $s $k hf_fp32 python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --precision fp32
              cap $s $k hf_tf32 python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --precision tf32 ;;
      hfnan) cap $s $k hf_nanfilter python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}"
             cap $s $k hf_nonanfilter python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --no-nan-filter ;;
      hfbf16) cap $s $k hf_tf32 python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --precision tf32
              cap $s $k hf_bf16 python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --precision bf16 ;;
      vitbf16) cap $s $k vit_b64_tf32 python3 $T/timm_vit_twins.py --batch 64 --tf32
               cap $s $k vit_b64_bf16 python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16 ;;
      gpt2bf16) for d in fp32 bf16; do
                  stamp "$s r$k $d"; cpu_probe 6; mkdir -p "$W/tmp"
                  timeout 150 python3 -m nsight_tui capture --warmup 3 --steps 6 --no-sync --no-count --batch 8 \
                    --model small --ctx 512 --tf32 --dtype $d --out "$W/tmp" 2>&1 | grep -E 'wrote|rror'
                  for f in "$W"/tmp/*.sqlite; do mv "$f" "$W/${s}_r${k}_$(basename "$f")"; done; rm -rf "$W/tmp"
                done ;;
      attn512|attn512tf32|attn1024|attn1024bf16|attn512bf16)
              ctx=512; [[ $s == attn1024* ]] && ctx=1024; prec=""; [ $s = attn512 ] || prec="--tf32"
              [[ $s == *bf16 ]] && prec="--tf32 --dtype bf16"
              for at in manual fused; do
                stamp "$s r$k $at"; cpu_probe 6; mkdir -p "$W/tmp"
                timeout 150 python3 -m nsight_tui capture --warmup 3 --steps 6 --no-sync --no-count --batch 8 \
                  --model small --ctx $ctx $prec --attention $at --out "$W/tmp" 2>&1 | grep -E 'wrote|rror'
                for f in "$W"/tmp/*.sqlite; do mv "$f" "$W/${s}_r${k}_$(basename "$f")"; done; rm -rf "$W/tmp"
              done ;;
      attnmed512|attn2048bf16|attnmed512tf32|attn2048tf32|attn1024bf16b32)
              args="--model medium --ctx 512 --batch 8"
              [ $s = attn1024bf16b32 ] && args="--model small --ctx 1024 --batch 32 --tf32 --dtype bf16"
              [ $s = attnmed512tf32 ] && args="--model medium --ctx 512 --batch 8 --tf32"
              [ $s = attn2048bf16 ] && args="--model small --ctx 2048 --batch 4 --tf32 --dtype bf16"
              [ $s = attn2048tf32 ] && args="--model small --ctx 2048 --batch 4 --tf32"
              for at in manual fused; do
                stamp "$s r$k $at"; cpu_probe 6; mkdir -p "$W/tmp"
                timeout 150 python3 -m nsight_tui capture --warmup 3 --steps 6 --no-sync --no-count $args \
                  --attention $at --out "$W/tmp" 2>&1 | grep -E 'wrote|rror'
                for f in "$W"/tmp/*.sqlite; do mv "$f" "$W/${s}_r${k}_$(basename "$f")"; done; rm -rf "$W/tmp"
              done ;;
      hfattn) cap $s $k hf_eager python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" --attn eager
              cap $s $k hf_sdpa python3 $T/hf_trainer_qwen2.py --steps "${HF_STEPS:-8}" ;;
      loader) cap $s $k loader_w0 python3 $T/torchvision_loader_twins.py --steps 40
              cap $s $k loader_w12 python3 $T/torchvision_loader_twins.py --steps 40 --workers 12 ;;
      loader2) cap $s $k loader_w0 python3 $T/torchvision_loader_twins.py --steps 40
               cap $s $k loader_w2 python3 $T/torchvision_loader_twins.py --steps 40 --workers 2 ;;
      loaderpin) cap $s $k loader_w12 python3 $T/torchvision_loader_twins.py --steps 24 --workers 12
                 cap $s $k loader_w12_pin python3 $T/torchvision_loader_twins.py --steps 24 --workers 12 --pin ;;
      loaderpin2) cap $s $k loader_r50_w12 python3 $T/torchvision_loader_twins.py --steps 24 --workers 12 \
                    --model resnet50 --size 192 --batch 96 --keep-batch
                  cap $s $k loader_r50_w12_pin python3 $T/torchvision_loader_twins.py --steps 24 --workers 12 \
                    --model resnet50 --size 192 --batch 96 --keep-batch --pin ;;
      loaderpin3) cap $s $k loader_r34_w12 python3 $T/torchvision_loader_twins.py --steps 24 --workers 12 \
                    --model resnet34 --batch 128
                  cap $s $k loader_r34_w12_pin python3 $T/torchvision_loader_twins.py --steps 24 --workers 12 \
                    --model resnet34 --batch 128 --pin ;;
      loadersample) cap $s $k loader_w2_b32 python3 $T/torchvision_loader_twins.py --steps 12 --batch 32 --workers 2 ;;
      vitattn) cap $s $k vit_b64_bf16_manual python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16 --manual-attn
               cap $s $k vit_b64_bf16_sdpa python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16 ;;
      vitattntf32) cap $s $k vit_b64_tf32_manual python3 $T/timm_vit_twins.py --batch 64 --tf32 --manual-attn
                   cap $s $k vit_b64_tf32_sdpa python3 $T/timm_vit_twins.py --batch 64 --tf32 ;;
      vitattnrev) cap $s $k vit_b64_bf16_sdpa python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16
                  cap $s $k vit_b64_bf16_manual python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16 --manual-attn ;;
      vitattnint) cap $s $k vit_b64_bf16_attention-manual-every2 python3 $T/timm_vit_twins.py --batch 64 --tf32 --bf16 \
                    --alternate-attn --steps 24 ;;
      vitattntf32int) cap $s $k vit_b64_tf32_attention-manual-every2 python3 $T/timm_vit_twins.py --batch 64 --tf32 \
                        --alternate-attn --steps 24 ;;
      vittf32) cap $s $k vit_b64_fp32 python3 $T/timm_vit_twins.py --batch 64
               cap $s $k vit_b64_tf32 python3 $T/timm_vit_twins.py --batch 64 --tf32 ;;
      "") ;;
      *) echo "unknown set $s" ;;
    esac
    run_queue "$k"
  done
done
ls -la "$W"
stamp "xz"
find "$W" -maxdepth 1 -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
tar -C "$W" -cf "$OUT/thirdparty_twins.tar" $(cd "$W" && ls *.sqlite.xz *.steps.json *.run.json 2>/dev/null)
ls -la "$OUT"; stamp "done"
