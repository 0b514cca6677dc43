#!/usr/bin/env bash
# The device session behind issue 29's tensor-core roofline: the ncu pair of sample_traces/ncu/ is
# fp32 (CUDA-core GEMMs: its tensor pipe is idle and it holds no tensor-core operation counters), so
# this captures the same workload with bf16 autocast (cuBLAS's tensor-core GEMMs) under nsys and
# under Nsight Compute with `capture --ncu`, whose sections now include
# SpeedOfLight_HierarchicalTensorRooflineChart (sm__ops_path_tensor_src_* per precision and their
# peaks). Bounded to the first 40 kernels of step_1 (embedding + the first layer's forward: its six
# GEMMs) to keep the report small: its size is the embedded cubins of the modules its kernels come
# from, and fewer kernels touch fewer modules.
# Oracles: nsys stats CSVs (on a COPY of the export), `ncu --page raw --csv`, and a JSON of the
# tensor/roofline metrics and names per kernel read by the ncu_report module shipped with this ncu.
# How it was run: tree copied into the git-ignored .gpustage-tensorroof/ of the checkout, with .whl
# (nvtx wheel) and .devlibs (libdw/libelf) carried beside it:
#   cd .gpustage-tensorroof && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_tensorroof.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_ncu}
devrun_start "$@"; "$NCU" --version
"$NCU" --query-metrics --chip gh100 2>/dev/null | grep -E "^sm__(ops_path_tensor_src|pipe_tensor)" | head -40
rm -rf "$W"; mkdir -p "$W/oracle" "$W/.copies"
stamp "capture"
timeout ${CAPTURE_TIMEOUT:-240} python3 -m nsight_tui capture --ncu --model small4 --ctx 128 --batch 4 --dtype bf16 --ncu-kernels ${NCU_KERNELS:-40} --out "$W"
echo "capture exit $?"
ls -la "$W"
nsys_oracle "$W"
stamp "ncu oracle"
for r in "$W"/*.ncu-rep; do
  base=$W/oracle/$(basename "${r%.ncu-rep}")
  "$NCU" --import "$r" --page raw --csv > "$base.ncu_raw.csv"
  PYTHONPATH=$NCU_HOME/extras/python python3 "$(dirname "${BASH_SOURCE[0]}")/ncu_dump.py" "$r" "$base.ncu_report.json" --keep ops_path_tensor pipe_tensor sm__cycles_elapsed gpu__time_duration dram__bytes \
    smsp__sass_thread_inst_executed_op_f device__attribute
done
ls -la "$W" "$W/oracle"
for f in "$W"/*.ncu-rep; do xz -9e -T0 -k "$f"; done
cp "$W"/*.ncu-rep.xz "$OUT"/
ls -la "$W"
XZ_OPT="-9e -T0" tar -C "$W" -cJf "$OUT/tensorroof.tar.xz" --exclude .copies --exclude "*.ncu-rep" .
ls -la "$OUT"; stamp "done"
