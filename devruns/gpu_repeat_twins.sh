#!/usr/bin/env bash
# Twin pairs captured again, several times, alternating, on a machine warmed first (docs/whatif.md,
# "Twins": devruns/gpu_cpu_pace.log found a fresh lent machine running a fixed Python loop at half its
# later speed for its first minute or so, the same in a run bound to one core: the first captures of a
# call ran on a slower CPU than the next). A fixed pure-Python probe (10^6 additions) runs until the
# machine has been up 100 s and its last 15 probes agree within 25%, its figures by uptime printed;
# then each set A B C A B C A B C, one probe before each capture (the second call, `tf32`, waited
# for 15 probes within 25% only, at most 30 s: the first call's machine ran at one pace throughout):
#   input  (the findings pair, ctx 128, batch 4, phase syncs, 2 warm-ups + 4 steps, no FLOP pass,
#           no memory usage): A --plant pageable-input, B --plant pinned-input, C no plant (which of
#           the two runs its forward's Python apart from a program without either?)
#   item   (ctx 128, no phase syncs, 2 warm-ups + 8 steps): A --plant item, B no plant
#   tf32   (the findings pair: ctx 512, batch 4, phase syncs, 2 warm-ups + 4 steps): A fp32, B --tf32
#   tf32rev  the same, B before A in each pair (does the order of the two carry the miss?)
# Run on 2026-11-28, one H100 each: `input item` (482 s), then `tf32` with WARM_S=30 (137 s), then
# `tf32rev` likewise.
# (Its logs print the probe as `probe_ms`: the same loop of 10^6, written in the script then, now
# preamble.sh's cpu_probe, which prints seconds.)
# Exports `xz -9`, one tar in $OUT (SET_rK_NAME.sqlite.xz: at most 8 files come back).
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_repeats}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
UP_S=${UP_S:-100} WARM_S=${WARM_S:-180} python3 - <<'PY'
import os, time
UP_S, WARM_S = float(os.environ["UP_S"]), float(os.environ["WARM_S"])
def up(): return float(open("/proc/uptime").read().split()[0])
t0, hist = time.time(), []
while True:
    t = time.perf_counter(); s = 0
    for k in range(10**6): s += k
    hist.append((up(), (time.perf_counter() - t) * 1e3))
    last = [h[1] for h in hist[-15:]]
    if (up() > UP_S and len(last) == 15 and max(last) < 1.25 * min(last)) or time.time() - t0 > WARM_S:
        break
bins = {}
for u, ms in hist: bins.setdefault(int(u // 10) * 10, []).append(ms)
print("warm-up probe (ms) by uptime:", " ".join(f"{b}s:{sorted(v)[len(v)//2]:.0f}" for b, v in sorted(bins.items())))
print(f"warm-up: {len(hist)} probes in {time.time() - t0:.0f} s, up {up():.0f} s")
PY
cap() { python3 -m nsight_tui capture --model small --warmup 2 --no-count --no-memory-usage "$@" 2>&1 \
  | grep -E 'wrote|rror' || echo "capture failed: $*"; }
sets=${*:-input item}
for k in 1 2 3; do
  for s in $sets; do case $s in
    input) for p in pageable-input pinned-input none; do
             o=(--plant $p); [ $p = none ] && o=()
             stamp "input r$k $p"; cpu_probe 6
             cap --steps 4 --ctx 128 "${o[@]}" --out "$W/input_r$k"
           done ;;
    tf32|tf32rev)  order="fp32 tf32"; [ $s = tf32rev ] && order="tf32 fp32"
           for p in $order; do
             o=(--tf32); [ $p = fp32 ] && o=()
             stamp "tf32 r$k $p"; cpu_probe 6
             cap --steps 4 --ctx 512 "${o[@]}" --out "$W/tf32_r$k"
           done ;;
    item)  for p in item none; do
             o=(--plant $p); [ $p = none ] && o=()
             stamp "item r$k $p"; cpu_probe 6
             cap --steps 8 --ctx 128 --no-phase-sync "${o[@]}" --out "$W/item_r$k"
           done ;;
  esac; done
done
stamp "xz"
pids=()
for d in "$W"/*_r*; do for f in "$d"/*.sqlite; do
  xz -9 -c "$f" > "$W/$(basename "$d")_$(basename "$f").xz" & pids+=($!)
done; done
for p in "${pids[@]}"; do wait "$p"; done  # by id: a bare wait would wait for the log's tee too
tar -C "$W" -cf "$OUT/repeats.tar" $(cd "$W" && ls *.xz)
sha256sum "$W"/*/*.sqlite; ls -la "$OUT"; stamp "done"
