#!/usr/bin/env bash
# Is `.item()` after the backward a cost of a launch-bound GPT-2 small step (ctx 128, batch 4, no
# syncs inside the ranges), or is the difference one pair of captures shows the machine's pace? Nine
# runs of the workload alone (no profiler, no NVTX: its own Python clock, 5 warm-ups + 30 steps),
# alternating none / item-before-step / item three times on one H100 in one call. Log:
# devruns/gpu_item_alternate.log (2026-11-27, 123 s). Needs only the tree (PYTHONPATH) and torch.
export PYTHONPATH=$PWD; R=/tmp/st; mkdir -p $R
for rep in 1 2 3; do for plant in none item-before-step item; do
 P=""; [ $plant != none ] && P="--plant $plant"
 python3 -m nsight_tui.capture.workload --model small --ctx 128 --no-phase-sync --no-range-sync --no-nvtx \
   --warmup 5 --steps 30 $P --status-file $R/$rep-$plant.json > /dev/null 2>$R/$rep-$plant.err || tail -3 $R/$rep-$plant.err
 python3 - $R/$rep-$plant.json $rep $plant <<'PY'
import json, sys, statistics as st
d = json.load(open(sys.argv[1])); s = [x for x in d["steps"] if x["name"].startswith("step_")]
t = sorted(x["seconds"]*1e3 for x in s)
ph = {k: st.median(x["phases"][k]*1e3 for x in s) for k in s[0]["phases"]}
print(f"rep {sys.argv[2]} {sys.argv[3]:18s} n={len(t)} median {st.median(t):.2f} p10 {t[len(t)//10]:.2f} p90 {t[9*len(t)//10]:.2f} mean {st.mean(t):.2f} sd {st.stdev(t):.2f} phases(CPU issue) " + " ".join(f"{k} {v:.2f}" for k, v in ph.items()))
PY
done; done
