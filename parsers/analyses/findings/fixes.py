"""`whatif TRACE fix:FINDING_ID`: the finding's fix as the replay edits it names (findings.replayed)."""
from __future__ import annotations

import dataclasses
import fnmatch
from typing import TYPE_CHECKING

from nsight_tui.parsers.analyses.findings.context import StepContext, context
from nsight_tui.parsers.analyses.findings.replayed import FIX_RANGE_BASIS, NO_EDIT, RANGE_BASIS, range_basis
from nsight_tui.parsers.analyses.findings.rules import findings
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.replay.edits import EditError, parse

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis


def resolve_fixes(trace: Trace, edits: list, attribution: str = "process", ncu: NcuAnalysis | None = None) -> list:
    """`fix:FINDING_ID` turned into the edits that finding names (EditError where no such finding
    fires on this trace, or its fix has no edit); other edits as they are. A rule that names several
    findings (occupancy-limited: one per kernel name) fixes them all: their edits together. `ncu`:
    the Nsight Compute report joined to the trace, for the rules that read it."""
    if not any(getattr(e, "kind", str(e).partition(":")[0]) == "fix" for e in edits):
        return list(edits)
    found = findings(trace, attribution, ncu=ncu, replay=False)
    out: list = []
    steps: StepContext | None = None  # the findings' steps, read once where a fix's range needs them
    looked = False
    for e in edits:
        text = getattr(e, "text", str(e))
        if not text.startswith("fix:"):
            out.append(e)
            continue
        wanted = text.partition(":")[2]
        hits = [f for f in found if fnmatch.fnmatchcase(f.id, wanted)]
        if not hits:
            raise EditError(f"{text}: no finding {wanted!r} on {trace.path.name} "
                            f"(found: {', '.join(f.id for f in found) or 'none'})"
                            + ("; occupancy-limited reads an Nsight Compute report of the same workload: whatif --ncu "
                                 "FILE.ncu-rep (the MCP tool's `ncu`)"
                               if ncu is None and fnmatch.fnmatchcase("occupancy-limited", wanted) else ""))
        named = [(f, x) for f in hits for x in f.edits]
        if not named:
            raise EditError(f"{text}: the replay has no edit for this fix ({NO_EDIT.get(hits[0].id, 'none named')})")
        if not looked and any(f.id in RANGE_BASIS or f.id in FIX_RANGE_BASIS for f in hits):
            # a fix's edits all come from one capture's steps: the findings' own (rank 0's of several)
            steps, looked = context(trace, attribution, ncu=ncu), True
        said: set[str] = set()
        for f, x in named:
            if x not in said:  # each finding's range said in its own words (one kernel's ncu figures)
                said.add(x)
                out.append(dataclasses.replace(parse(x), text=f"{x} (fix:{f.id})", why=range_basis(steps, f)))
    return out
