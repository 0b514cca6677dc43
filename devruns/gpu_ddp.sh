#!/usr/bin/env bash
# How the data-parallel sample traces were made on the 2-GPU machine (nvidia-h200-x2):
# one export holding both ranks (`nsight-tui capture --ddp 2`) and one export per rank
# (torchrun starting nsys for each rank, `--output ..._rank%q{RANK}`), with NVIDIA's CSVs.
# Expects .devlibs and .whl in the repository root (devruns/preamble.sh); results under $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=/tmp/nsight_tui_ddp; mkdir -p "$W/one" "$W/per_rank"
devrun_start "$@"

stamp "one export, both ranks"
python3 -m nsight_tui capture --model small --ctx 128 --ddp 2 --out "$W/one"
python3 -m nsight_tui capture --model medium --ctx 256 --ddp 2 --out "$W/one"
stamp "one export per rank"
python3 -m torch.distributed.run --standalone --nproc-per-node=2 --no-python \
  "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
  --output="$W/per_rank/small_ctx128_ddp2_rank%q{RANK}" \
  python3 -m nsight_tui.capture.workload --model small --ctx 128 --steps 3 --warmup 2
for rep in "$W"/per_rank/*.nsys-rep; do
  "$NSYS" export --type=sqlite --force-overwrite=true --output="${rep%.nsys-rep}.sqlite" "$rep"
done
stamp "NVIDIA's reports"
for f in "$W"/one/small_ctx128_ddp2.sqlite "$W"/per_rank/*.sqlite; do
  "$NSYS" stats -q -f csv -r "$REPORTS" -o "$W/oracle_$(basename "${f%.sqlite}")" "$f" >/dev/null
done
ls -la "$W"/one "$W"/per_rank
stamp "figures"
python3 -m nsight_tui report "$W/one/medium_ctx256_ddp2.sqlite" -f json > "$W/medium_ddp2_report.json" || true
python3 - "$W" <<'PY'
import sys
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.analyses import ranks
w = sys.argv[1]
for f in (f"{w}/one/small_ctx128_ddp2.sqlite", f"{w}/one/medium_ctx256_ddp2.sqlite"):
    run = ranks.ranks_of_trace(load_trace(f))
    print("FIGURES", f, run.assumption)
    for s in run.ranks:
        print("  ", s.rank.label, "median step ms", round((s.median_step_ns or 0) / 1e6, 3), "comm ms", s.comm_ns / 1e6,
              "exposed ms", s.exposed_comm_ns / 1e6, "overlap", s.overlap,
              {k: (v.comm_ns / 1e6, v.exposed_comm_ns / 1e6) for k, v in s.phases.items()})
    print("   straggler", run.straggler)
PY
cd "$W" && tar cJf "$OUT/ddp_traces.tar.xz" one/small_ctx128_ddp2.sqlite per_rank/*.sqlite oracle_*.csv
ls -la "$OUT"
stamp done
