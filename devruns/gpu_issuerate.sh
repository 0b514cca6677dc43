#!/usr/bin/env bash
# The device session behind the fp32-gemm estimate of issue 26 (helper `issuerate`): new fp32 / --tf32
# twins, unsynchronised (`--no-sync`: one synchronise per step, after its range), on which the
# finding's figure is checked without having been designed on them, and one probe of the mechanism.
#   twins   GPT-2 medium ctx 512 batch 8 and GPT-2 small ctx 1024 batch 8, each fp32 and --tf32,
#           2 warmup + 4 steps (GPU-bound in fp32, as the small ctx 512 batch 8 pair)
#   probe   GPT-2 small ctx 512 batch 8 fp32 with CUDA_LAUNCH_BLOCKING=1: every launch returns when its
#           kernel is done, so the GPU is always caught up; the CPU's time between CUDA calls is then
#           its own work with an idle GPU, for the same code as the committed fp32 capture
#           (the question: does the CPU's issue slow when the GPU keeps up, as the TF32 twins show?)
#   same-host  the committed small ctx 512 batch 8 pair (fp32, --tf32) again and the probe, all three
#           on one machine, so the CPU's pace is compared on one CPU
# Run (device tool, default kind, tree staged in the git-ignored .gpustage-issuerate/ with .whl and
# .devlibs carried):  cd .gpustage-issuerate && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_issuerate.sh twins probe
#   then, a second call:            ... bash devruns/gpu_issuerate.sh same-host
#   and (the lead, on nvidia-h100-x1): ... bash devruns/gpu_issuerate.sh repeat
# nsys stats runs on a COPY of each export (the committed SQLite is what `nsys export` wrote).
# What they showed (2026-11-26, one H200 machine, both calls; 101.6 s + 52.1 s wall): the estimate within
# 0.88-1.11x on all three new pairs (committed: sample_traces/async/h200_twins, tested); the blocking run's
# backward CPU time between calls 1.0x the fp32 run's in two steps and 2.5x in two, its forward 1.2-1.7x:
# no steady 'pace with the GPU caught up' to model (the blocking export itself is not committed).
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_issuerate}
devrun_start "$@"
cap() {  # group, then the capture's options
  local group=$1; shift
  stamp "capture $group: $*"
  timeout 200 python3 -m nsight_tui capture --no-sync --no-count --out "$W/$group" "$@" || echo "FAILED ($?): $*"
}
oracle() {  # NVIDIA's reports of a group's exports, then the group packed
  local group=$1
  nsys_oracle "$W/$group"
  XZ_OPT=-T0 tar -C "$W/$group" -cJf "$OUT/$group.tar.xz" .
  stamp "packed $group"
}
for group in "${@:-twins}"; do
  rm -rf "${W:?}/$group"; mkdir -p "$W/$group"
  case $group in
    twins)
      S=(--warmup 2 --steps 4 --batch 8)
      cap twins --model medium --ctx 512 "${S[@]}"
      cap twins --model medium --ctx 512 "${S[@]}" --tf32
      cap twins --model small --ctx 1024 "${S[@]}"
      cap twins --model small --ctx 1024 "${S[@]}" --tf32 ;;
    probe)
      CUDA_LAUNCH_BLOCKING=1 cap probe --model small --ctx 512 --warmup 2 --steps 4 --batch 8 ;;
    same-host)  # the probe beside the twins it is compared with, on one machine: its CPU is the same
      S=(--model small --ctx 512 --warmup 2 --steps 4 --batch 8)
      cap same-host "${S[@]}"
      cap same-host "${S[@]}" --tf32
      mkdir -p "$W/same-host/blocking"
      CUDA_LAUNCH_BLOCKING=1 timeout 200 python3 -m nsight_tui capture --no-sync --no-count --out "$W/same-host/blocking" "${S[@]}" \
        || echo "FAILED: blocking" ;;
    repeat)  # the committed H100 pair's configuration three times over, alternating, on one H100:
      # does the twin's CPU pace (and so the saving the twins measure) hold from run to run?
      S=(--model small --ctx 512 --warmup 2 --steps 4 --batch 8)
      for i in 1 2 3; do
        mkdir -p "$W/repeat/r$i"
        timeout 200 python3 -m nsight_tui capture --no-sync --no-count --out "$W/repeat/r$i" "${S[@]}" || echo "FAILED r$i fp32"
        timeout 200 python3 -m nsight_tui capture --no-sync --no-count --out "$W/repeat/r$i" "${S[@]}" --tf32 || echo "FAILED r$i tf32"
      done
      XZ_OPT=-T0 tar -C "$W/repeat" -cJf "$OUT/repeat.tar.xz" .; ls -laR "$W/repeat"; stamp "packed repeat"; continue ;;
    *) echo "unknown group $group"; continue ;;
  esac
  oracle "$group"
done
ls -la "$OUT"; stamp "done"
