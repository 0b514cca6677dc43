#!/usr/bin/env bash
# The device session behind issue 30's memory model: one real `nsight-tui capture --sweep` of
# GPT-2 medium, large and xl at ctx 512 and 1024, batch 8 (1 warmup + 2 steps, --no-count, memory
# events on: capture's default), on an H100 80GB. xl at ctx 1024 batch 8 runs out of memory
# there; the runner records it (STEM.oom.json) and exports what nsys saw (STEM.oom.sqlite).
# analyses/memory_model.py fits its terms on the runs that fit and explains that cell.
# NVIDIA's `nsys stats` CSVs are made on a COPY of each export (sha256 before/after printed).
# How it was run: tree copied into the git-ignored .gpustage-memmodel/ of the checkout, with
# .whl (nvtx wheel) and .devlibs (libdw/libelf) carried beside it:
#   cd .gpustage-memmodel && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_memmodel.sh
# and, as the first call's packing hung (see the log), NVIDIA's CSVs in a second call on the exports it
# brought back (carried xz'd in .gpustage-memmodel/exports/):
#   cd .gpustage-memmodel && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_memmodel.sh stats exports
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_memmodel}/sweep
devrun_start "$@"; nvidia-smi --query-gpu=memory.total --format=csv
rm -rf "$W"; mkdir -p "$W"
if [ "${1:-sweep}" = stats ]; then
  # `stats DIR`: NVIDIA's CSVs only, of the xz'd exports in DIR (the first call's packing hung, see the log)
  for f in "$2"/*.sqlite.xz; do xz -dc "$f" > "$W/$(basename "${f%.xz}")"; done
else
  # the sweep gets what is left of the call; whatever it finished is packed below either way
  timeout "${SWEEP_S:-190}" python3 -m nsight_tui capture --sweep --models medium,large,xl --ctxs 512,1024 \
    --batch 8 --warmup 1 --steps 2 --no-count --out "$W"
  echo "sweep exit $?"
  cat "$W"/*.oom.json
fi
nsys_oracle "$W"
stamp "pack"
# at most 8 files come back: NVIDIA's CSVs and the records first (small), then the exports xz'd one by one.
# A bare `wait` would also wait for the `tee` of the log above (a process substitution): it hung the
# first call until its limit. Wait for the xz processes by id.
XZ_OPT=-T0 tar -C "$W" -cJf "$OUT/rest.tar.xz" --exclude='*.sqlite' .
if [ "${1:-sweep}" != stats ]; then
  pids=()
  for f in "$W"/*.sqlite; do xz -9e -k -c "$f" > "$OUT/$(basename "$f").xz" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
fi
ls -la "$OUT"; stamp "done"
