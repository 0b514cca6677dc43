#!/usr/bin/env bash
# Third-party workloads nobody here wrote (issue 41 item 7), each captured with
# `nsight-tui capture -- CMD` (CUDA + NVTX, no CPU sampling, GPU memory usage) and marked only
# where a user would (devruns/thirdparty/*.py: a TrainerCallback, a Lightning Callback, mark.hooks,
# a StoppingCriteria's per-token clock), models built from configs (the machine is offline), a
# few warm-ups and 6 steady steps each. Beside each export: STEM.run.json and STEM.steps.json.
# Exports are `xz -9` here and packed into $OUT/thirdparty_*.tar. Arguments name the workloads
# (default all): trainer resnet vit generate nonvtx oom (and convnext, resnet-nhwc, trainer-agnvtx: not in the default;
# nor the gradient accumulation ones: vit-accum, vit-accum-small (4 blocks), vit-accum4 (their own phase ranges,
# the truth stripped of NVTX),
# trainer-accum, trainer-accum-small (2 layers, 3 micro-batches), trainer-accum4, resnet-accum (Lightning's clock
# per micro-batch); and torch.compile's:
# vit-compile, vit-compile-accum, trainer-compile, trainer-compile4, trainer-compile6)
# Run (tree staged in an ignored folder, .whl with nvtx and .devlibs carried):
#   cd build/devstage && WHL=../../.whl DEVLIBS=../../.devlibs bash devruns/gpu_thirdparty.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_thirdparty}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
python3 - <<'PY'
import importlib
for m in ["torch", "transformers", "accelerate", "lightning", "pytorch_lightning", "timm", "torchvision", "peft"]:
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:  # noqa: BLE001
        print(m, "not importable:", type(e).__name__, e)
PY
T=devruns/thirdparty
mine() {  # name, timeout (s), [capture options ...] --, then the command
  local name=$1 limit=$2 opts=(); shift 2
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift
  stamp "capture $name"
  timeout "$limit" python3 -m nsight_tui capture "${opts[@]}" --out "$W" --name "$name" --no-open -- "$@"
  echo "exit $?"
}
for p in "${@:-trainer resnet vit generate nonvtx oom}"; do for name in $p; do case $name in
  trainer-agnvtx) mine hf_trainer_qwen2_l4_b8_agnvtx 200 --autograd-nvtx -- python3 $T/hf_trainer_qwen2.py --layers 4 \
                    --batch 8 --seq 512 ;;
  trainer) mine hf_trainer_qwen2_l4_b8 200 -- python3 $T/hf_trainer_qwen2.py --layers 4 --batch 8 --seq 512 ;;
  resnet) mine lightning_resnet50_b32 200 -- python3 $T/lightning_resnet50.py --batch 32 --size 128 ;;
  resnet-nhwc) mine lightning_resnet50_b32_channels_last 200 -- python3 $T/lightning_resnet50.py --batch 32 --size 128 \
                 --channels-last ;;
  vit) mine timm_vit_small_b64 150 -- python3 $T/timm_vit_small.py --batch 64 ;;
  convnext) mine timm_convnext_tiny_b32 150 -- python3 $T/timm_convnext_tiny.py --batch 32 --size 160 ;;
  generate) mine hf_generate_llama_eager 150 -- python3 $T/hf_generate_llama.py --cache dynamic
            mine hf_generate_llama_static 200 -- python3 $T/hf_generate_llama.py --cache static ;;
  nonvtx) stamp "capture GPT-2 --no-nvtx"
          timeout 150 python3 -m nsight_tui capture --model small --ctx 512 --batch 8 --warmup 3 --steps 6 \
            --no-sync --no-nvtx --no-count --out "$W" ;;
  vit-accum) mine timm_vit_small_b16_accum2 150 -- python3 $T/timm_vit_twins.py --batch 16 --accum 2 --steps 5 ;;
  vit-accum-small) mine timm_vit_small_d4_b8_accum2 150 -- python3 $T/timm_vit_twins.py --depth 4 --batch 8 --accum 2 \
                     --warmup 3 --steps 4 ;;
  vit-accum4) mine timm_vit_small_b8_accum4_foreach-off 150 -- python3 $T/timm_vit_twins.py --batch 8 --accum 4 --steps 5 \
                --optim foreach-off ;;
  trainer-accum) mine hf_trainer_qwen2_l4_b4_accum2 200 -- python3 $T/hf_trainer_qwen2.py --batch 4 --accum 2 --steps 5 ;;
  trainer-accum-small) mine hf_trainer_qwen2_l2_b2_accum3 200 -- python3 $T/hf_trainer_qwen2.py --layers 2 --batch 2 \
                        --accum 3 --steps 4 ;;
  vit-compile) mine timm_vit_small_d4_b8_compiled 300 -- python3 $T/timm_vit_twins.py --depth 4 --batch 8 --compile \
                 --warmup 3 --steps 4 ;;
  trainer-compile) mine hf_trainer_qwen2_l2_b4_compiled 300 -- python3 $T/hf_trainer_qwen2.py --layers 2 --batch 4 \
                     --compile --steps 4 ;;
  vit-compile-accum) mine timm_vit_small_d4_b8_compiled_accum2 300 -- python3 $T/timm_vit_twins.py --depth 4 --batch 8 \
                       --compile --accum 2 --warmup 3 --steps 4 ;;
  trainer-compile4) mine hf_trainer_qwen2_l4_b4_compiled 300 -- python3 $T/hf_trainer_qwen2.py --layers 4 --batch 4 \
                      --compile --steps 4 ;;
  trainer-compile6) mine hf_trainer_qwen2_l6_b4_compiled 300 -- python3 $T/hf_trainer_qwen2.py --layers 6 --batch 4 \
                      --compile --steps 4 ;;
  resnet-accum) mine lightning_resnet50_b16_accum2 200 -- python3 $T/lightning_resnet50.py --batch 16 --size 128 --accum 2 \
                  --steps 4 ;;
  trainer-accum4) mine hf_trainer_qwen2_l4_b2_accum4_foreach-off 200 -- python3 $T/hf_trainer_qwen2.py --batch 2 --accum 4 \
                    --steps 5 --optim foreach-off ;;
  oom) mine oom_qwen2_b256 150 -- python3 $T/oom_qwen2.py --batch 256 --seq 4096 ;;
  *) echo "unknown workload $name" ;;
esac; done; done
ls -la "$W"
stamp "xz"
find "$W" -maxdepth 1 -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
tar -C "$W" -cf - --exclude="./.*" . | split -b 15M -d - "$OUT/thirdparty.tar.part"
ls -la "$OUT"; stamp "done"
