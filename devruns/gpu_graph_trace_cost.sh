#!/usr/bin/env bash
# What tracing a CUDA graph node by node costs (docs/whatif.md, "When a graph's GPU work starts"): the
# graphed decode loop (devruns/thirdparty/hf_decode_llama.py --graph, 6 layers) alone, under nsys with
# a graph launch traced as one item (--cuda-graph-trace=graph, nsys's default) and node by node
# (=node, as `nsight-tui capture` traces), alternating, twice: each token's Python clock (median), and
# from each export the launch call's time and when the GPU work starts against the call's return.
# Run: SKIP_PIP=1 DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_graph_trace_cost.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
devrun_start "$@"
T=devruns/thirdparty/hf_decode_llama.py
clock() {  # each token's Python clock, as the script prints it
  python3 -c "
import sys, statistics as st
ms = [float(l.split()[1]) for l in sys.stdin if l.startswith('step_')]
print(f'tokens {len(ms)}: median {st.median(ms):.3f} ms, min {min(ms):.3f}, max {max(ms):.3f}')"
}
for k in 1 2; do
  stamp "bare r$k"; timeout 120 python3 $T --graph --steps 48 2>&1 | clock
  for how in graph node; do
    stamp "nsys --cuda-graph-trace=$how r$k"
    timeout 150 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=$how \
      -o /tmp/trace_$how --force-overwrite=true python3 $T --graph --steps 48 2>&1 | clock
    "$NSYS" export --type sqlite -o /tmp/trace_$how.sqlite --force-overwrite=true /tmp/trace_$how.nsys-rep >/dev/null 2>&1
    python3 - /tmp/trace_$how.sqlite <<'PY'
import sqlite3, statistics as st, sys
c = sqlite3.connect(sys.argv[1])
tabs = {t for (t,) in c.execute("select name from sqlite_master")}
calls = c.execute("""select r.start, r.end, r.correlationId from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s
                     on s.id = r.nameId where s.value like 'cudaGraphLaunch%' order by r.start""").fetchall()[1:]
work = {}
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
    if t in tabs:
        for corr, s in c.execute(f"select correlationId, min(start) from {t} group by correlationId"):
            work.setdefault(corr, s)
after = [(work[k] - b) / 1e3 for a, b, k in calls if k in work]
print(f"launches {len(calls)}: call median {st.median((b - a) / 1e3 for a, b, _ in calls):.1f} us; "
      f"GPU work starts {st.median(after) if after else float('nan'):.1f} us after the call returns (median); tables "
      + ",".join(sorted(t[21:] for t in tabs if t.startswith("CUPTI_ACTIVITY_KIND_"))))
PY
  done
done
stamp done
