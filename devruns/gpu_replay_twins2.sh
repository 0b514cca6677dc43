#!/usr/bin/env bash
# More replay twins (issue 40 item 6), each pair back to back in one call on one machine, like
# devruns/gpu_replay_twins.sh (nothing synchronised inside any NVTX range, `--no-sync`: the Python
# step mark is the GPU's pace):
#   item128     ctx128 batch 4, no plant  vs  --plant item-before-step (loss.item() after backward):
#               the issue's own example, launch-bound enough that the drained queue shows
#   itemfwd128  ctx128 batch 4, no plant  vs  --plant item (loss.item() after the forward)
#   tf32a/tf32b ctx512 batch 8 fp32  vs  --tf32, twice in a row: how much the CPU's pace moves
#               between two captures of one configuration on one machine
# 2 warm-ups and 8 steps for the item pairs (the step clock's spread is the noise the change is
# told against), 3 + 5 for TF32 (as the first set). Exports xz -9, one tar per pair in $OUT.
# Run (tree staged, .whl with nvtx and .devlibs carried): bash devruns/gpu_replay_twins2.sh [PAIRS]
# Run on 2026-11-27 (one H100, 154 s of the call; the device tool ships the main checkout, so the same
# lines went inline in the call): devruns/gpu_replay_twins2.log. Not committed (the sample cap,
# tests/capture/test_capture_samples.py, has 0.9 MB left): the figures are in docs/whatif.md, "Twins".
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_replay2}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --no-sync --no-count --out "$W/$1" "${@:2}"; }
pair() {  # name, then the two captures' options separated by --
  devrun_pair "$@"
  local name=$1
  ls -la "$W/$name"
}
I="--ctx 128 --warmup 2 --steps 8"
T="--ctx 512 --batch 8 --warmup 3 --steps 5"
for p in "${@:-item128 itemfwd128 tf32a tf32b}"; do for name in $p; do case $name in
  item128) pair item128 $I -- $I --plant item-before-step ;;
  itemfwd128) pair itemfwd128 $I -- $I --plant item ;;
  tf32a|tf32b) pair "$name" $T -- $T --tf32 ;;
  *) echo "unknown pair $name" ;;
esac; done; done
stamp "xz"
find "$W" -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
for d in "$W"/*/; do tar -C "$d" -cf "$OUT/$(basename "$d").tar" .; done
ls -la "$OUT"; stamp "done"
