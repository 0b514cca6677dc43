"""The replay's prediction (parsers/replay/predict.Prediction) as Markdown or JSON."""
from __future__ import annotations

import json

from nsight_tui.render.numbers import percent
from nsight_tui.render.safe import markdown as md


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def _ms_unit(ns: float) -> str:
    return f"{_ms(ns)} ms"


# An edit longer than this is shown by its kind, how many name patterns it has and where it acts: a
# fix's fuse edit lists every kernel name of its chains (kilobytes); JSON keeps it whole.
EDIT_SHOWN_MAX = 120


def edit_shown(text: str) -> str:
    """An edit as a line shows it: as it is, or `kind:(N name patterns)@where (fix:ID)` where long."""
    if len(text) <= EDIT_SHOWN_MAX:
        return text
    kind, _, arg = text.partition(":")
    patterns, at, where = arg.partition("@")
    if not at:  # no place named: its first and last words, the middle elided
        half = EDIT_SHOWN_MAX // 2
        return f"{text[:half]}…{text[-half:]}"
    n = len(patterns.split("+"))
    return f"{kind}:({n} name pattern{'s' if n > 1 else ''})@{where}"


def _holder(h) -> dict:
    return {"what": h.what, "kind": h.kind, "ns": int(h.ns), "share": round(float(h.share), 4)}


def _idle(s) -> dict | None:
    if s is None:
        return None
    return {"idle_ns": s.idle_ns, "launch_starved_ns": s.launch_starved_ns, "sync_blocked_ns": s.sync_blocked_ns,
            "dependency_ns": s.dependency_ns}


# A step held mostly by the CPU was timed under the profiler, which slows every CUDA call it traces:
# the program alone runs those calls faster (docs/whatif.md, "without the profiler": on one H100 a
# launch-bound step ran 28-32 ms alone against 38 captured, while a GPU-bound one ran alike)
CPU_HELD_SHARE = 0.5


def cpu_share(holders) -> tuple[float, int]:
    """The share of the step its critical path spends on the CPU, and the ns of it inside CUDA calls."""
    cpu = [h for h in holders if h.kind in ("cpu-host", "cpu-calls")]
    return sum(h.share for h in cpu), sum(int(h.ns) for h in cpu if h.kind == "cpu-calls")


def profiler_note(holders) -> str:
    """A caveat where the CPU holds the step (CPU_HELD_SHARE), else ''."""
    share, calls_ns = cpu_share(holders)
    if share < CPU_HELD_SHARE:
        return ""
    return (f"{share * 100:.0f}% of this step is the CPU's ({_ms(calls_ns)} ms per step inside CUDA calls), timed under "
            "the profiler, which slows every CUDA call it traces: the program run alone spends less there, so its own "
            "step is shorter and a saving the CPU sets can differ (docs/whatif.md, \"The same changes without the profiler\")")


def queue_line(q) -> str:
    """The launches whose queue the edits empty or fill, and the CPU time that may move with them
    (parsers/replay/launch_cost.py), one sentence; '' where it is too small to say."""
    if q is None or not q.said:
        return ""
    low, mid, high = (x / 1e6 for x in q.extra_cpu_ns)
    more = "more" if mid >= 0 else "less"
    least, most = sorted((abs(low), abs(high)))  # the amount of CPU time, more or less, smaller end first
    return (f"{q.emptied_per_step:,.1f} launches a step that queued behind GPU work find their stream empty after the "
            f"edits ({q.filled_per_step:,.1f} the other way); in the committed every-other-step captures a launch onto "
            f"an empty queue cost the CPU {q.cost_ns[0] / 1e3:.2f}..{q.cost_ns[2] / 1e3:.2f} us more, which this "
            f"prediction leaves out: {least:,.2f}.."
            f"{most:,.2f} ms a step {more} CPU time ({abs(mid):,.2f} central; docs/whatif.md, \"That cost, "
            f"measured and replayed, and left out\")")


