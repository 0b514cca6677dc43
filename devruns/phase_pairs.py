"""Each phase of the planted steps (odd: step_1, step_3, ...) against the mean of the steps either
side, on the workload's Python clock, from workload status files or STEM.bare.json records: the
median difference in ms and its noise (2 standard errors of the median, from the median absolute
deviation), and the planted steps' median.
    python3 devruns/phase_pairs.py FILE..."""
from __future__ import annotations

import json
import statistics
import sys


def main(argv: list[str]) -> int:
    for path in argv:
        steps = [s for s in json.load(open(path))["steps"] if s["name"].startswith("step_")]
        print(f"{path.rsplit('/', 1)[-1]} ({len(steps)} steps)")
        for key in ("step", "forward", "backward", "optimizer"):
            def t(s, key=key) -> float:
                return s["seconds"] if key == "step" else s["phases"][key]
            d = [t(steps[i]) - (t(steps[i - 1]) + t(steps[i + 1])) / 2
                 for i in range(1, len(steps) - 1) if int(steps[i]["name"][5:]) % 2 == 1]
            med = statistics.median(d)
            mad = statistics.median(abs(x - med) for x in d)
            planted = statistics.median(t(steps[i]) for i in range(1, len(steps), 2))
            print(f"  {key:9s} planted less neighbours {med * 1e3:+7.3f} ms +- {2 * 1.2533 * 1.4826 * mad / len(d) ** 0.5 * 1e3:.3f}"
                  f"  (planted {planted * 1e3:.2f} ms, {len(d)} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
