#!/usr/bin/env bash
# The replay's twins (issue 40 item 6): GPT-2 small through `nsight-tui capture`, nothing synchronised
# inside any NVTX range (`--no-sync`: the CPU runs ahead, as in real training; one synchronise per
# iteration after its range, so the Python step mark is the GPU's pace), 3 warmup + 5 steps, no FLOP
# counting pass. Each pair is captured back to back in one call on one machine (lent machines differ
# by up to 1.6x: never pair across calls); each pair in a folder of its own (three pairs share the
# same baseline configuration, captured again beside each twin). Exports are `xz -9` here, each pair
# packed as $OUT/NAME.tar. Arguments name the pairs (default all five):
#   sleep   ctx512 b8, no plant  vs  --plant host-sleep (5 ms host sleep at each step's start)
#   item    ctx512 b8, no plant  vs  --plant item-before-step (loss.item() after backward)
#   tf32    ctx512 b8 fp32       vs  --tf32
#   optim   ctx512 b8 --plant foreach-off  vs  --plant fused-optim
#   graph   ctx128 b1 --plant capturable   vs  --plant cuda-graph (launch-bound, the whole step graphed)
# Run (tree staged in an ignored folder, .whl with nvtx and .devlibs carried):
#   cd build/devstage && WHL=../../.whl DEVLIBS=../../.devlibs bash devruns/gpu_replay_twins.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_replay}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 3 --steps 5 --no-sync --no-count --out "$W/$1" "${@:2}"; }
pair() {  # name, then the two captures' options separated by --
  devrun_pair "$@"
  local name=$1
  ls -la "$W/$name"
}
for p in "${@:-sleep item tf32 optim graph}"; do for name in $p; do case $name in
  sleep) pair sleep --ctx 512 --batch 8 -- --ctx 512 --batch 8 --plant host-sleep ;;
  item) pair item --ctx 512 --batch 8 -- --ctx 512 --batch 8 --plant item-before-step ;;
  tf32) pair tf32 --ctx 512 --batch 8 -- --ctx 512 --batch 8 --tf32 ;;
  optim) pair optim --ctx 512 --batch 8 --plant foreach-off -- --ctx 512 --batch 8 --plant fused-optim ;;
  graph) pair graph --ctx 128 --batch 1 --plant capturable -- --ctx 128 --batch 1 --plant cuda-graph ;;
  *) echo "unknown pair $name" ;;
esac; done; done
stamp "xz"
find "$W" -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
for d in "$W"/*/; do tar -C "$d" -cf "$OUT/$(basename "$d").tar" .; done
ls -la "$OUT"; stamp "done"
