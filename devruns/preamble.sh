# The setting every device-run script shares; each sources it first:
#   source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
# The GPU machine (../shared/device/README.md) has torch but no `nsys` on the PATH, no libdw/libelf
# for nsys's importer and no nvtx package; these come carried beside the staged tree:
#   DEVLIBS  libdw.so.1 and libelf.so.1 (fetch-nsys-libs.sh), put on LD_LIBRARY_PATH (default .devlibs)
#   WHL      the wheels to install (nvtx, ...), by `devrun_install` (default .whl)
# and from the caller's environment:
#   OUT      what comes back (default ./gpu_out); the log of the run is tee'd into it
#   DEVRUN_LOG  that log's name (default log_<script>.txt)
#   SKIP_PIP set: `devrun_install` installs nothing (the wheels' packages are importable already)
#   NCU_HOME, NSYS, NCU  Nsight Compute's folder and the two programs (nsys ships inside it there)
# It defines REPORTS (NVIDIA's `nsys stats` reports, the tests' oracle), T0, and the functions
# stamp, devrun_start, devrun_install, devrun_pair, nsys_oracle and cpu_probe below.
set -uo pipefail
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/${DEVRUN_LOG:-log_$(basename "$0" .sh).txt}") 2>&1
export PYTHONUNBUFFERED=1
if [ -d "${DEVLIBS:-.devlibs}" ]; then
  LD_LIBRARY_PATH=$(cd "${DEVLIBS:-.devlibs}" && pwd):${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH
fi
NCU_HOME=${NCU_HOME:-/opt/nvidia/nsight-compute/2025.3.1}
export NSYS=${NSYS:-$NCU_HOME/host/target-linux-x64/nsys}
export NCU=${NCU:-$NCU_HOME/ncu}
REPORTS=nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum,cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum
T0=$(date +%s)

stamp() { echo "=== [$(( $(date +%s) - T0 )) s] $*"; }

devrun_start() {  # what ran where: the GPUs, nsys's version, then the script's arguments
  stamp "start $*"; nvidia-smi -L; "$NSYS" --version
}

# The carried wheels into /tmp/site, the staged tree on PYTHONPATH: `python3 -m nsight_tui` then runs
# this tree (nsight_tui/ links its folders, so no install of the project itself is needed).
devrun_install() {
  if [ -z "${SKIP_PIP:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "${WHL:-.whl}"/*.whl || exit 1
  fi
  export PYTHONPATH=/tmp/site:$PWD
}

# A pair of captures back to back, into $W/NAME (never pair across calls: lent machines differ):
#   devrun_pair NAME A-OPTIONS... -- B-OPTIONS...
# each side through the script's own `cap NAME OPTIONS...`.
devrun_pair() {
  local name=$1; shift
  stamp "pair $name"
  mkdir -p "$W/$name"
  local a=() b=() side=a x
  for x in "$@"; do if [ "$x" = "--" ]; then side=b; elif [ $side = a ]; then a+=("$x"); else b+=("$x"); fi; done
  cap "$name" "${a[@]}"; cap "$name" "${b[@]}"
}

# NVIDIA's reports of every export in DIR into DIR/oracle, in parallel, each made on a COPY: the export
# kept is exactly what `nsys export` wrote (sha256 printed). Optional: the reports to make.
nsys_oracle() {
  local dir=$1 reports=${2:-$REPORTS} pids=() f
  stamp "nsys stats $dir"
  mkdir -p "$dir/oracle" "$dir/.copies"
  for f in "$dir"/*.sqlite; do
    cp "$f" "$dir/.copies/"
    "$NSYS" stats -q -f csv -r "$reports" -o "$dir/oracle/$(basename "${f%.sqlite}")" \
      "$dir/.copies/$(basename "$f")" >/dev/null &
    pids+=($!)
  done
  # by id: a bare `wait` would also wait for the `tee` of the log above (a process substitution)
  for p in "${pids[@]}"; do wait "$p"; done
  rm -rf "$dir/.copies"
  sha256sum "$dir"/*.sqlite; ls -la "$dir" "$dir/oracle"
}

# The CPU's pace now: a fixed pure-Python loop of 10^N additions (default 7), its time printed as
#   pace_s SECONDS   (a lent machine's CPU changes speed from one minute to the next: docs/whatif.md)
cpu_probe() {
  python3 -c "
import sys, time
t = time.perf_counter(); s = 0
for i in range(10**int(sys.argv[1])): s += i
print('pace_s', round(time.perf_counter() - t, 4))" "${1:-7}"
}
