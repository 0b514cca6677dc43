#!/usr/bin/env bash
# How the committed sample traces, the sweep and the benchmark trace were made on the GPU machine
# (see capture/README.md). Usage: bash devruns/gpu_session.sh STAGE... with STAGE in
# samples, sweep, big. Expects .devlibs (libdw/libelf for nsys's importer) and .whl (the nvtx
# wheel) in the repository root (devruns/preamble.sh); writes everything to return under $OUT (default ./gpu_out).
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui}  # traces are made outside the checkout
mkdir -p "$W"

counts() {  # kernels, NVTX events and the kernels that ran inside step_1, per file
  python3 - "$@" <<'EOF'
import os, sqlite3, sys
for path in sys.argv[1:]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    k = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    n = db.execute("SELECT COUNT(*) FROM NVTX_EVENTS").fetchone()[0]
    row = db.execute("SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
                     "WHERE COALESCE(e.text, s.value) = 'step_1'").fetchone()
    per = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ? AND end <= ?",
                     row).fetchone()[0] if row else -1
    print(f"COUNT {os.path.basename(path)} size={os.path.getsize(path)} kernels={k} nvtx={n} kernels_in_step_1={per}")
EOF
}

devrun_start "$@"
python3 -c "import torch, nvtx; print('torch', torch.__version__, torch.cuda.get_device_name())"

for stage in "$@"; do
case $stage in
samples)
  stamp "samples"
  rm -rf $W/sample_out && mkdir -p $W/sample_out/oracle
  python3 -m nsight_tui capture --model small --ctx 128 --out $W/sample_out
  python3 -m nsight_tui capture --model small --ctx 128 --mode forward --out $W/sample_out
  python3 -m nsight_tui capture --model small --ctx 128 --attention fused --out $W/sample_out
  for f in $W/sample_out/*.sqlite; do
    name=$(basename "$f" .sqlite)
    # stats runs on a copy: the committed file stays exactly what export wrote
    mkdir -p $W/statscopy && cp "$f" $W/statscopy/ && before=$(sha256sum < "$W/statscopy/$name.sqlite")
    stamp "nsys stats $name"
    "$NSYS" stats -f csv -r $REPORTS -o "$W/sample_out/oracle/$name" "$W/statscopy/$name.sqlite"
    after=$(sha256sum < "$W/statscopy/$name.sqlite")
    [ "$before" = "$after" ] && echo "stats left $name.sqlite unchanged" || echo "stats CHANGED $name.sqlite"
  done
  ls -la $W/sample_out $W/sample_out/oracle
  counts $W/sample_out/*.sqlite
  tar -C $W/sample_out -cJf "$OUT/samples.tar.xz" .
  ;;
sweep)
  stamp "sweep"
  rm -rf $W/sweep_out
  python3 -m nsight_tui capture --sweep --models small,medium --ctxs 128,256 --out $W/sweep_out
  counts $W/sweep_out/*.sqlite
  tar -C $W/sweep_out -cJf "$OUT/sweep.tar.xz" .
  ;;
big)
  stamp "big"
  per=${PER_STEP:-}
  if [ -z "$per" ] && [ -f $W/sample_out/small_ctx128.sqlite ]; then
    per=$(counts $W/sample_out/small_ctx128.sqlite | sed -n 's/.*kernels_in_step_1=\([0-9]*\).*/\1/p')
  fi
  steps=${BIG_STEPS:-$(( (600000 + ${per:-1800} - 1) / ${per:-1800} ))}
  echo "kernels per step: ${per:-unknown}; big run: $steps steps"
  rm -rf $W/big_out
  python3 -m nsight_tui capture --model small --ctx 128 --steps "$steps" --warmup 2 --out $W/big_out
  counts $W/big_out/small_ctx128.sqlite
  stamp "xz"
  xz -T0 -6 -c $W/big_out/small_ctx128.sqlite | split -b 15m -d - "$OUT/small_ctx128_big.sqlite.xz.part"
  sha256sum $W/big_out/small_ctx128.sqlite
  ls -la "$OUT"
  ;;
esac
done
stamp "done"
sleep 1  # let tee flush the log before the command returns