def _queue(q) -> dict | None:
    if q is None:
        return None
    # QueueShift's figures follow the cost per launch, low to high; where the edits fill queues that CPU
    # time is taken away (negative) and the high cost gives the lowest figure: a range's ends read low <= high
    low, high = sorted((q.extra_cpu_ns[0], q.extra_cpu_ns[2]))
    return {"emptied_launches_per_step": round(q.emptied_per_step, 2), "filled_launches_per_step": round(q.filled_per_step, 2),
            "extra_cpu_ns_per_step": {"low": low, "central": q.extra_cpu_ns[1], "high": high},
            "cost_ns_per_launch": {"low": q.cost_ns[0], "central": q.cost_ns[1], "high": q.cost_ns[2]},
            "in_prediction": False, "note": queue_line(q) or None}


def _alone(c) -> dict | None:
    if c is None:
        return None
    return {"alone_step_ns": c.alone_step_ns, "alone_steps": c.alone_steps, "captured_step_ns": c.captured_step_ns,
            "captured_steps": c.captured_steps, "slowdown": None if c.slowdown is None else round(c.slowdown, 4),
            "source": c.source}


def alone_line(c) -> str:
    """The bare run against the capture, one sentence ('' without a record)."""
    if c is None:
        return ""
    text = (f"Without the profiler (the workload run alone just before this capture, {c.source}, the workload's "
            f"Python clock per step, median of {c.alone_steps} steps): {_ms(c.alone_step_ns)} ms per step")
    if c.slowdown is not None and c.captured_step_ns is not None:
        text += (f"; captured, {_ms(c.captured_step_ns)} ms per step (its step marks, the same clock, median of "
                 f"{c.captured_steps} steps): the profiler made the step {abs(c.slowdown - 1) * 100:.0f}% "
                 f"{'longer' if c.slowdown >= 1 else 'shorter'}")
    return text


def _rank_files(r) -> dict | None:
    if r is None:
        return None
    return {"files": list(r.files), "ranks": list(r.ranks), "clock_offsets_ns": list(r.offsets_ns),
            "clock_fix_by_collectives_ns": list(r.clock_fix_ns),
            "collectives_matched": r.collectives, "collective_end_spread_median_ns": r.median_spread_ns,
            "collective_end_spread_max_ns": r.max_spread_ns, "renumbered": list(r.renumbered),
            "clock": "each file's times moved by its session start (TARGET_INFO_SESSION_START_TIME) less the "
                     "earliest file's, then by the median difference of the ends of the collectives it shares with the "
                     "first file (clock_fix_by_collectives_ns: a collective ends on every rank together; two nodes' "
                     "session starts agree only to their clock sync); the spread: the last rank's end of a collective "
                     "they share less the first's, on the merged clock"}


def rank_files_line(r) -> str:
    """One sentence: which per-rank exports were replayed as one, and how well their clocks agree."""
    moved = ", ".join(f"rank {k if k is not None else i} {o / 1e6:+.3f} ms ({f / 1e3:+,.1f} us of it by the collectives)"
                      for i, (k, o, f) in enumerate(zip(r.ranks, r.offsets_ns, r.clock_fix_ns)) if o or f)
    text = (f"Ranks: {len(r.files)} per-rank exports replayed as one, each moved onto one clock by its session start "
            f"and then so that the collectives it shares with the first end when the first's do ({moved or 'none moved'})")
    if r.collectives:
        text += (f"; the {r.collectives:,} collectives they share then end {r.median_spread_ns / 1e3:,.1f} us apart "
                 f"across ranks (median; {r.max_spread_ns / 1e3:,.1f} us at most)")
    text += "".join(f"; renumbered: {n}" for n in r.renumbered)
    if not r.collectives:
        # the replay couples ranks only through the collectives they share (replay.graph): none on every
        # rank, so not as one export's ranks are, whatever else the ranks have in common
        return text + ("; no collective found on every rank (NCCL kernels matched by name and order), so they are not "
                       "coupled as the ranks of one export are: a rank that shares no collective with another replays "
                       "on its own")
    # the coupling is the one-export replay's, checked on per-rank twins (docs/whatif.md "Per-rank twins")
    return text + ("; the ranks coupled through those collectives as in one export holding every rank (checked on "
                   "per-rank twins: a host sleep on every rank, the same sleep on one rank alone (a straggler, "
                   "which the other ranks wait for) and the bucket size: docs/whatif.md)")


