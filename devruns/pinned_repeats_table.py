"""The table of devruns/gpu_pinned_repeats.sh's captures (docs/whatif.md, "pageable → pinned input,
again"): for each adjacent pair rK (A = pageable-input, B = pinned-input, captured back to back) the
change on the workload's Python clock (tests/helpers/step_sql.py python_steps, medians), `pin`
replayed on A (parsers.replay.predict), the issue's tolerance, the replay at the twin's CPU pace
(tests/helpers/twins_table.py at_twin_pace), and the CPU pace of the two captures in SQL, as
tests/core/test_replay_pin.py's test_the_miss_is_the_cpu_pace reads it (host time between
consecutive runtime calls in each step's `backward` range on the autograd thread and `forward` on
the main thread, position by position, median over the steps); then the pooled change (median of
all B steps − median of all A steps). The committed H200 pair first, for reference.

    PYTHONPATH=$PWD python3 devruns/pinned_repeats_table.py [FOLDER]   (default build/pinned_repeats)

FOLDER holds rK_small_ctx128_pageable-input.sqlite.xz and rK_small_ctx128_pinned-input.sqlite.xz."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.replay_twins import Twin  # noqa: E402
from helpers.step_sql import phase_call_gaps, python_steps  # noqa: E402
from helpers.twins_table import at_twin_pace, noise_ns  # noqa: E402
from helpers.xz_samples import plain  # noqa: E402

def gaps(path: Path, phase: str) -> np.ndarray:
    """Per call position of the phase's launching thread, its host time before the call (ns),
    median over the steps."""
    runs = [v for v in phase_call_gaps(path, phase).values() if len(v) > 100]
    assert len({len(v) for v in runs}) == 1, "the steps' call counts differ"
    return np.median(np.array(runs, np.float64), axis=0)


def pair_row(name: str, a_xz: Path, b_xz: Path) -> dict:
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay.predict import predict

    a, b = plain(a_xz), plain(b_xz)
    sa, sb = python_steps(a), python_steps(b)
    ma, mb = float(np.median(sa)), float(np.median(sb))
    p = predict(load_trace(a), ["pin"])
    ba, bb = gaps(a, "backward"), gaps(b, "backward")
    fa, fb = gaps(a, "forward"), gaps(b, "forward")
    twin = Twin(name, a_xz, b_xz, ("pin",), "pageable-memcpy")
    return dict(name=name, steps_a=sa, steps_b=sb, base=ma / 1e6, twin=mb / 1e6, change=(mb - ma) / 1e6,
                noise=noise_ns(sa, sb) / 1e6, tol=max(0.2 * abs(mb - ma), 0.02 * mb) / 1e6,
                pred=(p.step_ns - p.replayed_step_ns) / 1e6, low=(p.low_ns - p.replayed_step_ns) / 1e6,
                high=(p.high_ns - p.replayed_step_ns) / 1e6, pace_pred=at_twin_pace(twin),
                bwd=(ba.sum() / 1e6, bb.sum() / 1e6, float(np.median(ba / np.maximum(bb, 1)))),
                fwd=(fa.sum() / 1e6, fb.sum() / 1e6))


def _f(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "build" / "pinned_repeats"
    committed = ROOT / "sample_traces" / "findings"
    rows = [pair_row("committed (H200)", committed / "small_ctx128_pageable-input.sqlite.xz",
                     committed / "small_ctx128_pinned-input.sqlite.xz")]
    for k in (1, 2, 3):
        rows.append(pair_row(f"r{k} (H100)", folder / f"r{k}_small_ctx128_pageable-input.sqlite.xz",
                             folder / f"r{k}_small_ctx128_pinned-input.sqlite.xz"))
    print("| pair | A step | B step | change (noise) | predicted (range) | error | tol | within | at the twin's pace "
          "| backward host time A / B (median stretch) | forward A / B |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        err = r["pred"] - r["change"]
        ok = "yes" if abs(err) <= r["tol"] else "no"
        print(f"| {r['name']} | {r['base']:.2f} | {r['twin']:.2f} | {_f(r['change'])} (±{r['noise']:.2f}) "
              f"| {_f(r['pred'])} ({_f(r['low'])}..{_f(r['high'])}) | {_f(err)} | {r['tol']:.2f} | {ok} "
              f"| {_f(r['pace_pred'])} | {r['bwd'][0]:.2f} / {r['bwd'][1]:.2f} = ×{r['bwd'][0] / r['bwd'][1]:.2f} "
              f"(×{r['bwd'][2]:.2f}) | {r['fwd'][0]:.2f} / {r['fwd'][1]:.2f} = ×{r['fwd'][0] / r['fwd'][1]:.2f} |")
    new = rows[1:]
    all_a = [s for r in new for s in r["steps_a"]]
    all_b = [s for r in new for s in r["steps_b"]]
    ma, mb = float(np.median(all_a)) / 1e6, float(np.median(all_b)) / 1e6
    pred = float(np.mean([r["pred"] for r in new]))
    tol = max(0.2 * abs(mb - ma), 0.02 * mb)
    print(f"\npooled r1-r3: A median {ma:.2f} ms over {len(all_a)} steps, B {mb:.2f} over {len(all_b)}: change "
          f"{_f(mb - ma)} (±{noise_ns(all_a, all_b) / 1e6:.2f}); predicted (mean of the three) {_f(pred)}, error "
          f"{_f(pred - (mb - ma))}, tol {tol:.2f}; steps A {sorted(round(x / 1e6, 1) for x in all_a)}, "
          f"B {sorted(round(x / 1e6, 1) for x in all_b)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
