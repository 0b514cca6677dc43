"""The twins table of docs/whatif.md, computed: each pair of tests/helpers/replay_twins.py replayed
with its edit, against the change measured on the workload's own Python clock (the `nsight-tui:step`
marks, tests/helpers/step_sql.py). Not a test module: tests/core/test_replay.py asserts on `row`, and

    PYTHONPATH=$PWD python3 tests/helpers/twins_table.py [--findings] [--write]

prints the table (and with --write puts it into docs/whatif.md between its markers); with
--findings, docs/findings.md's: each pair's finding, its replayed saving against the measured one.

Figures per pair, ms per step, medians over the steady steps:
- change: twin − base on the Python clock (each side's steps' median, their mean where they alternate: step_of);
- noise: how well one pair of five-step captures knows that change: twice the standard error of the
  difference of the two captures' mean step (each capture's own step-to-step spread, sample standard
  deviation over its steps): about a 95% interval under normal step noise;
- tolerance: the issue's target, the larger of 20% of the change and 2% of the twin's step;
- predicted: the replayed step with the edit minus the unchanged replay (the range where the edit
  rests on an assumption);
- old estimate: the findings rule's subtraction on the base (its saving, negated), or none where the
  rule does not fire.
A set of repeated pairs (replay_twins.Repeats: one change captured as several pairs, alternating) is
one row: each figure the median over its pairs, and its noise twice the standard error of the pairs'
mean change from their own spread, the capture-to-capture pace of the CPU included (repeats_row).

A pair is `yes` when the prediction is within tolerance of the change, `noise` when it misses the
tolerance but the change itself is not told from zero by the pair (|change| ≤ noise) and the
prediction is within the noise of it, `pace` when it misses but the same replay with this capture's
CPU at the twin's pace (read off the host time both captures spend on the same work: at_twin_pace)
is within tolerance: the two captures' CPUs ran apart, which one capture cannot know; `no`
otherwise."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parents[2])]

from helpers.replay_twins import INTERLEAVED, REPEATS, TWINS, Interleaved, Repeats, Twin  # noqa: E402
from helpers.step_sql import python_step_marks, python_steps, sidecar_steps  # noqa: E402
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
    at_twin_pace_ms: float | None = None  # a miss's predicted change at the twin's CPU pace (at_twin_pace)
    pairs: int = 1  # a set of repeated pairs: how many (repeats_row); one capture's planted steps
    one_capture: bool = False  # the change on every other step of one capture (interleaved_row)

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
    def within_at_twin_pace(self) -> bool:
        return self.at_twin_pace_ms is not None and abs(self.at_twin_pace_ms - self.change_ms) <= self.tol_ms

    @property
    def verdict(self) -> str:
        if self.within_tolerance:
            return "yes"
        return "noise" if self.within_noise else ("pace" if self.within_at_twin_pace else "no")

    @property
    def has_old(self) -> bool:
        """An old estimate to compare with: one capture half planted has none, a change no findings
        rule speaks of (a memory format) none either."""
        return not self.one_capture and bool(self.rule)

    @property
    def closer_than_old(self) -> bool:
        old = 0.0 if self.old_ms is None else self.old_ms
        return abs(self.error_ms) <= abs(old - self.change_ms)

    @property
    def tells_old_apart(self) -> bool:
        """Whether the pair's measurement can say which estimate is the closer: the change lies
        further than its noise from the point halfway between the prediction and the old estimate
        (inside it, the change the pair measured could lie on either side of that point)."""
        old = 0.0 if self.old_ms is None else self.old_ms
        return abs(self.change_ms - (self.predicted_ms + old) / 2) > self.noise_ms


def step_of(xs: list[float]) -> float:
    """A capture's step on the Python clock, by the definition (docs/whatif.md): the median of its
    steady steps, or their mean where more than one of them, and more than one in ten, runs over 1.5x that median (steps that
    alternate, whose median is one kind of step); one such step is a stall whatever the count."""
    med = float(np.median(xs))
    return med if sum(x > 1.5 * med for x in xs) <= max(1, 0.1 * len(xs)) else float(np.mean(xs))


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


def row(t: Twin, old: bool = True, pace: bool = True) -> Row:
    from nsight_tui.parsers.analyses.findings.fixes import resolve_fixes
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay.predict import predict

    base, other = plain(t.base), plain(t.twin)
    a, b = python_steps(base) or sidecar_steps(t.base), python_steps(other) or sidecar_steps(t.twin)
    ma, mb = step_of(a), step_of(b)
    trace = load_trace(t.base)  # as committed, with the records beside it (a --no-nvtx run's warm-up count)
    # `fix:ID`: the edits that finding names on the base, as `whatif fix:ID` replays them
    p = predict(trace, resolve_fixes(trace, t.edit_args(t.twin)))
    ms = 1e6
    r = Row(t.name, " ".join(t.edits).replace("{twin}", "TWIN"), ma / ms, mb / ms, (mb - ma) / ms,
            noise_ns(a, b) / ms, max(0.2 * abs(mb - ma), 0.02 * mb) / ms, (p.step_ns - p.replayed_step_ns) / ms,
            (p.low_ns - p.replayed_step_ns) / ms, (p.high_ns - p.replayed_step_ns) / ms,
            old_estimate_ms(base, t.rule) if old and t.rule else None, t.rule)
    if pace and not (r.within_tolerance or r.within_noise):
        r.at_twin_pace_ms = at_twin_pace(t)
    return r


def repeats_row(s: Repeats, old: bool = True) -> Row:
    """A set of repeated pairs as one row: each figure the median over its pairs (base, twin, change,
    prediction and its ends, old estimate); the noise is twice the standard error of the pairs' mean
    change from their own spread (sample standard deviation over the pairs), which holds the CPU's
    pace from one capture to the next as the one pair's noise cannot; the tolerance from the median
    change and twin step; a miss's figure at the twin's pace the median of the pairs'."""
    rows = [row(t, old=old, pace=False) for t in s.pairs]

    def med(xs) -> float:
        return float(np.median(list(xs)))

    changes = [r.change_ms for r in rows]
    olds = [r.old_ms for r in rows]
    r = Row(s.name, rows[0].edit, med(r.base_ms for r in rows), med(r.twin_ms for r in rows), med(changes),
            2 * float(np.std(changes, ddof=1)) / math.sqrt(len(rows)), 0.0, med(r.predicted_ms for r in rows),
            med(r.low_ms for r in rows), med(r.high_ms for r in rows),
            None if any(o is None for o in olds) else med(olds), s.rule, pairs=len(rows))
    r.tol_ms = max(0.2 * abs(r.change_ms), 0.02 * r.twin_ms)
    if not (r.within_tolerance or r.within_noise):
        r.at_twin_pace_ms = med(at_twin_pace(t) for t in s.pairs)
    return r