def whatif_dict(p) -> dict:
    return {
        "file": p.path.name,
        "steps": p.steps,
        "steps_per_rank": list(p.steps_per_rank) if len(p.steps_per_rank) > 1 else None,
        "rank_files": _rank_files(p.rank_files),
        "baseline": {"measured_step_ns": p.measured_step_ns, "replayed_step_ns": p.replayed_step_ns,
                     "unlike_median_ns": p.unlike_median_ns,
                     "identity_error": round(p.identity_error, 5), "holds_step": [_holder(h) for h in p.baseline_holders],
                     "gpu_idle_per_step": _idle(p.baseline_idle)},
        "edits": [{"edit": a.edit, "changed": a.changed, "assumption": a.assumption or None} for a in p.edits],
        "predicted": {"step_ns": p.step_ns, "low_ns": p.low_ns, "high_ns": p.high_ns,
                      **_clock(p), **_parts(p)},
        "moved_host_ns_per_step": p.moved_host_ns or None,
        "workers_to_keep_up": p.workers_to_keep_up,
        "workers_factor_if_waiting": (None if p.workers_factor_if_waiting is None
                                      else round(p.workers_factor_if_waiting, 3)),
        "cpu_pace_assumption": p.cpu_assumption or None,
        "contention_assumption": p.contention or None,
        "without_profiler": _alone(p.profiler),
        "saving_ns": p.saving_ns,
        "holds_step": [_holder(h) for h in p.holders],
        "cpu_share_of_step": round(cpu_share(p.holders)[0], 4),
        "profiler_note": profiler_note(p.holders) or None,
        "launch_queue": _queue(p.queue),
        "gpu_idle_per_step": _idle(p.idle),
        "measured": {"launch_latency_ns": p.launch_latency_ns, "queue_gap_ns": p.queue_gap_ns},
        "clock": "step period (a step's start to the next iteration's start), median over the steady-state steps "
                 "(steps: every rank's; steps_per_rank: how many each rank holds where several do, else null), "
                 "or their mean where the steps are not alike (more than one, and one in ten, over 1.5x the median: "
                 "baseline.unlike_median_ns their median then, else null); "
                 "CPU and GPU times on the capture's clock; predicted.clock: the clock whose typical period is the "
                 "predicted step, the slower of the CPU's (a step's start to the next one's, the last to its range's "
                 "end) and the GPU's (a step's first op to the next step's first op, the last to its work's end), "
                 "or `workers` where the loader workers of a workers:N edit set it (a batch every step_ns); "
                 "predicted.other_clock_shorter_ns: by how much the other clock's is shorter (null: no GPU work; "
                 "with `workers`, the slower clock's)",
    }


def _clock(p) -> dict:
    cpu, gpu = p.clocks_ns
    if p.workers_floor_ns is not None:
        return {"clock": "workers", "other_clock_shorter_ns": p.workers_floor_ns - max(cpu, gpu or 0)}
    return {"clock": "gpu" if gpu is not None and gpu > cpu else "cpu",
            "other_clock_shorter_ns": None if gpu is None else abs(cpu - gpu)}


def _window_note(p, hold) -> str:
    """Where the holders' step is not the predicted one, why, one clause ('' without edits): an edit replays
    the typical step, and the prediction is the unchanged replay's step less the saving."""
    if not p.edits or not hold:
        return ""
    return (f" on the typical step replayed with the edits ({_ms_unit(sum(h.ns for h in hold))} a step, the mean "
            "window; the predicted step above is the replayed unchanged step less the saving)")


def _stat(p) -> str:
    return "median" if p.unlike_median_ns is None else "mean"


