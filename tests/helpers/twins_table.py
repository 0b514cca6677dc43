"""The twins table of docs/whatif.md, computed: each pair of tests/helpers/replay_twins.py replayed
with its edit, against the change measured on the workload's own Python clock (the `nsight-tui:step`
marks, tests/helpers/step_sql.py). Not a test module: tests/core/test_replay.py asserts on `row`, and

    PYTHONPATH=$PWD python3 tests/helpers/twins_table.py [--write]

prints the table (and with --write puts it into docs/whatif.md between its markers).

Figures per pair, ms per step, medians over the steady steps:
- change: twin − base on the Python clock;
- noise: how well one pair of five-step captures knows that change: twice the standard error of the
  difference of the two captures' mean step (each capture's own step-to-step spread, sample standard
  deviation over its steps): about a 95% interval under normal step noise;
- tolerance: the issue's target, the larger of 20% of the change and 2% of the twin's step;
- predicted: the replayed step with the edit minus the unchanged replay (the range where the edit
  rests on an assumption);
- old estimate: the findings rule's subtraction on the base (its saving, negated), or none where the
  rule does not fire.

A pair is `yes` when the prediction is within tolerance of the change, `noise` when it misses the
tolerance but the change itself is not told from zero by the pair (|change| ≤ noise) and the
prediction is within the noise of it, `no` otherwise."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parents[2])]

from helpers.replay_twins import TWINS, Twin  # noqa: E402
from helpers.step_sql import python_steps  # noqa: E402
from helpers.xz_samples import plain  # noqa: E402

DOC = HERE.parents[2] / "docs" / "whatif.md"
BEGIN, END = "<!-- twins table: tests/helpers/twins_table.py -->", "<!-- end of twins table -->"


@dataclass
class Row:
    name: str
    edit: str
    base_ms: float
    twin_ms: float
    change_ms: float
    noise_ms: float
    tol_ms: float
    predicted_ms: float
    low_ms: float
    high_ms: float
    old_ms: float | None  # the rule's estimate as a change (negative: faster); None: not raised
    rule: str

    @property
    def error_ms(self) -> float:
        return self.predicted_ms - self.change_ms

    @property
    def within_tolerance(self) -> bool:
        return abs(self.error_ms) <= self.tol_ms

    @property
    def within_noise(self) -> bool:
        return abs(self.change_ms) <= self.noise_ms and abs(self.error_ms) <= self.noise_ms

    @property
    def verdict(self) -> str:
        return "yes" if self.within_tolerance else ("noise" if self.within_noise else "no")

    @property
    def closer_than_old(self) -> bool:
        old = 0.0 if self.old_ms is None else self.old_ms
        return abs(self.error_ms) <= abs(old - self.change_ms)


def noise_ns(a: list[float], b: list[float]) -> float:
    """Twice the standard error of the difference of the two means (sample standard deviations)."""
    if len(a) < 2 or len(b) < 2:
        return 0.0
    return 2 * math.sqrt(float(np.var(a, ddof=1)) / len(a) + float(np.var(b, ddof=1)) / len(b))


def old_estimate_ms(base: Path, rule: str) -> float | None:
    from nsight_tui.parsers.analyses.findings import findings
    from nsight_tui.parsers.read.load import load_trace

    f = next((f for f in findings(load_trace(base), replay=False) if f.id == rule), None)
    return None if f is None or f.estimate_ms_per_step is None else -float(f.estimate_ms_per_step)


def row(t: Twin, old: bool = True) -> Row:
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay.predict import predict

    base, other = plain(t.base), plain(t.twin)
    a, b = python_steps(base), python_steps(other)
    ma, mb = float(np.median(a)), float(np.median(b))
    p = predict(load_trace(base), t.edit_args(other))
    ms = 1e6
    return Row(t.name, " ".join(t.edits).replace("{twin}", "TWIN"), ma / ms, mb / ms, (mb - ma) / ms,
               noise_ns(a, b) / ms, max(0.2 * abs(mb - ma), 0.02 * mb) / ms, (p.step_ns - p.replayed_step_ns) / ms,
               (p.low_ns - p.replayed_step_ns) / ms, (p.high_ns - p.replayed_step_ns) / ms,
               old_estimate_ms(base, t.rule) if old and t.rule else None, t.rule)


def with_twin_host(t: Twin) -> float:
    """The pair's predicted change (ms) with every stretch of host time between two same-named
    launches taken from the twin as it was (parsers/replay/stretches.py, `twin_pace`): the twin's
    kernels and the twin's CPU, stretch by stretch. What is left of the error is the replay's own; a
    diagnostic of a miss, not a prediction."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import baseline, graph_of, replay

    base, other = plain(t.base), plain(t.twin)
    trace = load_trace(base)
    g, sr = graph_of(trace)
    ed = edits.apply(g, sr, [edits.parse(e) for e in t.edit_args(other)], load_trace, twin_host=True)
    return (replay(g, sr, ed.mid).step_ns - baseline(trace).step_ns) / 1e6


def _f(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def markdown(rows: list[Row]) -> str:
    out = ["| pair | edit | base | twin | change | noise | predicted (range) | old estimate | error | tol | within |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        rng = f" ({_f(r.low_ms)}..{_f(r.high_ms)})" if (r.low_ms, r.high_ms) != (r.predicted_ms, r.predicted_ms) else ""
        old = f"not raised (`{r.rule}`)" if r.old_ms is None else f"{_f(r.old_ms)} (`{r.rule}`)"
        closer = "" if r.closer_than_old else ", not closer than the old"
        out.append(f"| {r.name.replace('->', '→')} | `{r.edit}` | {r.base_ms:.2f} | {r.twin_ms:.2f} | {_f(r.change_ms)} "
                   f"| ±{r.noise_ms:.2f} | {_f(r.predicted_ms)}{rng} | {old} | {_f(r.error_ms)} | {r.tol_ms:.2f} "
                   f"| {r.verdict}{closer} |")
    n_yes = sum(r.verdict == "yes" for r in rows)
    n_noise = sum(r.verdict == "noise" for r in rows)
    n_closer = sum(r.closer_than_old for r in rows)
    out.append("")
    out.append(f"{n_yes} of {len(rows)} pairs within tolerance, {n_noise} more within the pair's own noise; "
               f"the prediction closer to the change than the old estimate on {n_closer} of {len(rows)}.")
    return "\n".join(out)


def write(table: str, doc: Path = DOC) -> None:
    text = doc.read_text()
    i, j = text.index(BEGIN), text.index(END)
    doc.write_text(text[: i + len(BEGIN)] + "\n" + table + "\n" + text[j:])


def main(argv: list[str]) -> int:
    only = [a for a in argv if not a.startswith("--")]
    rows = []
    for t in TWINS:
        if only and not any(o in t.name for o in only):
            continue
        r = row(t)
        rows.append(r)
        print(markdown([r]).splitlines()[2], file=sys.stderr, flush=True)
    table = markdown(rows)
    print(table)
    if "--write" in argv and not only:
        write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
