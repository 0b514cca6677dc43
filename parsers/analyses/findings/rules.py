"""The rules by id, and running them: every rule that fires on the steady-state steps, largest
saving first, each nanosecond of device time claimed once (partition)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nsight_tui.parsers.analyses.findings.communication import exposed_communication
from nsight_tui.parsers.analyses.findings.context import StepContext, context
from nsight_tui.parsers.analyses.findings.copies import not_checked, pageable_memcpy, sync_memcpy
from nsight_tui.parsers.analyses.findings.decode import memory_bound_decode
from nsight_tui.parsers.analyses.findings.fusion import elementwise_chain, unfused_attention, unfused_optimizer
from nsight_tui.parsers.analyses.findings.gemm import fp32_gemm, occupancy_limited, tensor_cores_idle
from nsight_tui.parsers.analyses.findings.host import host_bound_gap, launch_bound, sync_stall
from nsight_tui.parsers.analyses.findings.layout import channels_last_layout
from nsight_tui.parsers.analyses.findings.partition import partition
from nsight_tui.parsers.analyses.findings.straggler import straggler
from nsight_tui.parsers.analyses.findings.replayed import combined, replay_findings
from nsight_tui.parsers.analyses.findings.result import NOTHING_TO_GAIN_MS, Finding, FindingsReport, findings_report
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.analyses.findings.window import warmup_in_window
from nsight_tui.parsers.analyses.instrumentation import instrumentation_cost
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis
    from nsight_tui.parsers.analyses.ranks import Rank


RULES = {
    "host-bound-gap": host_bound_gap,
    "sync-stall": sync_stall,
    "launch-bound": launch_bound,
    "unfused-optimizer": unfused_optimizer,
    "fp32-gemm-without-tensor-cores": fp32_gemm,
    "unfused-attention": unfused_attention,
    "occupancy-limited": occupancy_limited,
    "tensor-cores-idle": tensor_cores_idle,
    "elementwise-chain": elementwise_chain,
    "channels-last-layout": channels_last_layout,
    "pageable-memcpy": pageable_memcpy,
    "sync-memcpy": sync_memcpy,
    "exposed-communication": exposed_communication,
    "straggler": straggler,
    "warmup-in-window": warmup_in_window,
    "memory-bound-decode": memory_bound_decode,
}


RULE_IDS = tuple(RULES)


def findings(trace: Trace, attribution: str = "process", rules: dict | None = None,
             rank: Rank | None = None, ncu: NcuAnalysis | None = None, replay: bool = True) -> list[Finding]:
    """Every rule that fires on the trace's steady-state steps (`rank`'s under a rank filter),
    largest saving first, with each nanosecond of device time claimed by one finding only. `ncu`:
    an Nsight Compute report joined to the trace (analyses.ncu.analyse), for the rules that read it.
    Each finding names its fix as replay edits; with `replay` its saving is the replay's
    (findings.replayed), the rule's estimate beside it, and the ranking follows the replay."""
    c = context(trace, attribution, rank, ncu)
    if c is None:
        return []
    out: list[Finding] = []
    for rule in (rules or RULES).values():
        found = rule(c)  # a rule per kernel name (occupancy-limited) gives a list
        out += found if isinstance(found, list) else [found] if found is not None else []
    found = replay_findings(c, partition(out, c.cpu_wait_ns / 1e6), run=replay)
    _say_instrumentation(c, found)
    _say_rank(c, found)
    return sorted(found, key=lambda f: (-f.saving_ms_per_step, f.id))


# The rules that read the CPU's pace: a profiler's per-op ranges slow that pace, not the workload.
CPU_PACE_RULES = ("launch-bound", "host-bound-gap", "sync-stall")


def _say_instrumentation(c: StepContext, found: list[Finding]) -> None:
    """Under emit_nvtx / --pytorch=autograd-nvtx, part of the CPU's time per step is the profiler's:
    the findings that read the CPU's pace say how much (analyses.instrumentation, a lower bound)."""
    cost = instrumentation_cost(c.trace, c.t0, c.t1)
    if cost is None or not cost.cost_per_step_ns:
        return
    for f in found:
        if f.id in CPU_PACE_RULES:
            f.evidence["instrumentation_ms_per_step"] = cost.cost_per_step_ns / 1e6
            f.basis += (f"; at least {cost.cost_per_step_ns / 1e6:.2f} ms of the CPU's time per step is the "
                        f"profiler's own instrumentation, not the workload's ({cost.basis}): captured without "
                        "per-op ranges the CPU issues the step faster")


# the rules that read every rank, not the steps of the one the others read
ACROSS_RANKS = ("straggler",)


def _say_rank(c: StepContext, found: list[Finding]) -> None:
    """In an export of several ranks, each finding says whose steps and GPU it read."""
    pids = steps_of(c.model).pids
    if len(pids) < 2:
        return
    who = c.rank.label if c.rank is not None else f"pid {int(pid_of(c.model.r_gtid[c.steps[:1]])[0])} · GPU {c.device}"
    for f in found:
        if f.id in ACROSS_RANKS:
            continue
        f.basis = f"{who} (one of {len(pids)} processes with steps): {f.basis}"
        f.evidence["rank"] = who


def all_fixes(trace: Trace, every: list[Finding], c: StepContext | None) -> tuple[float, str] | None:
    """What every finding with something to gain saves together (ms per step, and how): one replay
    with all their edits (replayed.combined), not the sum of their savings."""
    gain = [f for f in every if f.saving_ms_per_step >= max(NOTHING_TO_GAIN_MS, threshold("min_saving_ms"))]
    return combined(trace, gain, None if c is None else c.step_ns / 1e6)


def answers(trace: Trace, attribution: str = "process", ncu: NcuAnalysis | None = None) -> FindingsReport:
    """What the report says of the findings (render.findings lays it out under "findings")."""
    c = context(trace, attribution, ncu=ncu)
    every = findings(trace, attribution, ncu=ncu)
    return findings_report(None if c is None else c.step_ns, 0 if c is None else c.n,
                           None if c is None else c.cpu_wait_ns, every, not_checked(trace), all_fixes(trace, every, c))
