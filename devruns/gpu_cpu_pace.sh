#!/usr/bin/env bash
# Why does the CPU's pace move between back-to-back runs on one lent machine (docs/whatif.md,
# "Twins": the same launch-bound program ×0.57..×1.52 apart, a fixed Python loop 0.82..1.65 s)?
# What the machine is (CPUs, NUMA, frequency governor, the GPU's CPU affinity), a fixed pure-Python
# probe (10^6 additions, ~50 ms) 30 times free and 30 times bound to one core with the steal and
# iowait the kernel counted across each, then the launch-bound workload alone (GPT-2 small, ctx 512,
# batch 8, TF32, no syncs in the step, no NVTX: its own Python clock, 5 warm-ups + 30 steps)
# alternating free / bound to 4 cores (taskset) four times each. Needs only the tree and torch.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/pace; rm -rf $R; mkdir -p $R
echo "== machine"; nproc; lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA|MHz|Hypervisor|Virtualization'
cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo "no cpufreq governor visible"
nvidia-smi topo -m 2>/dev/null | head -5; uptime; ps -eo pcpu,comm --sort=-pcpu | head -6
probe() { python3 - "$@" <<'PY'
import time, sys
def st():
    f = open("/proc/stat").readline().split()[1:]
    return [int(x) for x in f]
out = []
for i in range(30):
    a = st(); t = time.perf_counter(); s = 0
    for k in range(10**6): s += k
    d = time.perf_counter() - t; b = st()
    tot = sum(b) - sum(a)
    out.append((d * 1e3, (b[7] - a[7]), (b[4] - a[4]), tot))
ms = sorted(x[0] for x in out)
print(sys.argv[1], "probe ms: min %.1f p50 %.1f p90 %.1f max %.1f" % (ms[0], ms[15], ms[27], ms[-1]),
      "| steal ticks %d iowait %d of %d" % (sum(x[1] for x in out), sum(x[2] for x in out), sum(x[3] for x in out)))
print(sys.argv[1], "each:", " ".join("%.0f" % x[0] for x in out))
PY
}
echo "== probe"; probe free; taskset -c 3 bash -c "$(declare -f probe); probe core3"; probe free-again
echo "== workload alone, TF32 launch-bound"
for rep in 1 2 3 4; do for mode in free bound; do
  pre=""; [ $mode = bound ] && pre="taskset -c 2-5"
  $pre python3 -m nsight_tui.capture.workload --model small --ctx 512 --batch 8 --tf32 --no-phase-sync --no-range-sync --no-nvtx \
    --warmup 5 --steps 30 --status-file $R/$rep-$mode.json > /dev/null 2>$R/$rep-$mode.err || tail -3 $R/$rep-$mode.err
  python3 - $R/$rep-$mode.json $rep $mode <<'PY'
import json, sys, statistics as st
d = json.load(open(sys.argv[1])); s = [x for x in d["steps"] if x["name"].startswith("step_")]
t = sorted(x["seconds"]*1e3 for x in s)
print(f"rep {sys.argv[2]} {sys.argv[3]:6s} n={len(t)} median {st.median(t):.2f} p10 {t[len(t)//10]:.2f} p90 {t[9*len(t)//10]:.2f} sd {st.stdev(t):.2f}")
PY
done; done
