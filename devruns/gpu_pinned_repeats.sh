#!/usr/bin/env bash
# Is the pageable -> pinned input pair's miss (docs/whatif.md, twins table: −14.08 ms measured, `pin`
# predicts −8.27) one pair's CPU pace, or a gap of the model? The committed findings pair
# (devruns/gpu_findings.sh `input`: GPT-2 small, ctx 128, batch 4, 2 warm-ups + 4 steps, phase syncs,
# no FLOP counting pass, no GPU memory usage as nsys was run then) captured again three times,
# alternating A B A B A B (A --plant pageable-input, B --plant pinned-input) in ONE call on one GPU,
# with a fixed pure-Python CPU mark (a 10^7-iteration loop, seconds) before and after each capture.
# Each export `xz -9` into $OUT as rK_NAME.sqlite.xz; not committed (the sample cap): the figures
# are in gpu_pinned_repeats.log and docs/whatif.md.
# Run on 2026-11-27 (one H100, 150 s of the call, 336 s of device time with the machine's start):
# the device tool ships the main checkout, not the helper's (a staged build/ folder is not carried
# from it), so these lines went inline in the call, run from that checkout's root (the same
# preamble and capture code), `.whl` (nvtx) and `.devlibs` carried:
#   cat > /tmp/gpu_pinned_repeats.sh <<'EOF' ... EOF   (the lines below, preamble sourced as
#   devruns/preamble.sh); WHL=.whl DEVLIBS=.devlibs DEVRUN_LOG=gpu_pinned_repeats.log bash /tmp/gpu_pinned_repeats.sh
# The table: PYTHONPATH=$PWD python3 devruns/pinned_repeats_table.py (the six exports in build/pinned_repeats).
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_pinned}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
for k in 1 2 3; do for m in A B; do
  plant=pageable-input; [ $m = B ] && plant=pinned-input
  stamp "$m$k $plant"; cpu_probe
  python3 -m nsight_tui capture --model small --steps 4 --warmup 2 --no-count --no-memory-usage --ctx 128 \
    --plant $plant --out "$W/r$k" 2>&1 | grep -E '^\s+\[[0-9]/|wrote|rror' || echo "capture $m$k failed"
  cpu_probe
done; done
stamp "xz"
for k in 1 2 3; do for f in "$W/r$k"/*.sqlite; do
  xz -9 -c "$f" > "$OUT/r${k}_$(basename "$f").xz"
done; done
sha256sum "$W"/r*/*.sqlite; ls -la "$OUT"; stamp "done"
