#!/usr/bin/env bash
# The framework's host work with the GPU lagging behind against keeping up (devruns/gpu_lag.py), and
# beside it the TF32-every-other-step workload the question comes from, both alone (no nsys), one
# lent machine, one call; PYTHONPATH=$PWD python3 devruns/phase_pairs.py FILE... prints the phases.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
devrun_start "$@"
W=(--model small --ctx 512 --batch 8 --no-phase-sync --no-range-sync --warmup 2 --steps "${STEPS:-40}")
for r in 1 2; do
  stamp "lag $r"; python3 devruns/gpu_lag.py "${W[@]}" --tf32 --plant host-sleep --plant-every 2 --status-file "$OUT/lag_$r.json" | tail -2
  stamp "tf32 every other step $r"
  python3 -m nsight_tui.capture.workload "${W[@]}" --plant fp32-gemm --plant-every 2 --status-file "$OUT/tf32_$r.json" | tail -2
done
python3 devruns/phase_pairs.py "$OUT"/lag_*.json "$OUT"/tf32_*.json
if [ -n "${UNDER_NSYS:-}" ]; then  # the lag again under nsys, CUDA and NVTX traced (gpu_lag_nsys.log)
  for r in 1 2; do
    stamp "lag under nsys $r"
    "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o "/tmp/lag_$r" --force-overwrite=true \
      python3 devruns/gpu_lag.py "${W[@]}" --tf32 --plant host-sleep --plant-every 2 --status-file "$OUT/lag_nsys_$r.json" \
      > /dev/null 2>&1
  done
  python3 devruns/phase_pairs.py "$OUT"/lag_nsys_*.json
fi
stamp "done"
