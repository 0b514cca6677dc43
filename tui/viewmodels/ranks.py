"""The ranks view: every rank side by side (parsers.ranks): step time, compute per step,
communication and how much of it is exposed, per rank and per phase, and the straggler.

One row per rank in the main table (a few ranks or hundreds: rows scale, columns do not);
per phase and rank in the second; the spread across ranks and the straggler as lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from nsight_tui.parsers.analyses.ranks import PhaseSpread, Rank, RunRanks, phase_spread
from nsight_tui.render.ranks import contention_line, inferred_note
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column, TableModel


def _share(v) -> float | None:
    return None if numbers.missing(v) else round(float(v), 4)


def _signed(v) -> str:
    if numbers.missing(v):
        return numbers.MISSING
    return ("+" if v >= 0 else "−") + numbers.duration(abs(v))


RANK_COLUMNS = [
    Column("label", "Rank", None, "left", text=True, min_width=7, md_header="Rank"),
    Column("device", "GPU", 3, fmt=numbers.count, priority=3, md_header="GPU"),
    Column("steps", "Steps", 5, fmt=numbers.count, priority=2, md_header="Steps"),
    Column("step_med_ns", "Step med", 9, fmt=numbers.duration, priority=9, md_header="Step period, median (ns)",
           md_fmt=numbers.exact_int),
    Column("step_min_ns", "Min", 9, fmt=numbers.duration, priority=6, md_header="Step period, min (ns)", md_fmt=numbers.exact_int),
    Column("step_max_ns", "Max", 9, fmt=numbers.duration, priority=6, md_header="Step period, max (ns)", md_fmt=numbers.exact_int),
    # Per step or the whole capture, said in each header (the screen shows no note).
    Column("compute_step_ns", "Comp/step", 9, fmt=numbers.duration, priority=7,
           md_header="Compute per step, median (ns)", md_fmt=numbers.exact_int),
    Column("comm_ns", "Comm cap", 9, fmt=numbers.duration, priority=5, md_header="Communication (ns, whole capture)"),
    Column("exposed_ns", "Expo cap", 9, fmt=numbers.duration, priority=8,
           md_header="Exposed communication (ns, whole capture)"),
    Column("overlap", "Overlap", 7, fmt=numbers.percent, priority=8, md_header="Overlap", md_fmt=_share),
    Column("kernels", "Kern cap", 8, fmt=numbers.count, priority=1, md_header="Kernels (whole capture)"),
    Column("busy_ns", "Busy cap", 9, fmt=numbers.duration, priority=1, md_header="GPU busy (ns, whole capture)"),
    Column("process", "", show=False, text=True, md_header="Process"),
    Column("pid", "", show=False, md_header="PID"),
    Column("rank_source", "", show=False, text=True, md_header="Rank number from"),
]

PHASE_COLUMNS = [
    Column("phase", "Phase", 9, "left", text=True, md_header="Phase"),
    Column("label", "Rank", None, "left", text=True, min_width=7, md_header="Rank"),
    Column("device", "GPU", 3, fmt=numbers.count, priority=2, md_header="GPU"),
    # The GPU's clock first: on a run without phase syncs the CPU span is when the work was issued.
    Column("per_step_ns", "GPU/step", 9, fmt=numbers.duration, priority=9,
           md_header="Phase GPU time per step (first start to last end of its work), mean (ns)", md_fmt=numbers.exact_int),
    Column("vs_median_ns", "vs med", 9, fmt=_signed, priority=6,
           md_header="GPU time per step minus the median rank's (ns)", md_fmt=numbers.exact_int),
    Column("cpu_step_ns", "CPU/step", 9, fmt=numbers.duration, priority=4,
           md_header="Phase CPU time per step (NVTX span), mean (ns)", md_fmt=numbers.exact_int),
    Column("comm_ns", "Comm tot", 9, fmt=numbers.duration, priority=7,
           md_header="Communication (ns, total over the steady-state steps)"),
    Column("exposed_ns", "Expo tot", 9, fmt=numbers.duration, priority=8,
           md_header="Exposed communication (ns, total over the steady-state steps)"),
    Column("overlap", "Overlap", 7, fmt=numbers.percent, priority=8, md_header="Overlap", md_fmt=_share),
    Column("busy_ns", "Busy tot", 9, fmt=numbers.duration, priority=3,
           md_header="GPU busy (ns, total over the steady-state steps)"),
    Column("instances", "", show=False, md_header="Instances"),
]

COMM_NOTE = ("comm: NCCL and other collective kernels (union of their intervals); exposed: comm time with no "
             "compute kernel running on that GPU; overlap = 1 − exposed / comm; compute: the other kernels. Ranks' "
             "columns marked cap: the whole capture; phases: summed over the steady-state steps, inside each "
             "phase's GPU time (its work's first start to last end), not its CPU span.")


@dataclass(frozen=True)
class RanksView:
    run: RunRanks
    ranks: list[Rank]  # in the rank table's frame order
    rank_frame: pd.DataFrame  # RANK_COLUMNS' keys
    phase_frame: pd.DataFrame  # PHASE_COLUMNS' keys
    spreads: list[PhaseSpread] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # spread across ranks, the straggler, per phase

    def rank_table(self) -> TableModel:
        return TableModel(self.rank_frame, RANK_COLUMNS)

    def phase_table(self) -> TableModel:
        # room for `inferred:backward` where the phases were inferred (the tree's names), else the usual
        longest = max((len(t) for t in self.phase_frame["phase"]), default=0)
        first = PHASE_COLUMNS[0]
        return TableModel(self.phase_frame, [replace(first, width=max(first.width or 0, longest)), *PHASE_COLUMNS[1:]])

    @property
    def notes(self) -> list[str]:
        return [self.run.assumption, *self.run.notes]


def _stat(values: list[int], how) -> float | None:
    return float(how(values)) if values else None


def ranks_view(run: RunRanks) -> RanksView:
    rows = []
    for s in run.ranks:
        rows.append({
            "label": _short(s.rank), "device": s.rank.device, "steps": len(s.steps_ns), "step_med_ns": s.median_step_ns,
            "step_min_ns": _stat(s.steps_ns, np.min), "step_max_ns": _stat(s.steps_ns, np.max),
            "compute_step_ns": s.median_compute_per_step_ns, "comm_ns": s.comm_ns, "exposed_ns": s.exposed_comm_ns,
            "overlap": s.overlap, "kernels": s.kernels, "busy_ns": s.busy_ns, "process": s.rank.process,
            "pid": s.rank.pid, "rank_source": s.rank.rank_source,
        })
    rank_frame = pd.DataFrame(rows, columns=[c.key for c in RANK_COLUMNS])
    spreads = phase_spread(run)
    median_of = {p.phase: p.median_ns for p in spreads}
    phase_rows = []
    for s in run.ranks:
        for phase, p in s.phases.items():
            per_step = p.gpu_ns / p.instances if p.instances else None
            phase_rows.append({
                "phase": p.prefix + phase, "label": _short(s.rank), "device": s.rank.device, "per_step_ns": per_step,
                "vs_median_ns": per_step - median_of[phase] if per_step is not None and phase in median_of else None,
                "cpu_step_ns": p.cpu_ns / p.instances if p.instances else None,
                "comm_ns": p.comm_ns, "exposed_ns": p.exposed_comm_ns,
                "overlap": 1 - p.exposed_comm_ns / p.comm_ns if p.comm_ns else None, "busy_ns": p.busy_ns,
                "instances": p.instances,
            })
    phase_frame = pd.DataFrame(phase_rows, columns=[c.key for c in PHASE_COLUMNS])
    if len(phase_frame):  # phase by phase, ranks in order inside each
        order = {p: i for i, p in enumerate(dict.fromkeys(phase_frame["phase"]))}
        phase_frame = phase_frame.sort_values("phase", key=lambda c: c.map(order), kind="stable")
    return RanksView(run, [s.rank for s in run.ranks], rank_frame, phase_frame.reset_index(drop=True), spreads,
                     summary_lines(run, spreads))


def summary_lines(run: RunRanks, spreads: list[PhaseSpread]) -> list[str]:
    """The spread across ranks and who is slowest, in words (screen and export alike); what
    matters first, so a narrow screen cuts only the explanation at the end."""
    out = []
    inferred = inferred_note(run)
    if inferred:  # first: every figure below stands on these iterations
        out.append(inferred)
    stats = run.step_stats()
    if stats:
        out.append(f"step period over ranks: min {numbers.duration(stats['min_ns'])} · median "
                   f"{numbers.duration(stats['median_ns'])} · max {numbers.duration(stats['max_ns'])} (each rank's median)")
    slow = run.straggler
    if slow is not None:
        rel = f" ({slow.excess_ns / slow.median_ns:+.1%})" if slow.median_ns else ""
        basis = re.sub(r" \([^)]*\)", "", slow.basis)  # its explanation is in the notes
        out.append(f"straggler: {_short(slow.rank)}, {basis} {_signed(slow.excess_ns)}{rel} over the median rank "
                   f"({numbers.duration(slow.value_ns)} vs {numbers.duration(slow.median_ns)})")
        if run.straggler_why:
            out.append(f"why: {run.straggler_why}")
    if contention_line(run):
        out.append(f"compute beside communication: {contention_line(run)}")
    if spreads:
        out.append("slowest per phase: " + " · ".join(
            f"{p.phase} {_short(p.slowest)} {_signed(p.excess_ns)}" for p in spreads)
            + " (GPU time per step over the median rank)")
    return out


def _short(rank: Rank) -> str:
    """`rank 1` (its GPU has a column of its own); `pid N · GPU d` where no rank number is known."""
    return f"rank {rank.rank}" if rank.rank is not None else rank.label
