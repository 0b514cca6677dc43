#!/usr/bin/env bash
# The every-other-step changes run without nsys (the workload alone, its own step clock), long, to
# see whether what the captures show (docs/whatif.md, "One capture, the change on every other step")
# is the program's or the profiler's: the .item() plant-free steps slower, the TF32 steps' host work
# slower. A capture of the .item() case and of the async TF32 one under nsys beside them, the same minute.
#   item      ctx 128, batch 4, no phase syncs, .item() after the forward, 200 steps
#   tf32      ctx 512, batch 4, phase syncs, fp32 matmuls every other step, 100 steps
#   tf32async ctx 512, batch 8, nothing synchronised in the ranges, 100 steps
#   input     ctx 128, phase syncs, a 64 MiB pageable batch against the same batch pinned, 100 steps
# Each prints its step times; devruns/bare_alternating_table.py reads the log.
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
devrun_start "$@"
bare() {  # every step's time from the status file (the log prints every 10th)
  python3 -m nsight_tui.capture.workload --model small --mode train --dtype fp32 --attention manual \
    --status-file /tmp/bare_status.json "$@" 2>&1 | grep -E "rror|Traceback"
  python3 -c "import json; s = json.load(open('/tmp/bare_status.json')); print('  steps ms:', ' '.join(
    f\"{r['name']}={r['seconds'] * 1e3:.2f}\" for r in s['steps'] if r['name'].startswith('step_')))"
}
for s in ${*:-item tf32 tf32async input item}; do
  stamp "bare $s"
  case $s in
    item) bare --ctx 128 --batch 4 --steps 200 --warmup 4 --plant item --plant-every 2 --no-phase-sync ;;
    tf32) bare --ctx 512 --batch 4 --steps 100 --warmup 4 --plant fp32-gemm --plant-every 2 ;;
    tf32async) bare --ctx 512 --batch 8 --steps 100 --warmup 4 --plant fp32-gemm --plant-every 2 --no-phase-sync --no-range-sync ;;
    input) bare --ctx 128 --batch 4 --steps 100 --warmup 4 --plant pageable-input --plant-every 2 ;;
  esac
done
nsyscap() {  # one capture of 24 steps under nsys, its step marks
  local W=/tmp/nsight_tui_bare_alt_$1; rm -rf "$W"; mkdir -p "$W"; shift
  python3 -m nsight_tui capture --model small --warmup 2 --steps 24 --no-count --no-memory-usage --out "$W" "$@" 2>&1 \
    | grep -E "wrote|rror"
  python3 - "$W" <<'PY'
import glob, sys
sys.path.insert(0, "tests")
from helpers.step_sql import python_step_marks
marks = python_step_marks(glob.glob(sys.argv[1] + "/*.sqlite")[0])
print("  marks ms:", " ".join(f"{n}={marks[n] / 1e6:.2f}" for n in sorted(marks, key=lambda n: int(n.split("_")[1]))))
PY
}
stamp "nsys item"; nsyscap item --ctx 128 --no-phase-sync --plant item --plant-every 2
stamp "nsys tf32async"; nsyscap tf32async --ctx 512 --batch 8 --no-sync --plant fp32-gemm --plant-every 2
stamp "done"
