#!/usr/bin/env bash
# Issue 19's captures on the GPU machine, in one call (see capture/README.md, "Backward captures"):
#   samples   small ctx128 train, 1 warmup + 2 steps, three ways: --autograd-nvtx, --emit-nvtx,
#             --backward-ranges; with NVIDIA's `nsys stats` CSVs (committed to sample_traces/)
#   overhead  small ctx128 (and medium ctx256) train, 3 warmup + 20 steps, plain / --backward-ranges /
#             --autograd-nvtx / --emit-nvtx: median step and phase times from the step marks
#   big       medium and large ctx256 train with --autograd-nvtx (the per-part tables), and medium
#             with --autograd-nvtx --backward-ranges (seq mapping against name mapping)
#   bwdranges the --backward-ranges captures again (sample with CSVs, medium with --autograd-nvtx,
#             small overhead pair), after backward:<part> moved from push/pop to start/end ranges
# Usage: bash devruns/backward_session.sh STAGE...   Expects WHL (wheels: nvtx, ...) and DEVLIBS
# (libdw/libelf for nsys's importer); writes what returns under $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_bwd}
mkdir -p "$W"
cap() { python3 -m nsight_tui capture --force "$@"; }

stepstats() {  # median step and phase times (ms) from the nsight-tui:step marks, per file
  python3 - "$@" <<'EOF'
import json, os, sqlite3, statistics, sys
for path in sys.argv[1:]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                      "WHERE e.eventType = 34").fetchall()
    steps = [json.loads(t[len("nsight-tui:step "):]) for (t,) in rows if t and t.startswith("nsight-tui:step ")]
    steps = [s for s in steps if s["name"].startswith("step_")]
    med = lambda xs: statistics.median(xs) * 1e3 if xs else float("nan")
    phases = {p: med([s["phases"][p] for s in steps if p in s["phases"]]) for p in ("forward", "backward", "optimizer")}
    n = db.execute("SELECT COUNT(*) FROM NVTX_EVENTS").fetchone()[0]
    k = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    print(f"STEPS {os.path.basename(path)} steps={len(steps)} step_ms={med([s['seconds'] for s in steps]):.3f} "
          + " ".join(f"{p}_ms={v:.3f}" for p, v in phases.items())
          + f" size={os.path.getsize(path)} kernels={k} nvtx={n}")
EOF
}

devrun_start "$@"
python3 -c "import torch, nvtx; print('torch', torch.__version__, torch.cuda.get_device_name())"
"$NSYS" profile --help | grep -i -A4 -- "--pytorch" | head -12

for stage in "$@"; do
case $stage in
samples)
  stamp "samples"
  rm -rf $W/samples && mkdir -p $W/samples/oracle
  for style in --autograd-nvtx --emit-nvtx --backward-ranges; do
    cap --model small --ctx 128 --warmup 1 --steps 2 $style --out $W/samples
  done
  for f in $W/samples/*.sqlite; do
    name=$(basename "$f" .sqlite)
    mkdir -p $W/statscopy && cp "$f" $W/statscopy/ && before=$(sha256sum < "$W/statscopy/$name.sqlite")
    stamp "nsys stats $name"
    "$NSYS" stats -f csv -r $REPORTS -o "$W/samples/oracle/$name" "$W/statscopy/$name.sqlite" > /dev/null
    after=$(sha256sum < "$W/statscopy/$name.sqlite")
    [ "$before" = "$after" ] && echo "stats left $name.sqlite unchanged" || echo "stats CHANGED $name.sqlite"
  done
  ls -la $W/samples $W/samples/oracle
  stepstats $W/samples/*.sqlite
  # What the op ranges look like, for the parsers: the most frequent names per thread.
  python3 - $W/samples/small_ctx128_agnvtx.sqlite <<'EOF'
import re, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for gtid, n in db.execute("SELECT globalTid, COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59,60,70,71) GROUP BY 1"):
    print("THREAD", gtid & 0xFFFFFF, n)
    q = ("SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
         "WHERE e.eventType IN (59,60,70,71) AND e.globalTid = ? LIMIT 4000")
    names = {}
    for (t,) in db.execute(q, (gtid,)):
        key = re.sub(r"\d+", "N", t or "")
        names[key] = names.get(key, 0) + 1
    for key, c in sorted(names.items(), key=lambda kv: -kv[1])[:25]:
        print("   ", c, key[:150])
EOF
  tar -C $W/samples -cJf "$OUT/samples.tar.xz" .
  ;;
overhead)
  stamp "overhead"
  rm -rf $W/overhead && mkdir -p $W/overhead
  for style in "" --backward-ranges --autograd-nvtx --emit-nvtx; do
    cap --model small --ctx 128 --warmup 3 --steps 20 $style --out $W/overhead
  done
  for style in "" --backward-ranges --autograd-nvtx; do
    cap --model medium --ctx 256 --warmup 3 --steps 10 $style --out $W/overhead
  done
  stepstats $W/overhead/*.sqlite
  ;;
bwdranges)
  stamp "bwdranges"
  rm -rf $W/bwd && mkdir -p $W/bwd/oracle $W/bwdbig $W/bwdover
  cap --model small --ctx 128 --warmup 1 --steps 2 --backward-ranges --out $W/bwd
  name=small_ctx128_bwdranges
  mkdir -p $W/statscopy && cp $W/bwd/$name.sqlite $W/statscopy/ && before=$(sha256sum < "$W/statscopy/$name.sqlite")
  "$NSYS" stats -f csv -r $REPORTS -o "$W/bwd/oracle/$name" "$W/statscopy/$name.sqlite" > /dev/null
  after=$(sha256sum < "$W/statscopy/$name.sqlite")
  [ "$before" = "$after" ] && echo "stats left $name.sqlite unchanged" || echo "stats CHANGED $name.sqlite"
  cap --model medium --ctx 256 --warmup 1 --steps 2 --autograd-nvtx --backward-ranges --out $W/bwdbig
  for style in "" --backward-ranges; do
    cap --model small --ctx 128 --warmup 3 --steps 20 $style --out $W/bwdover
  done
  stepstats $W/bwd/*.sqlite $W/bwdbig/*.sqlite $W/bwdover/*.sqlite
  tar -C $W/bwd -cJf "$OUT/bwd.tar.xz" .
  xz -T0 -6 -c $W/bwdbig/medium_ctx256_agnvtx_bwdranges.sqlite > "$OUT/medium_ctx256_agnvtx_bwdranges.sqlite.xz"
  ;;
big)
  stamp "big"
  rm -rf $W/big && mkdir -p $W/big
  cap --model medium --ctx 256 --warmup 1 --steps 2 --autograd-nvtx --out $W/big
  cap --model large --ctx 256 --warmup 1 --steps 2 --autograd-nvtx --out $W/big
  cap --model medium --ctx 256 --warmup 1 --steps 2 --autograd-nvtx --backward-ranges --out $W/big
  stepstats $W/big/*.sqlite
  stamp "xz"
  tar -C $W/big -cf - . | xz -T0 -6 -c | split -b 15m -d - "$OUT/big.tar.xz.part"
  ls -la "$OUT"
  ;;
esac
done
stamp "done"
sleep 1  # let tee flush the log before the command returns
