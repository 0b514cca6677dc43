#!/usr/bin/env bash
# How sample_traces/small_ctx128_twin* were made on the GPU machine (issue 11): one short
# training capture, kept as .nsys-rep, exported three ways from that same report (SQLite,
# nsys's Parquet directory, nsys's Arrow directory), with NVIDIA's own `nsys stats` CSVs
# for the SQLite twin. Run from the repository root there, staged two folders down
# (WHL=../../.whl DEVLIBS=../../.devlibs; devruns/preamble.sh); everything to bring back lands in $OUT/twin.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/twin}
rm -rf "$W" && mkdir -p "$W/out/oracle" "$W/statscopy"
devrun_start "$@"
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