# Two clocks closer than this share of the step are one pace: the CPU's period a hair shorter is how
# the two windows are cut (a step's first op against its start), not a CPU running ahead of a GPU it
# leaves idle half the step (a launch-bound step's unchanged replay: 0.05 ms of 27)
CLOCKS_AGREE = 0.01


def clock_clause(p) -> str:
    """Which clock's typical period is the predicted step, and by how much the other's is shorter."""
    c = _clock(p)
    if c["clock"] == "workers":
        return (f"set by the loader workers, a batch every {_ms_unit(p.workers_floor_ns)}: the replayed step on the "
                f"slower clock {_ms_unit(c['other_clock_shorter_ns'])} shorter waits for their next batch")
    if c["other_clock_shorter_ns"] is None:
        return "on the CPU's clock (no step launched GPU work)"
    if c["clock"] == "gpu":
        ahead = c["other_clock_shorter_ns"] >= CLOCKS_AGREE * max(p.step_ns, 1)
        return (f"on the GPU's clock (a step's first op to the next one's, {_stat(p)}), the slower: the CPU's own period "
                f"{_ms_unit(c['other_clock_shorter_ns'])} shorter, "
                + ("so the CPU runs ahead of its GPU work" if ahead else
                   f"the two within {CLOCKS_AGREE:.0%} of each other: the CPU does not run ahead"))
    return (f"on the CPU's clock (a step's start to the next one's, {_stat(p)}), the slower: the GPU's "
            f"{_ms_unit(c['other_clock_shorter_ns'])} shorter")


def baseline_clock(p) -> str:
    """The clock the unchanged replay's step is on, a phrase: the slower of the two, as the predicted
    step's (replay.predict.Replayed.step_ns); the measured step is always the CPU's."""
    cpu, gpu = p.baseline_clocks_ns
    if gpu is None:
        return "CPU clock, no step launched GPU work"
    if gpu > cpu:
        return (f"GPU clock, a step's first op to the next one's, the slower: the CPU's period "
                f"{_ms_unit(gpu - cpu)} shorter")
    return f"CPU clock, the slower: the GPU's period {_ms_unit(cpu - gpu)} shorter"


def _parts(p) -> dict:
    """The range's two sources apart (predicted steps, ns), where the prediction has a range."""
    if p.edits_range_ns is None or p.pace_range_ns is None:
        return {}
    return {"edits_low_ns": p.edits_range_ns[0], "edits_high_ns": p.edits_range_ns[1],
            "pace_low_ns": p.pace_range_ns[0], "pace_high_ns": p.pace_range_ns[1]}


def range_parts(p) -> str:
    """Which part of the range each source makes, one clause ('' where there is no range or only one
    source moves it)."""
    e, c = p.edits_range_ns, p.pace_range_ns
    if e is None or c is None or p.low_ns == p.high_ns or e[0] == e[1] or c[0] == c[1]:
        return ""
    return (f"the edits' assumptions alone {_ms_unit(e[0])} .. {_ms_unit(e[1])} per step (the CPU at this capture's "
            f"pace), the CPU's pace alone {_ms_unit(c[0])} .. {_ms_unit(c[1])} per step (the edits' central figures)")


def steps_statistic(p) -> str:
    """How the step period is taken over the steps, as a phrase: their median, or their mean where they
    are not alike (model.steps.typical_period_ns)."""
    if p.unlike_median_ns is None:
        return f"median of {p.steps} steady-state steps{_of_ranks(p)}"
    return (f"mean of {p.steps} steady-state steps{_of_ranks(p)}, which are not alike (more than one, and one in ten, "
            f"over 1.5x their median of {_ms_unit(p.unlike_median_ns)}: a loop that alternates, whose median is one kind "
            "of step)")


def _of_ranks(p) -> str:
    """Where several ranks hold steps, how many each, a clause ('' for one): `steps` counts every rank's."""
    per = p.steps_per_rank
    if len(per) < 2:
        return ""
    each = f"{per[0]} on each of {len(per)} ranks" if len(set(per)) == 1 else f"{', '.join(map(str, per))} on {len(per)} ranks"
    return f" ({each}, each period on its own rank's timeline)"