def planted(name: str) -> bool:
    """`capture --plant-every 2` plants in step_1, step_3, ..."""
    return int(name.rsplit("_", 1)[1]) % 2 == 1


def paired_change_ns(marks: dict[str, float]) -> tuple[float, float, int]:
    """The change on every other step of one capture, from its step marks (name -> ns): per planted
    step its time less the mean of its plant-free neighbours (one, at the capture's end), which ran
    at its minute's CPU pace (the pace drifts within a capture, by half over a few seconds); the
    change the median of those differences, negated (the plant-free side less the planted, as a
    pair's twin less its base); its noise twice the median's standard error (1.2533 sigma / sqrt n)
    with sigma read robustly off the differences (1.4826 x their median absolute deviation): now and
    then one step stalls for tens of ms, a stall neither side owns. -> (change, noise, planted steps)."""
    order = sorted(marks, key=lambda n: int(n.rsplit("_", 1)[1]))
    times = [marks[n] for n in order]
    diffs = []
    for i, name in enumerate(order):
        if planted(name):
            around = [times[j] for j in (i - 1, i + 1) if 0 <= j < len(order) and not planted(order[j])]
            if around:
                diffs.append(times[i] - sum(around) / len(around))
    d = np.asarray(diffs, np.float64)
    if len(d) < 2:
        return (float(-np.median(d)) if len(d) else 0.0), 0.0, len(d)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    return float(-np.median(d)), 2 * 1.2533 * sigma / math.sqrt(len(d)), len(d)


# An every-other-step capture's kernels-from names itself: a planted step takes the kernels of the
# plant-free step before it (twin_iterations)
SELF = "{self}"


