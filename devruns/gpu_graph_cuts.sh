#!/usr/bin/env bash
# A decode loop's CUDA graph cut into segments (docs/whatif.md, "When a graph's GPU work starts"):
# the graph of each token (devruns/thirdparty/hf_decode_llama.py --graph, 6 layers) as captured, one
# segment the launch hands the GPU only once its call returns, against the same graph with a
# cudaMemsetAsync before every decoder layer but the first (--cut-layers: six segments, the first
# handed over after ~1/6 of the call). First the program alone, no profiler, pairs alternating
# (each token's Python clock printed), then twins under `nsight-tui capture`, pairs alternating.
# Exports `xz -9` in $OUT as cuts_rK_{graph,graph_cut}.sqlite.xz (+ .steps.json).
# Run: SKIP_PIP=1 DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_graph_cuts.sh [BARE_PAIRS] [CAPTURE_PAIRS]
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_graph_cuts}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
T=devruns/thirdparty/hf_decode_llama.py
stamp "probe"; timeout 120 python3 $T --graph --cut-layers --probe 2>&1 | tail -2
for k in $(seq 1 "${1:-3}"); do
  for form in "" "--cut-layers"; do
    stamp "bare r$k graph $form"
    timeout 120 python3 $T --graph $form --steps 48 2>&1 | python3 -c "
import sys, statistics as st
ms = [float(l.split()[1]) for l in sys.stdin if l.startswith('step_')]
print(f'bare tokens {len(ms)}: median {st.median(ms):.3f} ms, min {min(ms):.3f}, max {max(ms):.3f}')"
  done
done
cap() {  # k, stem, options...
  local k=$1 stem=$2; shift 2
  if (( $(date +%s) - T0 > ${BUDGET_S:-500} )); then echo "out of time: r$k $stem not captured"; return; fi
  stamp "capture r$k $stem"; cpu_probe 6
  timeout 150 python3 -m nsight_tui capture --out "$W" --name "cuts_r${k}_${stem}" --no-open -- python3 $T "$@" 2>&1 \
    | grep -E '^(step_|wrote)|rror|out of' | tr '\n' ' '; echo
}
for k in $(seq 1 "${2:-2}"); do
  cap $k graph --graph
  cap $k graph_cut --graph --cut-layers
done
find "$W" -maxdepth 1 -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
cp "$W"/*.sqlite.xz "$OUT"/
cp "$W"/*.steps.json "$OUT"/ 2>/dev/null
ls -la "$OUT"
stamp done
