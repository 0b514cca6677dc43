#!/usr/bin/env bash
# Two fixes at once, against the replay of both together (issue 40: "all fixes together" is one more
# replay; until this session a host edit beside another replayed the steps as they ran and gave back
# the slow steps the typical step smooths). GPT-2 small, ctx 512, batch 8, nothing synchronised inside
# any NVTX range (`--no-sync`), 3 warm-ups + 5 steps, no FLOP counting pass, as gpu_replay_twins.sh:
#   A  fp32 GEMMs on the CUDA cores and a 5 ms host sleep at each step's start (--plant host-sleep)
#   B  TF32 GEMMs (--tf32), no sleep
# captured alternating A B A B A B in ONE call on one GPU (lent machines differ by up to 1.6x), a
# fixed pure-Python CPU mark before and after each capture. Each export `xz -9`, all six in
# $OUT/combined.tar. The table: PYTHONPATH=$PWD python3 devruns/repeat_twins_table.py DIR combined.
# PLANT=pageable-input FIX=pinned-input: A plants a blocking 64 MiB pageable input copy instead of the
# sleep, B copies it pinned with non_blocking=True (held out: TF32 and pinned input together).
# Run: SKIP_PIP=1 DEVLIBS=.devlibs DEVRUN_LOG=gpu_combined_twins.log OUT=$OUT bash devruns/gpu_combined_twins.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_combined}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --warmup 3 --steps 5 --no-sync --no-count --ctx 512 --batch 8 \
          --out "$W/r$1" "${@:2}" 2>&1 | grep -E 'wrote|rror' || echo "capture r$1 $* failed"; }
PLANT=${PLANT:-host-sleep}
for k in 1 2 3; do
  stamp "A$k"; cpu_probe; cap "$k" --plant "$PLANT"; cpu_probe
  stamp "B$k"; cpu_probe; cap "$k" --tf32 ${FIX:+--plant "$FIX"}; cpu_probe
done
stamp "xz"
find "$W" -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
tar -C "$W" -cf "$OUT/combined.tar" .
sha256sum "$W"/r*/*.xz; ls -la "$OUT"; stamp "done"
