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
#   cd .gpustage-ncu && WHL=../.whl DEVLIBS=../.devlibs bash capture/gpu_ncu.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log_ncu.txt") 2>&1
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
rm -rf "$W"; mkdir -p "$W/oracle" "$W/.copies"
stamp "capture"
timeout ${CAPTURE_TIMEOUT:-420} python3 -m nsight_tui capture --ncu --model small4 --ctx 128 --batch 4 --out "$W"
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
  "$NCU" --import "$r" --page details --csv > "$base.ncu_details.csv"
  PYTHONPATH=$NCU_HOME/extras/python python3 - "$r" "$base.ncu_report.json" <<'PY'
import json, sys
import ncu_report
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
cp "$NCU_HOME"/sections/SpeedOfLight_RooflineChart.section "$NCU_HOME"/sections/SpeedOfLight*Roofline*.section "$W/oracle/" 2>/dev/null
ls -la "$W" "$W/oracle"
XZ_OPT="-9e -T0" tar -C "$W" -cJf "$OUT/ncu.tar.xz" --exclude .copies .
ls -la "$OUT"; stamp "done"
