#!/usr/bin/env bash
# Issue 31's bare CUDA C++ trace: capture/bare_gpt2.cu (a GPT-2 small forward with cuBLAS, no NVTX at
# all, built on the development machine with nvcc 13.0: `nvcc -O2 -arch=sm_90 -o bin/bare_gpt2
# capture/bare_gpt2.cu -ldl`, carried in the staged tree) under nsys, 6 forward passes, ctx 512,
# batch 8, 12 layers; the program's own step times in STEM.steps.json; NVIDIA's kernel/API CSVs.
# Run (device tool, nvidia-h100-x1): cd .gpustage-nonvtx && DEVLIBS=../.devlibs bash devruns/gpu_bare.sh
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
CUBLAS=$(dirname "$(find / -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$CUBLAS:$LD_LIBRARY_PATH
echo "cuBLAS from $CUBLAS"; devrun_start "$@"
W=/tmp/nsight_tui_bare; rm -rf "$W"; mkdir -p "$W"
S=bare_gpt2_small_ctx512_b8
"$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --output="$W/$S" \
  ./bin/bare_gpt2 6 12 512 8 "$W/$S.steps.json" || echo "FAILED profile ($?)"
"$NSYS" export --type=sqlite --output="$W/$S.sqlite" "$W/$S.nsys-rep" || echo "FAILED export ($?)"
rm -f "$W/$S.nsys-rep"
nsys_oracle "$W" cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum  # no NVTX: no NVTX reports
cat "$W/$S.steps.json"
XZ_OPT=-T0 tar -C "$W" -cJf "$OUT/bare.tar.xz" .
ls -la "$OUT"
