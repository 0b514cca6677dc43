"""An annotated export's kernel sequence and its own ranges as a small oracle, for a capture too large to
commit whole (a torch.compile'd model's first step holds its compilation's kernels): plain sqlite3 over the
export, no nsight_tui.

    python3 devruns/step_oracle.py EXPORT.sqlite STEP OUT.json.xz [--depth N]

STEP `-`: an export without NVTX (a Trainer's, its clock beside it): the sequence alone, no iterations or phases.

OUT holds {"source", "names": the kernels' demangled names (a table), "sequence": every kernel of the process
with the most, in launch order (call start, then kernel start), as indices into names; "iterations": each
warmup_N/step_N range as [name, its first kernel's index in the sequence, its kernels]; "step": STEP;
"phases": the forward/backward/optimizer ranges inside STEP in time order as [name, kernels] (the step's
kernels before its first range counted with it, as an inferred iteration gives them to the forward they
precede); "depth": the model's layers, from its command line}. A kernel is in a range when its launch call
starts inside it."""
from __future__ import annotations

import argparse
import json
import lzma
import re
import sqlite3
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("export")
    p.add_argument("step")
    p.add_argument("out")
    p.add_argument("--depth", type=int, default=0, help="the model's layers, from its command line")
    a = p.parse_args()
    con = sqlite3.connect(f"{Path(a.export).resolve().as_uri()}?mode=ro", uri=True)
    ((pid,),) = con.execute("""SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY globalPid
        ORDER BY count(*) DESC LIMIT 1""").fetchall()
    kernels = con.execute("""SELECT r.start, n.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds n ON n.id = k.demangledName WHERE k.globalPid = ? ORDER BY r.start, k.start""", (pid,)).fetchall()
    has_nvtx = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()
    ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start""").fetchall() if has_nvtx else []
    names = sorted({n for _, n in kernels})
    index = {n: i for i, n in enumerate(names)}
    starts = [t for t, _ in kernels]

    def held(s: int, e: int) -> tuple[int, int]:
        inside = [i for i, t in enumerate(starts) if s <= t <= e]
        return (inside[0] if inside else -1), len(inside)

    iterations = [[name, *held(s, e)] for name, s, e in ranges if re.fullmatch(r"(warmup|step)_\d+", name)]
    phases: list[list] = []
    if a.step != "-":
        ((s0, s1),) = [(s, e) for name, s, e in ranges if name == a.step]
        phases = [[name, held(s, e)[1]] for name, s, e in ranges
                  if name in ("forward", "backward", "optimizer") and s0 <= s <= s1]
        phases[0][1] += held(s0, s1)[1] - sum(c for _, c in phases)
    doc = {"source": Path(a.export).name, "names": names, "sequence": [index[n] for _, n in kernels],
           "iterations": iterations, "step": a.step, "phases": phases, "depth": a.depth}
    tmp = Path(a.out + ".partial")
    with lzma.open(tmp, "wt", preset=9) as f:
        json.dump(doc, f, separators=(",", ":"))
    tmp.rename(a.out)
    print(f"{a.out}: {len(kernels)} kernels, {len(iterations)} iterations, {a.step}'s phases {phases}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
