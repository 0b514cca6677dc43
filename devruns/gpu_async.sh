#!/usr/bin/env bash
# The device sessions behind issue 26 ("Time as the GPU sees it"): real captures WITHOUT the
# per-phase synchronise (`--no-phase-sync`), where the CPU runs ahead and the GPU works behind it,
# so an NVTX range's CPU span is not the time its GPU work takes. Committed, xz'd, under
# sample_traces/async/ with NVIDIA's `nsys stats` CSVs (sample_traces/async/README.md has the
# table of Python step / nsys GPU projection / NVTX CPU span). Arguments name the groups:
#   single   six GPT-2 small captures, 2 warmup + 4 steps (one GPU)
#   large    GPT-2 large ctx 512 fp32 and --tf32, 1 warmup + 3 steps (one GPU; issue 26's headline)
#   ddp      GPT-2 small ctx 512 batch 8 over 2 GPUs, one bucket vs DDP's overlapping buckets
#            (one export holding both ranks each; kind nvidia-h100-x2)
# Why these settings:
# - --no-phase-sync everywhere: the workload then synchronises once, at each step's end (inside
#   step_N), as a real training loop that logs its step time would; forward/backward/optimizer's
#   NVTX spans only cover the launches.
# - ctx 512 batch 8: GPU-bound (ctx 128 batch 4 is bound by the host), so the GPU runs behind the
#   CPU and TF32, fused AdamW and bf16 change the step by more than its jitter. The default
#   foreach AdamW capture is the fp32 one (small_ctx512_b8_nosync); --plant foreach-off is the
#   AdamW loop, --plant fused-optim the fused kernel.
# - ctx 128 batch 1: the launch-bound case (the GPU waits for the CPU).
# - GPT-2 small: the kernel count does not grow with ctx or batch, so each export is ~1-2 MB.
# - --no-count: no FLOP-counting pass (its own process; not needed here).
# - nsys stats runs on a COPY of each export, so the committed SQLite is exactly what
#   `nsys export` wrote (sha256 printed before and after).
# How it was run (2026-11-25, device tool; tree copied into the git-ignored .gpustage/ with
# .whl (nvtx 0.2.17 wheel) and .devlibs (libdw/libelf, /work/shared/device/fetch-nsys-libs.sh)
# beside it, all three carried):
#   cd .gpustage && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_async.sh single large  # nvidia-h100-x1
#   cd .gpustage && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_async.sh ddp           # nvidia-h100-x2
# Wall times (the "=== [N s]" stamps in devruns/gpu_async.log): single + large 201 s on one H100
# (233 s of device time with the start), ddp 55 s on two H100s; 5.6 minutes of device time in all.
# SKIP_PIP=1 skips the wheel install (nvtx already importable), WORK= moves the scratch folder.
DEVRUN_LOG=log_async_${1:-single}.txt
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_async}
devrun_start "$@"
cap() {  # group, then the capture's options
  local group=$1; shift
  stamp "capture $group: $*"
  timeout 240 python3 -m nsight_tui capture --no-sync --no-count --out "$W/$group" "$@" || echo "FAILED ($?): $*"
}
oracle() {  # NVIDIA's reports of a group's exports, then the group packed
  local group=$1
  nsys_oracle "$W/$group"
  XZ_OPT=-T0 tar -C "$W/$group" -cJf "$OUT/$group.tar.xz" .
  stamp "packed $group"
}
for group in "${@:-single}"; do
  rm -rf "${W:?}/$group"; mkdir -p "$W/$group"
  case $group in
    single)
      S=(--model small --warmup 2 --steps 4)
      cap single "${S[@]}" --ctx 512 --batch 8
      cap single "${S[@]}" --ctx 512 --batch 8 --tf32
      cap single "${S[@]}" --ctx 512 --batch 8 --plant foreach-off
      cap single "${S[@]}" --ctx 512 --batch 8 --plant fused-optim
      cap single "${S[@]}" --ctx 512 --batch 8 --dtype bf16
      cap single "${S[@]}" --ctx 128 --batch 1 ;;
    large)
      cap large --model large --ctx 512 --warmup 1 --steps 3
      cap large --model large --ctx 512 --warmup 1 --steps 3 --tf32 ;;
    ddp)
      D=(--model small --ctx 512 --batch 8 --warmup 2 --steps 4 --ddp 2)
      cap ddp "${D[@]}"
      cap ddp "${D[@]}" --plant ddp-one-bucket ;;
    *) echo "unknown group $group"; continue ;;
  esac
  sha256sum "$W/$group"/*.sqlite
  oracle "$group"
done
ls -la "$OUT"; stamp "done"
