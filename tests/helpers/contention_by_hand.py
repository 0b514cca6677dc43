"""The contention factor (parsers/replay/contention.py) computed apart: kernels read with SQL, the
collectives' overlap walked interval by interval, the median ratios by the statistics module."""
from __future__ import annotations

import statistics
from collections import defaultdict

from helpers.export_sql import sql_rows
from helpers.xz_samples import plain

KERNELS_SQL = """
SELECT k.deviceId, k.start, k."end", s.value, k.gridX * k.gridY * k.gridZ, k.blockX * k.blockY * k.blockZ
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start
"""


def by_hand(path):
    """Per GPU: its collectives' intervals and its other kernels (start, end, key), in start order."""
    coll, other = defaultdict(list), defaultdict(list)
    for dev, s, e, name, grid, block in sql_rows(plain(path), KERNELS_SQL):
        if name.startswith(("ncclDevKernel", "ncclKernel")):
            coll[dev].append((s, e))
        else:
            other[dev].append((s, e, (name, grid, block)))
    return coll, other


def overlap(intervals, s, e) -> float:
    """The fraction of s..e inside the union of `intervals`, by walking them."""
    covered, reach = 0, s
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, e)
        if b > a:
            covered += b - a
            reach = b
    return covered / max(e - s, 1)


def factor_by_hand(coll, kernels) -> tuple[float, int]:
    """Over the kernels (name, grid, block) run at least 3 times fully beside a collective (90% of their
    time) and 3 times with none: the sum over them of runs beside x median beside, over the sum of runs
    beside x median alone; 1.0 below 3 such kernels; and how many there were."""
    runs = defaultdict(lambda: ([], []))
    for s, e, key in kernels:
        f = overlap(coll, s, e)
        if f >= 0.9:
            runs[key][0].append(e - s)
        elif f == 0:
            runs[key][1].append(e - s)
    both = [(a, b) for a, b in runs.values() if len(a) >= 3 and len(b) >= 3]
    if len(both) < 3:
        return 1.0, len(both)
    beside = sum(len(a) * statistics.median(a) for a, _ in both)
    alone = sum(len(a) * statistics.median(b) for a, b in both)
    return max(1.0, beside / alone), len(both)
