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
#   cd .gpustage-tensorroof && WHL=../.whl DEVLIBS=../.devlibs bash capture/gpu_tensorroof.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log_tensorroof.txt") 2>&1
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$(cd "${DEVLIBS:-.devlibs}" && pwd):${LD_LIBRARY_PATH:-}
NCU_HOME=${NCU_HOME:-/opt/nvidia/nsight-compute/2025.3.1}
export NSYS=${NSYS:-$NCU_HOME/host/target-linux-x64/nsys}
export NCU=${NCU:-$NCU_HOME/ncu}
[ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "${WHL:-.whl}"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
REPORTS=nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum,cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum
W=${WORK:-/tmp/nsight_tui_ncu}
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 )) s] $*"; }
stamp "start"; nvidia-smi -L; "$NSYS" --version; "$NCU" --version
"$NCU" --query-metrics --chip gh100 2>/dev/null | grep -E "^sm__(ops_path_tensor_src|pipe_tensor)" | head -40
rm -rf "$W"; mkdir -p "$W/oracle" "$W/.copies"
stamp "capture"
timeout ${CAPTURE_TIMEOUT:-240} python3 -m nsight_tui capture --ncu --model small4 --ctx 128 --batch 4 --dtype bf16 --ncu-kernels ${NCU_KERNELS:-40} --out "$W"
echo "capture exit $?"
ls -la "$W"
stamp "nsys stats"
for f in "$W"/*.sqlite; do
  cp "$f" "$W/.copies/"
  "$NSYS" stats -q -f csv -r "$REPORTS" -o "$W/oracle/$(basename "${f%.sqlite}")" "$W/.copies/$(basename "$f")" >/dev/null
done
rm -rf "$W/.copies"
stamp "ncu oracle"
for r in "$W"/*.ncu-rep; do
  base=$W/oracle/$(basename "${r%.ncu-rep}")
  "$NCU" --import "$r" --page raw --csv > "$base.ncu_raw.csv"
  PYTHONPATH=$NCU_HOME/extras/python python3 - "$r" "$base.ncu_report.json" <<'PY'
import json, sys
import ncu_report
KEEP = ("ops_path_tensor", "pipe_tensor", "sm__cycles_elapsed", "gpu__time_duration", "dram__bytes",
        "smsp__sass_thread_inst_executed_op_f", "device__attribute")
ctx = ncu_report.load_report(sys.argv[1])
kernels = []
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        act = rng.action_by_idx(a)
        nvtx = {}
        state = act.nvtx_state()
        for d in state.domains():
            dom = state.domain_by_id(d)
            nvtx[dom.name() or str(d)] = list(dom.push_pop_ranges())
        metrics = {}
        for name in act.metric_names():
            if not any(k in name for k in KEEP):
                continue
            m = act.metric_by_name(name)
            try:
                v = m.value()
            except Exception as exc:  # noqa: BLE001
                v = f"<{exc}>"
            if not isinstance(v, (int, float, str)) and v is not None:
                v = str(v)
            metrics[name] = [v, m.unit()]
        try:
            rules = act.rule_results_as_dicts()
        except Exception as exc:  # noqa: BLE001
            rules = [f"<{exc}>"]
        kernels.append({"range": r, "action": a, "name": act.name(), "mangled": act.name(act.NameBase_MANGLED),
                        "function": act.name(act.NameBase_FUNCTION), "nvtx": nvtx, "metrics": metrics,
                        "rules": json.loads(json.dumps(rules, default=str))})
json.dump({"kernels": kernels}, open(sys.argv[2], "w"))
print("dumped", len(kernels), "kernels ->", sys.argv[2])
PY
done
ls -la "$W" "$W/oracle"
for f in "$W"/*.ncu-rep; do xz -9e -T0 -k "$f"; done
cp "$W"/*.ncu-rep.xz "$OUT"/
ls -la "$W"
XZ_OPT="-9e -T0" tar -C "$W" -cJf "$OUT/tensorroof.tar.xz" --exclude .copies --exclude "*.ncu-rep" .
ls -la "$OUT"; stamp "done"
