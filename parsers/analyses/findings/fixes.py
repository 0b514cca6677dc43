"""`whatif TRACE fix:FINDING_ID`: the finding's fix as the replay edits it names (findings.replayed)."""
from __future__ import annotations

import dataclasses
import fnmatch

from nsight_tui.parsers.analyses.findings.replayed import NO_EDIT
from nsight_tui.parsers.analyses.findings.rules import findings
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.replay.edits import EditError, parse


def resolve_fixes(trace: Trace, edits: list, attribution: str = "process") -> list:
    """`fix:FINDING_ID` turned into the edits that finding names (EditError where no such finding
    fires on this trace, or its fix has no edit); other edits as they are."""
    if not any(getattr(e, "kind", str(e).partition(":")[0]) == "fix" for e in edits):
        return list(edits)
    found = findings(trace, attribution, replay=False)
    out: list = []
    for e in edits:
        text = getattr(e, "text", str(e))
        if not text.startswith("fix:"):
            out.append(e)
            continue
        wanted = text.partition(":")[2]
        hit = next((f for f in found if fnmatch.fnmatchcase(f.id, wanted)), None)
        if hit is None:
            raise EditError(f"{text}: no finding {wanted!r} on {trace.path.name} "
                            f"(found: {', '.join(f.id for f in found) or 'none'})")
        if not hit.edits:
            raise EditError(f"{text}: the replay has no edit for this fix ({NO_EDIT.get(hit.id, 'none named')})")
        out += [dataclasses.replace(parse(x), text=f"{x} (fix:{hit.id})") for x in hit.edits]
    return out
