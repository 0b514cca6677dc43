#!/usr/bin/env bash
# Does the CPU's pace move between captures of one program on one machine? (docs/whatif.md, "Twins",
# fp32 -> TF32.) The fp32 and TF32 captures of GPT-2 small, ctx 512, batch 8, `--no-sync`, 3 warm-ups
# + 5 steps, alternated A B A B A B (A fp32, B --tf32) in ONE call on one H100, with a fixed pure-Python
# CPU mark (a 10^7-iteration loop, seconds) twice before and once after each capture. Exports xz -9, one
# tar in $OUT; not committed (the sample cap): the figures are in gpu_tf32_pace.log and docs/whatif.md.
# Run on 2026-11-27 (one H100, 159 s of the call, ~96 s of device time at the one-chip rate); the
# device tool ships the main checkout, so the same lines went inline in the call, `.whl` (nvtx) and
# `.devlibs` carried.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/w}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
for k in 1 2 3; do for m in A B; do
  o=; [ $m = B ] && o=--tf32
  stamp "$m$k"; cpu_probe; cpu_probe
  python3 -m nsight_tui capture --model small --no-sync --no-count --ctx 512 --batch 8 --warmup 3 --steps 5 $o \
    --out "$W/$m$k" > "$W/$m$k.log" 2>&1 || tail -5 "$W/$m$k.log"
  cpu_probe
done; done
find "$W" -name '*.sqlite' -print0 | xargs -0 -P 6 -n 1 xz -9
tar -C "$W" -cf "$OUT/abab.tar" .
ls -la "$OUT"; stamp "done"
