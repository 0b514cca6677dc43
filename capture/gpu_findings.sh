#!/usr/bin/env bash
# The device session behind issue 20 (findings): each planted cause (capture/plant.py) and its
# fixed twin, small GPT-2, ctx 128 (ctx 512 for TF32: at ctx 128 the step is bound by the host,
# so faster GEMMs save no step time), 2 warmup + 4 steps, no FLOP counting pass. Run from an
# editable install with $NSYS set; each pair goes under $OUT as soon as it is captured.
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
W=${WORK:-/tmp/nsight_tui_findings}
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 )) s] $*"; }
rm -rf "$W" && mkdir -p "$W"
stamp "start"; nvidia-smi -L
cap() { python3 -m nsight_tui capture --model small --steps 4 --warmup 2 --no-count --out "$W/$1" "${@:2}"; }
pair() {  # name, then the two captures' options separated by --
  local name=$1; shift
  stamp "pair $name"
  mkdir -p "$W/$name"
  local a=() b=() side=a
  for x in "$@"; do if [ "$x" = "--" ]; then side=b; elif [ $side = a ]; then a+=("$x"); else b+=("$x"); fi; done
  cap "$name" "${a[@]}"; cap "$name" "${b[@]}"
  ls -la "$W/$name"; tar -C "$W/$name" -cJf "$OUT/$name.tar.xz" .
}
pair sleep --ctx 128 -- --ctx 128 --plant host-sleep
pair item --ctx 128 --no-phase-sync -- --ctx 128 --no-phase-sync --plant item
pair optim --ctx 128 --plant foreach-off -- --ctx 128 --plant fused-optim
pair input --ctx 128 --plant pageable-input -- --ctx 128 --plant pinned-input
pair tf32 --ctx 512 -- --ctx 512 --tf32
ls -la "$OUT"; stamp "done"
