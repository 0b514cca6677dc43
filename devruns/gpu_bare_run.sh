#!/usr/bin/env bash
# `capture --bare-run`: the workload once alone, then under nsys, the same minute: STEM.bare.json
# beside each export (whatif's "Without the profiler" line; sample_traces/bare).
#   launch-bound  GPT-2 small, ctx 128, batch 4, no phase syncs
#   gpu-bound     ctx 512, batch 8, nothing synchronised in the ranges
# 2 warm-ups + 6 steps each, no FLOP pass, no GPU memory usage; exports xz -9, one tar in $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_bare_run}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 2 --steps 6 --no-count --no-memory-usage --bare-run \
  --out "$W" "$@" 2>&1 | grep -E 'wrote|rror|without nsys' || echo "capture failed: $*"; }
stamp "launch-bound"; cap --ctx 128 --no-phase-sync
stamp "gpu-bound"; cap --ctx 512 --batch 8 --no-sync
stamp "launch-bound again"; cap --ctx 128 --no-phase-sync --out "$W/again"
stamp "xz"
for f in "$W"/*.sqlite "$W"/again/*.sqlite; do xz -9 -k "$f"; done
for f in "$W"/*.bare.json "$W"/again/*.bare.json; do echo "$f"; cat "$f" | python3 -c "import json,sys; d=json.load(sys.stdin); print([round(s['seconds']*1e3,2) for s in d['steps']])"; done
(cd "$W" && tar -cf "$OUT/bare_run.tar" *.sqlite.xz *.bare.json again/*.sqlite.xz again/*.bare.json)
ls -la "$OUT"; stamp "done"
