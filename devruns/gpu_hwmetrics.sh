#!/usr/bin/env bash
# The device session behind issue 29's items 4-6 ("Below the kernel": FLOPs from op shapes, GPU
# metrics sampling, capture --gpu-metrics / --autograd-shapes):
#   metrics  GPT-2 small ctx 512 batch 8, fp32 and --tf32, 1 warmup + 2 steps, --gpu-metrics 1000
#            (nsys --gpu-metrics-devices=all at 1 kHz: the default 10 kHz makes millions of rows)
#   conv     a small conv net (capture/conv_shapes.py) under --pytorch=autograd-shapes-nvtx and under
#            emit_nvtx(record_shapes=True), its FlopCounterMode total recorded as a mark
#   shapes   GPT-2 small ctx 128 batch 4, 1 warmup + 2 steps, --autograd-shapes (nsys
#            --pytorch=autograd-shapes-nvtx), WITH the FLOP-counting pass (its marks are the truth the
#            shapes' FLOPs are compared to); and the same with --no-count (a trace with shapes only)
# nsys stats runs on a COPY of each export (sha256 before/after). The log also prints the GPU-metric
# names this nsys/GPU writes (TARGET_INFO_GPU_METRICS) and a few op-range texts with their shapes.
# How it was run: tree copied into the git-ignored .gpustage-hwmetrics/ of the checkout, with .whl
# (nvtx wheel) and .devlibs (libdw/libelf) carried beside it:
#   cd .gpustage-hwmetrics && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_hwmetrics.sh metrics shapes
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_hwmetrics}
devrun_start "$@"
cap() {  # group, then the capture's options
  local group=$1; shift
  stamp "capture $group: $*"
  timeout 200 python3 -m nsight_tui capture --out "$W/$group" "$@"; echo "exit $?: $*"
}
schema() {  # the GPU-metrics tables and the op ranges' text as this nsys writes them
  python3 - "$@" <<'PY'
import sqlite3, sys
for path in sys.argv[1:]:
    db = sqlite3.connect(path)
    names = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    print("##", path)
    for t in sorted(names):
        if "GPU_METRIC" in t:
            print(t, db.execute(f"select sql from sqlite_master where name='{t}'").fetchone()[0])
            print("  rows", db.execute(f"select count(*) from {t}").fetchone()[0])
    if "TARGET_INFO_GPU_METRICS" in names:
        for row in db.execute("select * from TARGET_INFO_GPU_METRICS"):
            print("  metric", row)
        print("  samples", db.execute("select count(distinct timestamp), min(timestamp), max(timestamp) from GPU_METRICS").fetchone())
        print("  first", db.execute("select * from GPU_METRICS order by timestamp limit 30").fetchall())
    texts = db.execute("select coalesce(e.text, s.value) from NVTX_EVENTS e left join StringIds s on s.id = e.textId "
                       "where coalesce(e.text, s.value) like '%aten::%' limit 4000").fetchall()
    seen = set()
    for (t,) in texts:
        key = t.split(",")[0]
        if key not in seen and ("conv" in key or "relu" in key or "mm" in key or "linear" in key or "addmm" in key or "bmm" in key or "Backward" in key or len(seen) < 6):
            seen.add(key); print("  text", repr(t[:400]))
PY
}
oracle() {  # NVIDIA's reports of a group's exports, their tables, then the group packed
  local group=$1
  nsys_oracle "$W/$group"
  schema "$W/$group"/*.sqlite
  XZ_OPT="-9 -T0" tar -C "$W/$group" -cJf "$OUT/$group.tar.xz" .
  stamp "packed $group"
}
for group in "${@:-metrics}"; do
  rm -rf "${W:?}/$group"; mkdir -p "$W/$group"
  case $group in
    metrics)
      cap metrics --model small --ctx 512 --batch 8 --warmup 1 --steps 2 --no-count --gpu-metrics 1000
      cap metrics --model small --ctx 512 --batch 8 --warmup 1 --steps 2 --no-count --gpu-metrics 1000 --tf32 ;;
    shapes)
      cap shapes --model small --ctx 128 --warmup 1 --steps 2 --autograd-shapes
      cap shapes/nocount --model small --ctx 128 --warmup 1 --steps 2 --autograd-shapes --no-count
      for f in "$W/shapes/nocount"/*.sqlite; do mv "$f" "${f%.sqlite}_nocount.sqlite"; done
      mv "$W/shapes/nocount"/*.sqlite "$W/shapes/"; rm -rf "$W/shapes/nocount" ;;
    conv)  # convolutions: nsys's shapes, and emit_nvtx(record_shapes=True)'s (no nsight-tui capture)
      stamp "conv under --pytorch=autograd-shapes-nvtx"
      timeout 120 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --pytorch=autograd-shapes-nvtx \
        --output="$W/conv/conv_agshapes.nsys-rep" python3 -m nsight_tui.capture.conv_shapes; echo "exit $?"
      stamp "conv under emit_nvtx(record_shapes=True)"
      timeout 120 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none \
        --output="$W/conv/conv_emitshapes.nsys-rep" python3 -m nsight_tui.capture.conv_shapes --emit; echo "exit $?"
      for r in "$W/conv"/*.nsys-rep; do "$NSYS" export --type=sqlite --output="${r%.nsys-rep}.sqlite" "$r"; done
      rm -f "$W/conv"/*.nsys-rep ;;
    *) echo "unknown group $group"; continue ;;
  esac
  oracle "$group"
done
ls -la "$OUT"; stamp "done"