def saving_words(p) -> str:
    """The saving against the unchanged replay, said as a cost where the edits lengthen the step
    ("saves -5.52 ms" read as a saving at a glance)."""
    share = abs(p.saving_ns) / p.replayed_step_ns * 100 if p.replayed_step_ns else 0.0
    if p.saving_ns < 0:
        return f"costs {_ms(-p.saving_ns)} ms more per step ({share:.1f}% longer than the unchanged replay)"
    return f"saves {_ms(p.saving_ns)} ms per step ({share:.1f}%)"


def whatif_json_text(p) -> str:
    return json.dumps(whatif_dict(p), indent=2) + "\n"


def workers_line(p) -> str:
    """One sentence on Prediction.workers_to_keep_up ('' where it does not apply)."""
    k = p.workers_to_keep_up
    if k is None:
        return ""
    return (f"were the host work taken off the steps ({_ms_unit(p.moved_host_ns)} a step) a data loader's, "
            f"{k} loader worker{'s' if k > 1 else ''} or more keep up with the predicted step (fewer: add "
            "workers:N, whose batches then set the step); were it the wait for N workers the loop already "
            f"runs (the export shows no other process's work), {p.workers_factor_if_waiting:.1f} x N keep up: each delivers "
            "a batch every N measured steps")


def whatif_markdown(p) -> str:
    out = [f"# nsight-tui whatif: {md(p.path.name)}", ""]
    out.append(f"Step period, {steps_statistic(p)}: measured {_ms(p.measured_step_ns)} ms, "
               f"replayed unchanged {_ms(p.replayed_step_ns)} ms (identity error {p.identity_error * 100:.2f}%).")
    if p.profiler is not None:
        out.append(md(alone_line(p.profiler)) + ".")
    if p.rank_files is not None:
        out.append(md(rank_files_line(p.rank_files)) + ".")
    out.append(f"Measured in this capture: launch latency {p.launch_latency_ns / 1e3:.1f} us (median op start - launch "
               f"call start onto an idle stream), queued ops {p.queue_gap_ns} ns apart (median).")
    out.append("")
    if p.edits:
        out += ["## Edits", ""]
        said: set[str] = set()  # an assumption several edits share (a graph per phase) said once
        for a in p.edits:
            assumes = "" if not a.assumption else (" (assumes the same as above)" if a.assumption in said
                                                    else f" (assumes {md(a.assumption)})")
            said.add(a.assumption or "")
            out.append(f"- `{md(edit_shown(a.edit))}`: {md(a.changed)}{assumes}")
        out += ["", "## Predicted step (estimated, replay)", ""]
        rng = (f" (between {_ms(p.low_ns)} and {_ms(p.high_ns)} ms)" if p.low_ns != p.high_ns else "")
        out.append(f"**{_ms(p.step_ns)} ms per step**{rng}: {saving_words(p)}, {md(clock_clause(p))}.")
        if range_parts(p):
            out += ["", f"Of the range: {md(range_parts(p))}."]
        if p.cpu_assumption:
            out += ["", f"The range assumes {md(p.cpu_assumption)}."]
        if p.contention:
            out += ["", f"Contention: {md(p.contention)}."]
        if queue_line(p.queue):
            out += ["", f"The launch queue: {md(queue_line(p.queue))}."]
        if workers_line(p):
            out += ["", f"Workers: {md(workers_line(p))}."]
        out.append("")
    for title, hold, idle in ((("What holds the step after the edits" if p.edits else "What holds the step"), p.holders, p.idle),):
        out += [f"## {title} (critical path, share of the step)", "",
                f"Each step's window on the clock that sets the step, walked back{_window_note(p, hold)}; ms per step "
                "the mean over the steps' windows, so they add up to the mean window.", "",
                "| holder | ms per step | share |", "|---|---:|---:|"]
        for h in hold:
            out.append(f"| {md(h.what)} | {_ms(h.ns)} | {h.share * 100:.1f}% |")
        out += ["", "GPU idle per step (replayed): " + (
            f"{_ms(idle.idle_ns)} ms = launch-starved {_ms(idle.launch_starved_ns)} + blocked by a sync "
            f"{_ms(idle.sync_blocked_ns)} + waiting on a dependency {_ms(idle.dependency_ns)}"), ""]
        note = profiler_note(hold)
        if note:
            out += [f"Note: {md(note)}.", ""]
    return "\n".join(out) + "\n"


