#!/usr/bin/env bash
# The `graph` edit held out (docs/whatif.md, "CUDA graph, held out"): parsers/replay/cudagraph.py's
# figures (a graph's first node after its launch call, the nodes' mean GPU gap, the call's CPU per
# node) were read off the committed ctx-128 twins; here configurations it never saw, each an eager
# step (`--plant capturable`) and the same step captured once as a CUDA graph (`--plant cuda-graph`),
# nothing synchronised inside a step (`--no-sync`), 3 warm-ups + 5 steps, no FLOP pass; three pairs
# of each, alternating A B A B A B, on one machine in one call:
#   graph256   GPT-2 small,  ctx 256, batch 1
#   graphmed   GPT-2 medium, ctx 128, batch 1
# Exports `xz -9`, one tar in $OUT (SET_rK_STEM.sqlite.xz, as devruns/repeat_twins_table.py reads them).
# Run: WHL=.whl DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_graph_holdout.sh [graph256 graphmed]
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_graph_holdout}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --warmup 3 --steps 5 --no-sync --no-count --batch 1 "$@" 2>&1 \
  | grep -E 'wrote|rror' || echo "capture failed: $*"; }
for k in 1 2 3; do
  for s in ${*:-graph256 graphmed}; do
    case $s in
      graph256) o=(--model small --ctx 256) ;;
      graphmed) o=(--model medium --ctx 128) ;;
      *) echo "unknown set $s"; continue ;;
    esac
    for p in capturable cuda-graph; do
      stamp "$s r$k $p"; cpu_probe 6
      mkdir -p "$W/tmp" && cap "${o[@]}" --plant $p --out "$W/tmp"
      for f in "$W"/tmp/*.sqlite; do mv "$f" "$W/${s}_r${k}_$(basename "$f")"; done
      rm -rf "$W/tmp"
    done
  done
done
stamp "xz"
find "$W" -maxdepth 1 -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
tar -C "$W" -cf "$OUT/graph_holdout.tar" $(cd "$W" && ls *.sqlite.xz)
ls -la "$W" "$OUT"; stamp "done"
