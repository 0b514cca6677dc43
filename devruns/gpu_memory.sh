#!/usr/bin/env bash
# The device session behind issue 30 ("GPU memory: where it goes, and why a run runs out of it"):
# captures with nsys's --cuda-memory-usage=true (capture's default now) and torch's own per-phase
# peaks in the step marks, and one run that runs out of GPU memory and still leaves an export.
#   memory   GPT-2 small ctx 512 batch 8 and medium ctx 512 (batch 4), 2 warmup + 3 steps
#   oom      GPT-2 xl ctx 1024 batch 16 (1 warmup + 1 step): runs out of memory in its first
#            forward on an H100 or an H200; the workload catches the OOM, marks the range that was
#            open, exits cleanly, and the runner exports STEM.oom.sqlite beside STEM.oom.json
# --no-count: no FLOP-counting pass. nsys stats runs on a COPY of each export (sha256 before/after).
# How it was run: tree copied into the git-ignored .gpustage3/ of the checkout, with .whl (nvtx
# wheel) and .devlibs (libdw/libelf) carried beside it:
#   cd .gpustage3 && WHL=../.whl DEVLIBS=../.devlibs bash devruns/gpu_memory.sh memory oom
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
devrun_install
W=${WORK:-/tmp/nsight_tui_memory}
devrun_start "$@"; nvidia-smi --query-gpu=memory.total --format=csv
cap() {  # group, then the capture's options
  local group=$1; shift
  stamp "capture $group: $*"
  timeout 240 python3 -m nsight_tui capture --no-count --out "$W/$group" "$@"; echo "exit $?: $*"
}
schema() {  # the memory tables as this nsys writes them
  python3 - "$@" <<'PY'
import sqlite3, sys
for path in sys.argv[1:]:
    db = sqlite3.connect(path)
    names = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
    print("##", path)
    for t in names:
        if "MEMORY" in t or t.startswith("ENUM_CUDA_MEM") or t.startswith("ENUM_CUDA_DEV_MEM") or t == "TARGET_INFO_GPU":
            print(t, db.execute(f"select sql from sqlite_master where name='{t}'").fetchone()[0])
            print("  rows", db.execute(f"select count(*) from {t}").fetchone()[0],
                  db.execute(f"select * from {t} limit 4").fetchall())
    print("failed cudaMalloc:", db.execute("select r.start, r.end, r.returnValue, s.value from CUPTI_ACTIVITY_KIND_RUNTIME r "
          "join StringIds s on s.id = r.nameId where r.returnValue != 0 limit 8").fetchall())
PY
}
oracle() {  # NVIDIA's reports of a group's exports, their tables, then the group packed
  local group=$1
  nsys_oracle "$W/$group"
  schema "$W/$group"/*.sqlite
  XZ_OPT=-T0 tar -C "$W/$group" -cJf "$OUT/$group.tar.xz" .
  stamp "packed $group"
}
for group in "${@:-memory}"; do
  rm -rf "${W:?}/$group"; mkdir -p "$W/$group"
  case $group in
    memory)
      cap memory --model small --ctx 512 --batch 8
      cap memory --model medium --ctx 512 ;;
    oom)
      cap oom --model xl --ctx 1024 --batch 16 --warmup 1 --steps 1
      cat "$W/oom"/*.oom.json ;;
    *) echo "unknown group $group"; continue ;;
  esac
  oracle "$group"
done
ls -la "$OUT"; stamp "done"
