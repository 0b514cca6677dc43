#!/usr/bin/env bash
# Launch and host cost with the GPU idle against busy (devruns/idle_launch.py), bare and under nsys
# as `capture` runs it (CUDA API tracing on), on one lent machine in one call.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_start "$@"
stamp "bare"; python3 devruns/idle_launch.py 300
stamp "bare again"; python3 devruns/idle_launch.py 300
stamp "under nsys"
"$NSYS" profile --trace=cuda --sample=none --cpuctxsw=none -o /tmp/idle_launch --force-overwrite=true \
  python3 devruns/idle_launch.py 300 2>&1 | grep -v "^Generating\|^Collecting\|^Processing\|^\s*$" | head -20
stamp "done"
