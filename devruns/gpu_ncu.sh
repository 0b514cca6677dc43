#!/usr/bin/env bash
# The device session behind issue 29 ("Below the kernel"): one workload captured twice, under nsys
# (the export) and under Nsight Compute over one steady-state step (`capture --ncu`: the workload
# brackets step_1 with cudaProfilerStart/Stop, ncu runs with --profile-from-start off, so every
# thread's kernels of that step are profiled, backward's on the autograd thread included), plus
# NVIDIA's own readings of both as the tests' oracle:
#   nsys stats CSVs (on a COPY of the export), `ncu --import R --page raw --csv` (every metric of
#   every profiled kernel) and `--page details --csv`, and a JSON dump made with the ncu_report
#   module that ships with this ncu (extras/python): per kernel its names, NVTX push/pop stack,
#   every metric and ncu's rule results.
# Model: small4 (GPT-2 small's width, 4 layers) ctx 128 batch 4: ~130 kernels a step.
# How it was run: tree copied into the git-ignored .gpustage-ncu/ of the checkout, with .whl (nvtx
# wheel) and .devlibs (libdw/libelf) carried beside it:
#   cd .gpustage-ncu && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_ncu.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_ncu}
devrun_start "$@"; "$NCU" --version
rm -rf "$W"; mkdir -p "$W/oracle" "$W/.copies"
stamp "capture"
timeout ${CAPTURE_TIMEOUT:-420} python3 -m nsight_tui capture --ncu --model small4 --ctx 128 --batch 4 --out "$W"
echo "capture exit $?"
ls -la "$W"
nsys_oracle "$W"
stamp "ncu oracle"
for r in "$W"/*.ncu-rep; do
  base=$W/oracle/$(basename "${r%.ncu-rep}")
  "$NCU" --import "$r" --page raw --csv > "$base.ncu_raw.csv"
  "$NCU" --import "$r" --page details --csv > "$base.ncu_details.csv"
  PYTHONPATH=$NCU_HOME/extras/python python3 "$(dirname "${BASH_SOURCE[0]}")/ncu_dump.py" "$r" "$base.ncu_report.json"
done
cp "$NCU_HOME"/sections/SpeedOfLight_RooflineChart.section "$NCU_HOME"/sections/SpeedOfLight*Roofline*.section "$W/oracle/" 2>/dev/null
ls -la "$W" "$W/oracle"
XZ_OPT="-9e -T0" tar -C "$W" -cJf "$OUT/ncu.tar.xz" --exclude .copies .
ls -la "$OUT"; stamp "done"
