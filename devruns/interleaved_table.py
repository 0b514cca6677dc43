"""The rows of devruns/gpu_interleaved.sh's captures (docs/whatif.md, "One capture, the change on
every other step") as the twins table computes a committed one (tests/helpers/twins_table.py,
interleaved_row): the change on the workload's Python clock, the plant-free steps less the planted
ones, and the planted steps replayed as they ran with the edit against without.

    PYTHONPATH=$PWD python3 devruns/interleaved_table.py FOLDER   (the exports, .sqlite.xz)"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.replay_twins import Interleaved  # noqa: E402
from helpers.twins_table import interleaved_row, markdown  # noqa: E402

EDITS = {"_item-every": ("nosync:cudaStreamSynchronize", "sync-stall"),
         "_item-before-step-every": ("nosync:cudaStreamSynchronize", "sync-stall"),
         "_pageable-input-every": ("pin", "pageable-memcpy"),
         "_fp32-gemm-every": ("kernels-from:{self}", "fp32-gemm-without-tensor-cores"),
         "_host-sleep-every": ("nohost:-5ms", "host-bound-gap"),
         "_no-autocast-every": ("kernels-from:{self}", ""),
         # the planted steps alone: the edit finds no attention written out where fused kernels run beside it
         "_attention-manual-every": ("attention:step_*[13579]", "unfused-attention")}


def main(argv: list[str]) -> int:
    rows = []
    for p in sorted(Path(argv[0]).rglob("*.sqlite.xz")):
        plant = next((v for k, v in EDITS.items() if k in p.name), None)
        if plant is None:  # a pair's capture beside them (gpu_thirdparty_twins.sh writes both into one folder)
            continue
        edit, rule = plant
        rows.append(interleaved_row(Interleaved(f"{p.parent.name}/{p.name}", p, (edit,), rule)))
    print("\n".join(markdown(rows).splitlines()[:-4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
