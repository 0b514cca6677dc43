#!/usr/bin/env bash
# The device session behind issue 13 (roofline): the committed sample with FLOP/byte counts and
# NVIDIA's CSVs, and small/large at ctx 512 in fp32 and with --tf32. Run from the staged tree
# with .whl and .devlibs carried (devruns/preamble.sh installs the one and puts the other on LD_LIBRARY_PATH).
# Everything to bring back goes under $OUT (default ./gpu_out), xz-compressed.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_roofline}
rm -rf "$W" && mkdir -p "$W/sample/oracle" "$W/sweep"
devrun_start "$@"

stamp "sample: small ctx128 with counts"
python3 -m nsight_tui capture --model small --ctx 128 --out "$W/sample"
mv "$W/sample/small_ctx128.sqlite" "$W/sample/small_ctx128_counts.sqlite"
cp "$W/sample/small_ctx128_counts.sqlite" "$W/stats_copy.sqlite"   # stats runs on a copy
"$NSYS" stats -f csv -r $REPORTS -o "$W/sample/oracle/small_ctx128_counts" "$W/stats_copy.sqlite"
cmp "$W/stats_copy.sqlite" "$W/sample/small_ctx128_counts.sqlite" && echo "stats left the trace unchanged"
tar -C "$W/sample" -cJf "$OUT/sample.tar.xz" .

for tf in "" "--tf32"; do
  stamp "sweep small,large x ctx 512 $tf"
  python3 -m nsight_tui capture --sweep --models small,large --ctxs 512 $tf --out "$W/sweep"
done
ls -la "$W/sweep"
tar -C "$W/sweep" -cJf "$OUT/sweep.tar.xz" .
ls -la "$OUT"
stamp "done"
sleep 1