def interleaved_row(t: Interleaved) -> Row:
    """One capture with the change on every other step as one row: the change and its noise from the
    planted steps and their neighbours on the Python clock (paired_change_ns); the prediction the
    planted steps replayed as they ran (each its own host time, not the typical step) with the edit
    less without, medians over them (the edit's low and high ends); `kernels-from:{self}` gives each
    planted step the kernels of the plant-free step before it in the same capture; the old estimate
    none (the rule on a capture half planted). A miss's figure at the twin's pace: the planted steps'
    host time at the pace of the plant-free steps before them (any edit, as a pair's at_twin_pace)."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import graph_of, replay
    from nsight_tui.parsers.replay.simulate import Plan

    path = plain(t.capture)
    marks = python_step_marks(path)
    trace = load_trace(path)
    g, sr = graph_of(trace)
    mask = np.array([planted(n) for n, s in zip(sr.names, sr.is_step) if s])
    base = replay(g, sr, Plan.of(g)).periods_ns[mask]
    before = {n: f"{n.rsplit('_', 1)[0]}_{int(n.rsplit('_', 1)[1]) - 1}" for n in sr.names if n[-1:].isdigit() and planted(n)}

    def predicted(twin_host: bool = False) -> list[float]:
        # at the twin's pace an edit that is not `kernels-from` (nosync, pin) gets one from the plant-free
        # step before, for the pace alone, as a pair's does (at_twin_pace)
        own = list(t.edits) if not twin_host or any(SELF in e for e in t.edits) else [f"kernels-from:{SELF}", *t.edits]
        ed = edits.apply(g, sr, [edits.parse(e.replace(SELF, str(path))) for e in own], load_trace,
                         twin_host=twin_host, twin_iterations=before if any(SELF in e for e in own) else None)
        return [float(np.median(replay(g, sr, p).periods_ns[mask]) - np.median(base)) / 1e6 for p in ed.plans]

    ends = predicted()
    low, mid, high = min(ends), ends[1], max(ends)  # an edit's ends in either order (edits.Edited)
    change, noise, n = paired_change_ns(marks)
    ms = 1e6
    a = float(np.median([v for k, v in marks.items() if planted(k)]))
    b = float(np.median([v for k, v in marks.items() if not planted(k)]))
    r = Row(t.name, " ".join(t.edits), a / ms, b / ms, change / ms, noise / ms,
            max(0.2 * abs(change), 0.02 * b) / ms, mid, low, high, None, t.rule, pairs=n, one_capture=True)
    if not (r.within_tolerance or r.within_noise):
        # the planted steps' CPU at the pace of the plant-free steps before them: in one capture a pace
        # that differs is the change's own doing, which the replay does not model
        r.at_twin_pace_ms = predicted(twin_host=True)[1]
    return r


def at_twin_pace(t: Twin) -> float | None:
    """A pair's predicted change (ms) with this capture's CPU at the twin's pace: each thread's host
    time between two same-named launches that no changed kernel touches scaled by the twin's pace over
    those stretches (per thread and step), a changed one as the twin ran it (parsers/replay/
    stretches.py, `twin_pace`). A pair whose edit is not `kernels-from` (`pin`: the same kernels on
    both sides) gets one before its own edits, for the pace alone (its kernels' durations as the twin
    ran them too). What is left of the error is the replay's own, not the two captures' CPU pace: a
    diagnostic of a miss, not a prediction."""
    from nsight_tui.parsers.analyses.findings.fixes import resolve_fixes
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import baseline, edited

    trace = load_trace(t.base)  # as committed, with the records beside it
    args = [edits.parse(e) if isinstance(e, str) else e for e in resolve_fixes(trace, t.edit_args(t.twin))]
    if not any(e.startswith("kernels-from:") for e in t.edits):
        args = [edits.parse(f"kernels-from:{t.twin}"), *args]
    ed = edited(trace, args, load_trace, twin_host=True)
    step = baseline(trace).step_ns
    return (ed.steps_ns(step)[1] - step) / 1e6


def _f(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def markdown(rows: list[Row]) -> str:
    out = ["| pair | edit | base | twin | change | noise | predicted (range) | old estimate | error | tol | within |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        rng = f" ({_f(r.low_ms)}..{_f(r.high_ms)})" if (r.low_ms, r.high_ms) != (r.predicted_ms, r.predicted_ms) else ""
        old = (f"– (one capture; `{r.rule}`)" if r.one_capture else "– (no findings rule)" if not r.rule
               else f"not raised (`{r.rule}`)" if r.old_ms is None
               else f"{_f(r.old_ms)} (`{r.rule}`)")
        closer = "" if not r.has_old or r.closer_than_old else ", not closer than the old"
        if r.at_twin_pace_ms is not None:
            closer = f" ({_f(r.at_twin_pace_ms)} at the twin's CPU pace){closer}"
        out.append(f"| {r.name.replace('->', '→')} | `{r.edit}` | {r.base_ms:.2f} | {r.twin_ms:.2f} | {_f(r.change_ms)} "
                   f"| ±{r.noise_ms:.2f} | {_f(r.predicted_ms)}{rng} | {old} | {_f(r.error_ms)} | {r.tol_ms:.2f} "
                   f"| {r.verdict}{closer} |")
    n_yes = sum(r.verdict == "yes" for r in rows)
    n_noise = sum(r.verdict == "noise" for r in rows)
    n_pace = sum(r.verdict == "pace" for r in rows)
    with_old = [r for r in rows if r.has_old]
    n_closer = sum(r.closer_than_old for r in with_old)
    told = [r for r in with_old if r.tells_old_apart]
    n_inside = sum(r.low_ms <= r.change_ms <= r.high_ms for r in rows)
    out.append("")
    findings = by_finding(rows)
    out.append("By finding, each judged on its sets of repeated pairs and its captures with the change on every other "
               "step where it has any, else on its pairs: "
               + ", ".join(f"`{rule}` {v}" for rule, v in findings.items())
               + f" ({sum(v == 'yes' for v in findings.values())} of {len(findings)} within tolerance on every row, "
               f"{sum(v == 'noise' for v in findings.values())} more within a row's own noise).")
    out.append("")
    out.append(f"{n_yes} of {len(rows)} rows (a pair, a set of repeated pairs, or one capture with the change on every "
               f"other step) within tolerance, {n_noise} more within "
               f"the row's own noise, "
               f"{n_pace} more within tolerance at the twin's CPU pace; "
               f"the prediction closer to the change than the old estimate on {n_closer} of {len(with_old)} "
               f"({sum(r.closer_than_old for r in told)} of the {len(told)} whose noise tells the two apart); the change "
               f"inside the predicted range on {n_inside} of {len(rows)}.")
    return "\n".join(out)


def by_finding(rows: list[Row]) -> dict[str, str]:
    """Per findings rule, in the rows' order: `yes` where every row it is judged on is within
    tolerance, `noise` where each is within tolerance or its own noise, else `no`. A rule is judged
    on its sets of repeated pairs and its captures with the change on every other step where it has
    any (one pair of a launch-bound change measures the CPU's pace of that minute as much as the
    change), else on its single pairs."""
    out = {}
    for rule in dict.fromkeys(r.rule for r in rows if r.rule):
        mine = [r for r in rows if r.rule == rule]
        judged = [r for r in mine if r.pairs > 1] or mine
        verdicts = {r.verdict for r in judged}
        out[rule] = "yes" if verdicts == {"yes"} else "noise" if verdicts <= {"yes", "noise"} else "no"
    return out


README = HERE.parents[2] / "README.md"
README_BEGIN, README_END = "<!-- twins summary: tests/helpers/twins_table.py -->", "<!-- end of twins summary -->"


def summary(rows: list[Row]) -> str:
    """README's short form of the table: each pair's measured change, the prediction with its range,
    the old estimate and the verdict."""
    out = ["| pair | measured change | predicted (range) | old estimate | within |", "|---|---:|---:|---:|---|"]
    for r in rows:
        old = ("– (one capture)" if r.one_capture else "– (no findings rule)" if not r.rule
               else "not raised" if r.old_ms is None else _f(r.old_ms))
        out.append(f"| {r.name.replace('->', '→')} | {_f(r.change_ms)} | {_f(r.predicted_ms)} ({_f(r.low_ms)}..{_f(r.high_ms)}) "
                   f"| {old} | {r.verdict} |")
    lines = markdown(rows).splitlines()
    return "\n".join(out + ["", lines[-3], "", lines[-1]])


def write(table: str, doc: Path = DOC, begin: str = BEGIN, end: str = END) -> None:
    text = doc.read_text()
    i, j = text.index(begin), text.index(end)
    doc.write_text(text[: i + len(begin)] + "\n" + table + "\n" + text[j:])


FINDINGS_DOC = HERE.parents[2] / "docs" / "findings.md"
FINDINGS_BEGIN, FINDINGS_END = "<!-- findings twins table: tests/helpers/twins_table.py --findings -->", \
    "<!-- end of findings twins table -->"


def findings_row(t: Twin) -> str:
    """The pair's line of docs/findings.md's table: the finding's replayed saving on the base (its
    range) and its old estimate against the saving measured on the Python clock (base - twin)."""
    from nsight_tui.parsers.analyses.findings import findings
    from nsight_tui.parsers.read.load import load_trace

    base, other = plain(t.base), plain(t.twin)
    a, b = python_steps(base) or sidecar_steps(t.base), python_steps(other) or sidecar_steps(t.twin)
    saved, twin_ms = (float(np.median(a)) - float(np.median(b))) / 1e6, float(np.median(b)) / 1e6
    tol, noise = max(0.2 * abs(saved), 0.02 * twin_ms), noise_ns(a, b) / 1e6
    f = next((f for f in findings(load_trace(base)) if f.id == t.rule), None)
    head = f"| {t.name.replace('->', '→')} |"
    if f is None:
        return f"{head} `{t.rule}` not raised | {saved:.2f} | – | – | – |"
    err, old = f.saving_ms_per_step - saved, (f.estimate_ms_per_step or 0.0) - saved
    verdict = "yes" if abs(err) <= tol else ("noise" if abs(saved) <= noise and abs(err) <= noise else "no")
    why = f"{err:+.2f}, tol {tol:.2f}" + (f", noise {noise:.2f}" if verdict == "noise" else "")
    return (f"{head} `{t.rule}`: `{' '.join(f.edits)}` | {saved:.2f} | {f.saving_ms_per_step:.2f} "
            f"({f.replay_low_ms_per_step:.2f}..{f.replay_high_ms_per_step:.2f}) | {f.estimate_ms_per_step:.2f} "
            f"| {verdict} ({why}; {old:+.2f}) |")


def findings_markdown(twins) -> str:
    out = ["| pair | finding: edits | measured | replayed (range) | old estimate | within (replayed − measured, "
           "tolerance; estimate − measured) |", "|---|---|---:|---:|---:|---|"]
    return "\n".join(out + [findings_row(t) for t in twins if t.rule])


def paces() -> list[tuple[str, list[float]]]:
    """Per `kernels-from` pair: each CPU thread's pace in the twin over the base's on the same work
    (stretches.carry), the figures pace.BETWEEN_CAPTURES is read off."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay import edits
    from nsight_tui.parsers.replay.predict import graph_of

    out = []
    for t in TWINS:
        if "kernels-from:{twin}" in t.edits:
            g, sr = graph_of(load_trace(t.base))
            ed = edits.apply(g, sr, [edits.parse(e) for e in t.edit_args(t.twin)], load_trace)
            out.append((t.name, list(ed.twin_pace.values())))
    return out


def main(argv: list[str]) -> int:
    only = [a for a in argv if not a.startswith("--")]
    if "--pace" in argv:
        rows = paces()
        for name, p in rows:
            print(f"{name}: " + ", ".join(f"x{x:.3f}" for x in p))
        logs = np.abs(np.log([x for _, p in rows for x in p]))
        print(f"{len(logs)} threads; within x{math.exp(float(np.percentile(logs, 80))):.2f} either way: 80%")
        return 0
    if "--findings" in argv:
        table = findings_markdown([t for t in TWINS if not only or any(o in t.name for o in only)])
        print(table)
        if "--write" in argv and not only:
            write(table, FINDINGS_DOC, FINDINGS_BEGIN, FINDINGS_END)
        return 0
    rows = []
    for t in (*TWINS, *REPEATS, *INTERLEAVED):
        if only and not any(o in t.name for o in only):
            continue
        r = repeats_row(t) if isinstance(t, Repeats) else interleaved_row(t) if isinstance(t, Interleaved) else row(t)
        rows.append(r)
        print(markdown([r]).splitlines()[2], file=sys.stderr, flush=True)
    table = markdown(rows)
    print(table)
    if "--write" in argv and not only:
        write(table)
        write(summary(rows), README, README_BEGIN, README_END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
