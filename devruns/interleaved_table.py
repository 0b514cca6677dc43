"""The table of devruns/gpu_interleaved.sh's captures (docs/whatif.md, "One capture, the change on
every other step"): per export, the change on the workload's Python clock (the median of the steps
without the plant, step_0, step_2, ..., less the median of the planted ones, step_1, step_3, ...;
the noise twice the standard error of that difference from the steps' own spread), and the replay's
prediction: the planted steps replayed as they ran (each step's own host time, parsers/replay/
predict.replay), with the edit that is the change against without (medians over the planted steps;
the edit's low and high ends); and, as a check of the model, the unchanged replay's own free-less-
planted difference.

    PYTHONPATH=$PWD python3 devruns/interleaved_table.py FOLDER   (the exports, .sqlite or .sqlite.xz)"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

EDITS = {"item-every": "nosync:cudaStreamSynchronize", "item-before-step-every": "nosync:cudaStreamSynchronize",
         "pageable-input-every": "pin"}


def marks(path: Path) -> dict[str, float]:
    """The workload's `nsight-tui:step` marks: step name -> seconds (as ms), read here in SQL."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    rows = [t for (t,) in con.execute("""SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s
        ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:step %'""")]
    con.close()
    out = {}
    for text in rows:
        m = json.loads(text.split(" ", 1)[1])
        if str(m.get("name", "")).startswith("step_"):
            out[m["name"]] = m["seconds"] * 1e3
    return out


def row(path: Path) -> str:
    from nsight_tui.parsers.read.compressed import plain_export
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import graph_of, replay
    from nsight_tui.parsers.replay.simulate import Plan

    edit = next(e for k, e in EDITS.items() if f"_{k}" in path.name)
    plain = plain_export(path)
    py = marks(plain)
    odd = lambda n: int(n.rsplit("_", 1)[1]) % 2 == 1  # noqa: E731
    planted = np.array([v for n, v in py.items() if odd(n)])
    free = np.array([v for n, v in py.items() if not odd(n)])
    change = float(np.median(free) - np.median(planted))
    noise = 2 * float(np.sqrt(np.var(free, ddof=1) / len(free) + np.var(planted, ddof=1) / len(planted)))
    trace = load_trace(plain)
    g, sr = graph_of(trace)
    names = [n for n, s in zip(sr.names, sr.is_step) if s]
    on = np.array([odd(n) for n in names])
    base = replay(g, sr, Plan.of(g)).periods_ns / 1e6
    ed = edits.apply(g, sr, [edits.parse(edit)], load_trace)
    low, mid, high = (replay(g, sr, p).periods_ns / 1e6 for p in ed.plans)
    pred = [float(np.median(x[on]) - np.median(base[on])) for x in (mid, low, high)]
    model = float(np.median(base[~on]) - np.median(base[on]))
    tol = max(0.2 * abs(change), 0.02 * float(np.median(free)))
    err = pred[0] - change
    verdict = "yes" if abs(err) <= tol else ("noise" if abs(change) <= noise and abs(err) <= noise else "no")
    return (f"| {path.parent.name}/{path.name} | `{edit}` | {len(planted)} / {len(free)} | {np.median(planted):.2f} "
            f"| {np.median(free):.2f} | {change:+.2f} | ±{noise:.2f} | {pred[0]:+.2f} ({pred[1]:+.2f}..{pred[2]:+.2f}) "
            f"| {err:+.2f} | {tol:.2f} | {verdict} | {model:+.2f} |")


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    print("| capture | edit | steps planted / free | planted | free | change | noise | predicted (range) | error "
          "| tol | within | replayed unchanged, free − planted |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for p in sorted(folder.rglob("*.sqlite.xz")) + sorted(folder.rglob("*.sqlite")):
        if p.name.endswith(".sqlite") and p.with_name(p.name + ".xz").exists():
            continue
        print(row(p), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
