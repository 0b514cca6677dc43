#!/usr/bin/env bash
# When a CUDA graph's GPU work starts (devruns/graph_start.py): synthetic graphs one property apart
# (linear tiny kernels, 300 or 1000; a long GEMM first; GEMMs; a fork onto a second stream; index
# kernels; a multi-tensor kernel first; multi-tensor kernels; launched behind queued work; launched on
# a side stream; cut by a memset, a device copy or a host copy), replayed under nsys with every graph
# node traced, twice; the table printed here. GRAPHS (comma-separated) picks some.
# Run: SKIP_PIP=1 DEVLIBS=.devlibs OUT=$OUT [GRAPHS=a,b] bash devruns/gpu_graph_start.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
devrun_start "$@"
for k in 1 2; do
  stamp "graph_start r$k"
  "$NSYS" profile --trace=cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none \
    -o /tmp/graph_start_$k --force-overwrite=true python3 devruns/graph_start.py 30 ${GRAPHS:-} 2>&1 | grep -E "graph_start|rror" | head
  "$NSYS" export --type sqlite -o /tmp/graph_start_$k.sqlite --force-overwrite=true /tmp/graph_start_$k.nsys-rep >/dev/null 2>&1
  python3 devruns/graph_start.py --analyse /tmp/graph_start_$k.sqlite
  xz -9 -c /tmp/graph_start_$k.sqlite > "$OUT/graph_start_$k.sqlite.xz"
done
stamp done
