#!/usr/bin/env bash
# The device sessions behind issue 20 (findings): each planted cause (capture/plant.py) and its
# fixed twin, small GPT-2, 2 warmup + 4 steps, no FLOP counting pass. Run from the staged tree
# (devruns/preamble.sh: .whl and .devlibs carried); each pair goes under $OUT (a .tar.xz with NVIDIA's CSVs) as soon as it
# is captured. Arguments name the pairs (default: the first session's five):
#   sleep item optim input tf32    (2026-11-23, one H200: sample_traces/findings, committed as
#                                   `xz -9e` NAME.sqlite.xz; `xz -dc` one to open it)
#   syncstep graph                 (one GPU)   ddp (two GPUs: kind nvidia-h200-x2)
# Why these settings:
# - tf32, syncstep, ddp at ctx 512: the step is GPU-bound there (ctx 128 is bound by the host,
#   so faster GEMMs save nothing, and the step time jitters by ms, hiding small savings).
# - syncstep: loss.item() before the optimizer step; the GPU-bound backward lets the CPU run
#   ahead, and the sync throws that lead away, exposing the optimizer's launches (~2 ms).
#   Batch 8 and 8 steps: at batch 4 (2026-11-23, H200) the twin's forward was still partly bound
#   by the CPU (its launch took 9-16 ms against ~12 ms of GPU work), so its steps spread over
#   2.6 ms and the mean of 4 hid the saving; batch 8 doubles the GPU work per launch.
# - graph: batch 1 at ctx 128, the most launch-bound step; the twin replays the same kernels
#   (AdamW capturable in both) as one CUDA graph, so the step time saved is the launch overhead.
# - ddp: DDP with one gradient bucket (the all-reduce after the whole backward) vs DDP's default
#   25 MB buckets that overlap it with the backward.
# Sizes (sample_traces has a cap, tests/capture/test_capture_samples.py): ~1.2 MB per single-GPU
# export of 4 steps (syncstep's 8: ~1.7 MB), ~2.8 MB per two-rank export; xz -9e makes the
# single-GPU ones 0.19-0.37 MB, as committed.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_findings}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
cap() { python3 -m nsight_tui capture --model small --steps 4 --warmup 2 --no-count --out "$W/$1" "${@:2}"; }
pair() {  # name, then the two captures' options separated by --
  devrun_pair "$@"
  local name=$1
  if [ -n "${CSV:-}" ]; then
    for f in "$W/$name"/*.sqlite; do "$NSYS" stats -q -f csv -r "$REPORTS" -o "${f%.sqlite}" "$f" >/dev/null; done
  fi
  ls -la "$W/$name"; tar -C "$W/$name" -cJf "$OUT/$name.tar.xz" .
}
for p in "${@:-sleep item optim input tf32}"; do for name in $p; do case $name in
  sleep) pair sleep --ctx 128 -- --ctx 128 --plant host-sleep ;;
  item) pair item --ctx 128 --no-phase-sync -- --ctx 128 --no-phase-sync --plant item ;;
  optim) pair optim --ctx 128 --plant foreach-off -- --ctx 128 --plant fused-optim ;;
  input) pair input --ctx 128 --plant pageable-input -- --ctx 128 --plant pinned-input ;;
  tf32) pair tf32 --ctx 512 -- --ctx 512 --tf32 ;;
  syncstep) CSV=1 pair syncstep --ctx 512 --batch 8 --steps 8 --no-phase-sync -- \
              --ctx 512 --batch 8 --steps 8 --no-phase-sync --plant item-before-step ;;
  graph) CSV=1 pair graph --ctx 128 --batch 1 --no-phase-sync --plant capturable -- \
           --ctx 128 --batch 1 --no-phase-sync --plant cuda-graph ;;
  ddp) CSV=1 pair ddp --ctx 512 --ddp 2 --no-phase-sync -- --ctx 512 --ddp 2 --no-phase-sync --plant ddp-one-bucket ;;
  *) echo "unknown pair $name" ;;
esac; done; done
stamp "findings (estimate, ms per step) and mean step of every export"
python3 - "$W" <<'PY'
import sys, pathlib
from nsight_tui.parsers.analyses.findings import context, findings
from nsight_tui.parsers.read.load import load_trace
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.sqlite")):
    t = load_trace(f)
    c = context(t)
    print(f.name, "step ms", None if c is None else round(c.step_ns / 1e6, 3),
          {x.id: round(x.saving_ms_per_step, 3) for x in findings(t)})
PY
ls -la "$OUT"; stamp "done"
