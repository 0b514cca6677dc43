#!/usr/bin/env bash
# The change measured inside one capture (capture --plant-every 2: the plant in step_1, step_3, ...
# and its absence in step_0, step_2, ...), so both sides share the minute's CPU (docs/whatif.md,
# "Repeated pairs"): the change is the median of the plant-free steps less the median of the planted
# ones on the workload's Python clock, the prediction the replay of the planted steps with the edit.
#   item     GPT-2 small, ctx 128, batch 4, no phase syncs, .item() after the forward (launch-bound), 2x
#   input    ctx 128, phase syncs, a 64 MiB batch from pageable memory against the same batch pinned
#   itemgpu  ctx 512, batch 8, nothing synchronised in the ranges, .item() before optimizer.step (GPU-bound)
#   tf32     ctx 512, batch 4, phase syncs: fp32 matmuls in the odd steps, TF32 in the even ones
#   tf32async  the same at batch 8 with nothing synchronised in the ranges
#   tf32c1024, tf32medium, tf32c256  TF32 every other step held out from the model's making: ctx 1024
#              batch 4 and GPT-2 medium ctx 512 batch 4, nothing synchronised; ctx 256 batch 8, phase syncs
#   sleep, sleepasync  a 5 ms host sleep at the step's start: ctx 128 with phase syncs; ctx 512 batch 8
#              with nothing synchronised
#   inputasync  pageable input against its pinned batch at ctx 512 batch 8, nothing synchronised
#   bf16, bf16medium, bf16c1024  TF32 against bf16 autocast (plant no-autocast: autocast off in the odd steps),
#              held out: ctx 512 batch 8, GPT-2 medium ctx 512 batch 4 and ctx 1024 batch 4, nothing synchronised
#   attnbf16, attnbf16c512, attntf32c512, attnbf16b32  attention written out in the odd steps, SDPA in the even
#              ones (plant attention-manual): bf16 autocast at ctx 1024 batch 8 and ctx 512 batch 8, TF32 at
#              ctx 512 batch 8 (steps the CPU holds after the fix), bf16 at ctx 1024 batch 32 (the GPU's);
#              nothing synchronised
# 2 warm-ups + 16 steps each (STEPS), no FLOP pass, no GPU memory usage; exports xz -9, one tar in $OUT.
# Run on 2026-11-28 (one H100; again on an H200 with STEPS=24 and on an H100 with STEPS=24 and the
# tf32 cases); the table: PYTHONPATH=$PWD python3 devruns/interleaved_table.py FOLDER.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_interleaved}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 2 --steps "${STEPS:-16}" --no-count --no-memory-usage "$@" 2>&1 \
  | grep -E 'wrote|rror' || echo "capture failed: $*"; }
for s in ${*:-item input itemgpu item}; do
  stamp "$s"
  case $s in
    item) cap --ctx 128 --no-phase-sync --plant item --plant-every 2 --out "$W/item_$(date +%s)" ;;
    input) cap --ctx 128 --plant pageable-input --plant-every 2 --out "$W/input_$(date +%s)" ;;
    itemgpu) cap --ctx 512 --batch 8 --no-sync --plant item-before-step --plant-every 2 --out "$W/itemgpu" ;;
    tf32) cap --ctx 512 --plant fp32-gemm --plant-every 2 --out "$W/tf32_$(date +%s)" ;;
    tf32async) cap --ctx 512 --batch 8 --no-sync --plant fp32-gemm --plant-every 2 --out "$W/tf32async" ;;
    tf32c1024) cap --ctx 1024 --batch 4 --no-sync --plant fp32-gemm --plant-every 2 --out "$W/tf32c1024" ;;
    tf32medium) cap --model medium --ctx 512 --batch 4 --no-sync --plant fp32-gemm --plant-every 2 --out "$W/tf32medium" ;;
    tf32c256) cap --ctx 256 --batch 8 --plant fp32-gemm --plant-every 2 --out "$W/tf32c256" ;;
    sleep) cap --ctx 128 --plant host-sleep --plant-every 2 --out "$W/sleep" ;;
    sleepasync) cap --ctx 512 --batch 8 --no-sync --plant host-sleep --plant-every 2 --out "$W/sleepasync" ;;
    bf16) cap --ctx 512 --batch 8 --no-sync --dtype bf16 --tf32 --plant no-autocast --plant-every 2 --out "$W/bf16" ;;
    bf16medium) cap --model medium --ctx 512 --batch 4 --no-sync --dtype bf16 --tf32 --plant no-autocast --plant-every 2 \
                  --out "$W/bf16medium" ;;
    bf16c1024) cap --ctx 1024 --batch 4 --no-sync --dtype bf16 --tf32 --plant no-autocast --plant-every 2 --out "$W/bf16c1024" ;;
    inputasync) cap --ctx 512 --batch 8 --no-sync --plant pageable-input --plant-every 2 --out "$W/inputasync" ;;
    attnbf16) cap --ctx 1024 --batch 8 --no-sync --dtype bf16 --tf32 --plant attention-manual --plant-every 2 --out "$W/attnbf16" ;;
    attnbf16c512) cap --ctx 512 --batch 8 --no-sync --dtype bf16 --tf32 --plant attention-manual --plant-every 2 \
                    --out "$W/attnbf16c512" ;;
    attntf32c512) cap --ctx 512 --batch 8 --no-sync --tf32 --plant attention-manual --plant-every 2 --out "$W/attntf32c512" ;;
    attnbf16b32) cap --ctx 1024 --batch 32 --no-sync --dtype bf16 --tf32 --plant attention-manual --plant-every 2 \
                   --out "$W/attnbf16b32" ;;
  esac
done
stamp "xz"
pids=()
for f in "$W"/*/*.sqlite; do xz -9 -k "$f" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done  # by id: a bare wait would wait for the log's tee too
(cd "$W" && tar -cf "$OUT/interleaved.tar" */*.sqlite.xz)
sha256sum "$W"/*/*.sqlite; ls -la "$OUT"; stamp "done"
