"""One step of an annotated export as a small oracle: its kernels' names in launch order and the kernels
each of its own phase ranges holds (plain sqlite3 over the export, no nsight_tui), for a capture too large
to commit whole (a torch.compile'd model's first step holds its compilation's kernels).

    python3 devruns/step_oracle.py EXPORT.sqlite STEP OUT.json.xz [--depth N]

OUT holds {"source", "step", "names": [...], "phases": [[name, kernels], ...], "depth"}: the phases in
time order (forward/backward/optimizer ranges inside STEP; the step's kernels before its first range
counted with it, as an inferred iteration gives them to the forward they precede)."""
from __future__ import annotations

import argparse
import json
import lzma
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
    ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start""").fetchall()
    ((s0, s1),) = [(s, e) for name, s, e in ranges if name == a.step]
    kernels = con.execute("""SELECT r.start, n.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds n ON n.id = k.demangledName WHERE r.start BETWEEN ? AND ? ORDER BY r.start, k.start""",
                          (s0, s1)).fetchall()
    phases = [[name, sum(s <= t <= e for t, _ in kernels)] for name, s, e in ranges
              if name in ("forward", "backward", "optimizer") and s0 <= s <= s1]
    phases[0][1] += len(kernels) - sum(c for _, c in phases)
    doc = {"source": Path(a.export).name, "step": a.step, "names": [n for _, n in kernels], "phases": phases,
           "depth": a.depth}
    tmp = Path(a.out + ".partial")
    with lzma.open(tmp, "wt") as f:
        json.dump(doc, f)
    tmp.rename(a.out)
    print(f"{a.out}: {len(kernels)} kernels, phases {phases}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
