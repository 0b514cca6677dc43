"""Each nanosecond of device time to one finding: the overlap partition of their savings."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.model import intervals


def partition(found: list[Finding], cpu_wait_ms: float | None = None) -> list[Finding]:
    """Take out of each finding's saving the time a larger finding already claimed.

    In order of saving (largest first; launch-bound, the catch-all for launch overhead, after every
    finding that names a cause of its own), a finding keeps the share of its claim (the device time
    its saving stands on: the idle it would fill, the kernels it would shorten) that no finding
    before it claimed: its saving scales by that share. Two findings naming the same idle gaps (a
    sync stall and the host-bound gap after it; the launch-bound idle inside an unfused optimizer,
    whose fix removes those launches) then add up to that idle once. A finding without a claim
    (copies, communication) keeps its own. Findings that shorten GPU work (`gpu_work`) together
    save at most `cpu_wait_ms` per step, the time the CPU waited for the GPU: below it the CPU sets
    the pace; in the same order each takes what is left of it."""

    taken = intervals.EMPTY
    owners: list[tuple[str, tuple[np.ndarray, np.ndarray]]] = []
    budget = cpu_wait_ms
    for f in sorted(found, key=lambda f: (f.id == "launch-bound", -f.saving_ms_per_step, f.id)):
        f.saving_alone_ms_per_step = f.saving_ms_per_step
        if f.claim is None or not len(f.claim[0]):
            continue
        total = intervals.length(f.claim)
        shared = intervals.overlap(f.claim, taken)
        if shared and total:
            f.saving_ms_per_step = f.saving_ms_per_step * (1 - shared / total)
            f.overlaps = [fid for fid, claim in owners if intervals.overlap(f.claim, claim)]
        if f.gpu_work and budget is not None:
            f.capped_by_cpu_wait = f.saving_ms_per_step > budget
            f.saving_ms_per_step = min(f.saving_ms_per_step, max(budget, 0.0))
            budget -= f.saving_ms_per_step
        owners.append((f.id, f.claim))
        taken = intervals.union(np.concatenate([taken[0], f.claim[0]]), np.concatenate([taken[1], f.claim[1]]))
    return found
