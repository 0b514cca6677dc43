"""The per-rank DDP twins (devruns/gpu_ddp_rank_twins.sh) as a table: per pair, the change the
workload's own step clock measured (rank 0's `nsight-tui:step` marks, the median step of the twin
less the base's, ms) against `whatif BASE_FOLDER kernels-from:TWIN_FOLDER` (the two ranks replayed as
one, collectives coupled) and against the same edit on rank 0's export alone (collectives as
measured, waits included), and, for a miss, the same prediction with the base's CPU at the twin's pace
(each thread's host time scaled by the twin's pace over the same work, `twin_host`, as
tests/helpers/twins_table.py's at_twin_pace: a diagnostic of how much of a miss is the two captures' CPU
pace, which one capture cannot know).

    python3 devruns/ddp_rank_twins_table.py FOLDER [--edit EDIT]   # FOLDER holds r1_base/, r1_twin/, r2_base/, ...

EDIT: the edit that is the change, in place of kernels-from:TWIN (a host sleep removed: nohost:-5ms).
"""
from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path


def step_ms(folder: Path) -> float:
    """Rank 0's median steady step (ms) from its step marks."""
    f = next(folder.glob("*rank0.sqlite"))
    con = sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True)
    texts = [t for (t,) in con.execute("""SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s
        ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:step %'""")]
    con.close()
    marks = [json.loads(t.split(" ", 1)[1]) for t in texts]
    return statistics.median(m["seconds"] * 1e3 for m in marks if str(m.get("name", "")).startswith("step_"))


def whatif_ms(base: Path, twin: Path, edit: str | None = None) -> tuple[float, float, float]:
    """The predicted change (ms a step) and its range: -(saving)."""
    run = subprocess.run([sys.executable, "-m", "nsight_tui", "whatif", str(base), edit or f"kernels-from:{twin}", "-f",
                          "json", "-q"], capture_output=True, text=True)
    if run.returncode:  # refused (rank 0 alone, where the change is on another rank: nothing to edit there)
        print(f"<!-- {base.name}: {run.stderr.strip()} -->")
        return 0.0, 0.0, 0.0
    d = json.loads(run.stdout)
    r = d["baseline"]["replayed_step_ns"]
    return (d["predicted"]["step_ns"] - r) / 1e6, (d["predicted"]["low_ns"] - r) / 1e6, (d["predicted"]["high_ns"] - r) / 1e6


def at_twin_pace_ms(base: Path, twin: Path, edit: str | None = None) -> float:
    """The predicted change (ms a step) with the base's CPU at the twin's pace."""
    from nsight_tui.parsers.read.rank_merge import load_export
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import baseline, edited

    trace = load_export(base)
    wanted = [edits.parse(f"kernels-from:{twin}"), *([edits.parse(edit)] if edit else [])]
    step = baseline(trace).step_ns
    return (edited(trace, wanted, load_export, twin_host=True).steps_ns(step)[1] - step) / 1e6


def main(folder: Path, edit: str | None = None) -> None:
    print("| pair | base | twin | change | predicted, ranks as one (range) | rank 0's export alone | error "
          "| at the twin's pace |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for base in sorted(folder.glob("r*_base")):
        twin = base.with_name(base.name.replace("_base", "_twin"))
        a, b = step_ms(base), step_ms(twin)
        mid, lo, hi = whatif_ms(base, twin, edit)
        alone = whatif_ms(next(base.glob("*rank0.sqlite")), next(twin.glob("*rank0.sqlite")), edit)[0]
        print(f"| {base.name[:2]} | {a:.2f} | {b:.2f} | {b - a:+.2f} | {mid:+.2f} ({lo:+.2f}..{hi:+.2f}) | {alone:+.2f} "
              f"| {mid - (b - a):+.2f} | {at_twin_pace_ms(base, twin, edit):+.2f} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]), args[args.index("--edit") + 1] if "--edit" in args else None)
