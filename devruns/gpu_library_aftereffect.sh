#!/usr/bin/env bash
# The framework's host work right after a TF32 GEMM call against an fp32 one (devruns/
# library_aftereffect.py), bare twice and under nsys as `capture` traces CUDA, on one lent machine in
# one call.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_start "$@"
stamp "bare"; python3 devruns/library_aftereffect.py "${ROUNDS:-400}"
stamp "bare again"; python3 devruns/library_aftereffect.py "${ROUNDS:-400}"
stamp "under nsys"
"$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o /tmp/library_aftereffect --force-overwrite=true \
  python3 devruns/library_aftereffect.py "${ROUNDS:-400}" 2>&1 | grep -v "^Generating\|^Collecting\|^Processing\|^\s*$" | head -20
stamp "done"
