"""The table of the third-party workloads and the no-NVTX samples: the tool's step (or a generate() call's
per-token decode) against the workload's own Python clock (STEM.steps.json beside each export).

    python3 devruns/thirdparty_table.py DIR...   (folders holding STEM.sqlite + STEM.steps.json, decompressed)

Tool step: the steady steps' mean of the figure the workload's clock reads like (the report's
`timing.python_clock_covers`: the step's own time, start to its work's end, where the clock was taken
inside the loop, as a trainer's batch hooks take it; else the period, start to the next step's start).
Decode: the median per-token latency (GPU clock) against the median of the workload's per-token gaps."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from nsight_tui.parsers.analyses.questions import timing
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.model.steps import BASIS_INFERRED, BASIS_NVTX, steps_of
from nsight_tui.parsers.read.load import load_trace


def row(path: Path) -> dict:
    record = json.loads(path.with_name(path.name.replace(".sqlite", ".steps.json")).read_text())
    trace = load_trace(path)
    model = range_model(trace)
    t = timing(trace, model)
    steps = [s for s in record["steps"] if str(s.get("name", "")).startswith("step_")]
    basis = {BASIS_INFERRED: "inferred", BASIS_NVTX: "NVTX step_N"}.get(steps_of(model).basis, "none")
    out = {"stem": path.name.removesuffix(".oom.sqlite").removesuffix(".sqlite"), "basis": basis,
           "python_step_ms": float(np.mean([s["seconds"] for s in steps])) * 1e3 if steps else None}
    covers = t.python_clock_covers or "period"
    key = "own_ns" if covers == "own" else "period_ns"
    out["covers"] = covers
    out["tool_step_ms"] = float(np.mean([getattr(r, key) for r in t.steps])) / 1e6 if t.steps else None
    py = {s["name"]: s["seconds"] * 1e9 for s in steps}
    out["worst_step"] = max((abs(getattr(r, key) / py[r.step] - 1) for r in t.steps if r.step in py), default=None)
    out["steps"] = len(t.steps)
    d = inference(trace).decode
    if d is not None:
        tokens = [x for s in steps for x in s["decode_token_s"]]
        out["tool_token_ms"], out["python_token_ms"] = d.median_ns / 1e6, float(np.median(tokens)) * 1e3
    return out


def pct(a: float | None, b: float | None) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a is not None and b else "–"


def ms(x: float | None) -> str:
    return f"{x:,.2f}" if x is not None else "–"


def main(folders: list[str]) -> None:
    print("| workload | steps on | steps | tool step ms | Python step ms | error | worst step | tool decode ms/token | "
          "Python ms/token | error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for folder in folders:
        for path in sorted(Path(folder).glob("*.sqlite")):
            if not path.with_name(path.name.replace(".sqlite", ".steps.json")).exists():
                continue
            r = row(path)
            step = f"{ms(r['tool_step_ms'])} ({r['covers']})" if r["tool_step_ms"] is not None else "–"
            print(f"| {r['stem']} | {r['basis']} | {r['steps']} | {step} | {ms(r['python_step_ms'])} | "
                  f"{pct(r['tool_step_ms'], r['python_step_ms'])} | "
                  f"{'–' if r['worst_step'] is None else format(r['worst_step'] * 100, '.1f') + '%'} | {ms(r.get('tool_token_ms'))} | "
                  f"{ms(r.get('python_token_ms'))} | {pct(r.get('tool_token_ms'), r.get('python_token_ms'))} |")


if __name__ == "__main__":
    main(sys.argv[1:])
