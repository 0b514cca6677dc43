"""Ranks as text: the per-rank table, communication against compute per phase, the straggler."""
from __future__ import annotations

import json
from dataclasses import asdict

from nsight_tui.parsers.analyses.ranks import RankSummary, RunRanks
from nsight_tui.render.numbers import ms as _ms
from nsight_tui.render.numbers import percent as _pct
from nsight_tui.render.safe import markdown as _md
from nsight_tui.render.tables import markdown as table


def ranks_markdown(run: RunRanks, heading: str = "##") -> str:
    out = [f"{heading} Ranks", "", f"_{run.assumption}_", ""]
    rows = [[s.rank.label, s.rank.process or "–", s.rank.pid, _steps(s), _ms(s.median_step_ns),
             _ms(s.median_compute_per_step_ns), s.kernels, _ms(s.busy_ns), _ms(s.comm_ns), _ms(s.exposed_comm_ns),
             _pct(s.overlap)] for s in run.ranks]
    out.append(table(["rank", "process", "pid", "steps", "step period ms (median)", "compute ms / step (median)",
                      "kernels", "GPU busy ms (capture)", "comm ms (capture)", "exposed comm ms (capture)", "overlap"],
                     rows,
                     notes=["step period: each step_N's start to the next iteration's start on that rank's clock "
                            "(the last ends with its GPU work). comm: NCCL and other collective kernels (union of "
                            "their intervals); exposed: comm time with no compute kernel running on that GPU; "
                            "overlap = 1 - exposed / comm. Columns marked (capture): whole capture, warmup included."]))
    stats = run.step_stats()
    if stats:
        out.append(f"Step period across ranks (each rank's median): min {_ms(stats['min_ns'])} ms, "
                   f"median {_ms(stats['median_ns'])} ms, max {_ms(stats['max_ns'])} ms.\n")
    if run.straggler:
        slow = run.straggler
        out.append(f"**Straggler: {_md(slow.rank.label)}** — {slow.basis}: {_ms(slow.value_ns)} ms against the median "
                   f"rank's {_ms(slow.median_ns)} ms (+{_ms(slow.excess_ns)} ms). The other ranks wait for it in "
                   "their collectives." + (f" Why: {run.straggler_why}." if run.straggler_why else "")
                   + " What it costs, replayed: `nsight-tui whatif FILE|DIR straggler` (its own pauses, other kernels "
                   "and syncs at the other ranks' length; the `straggler` finding).\n")
    if contention_line(run):
        out.append(f"Compute beside communication: {_md(contention_line(run))}.\n")
    phase_rows = []
    for s in run.ranks:
        for phase, p in s.phases.items():
            phase_rows.append([s.rank.label, p.prefix + phase, p.instances, _ms(p.gpu_ns), _ms(p.cpu_ns), _ms(p.busy_ns),
                               _ms(p.comm_ns), _ms(p.exposed_comm_ns),
                               _pct(1 - p.exposed_comm_ns / p.comm_ns if p.comm_ns else None)])
    if phase_rows:
        # an inferred phase has no NVTX span: its CPU figure is its launch span (inferred_note says so)
        kinds = {bool(p.domain) for s in run.ranks for p in s.phases.values()}
        cpu_head = {frozenset({False}): "CPU ms (NVTX, total)", frozenset({True}): "CPU ms (launch span, total)"}.get(
            frozenset(kinds), "CPU ms (NVTX; inferred: launch span; total)")
        out.append(table(["rank", "phase", "instances", "GPU time ms (total)", cpu_head,
                          "GPU busy ms (total)", "comm ms (total)", "exposed comm ms (total)", "overlap"], phase_rows,
                         title="Communication vs compute per phase (steady-state steps, totals over the steps)",
                         notes=["GPU time: per phase instance, the first start to the last end of the GPU work its "
                                "process launched while the range was open (the GPU's clock); busy, comm and exposed "
                                "are measured inside those windows, not in the range's CPU span (without a sync at "
                                "phase ends the GPU runs behind the CPU)."]))
    inferred = inferred_note(run)
    if inferred:
        out.append(f"_note: {_md(inferred)}_\n")
    for note in run.notes:
        out.append(f"_note: {_md(note)}_\n")
    return "\n".join(out)


def contention_line(run: RunRanks) -> str:
    """Per rank, how much slower its kernels ran while a collective ran beside them ('' where no rank
    could say): the replay's contention factor, read off this capture."""
    said = [f"{s.rank.label} x{s.compute_beside_comm:.2f} ({s.compute_beside_comm_kernels:,} kernels)"
            for s in run.ranks if s.compute_beside_comm is not None]
    if not said:
        return ""
    return ("; ".join(said) + " — each GPU's kernels while a collective ran beside them, over the same kernels "
            "(name, grid, block) alone in this capture, weighted by time; the what-if re-times kernels by it as edits "
            "move the collectives")


def _steps(s: RankSummary) -> str:
    return f"{len(s.steps_ns)} ({s.step_label})" if s.step_domain else str(len(s.steps_ns))


def inferred_note(run: RunRanks) -> str:
    """Which ranks' steps and phases were inferred, and from what ("" when none were)."""
    steps = [s.rank.label for s in run.ranks if s.step_domain]
    phases = list(dict.fromkeys(p.prefix + name for s in run.ranks for name, p in s.phases.items() if p.domain))
    if not steps and not phases:
        return ""
    what = " and ".join(x for x in ("steps (inferred:step_N)" if steps else "",
                                     f"phases ({', '.join(phases)})" if phases else "") if x)
    whose = f" on {', '.join(steps)}" if steps and len(steps) < len(run.ranks) else ""
    return (f"{what}{whose} inferred from the kernel sequence (no NVTX ranges for them: the iterations the tree "
            "shows as inferred:step_N); their CPU spans run from the launch of their first kernel")


def ranks_json(run: RunRanks) -> dict:
    """Plain data: every figure, with the derived ones (overlap, medians, the straggler's excess)."""
    return {
        "assumption": run.assumption,
        "ranks": [{**asdict(s), "label": s.rank.label, "step_label": s.step_label,
                    "overlap": s.overlap, "median_step_ns": s.median_step_ns,
                   "median_compute_per_step_ns": s.median_compute_per_step_ns} for s in run.ranks],
        "step_stats": run.step_stats(),
        "straggler": None if run.straggler is None else {**asdict(run.straggler),
                                                        "excess_ns": run.straggler.excess_ns,
                                                        "why": run.straggler_why or None},
        "notes": run.notes,
    }


def ranks_json_text(run: RunRanks) -> str:
    return json.dumps(ranks_json(run), indent=2, default=str) + "\n"
