#!/usr/bin/env bash
# The elementwise-chain twins (issue 40: the `fuse:` replay edit): GPT-2 small through `nsight-tui
# capture`, nothing synchronised inside any NVTX range (`--no-sync`), 3 warmup + 5 steps, no FLOP
# counting pass, as devruns/gpu_replay_twins.sh. Each pair back to back in one call on one machine
# (never pair across calls); each pair in a folder of its own, `xz -9`, packed as $OUT/NAME.tar:
#   fuse128  ctx128 b8 --plant gelu-unfused  vs  --plant gelu-fused (its chain kernels are ~10 us:
#            the elementwise-chain rule finds them; each kernel at ctx512 runs 30-50 us, over the
#            rule's 20 us)
#   fuse512  ctx512 b8, the same two plants (GPU-bound: the chain's GPU time, not its launches)
# Run (tree staged in an ignored folder, .whl with nvtx and .devlibs carried):
#   cd build/fusestage && WHL=../../.whl DEVLIBS=../../.devlibs bash devruns/gpu_fuse_twins.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_fuse}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 3 --steps 5 --no-sync --no-count --out "$W/$1" "${@:2}"; }
pair() {  # name, then the two captures' options separated by --
  devrun_pair "$@"
  local name=$1
  ls -la "$W/$name"
}
for p in "${@:-fuse128 fuse512}"; do for name in $p; do case $name in
  fuse128) pair fuse128 --ctx 128 --batch 8 --plant gelu-unfused -- --ctx 128 --batch 8 --plant gelu-fused ;;
  fuse512) pair fuse512 --ctx 512 --batch 8 --plant gelu-unfused -- --ctx 512 --batch 8 --plant gelu-fused ;;
  *) echo "unknown pair $name" ;;
esac; done; done
stamp "xz"
find "$W" -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
for d in "$W"/*/; do tar -C "$d" -cf "$OUT/$(basename "$d").tar" .; done
ls -la "$OUT"; stamp "done"
