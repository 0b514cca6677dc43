"""devruns/gpu_bare_alternating.sh's log as the every-other-step change, each run: the planted steps
(step_1, step_3, ...) against the steps either side, as the twins table measures a capture
(tests/helpers/twins_table.paired_change_ns).
    python3 devruns/bare_alternating_table.py devruns/gpu_bare_alternating.log"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.twins_table import paired_change_ns  # noqa: E402


def main(argv: list[str]) -> int:
    what = ""
    print("| run | steps | median step | change (plant-free less planted) | noise |")
    print("|---|---:|---:|---:|---:|")
    for line in Path(argv[0]).read_text().splitlines():
        if line.startswith("=== "):
            what = line.split("] ", 1)[1]
        elif "ms:" in line:
            marks = {k: float(v) * 1e6 for k, v in (x.split("=") for x in line.split("ms:", 1)[1].split())}
            change, noise, n = paired_change_ns(marks)
            times = sorted(marks.values())
            print(f"| {what} | {len(marks)} | {times[len(times) // 2] / 1e6:.2f} | {change / 1e6:+.2f} | ±{noise / 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