def whatif_lines(p, estimate_ms: float | None = None) -> list[tuple[str, str]]:
    """The prediction `p` as (label, text) lines for a screen (the TUI's what-if), `estimate_ms` the
    rule's own estimate beside the replay's; every figure says whose clock it is on and whether it is
    measured or the model's."""
    lines: list[tuple[str, str]] = []
    base = p.replayed_step_ns
    lines.append(("step", f"{_ms_unit(p.measured_step_ns)} measured (CPU clock, period of the main thread's step, "
                  f"{steps_statistic(p)}), {_ms_unit(base)} replayed unchanged ({baseline_clock(p)}; "
                  f"the model's identity error {p.identity_error * 100:.2f}%)"))
    if p.rank_files is not None:
        lines.append(("ranks", rank_files_line(p.rank_files).removeprefix("Ranks: ")))
    rng = (f", range {_ms_unit(p.low_ns)} .. {_ms_unit(p.high_ns)}" if p.low_ns != p.high_ns else
           ", no range: the edit rests on no figure this capture lacks")
    lines.append(("predicted", f"{_ms_unit(p.step_ns)} per step with the fix (estimated: the replay){rng}, "
                  f"{clock_clause(p)}"))
    if range_parts(p):
        lines.append(("of the range", range_parts(p)))
    for a in dict.fromkeys([*p.assumptions, p.cpu_assumption]):  # one line for an assumption edits share
        if a:
            lines.append(("assumes", a))
    if p.contention:
        lines.append(("contention", p.contention))
    share = p.saving_ns / base if base else 0.0
    saving = f"{_ms_unit(p.saving_ns)} per step ({percent(share)} of the replayed step)"
    if p.saving_ns < 0:  # a negative saving, said as what it is
        saving = f"none: the step {_ms_unit(-p.saving_ns)} longer ({percent(-share)} of the replayed step)"
    if p.low_ns != p.high_ns:
        saving += f", {_ms_unit(base - p.high_ns)} .. {_ms_unit(base - p.low_ns)}"
    if estimate_ms is not None:
        saving += f"; the rule's own estimate {estimate_ms:,.2f} ms"
    lines.append(("saving", saving))
    for a in p.edits:
        lines.append(("edit", f"{edit_shown(a.edit)}: {a.changed}"))
    lines.append(("holds the step", f"after the fix, its critical path{_window_note(p, p.holders)} (replayed; ms "
                  "per step the mean over the steps' windows, share of the mean window):"))
    for h in p.holders:
        lines.append(("", f"{h.share * 100:5.1f}%  {h.ns / 1e6:9,.2f} ms  {h.what}"))
    if p.baseline_holders and p.edits:
        top = p.baseline_holders[0]
        lines.append(("before", f"{top.what} held {top.share * 100:.1f}% ({top.ns / 1e6:,.2f} ms per step) "
                      "of the unchanged replay's step"))
    note = profiler_note(p.holders)
    if note:
        lines.append(("profiler", note))
    if queue_line(p.queue):
        lines.append(("queue", queue_line(p.queue)))
    if workers_line(p):
        lines.append(("workers", workers_line(p)))
    if p.profiler is not None:
        lines.append(("alone", alone_line(p.profiler)))
    i = p.idle
    lines.append(("GPU idle", f"{_ms_unit(i.idle_ns)} per step after the fix (replayed) = launch-starved "
                  f"{_ms_unit(i.launch_starved_ns)} + blocked by a sync {_ms_unit(i.sync_blocked_ns)} + waiting on a "
                  f"dependency {_ms_unit(i.dependency_ns)}"))
    return lines
