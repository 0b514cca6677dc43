"""What the rules find (`Finding`) and what the report says of them all (`FindingsReport`: the
findings with a saving, their combined saving, those with nothing to gain). Typed results only:
`nsight_tui.render.findings` lays them out as the JSON under "findings" and as Markdown."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from nsight_tui.parsers.analyses.findings.thresholds import THRESHOLDS, Threshold, threshold


@dataclass
class Finding:
    id: str
    title: str
    ranges: list[str]
    saving_ms_per_step: float
    basis: str  # how the saving was estimated, in words
    fix: str
    evidence: dict  # the figures, units in the keys
    rows: list[dict] = field(default_factory=list)  # what the figures stand on (gaps, calls, kernels, copies)
    start_ns: int | None = None  # where to look first (the largest piece of evidence)
    end_ns: int | None = None
    # The device time its saving stands on (disjoint sorted [start, end) arrays): idle it would
    # fill, or kernels it would shorten. findings() gives each nanosecond to one finding only.
    claim: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    saving_alone_ms_per_step: float | None = None  # before the time other findings claimed was taken out
    overlaps: list[str] = field(default_factory=list)  # higher-ranked findings that claimed some of its time
    # A finding that shortens GPU work saves step time only while the CPU waits for the GPU: such
    # findings share that wait (findings() caps their sum at it).
    gpu_work: bool = field(default=False, repr=False)
    capped_by_cpu_wait: bool = False  # its saving was cut to what was left of the CPU's wait for the GPU
    # The replay (findings.replayed): the edits that are its fix (`whatif TRACE fix:ID` applies them),
    # whether the saving is the replay's, the rule's own estimate beside it, and the replay's range.
    edits: list[str] = field(default_factory=list)
    replayed: bool = False
    estimate_ms_per_step: float | None = None
    estimate_basis: str = ""  # how the rule estimated it (the basis, where the saving is the estimate)
    replay_low_ms_per_step: float | None = None
    replay_high_ms_per_step: float | None = None
    # why the replay did not give the saving (its edit has nothing to act on here, or no edit), "" where it
    # did: `whatif fix:ID` fails for the same reason, which the TUI's `w` and an agent can say before asking
    not_replayed: str = ""

    @property
    def range(self) -> str:
        return ", ".join(self.ranges)


# Longer than this, a finding's edits are named by `fix:ID` in sentences (the elementwise-chain rule's
# fuse patterns run to kilobytes of kernel-name globs); `whatif TRACE fix:ID` spells them out.
EDIT_WORDS_MAX = 80


def edit_words(finding_id: str, edits: list[str]) -> str:
    """A finding's edits as a sentence names them: as they are, or `fix:ID` and their kinds where long."""
    text = " ".join(edits)
    if len(text) <= EDIT_WORDS_MAX:
        return text
    kinds: dict[str, int] = {}
    for e in edits:
        kind = e.partition(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return f"fix:{finding_id} (" + ", ".join(f"{n} {k} edit{'s' if n > 1 else ''}" for k, n in kinds.items()) + ")"


# Below this a finding's cause is present but fixing it gains nothing measurable: it stands apart.
NOTHING_TO_GAIN_MS = 0.01


# step_ns is the mean (a saving per step of the steps' total); `whatif`'s measured step is their median,
# so an agent reading both sees which is which
STEP_BASIS = ("the step period: each step's start to the next's (the last ends with its GPU work), the mean over "
              "the steady-state steps")
PARTITION_BASIS = "the findings' savings summed, each nanosecond of device time claimed once"
NO_STEP = "the run ran out of GPU memory before it finished a step: no step time to find savings in"


@dataclass(frozen=True)
class FindingsReport:
    """The findings of one trace as the report says them. Per step of the step period (ms), over
    `steps` steady-state steps; `step_ns` the mean period (ns). findings: those with a saving,
    largest first; present_no_saving: present, with nothing measurable to gain. combined: what the
    findings save together, each nanosecond once (the replay with every fix where it ran, else the
    partitioned estimates' sum; how: combined_basis); overlap: the savings alone less that.
    cpu_wait: the CPU's wait for the GPU per step, which findings that shorten GPU work share.
    not_run: why no rule ran (None: they ran)."""

    step_ns: float | None
    steps: int
    combined_basis: str
    step_basis: str
    findings: list[Finding]
    combined_saving_ms_per_step: float
    overlap_ms_per_step: float
    present_no_saving: list[Finding]
    cpu_wait_ms_per_step: float | None
    not_checked: list[str]
    thresholds: dict[str, Threshold]
    not_run: str | None = None


def findings_report(step_ns: float | None, steps: int, cpu_wait_ns: float | None, every: list[Finding],
                    not_checked: list[str], together: tuple[float, str] | None = None) -> FindingsReport:
    """The findings with a saving, their combined saving (each nanosecond once: `together`, the
    replay with every fix, where the replay ran; else the partitioned estimates' sum), and apart
    those present with nothing to gain."""
    gain = [f for f in every if f.saving_ms_per_step >= max(NOTHING_TO_GAIN_MS, threshold("min_saving_ms"))]
    apart = [f for f in every if f not in gain]
    alone = sum(f.saving_alone_ms_per_step or f.saving_ms_per_step for f in gain)
    combined = sum(f.saving_ms_per_step for f in gain) if together is None else together[0]
    return FindingsReport(
        step_ns=step_ns, steps=steps, combined_basis=PARTITION_BASIS if together is None else together[1],
        step_basis=STEP_BASIS, findings=gain, combined_saving_ms_per_step=combined,
        overlap_ms_per_step=alone - combined, present_no_saving=apart,
        cpu_wait_ms_per_step=None if cpu_wait_ns is None else cpu_wait_ns / 1e6,
        not_checked=not_checked, thresholds=dict(THRESHOLDS))


def no_step(found: FindingsReport) -> FindingsReport:
    """A run that ran out of memory before it finished a step has no step time to save: no findings,
    and no figure per step (the CPU's wait for the GPU was read over the iteration it died in)."""
    return replace(found, findings=[], present_no_saving=[], combined_saving_ms_per_step=0.0,
                   overlap_ms_per_step=0.0, steps=0, step_ns=None, cpu_wait_ms_per_step=None, not_run=NO_STEP)
