#!/usr/bin/env bash
# How sample_traces/small_ctx128_twin* were made on the GPU machine (issue 11): one short
# training capture, kept as .nsys-rep, exported three ways from that same report (SQLite,
# nsys's Parquet directory, nsys's Arrow directory), with NVIDIA's own `nsys stats` CSVs
# for the SQLite twin. Run from the repository root there, with .whl and .devlibs beside it
# (see capture/README.md); everything to bring back lands in $OUT/twin.tar.xz.
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/twin_log.txt") 2>&1
export PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$PWD/../../.devlibs:$PWD/.devlibs:${LD_LIBRARY_PATH:-}
export NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
WHL=${WHL:-../../.whl}
python3 -m pip install -q --no-index --find-links "$WHL" -e '.[capture]' || exit 1
REPORTS=nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum,cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum
W=${WORK:-/tmp/twin}
rm -rf "$W" && mkdir -p "$W/out/oracle" "$W/statscopy"
"$NSYS" --version
# 1 warm-up + 1 step of GPT-2 small, ctx 128: the main thread and the autograd thread both launch
python3 -m nsight_tui capture --model small --ctx 128 --steps 1 --warmup 1 --keep-rep --out "$W/cap" || exit 1
cd "$W/cap" || exit 1
mv small_ctx128.sqlite "$W/out/small_ctx128_twin.sqlite"
"$NSYS" export --type parquetdir --output "$W/out/small_ctx128_twin.parquetdir" small_ctx128.nsys-rep
"$NSYS" export --type arrowdir --output "$W/out/small_ctx128_twin.arrowdir" small_ctx128.nsys-rep
cp small_ctx128.nsys-rep "$W/out/small_ctx128_twin.nsys-rep"
# nsys stats on a copy: the committed SQLite stays exactly what export wrote
cp "$W/out/small_ctx128_twin.sqlite" "$W/statscopy/"
"$NSYS" stats -f csv -r $REPORTS -o "$W/out/oracle/small_ctx128_twin" "$W/statscopy/small_ctx128_twin.sqlite"
"$NSYS" export --help > "$W/out/nsys_export_help.txt" 2>&1
ls -laR "$W/out"
tar -C "$W/out" -cJf "$OUT/twin.tar.xz" .
ls -la "$OUT"
