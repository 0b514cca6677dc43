#!/usr/bin/env bash
# The device session behind issue 31 ("Traces without NVTX"): GPT-2 captures with NO NVTX at all
# (`capture --no-nvtx`: no ranges, no marks) and their NVTX twins (the same command without it),
# so the iterations and layers nsight-tui infers from the kernel sequence can be checked against
# the twin's step_N ranges and the Python step times (STEM.steps.json beside each --no-nvtx export).
# Committed, xz'd, under sample_traces/nonvtx/ with NVIDIA's `nsys stats` CSVs (README there).
# Why these settings:
# - --no-sync (one synchronise per step, after its range): the CPU runs ahead of the GPU, as in real
#   training; the GPU's iteration period is then the step's pace.
# - GPT-2 small ctx 512 batch 8 (12 layers, GPU-bound), 2 warmup + 4 steps: the kernel count does not
#   grow with ctx or batch, so each export is ~1-2 MB; the first iteration differs (AdamW makes its
#   state), which the inference has to survive.
# - forward mode: iterations with no backward and no optimizer (the inference's other shape).
# - bf16: other kernel names (autocast's casts, bf16 GEMMs); its NVTX twin is
#   sample_traces/async/small_ctx512_bf16_b8_async (same command, another run).
# - --no-count: no FLOP-counting pass. nsys stats runs on a COPY of each export.
# Run (device tool, nvidia-h100-x1; stage with the rsync in the brief, carry .gpustage-nonvtx .whl .devlibs):
#   cd .gpustage-nonvtx && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_nonvtx.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_nonvtx}
devrun_start "$@"
rm -rf "$W"; mkdir -p "$W"
cap() {
  stamp "capture: $*"
  timeout 150 python3 -m nsight_tui capture --no-sync --no-count --out "$W" "$@" || echo "FAILED ($?): $*"
}
S=(--model small --ctx 512 --batch 8 --warmup 2 --steps 4)
cap "${S[@]}"
cap "${S[@]}" --no-nvtx
cap "${S[@]}" --mode forward
cap "${S[@]}" --mode forward --no-nvtx
cap "${S[@]}" --dtype bf16 --no-nvtx
nsys_oracle "$W"
cat "$W"/*.steps.json | head -c 3000
XZ_OPT=-T0 tar -C "$W" -cJf "$OUT/nonvtx.tar.xz" .
ls -la "$OUT"; stamp "done"
