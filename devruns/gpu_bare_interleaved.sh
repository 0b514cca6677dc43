#!/usr/bin/env bash
# The every-other-step changes captured with `--bare-run`: the same alternating workload once alone,
# then under nsys, the same minute: the change the program makes against the change the capture shows
# (docs/whatif.md, "The step without the profiler"). 2 warm-ups + 16 steps each; exports xz -9 with
# their STEM.bare.json, one tar in $OUT (not committed: the sample cap).
#   tf32async  ctx 512, batch 8, nothing synchronised in the ranges, fp32 matmuls every other step
#   item       ctx 128, no phase syncs, .item() after the forward every other step
#   input      ctx 128, phase syncs, pageable input every other step, its pinned batch in the others
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_bare_interleaved}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 2 --steps 16 --no-count --no-memory-usage --bare-run \
  --out "$W" "$@" 2>&1 | grep -E 'wrote|rror|without nsys' || echo "capture failed: $*"; }
for s in ${*:-tf32async item input}; do
  stamp "$s"
  case $s in
    tf32async) cap --ctx 512 --batch 8 --no-sync --plant fp32-gemm --plant-every 2 ;;
    item) cap --ctx 128 --no-phase-sync --plant item --plant-every 2 ;;
    input) cap --ctx 128 --plant pageable-input --plant-every 2 ;;
  esac
done
stamp "xz"
pids=()
for f in "$W"/*.sqlite; do xz -9 -k "$f" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
(cd "$W" && tar -cf "$OUT/bare_interleaved.tar" *.sqlite.xz *.bare.json)
ls -la "$OUT"; stamp "done"
