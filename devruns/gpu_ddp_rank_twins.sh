#!/usr/bin/env bash
# Per-rank DDP twins for `whatif FOLDER` (parsers/read/rank_merge.py), on a 2-GPU machine
# (nvidia-h200-x2 or -h100-x2): GPT-2 small ctx 512 batch 8 without phase syncs, torchrun starting nsys
# for each rank (`--output NAME_rank%q{RANK}`, one export per rank, each on its own session clock),
# DDP's 25 MB buckets (base) and one bucket (twin), back to back, PAIRS pairs (default 3), in turn
# base first and twin first.
# Then, on the machine, `whatif BASE_FOLDER kernels-from:TWIN_FOLDER -f json` per pair, and the table
# beside the workload's own step clock: `python3 devruns/ddp_rank_twins_table.py $W` (also runnable here
# on the exports that come back in $OUT/ddp_rank_twins.tar.xz).
#   SKIP_PIP=1 DEVLIBS=.devlibs OUT=$OUT bash devruns/gpu_ddp_rank_twins.sh [PAIRS]
# Another change: BASE_ARGS and TWIN_ARGS (the workload's options each side; default none and
# `--plant ddp-one-bucket`) and EDIT (the edit that is the change; default kernels-from:TWIN), e.g. a 5 ms
# host sleep at each rank's step start removed: BASE_ARGS="--plant host-sleep" TWIN_ARGS= EDIT=nohost:-5ms;
# on rank 1 alone (a straggler, which rank 0 waits for in its all-reduces): BASE_ARGS="--plant host-sleep
# --plant-rank 1" TWIN_ARGS= EDIT=nohost:-5ms; a GPU-bound straggler (rank 1's GEMMs fp32, rank 0's and the
# twin's TF32): BASE_ARGS="--tf32 --plant fp32-gemm --plant-rank 1" TWIN_ARGS=--tf32 (EDIT: kernels-from)
# Another workload: WORKLOAD (the command each rank runs, its own step marks; default the GPT-2 workload above)
# and NAME (the exports' stem), e.g. timm's ViT under DDP with a straggler's sleep:
#   WORKLOAD="python3 devruns/thirdparty/timm_vit_ddp.py --tf32" NAME=vit_small_b32_ddp2
#   BASE_ARGS="--sleep-ms 5 --sleep-rank 1" TWIN_ARGS= EDIT=nohost:-5ms
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=/tmp/nsight_tui_ddp_ranks; rm -rf "$W"; mkdir -p "$W"
devrun_start "$@"
PAIRS=${1:-3}

ranks() {  # ranks FOLDER [--plant P]: one export per rank into FOLDER
  local dir=$1; shift
  mkdir -p "$dir"
  timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node=2 --no-python \
    "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true \
    --output="$dir/${NAME:-small_ctx512_b8_ddp2}_rank%q{RANK}" \
    ${WORKLOAD:-python3 -m nsight_tui.capture.workload --model small --ctx 512 --batch 8 --steps 6 --warmup 2 \
    --no-phase-sync} "$@" 2>&1 | tail -3
  for rep in "$dir"/*.nsys-rep; do
    "$NSYS" export --type=sqlite --force-overwrite=true --output="${rep%.nsys-rep}.sqlite" "$rep" >/dev/null && rm -f "$rep"
  done
  ls -la "$dir"
}

for i in $(seq 1 "$PAIRS"); do  # the order alternates (A B, B A): the second of two captures can run slower
  if (( i % 2 )); then
    stamp "pair r$i: base ${BASE_ARGS:-}"; ranks "$W/r${i}_base" ${BASE_ARGS:-}
    stamp "pair r$i: twin ${TWIN_ARGS---plant ddp-one-bucket}"; ranks "$W/r${i}_twin" ${TWIN_ARGS---plant ddp-one-bucket}
  else
    stamp "pair r$i: twin ${TWIN_ARGS---plant ddp-one-bucket}"; ranks "$W/r${i}_twin" ${TWIN_ARGS---plant ddp-one-bucket}
    stamp "pair r$i: base ${BASE_ARGS:-}"; ranks "$W/r${i}_base" ${BASE_ARGS:-}
  fi
done
stamp "table"
python3 devruns/ddp_rank_twins_table.py "$W" ${EDIT:+--edit "$EDIT"}
cd "$W" && tar cJf "$OUT/ddp_rank_twins.tar.xz" r*_base/*.sqlite r*_twin/*.sqlite
ls -la "$OUT"
stamp done
