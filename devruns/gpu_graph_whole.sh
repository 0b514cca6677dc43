#!/usr/bin/env bash
# CUDA graphs traced whole (nsys's default, --cuda-graph-trace=graph: one CUPTI_ACTIVITY_KIND_GRAPH_TRACE
# row per graph launch, no row per node), as a user's own `nsys profile` of a graphed program records
# them: the graphed decode loop (devruns/thirdparty/hf_decode_llama.py --graph) and timm's ViT trained
# as one graph per step (timm_vit_twins.py --graph), and the decode loop eager beside them; NVIDIA's
# `nsys stats` CSVs of each (the tests' oracle). Exports `xz -9` in $OUT with their oracle folder.
# Run: SKIP_PIP=1 DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_graph_whole.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_graph_whole}
rm -rf "$W" && mkdir -p "$W"
devrun_start "$@"
T=devruns/thirdparty
prof() {  # name, command...
  local name=$1; shift
  stamp "$name"
  timeout 200 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o "$W/$name" --force-overwrite=true \
    "$@" 2>&1 | grep -E "^step_" | tr '\n' ' '; echo
  "$NSYS" export --type=sqlite --force-overwrite=true --output="$W/$name.sqlite" "$W/$name.nsys-rep" >/dev/null 2>&1 \
    || echo "FAILED export $name"
  rm -f "$W/$name.nsys-rep"
}
prof decode_graph_whole python3 $T/hf_decode_llama.py --graph --steps 24
prof vit_graph_whole python3 $T/timm_vit_twins.py --batch 8 --tf32 --graph
nsys_oracle "$W"
python3 - "$W" <<'PY'
import sqlite3, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*.sqlite")):
    c = sqlite3.connect(f)
    tabs = {t for (t,) in c.execute("select name from sqlite_master")}
    g = c.execute("select count(*), sum(end - start) from CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone() \
        if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tabs else None
    k = c.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    print(f.split("/")[-1], "graph rows, ns:", g, "kernel rows:", k)
    print(c.execute("select sql from sqlite_master where name = 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE'").fetchone())
PY
find "$W" -maxdepth 1 -name '*.sqlite' -print0 | xargs -0 -P 16 -n 1 xz -9
cp "$W"/*.sqlite.xz "$OUT"/ && cp -r "$W/oracle" "$OUT"/
stamp done
