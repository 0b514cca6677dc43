"""An independent, deliberately plain computation of GPU idle time by cause, the CPU's lead
and the queue depth, straight from the SQLite export (SQL + Python loops over intervals),
written from the definitions in parsers/analyses/idle.py's docstring, sharing no code with it.

Slow on purpose (a sweep over every elementary piece of the window, bisect per set), so the
tests use it on the committed samples and ../shared/traces only.
"""
from __future__ import annotations

import bisect
import math
import re
import sqlite3
import statistics
from itertools import pairwise
from pathlib import Path

SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
        "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"}
OP_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def is_sync(name: str) -> bool:
    base = re.sub(r"(_v\d+)?(_ptds|_ptsz)?(_v\d+)?$", "", name)
    return base in SYNC or (base.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in base)


class Reference:
    """Everything read once per trace; windows are then computed with loops."""

    def __init__(self, path: Path):
        con = ro(path)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.ops = []  # (start, end, device, pid, corr, is_kernel)
        for t in OP_TABLES:
            if t in tables:
                for s, e, d, g, c in con.execute(f"SELECT start, end, deviceId, globalPid, correlationId FROM {t}"):
                    self.ops.append((s, e, d, g >> 24, c, t.endswith("KERNEL")))
        self.calls = []  # (start, end, tid, pid, corr, name)
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            q = """SELECT r.start, r.end, r.globalTid, r.correlationId, s.value
                   FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"""
            for s, e, g, c, name in con.execute(q):
                self.calls.append((s, e, g, g >> 24, c, name))
        con.close()
        self.call_of = {}
        for call in self.calls:
            self.call_of.setdefault((call[3], call[4]), call)
        self.launching = {(o[3], o[4]) for o in self.ops}
        self._cache: dict = {}

    def devices(self) -> list[int]:
        return sorted({o[2] for o in self.ops})

    def _sets(self, device: int, burst_gap: int):
        ops = [o for o in self.ops if o[2] == device]
        pids = {o[3] for o in ops}
        calls = [c for c in self.calls if c[3] in pids]
        busy = [(o[0], o[1]) for o in ops]
        queued = []
        for o in ops:
            call = self.call_of.get((o[3], o[4]))
            if call is not None and call[1] < o[0]:
                queued.append((call[1], o[0]))
        sync = [(c[0], c[1]) for c in calls if is_sync(c[5])]
        active = [(c[0], c[1]) for c in calls if not is_sync(c[5])]
        by_thread: dict[int, list] = {}
        for c in calls:
            by_thread.setdefault(c[2], []).append(c)
        for thread_calls in by_thread.values():
            launches = sorted((c for c in thread_calls if not is_sync(c[5]) and (c[3], c[4]) in self.launching),
                              key=lambda c: c[0])
            sync_starts = [c[0] for c in thread_calls if is_sync(c[5])]
            for a, b in pairwise(launches):
                gap_start, gap_end = a[1], b[0]
                if 0 < gap_end - gap_start <= burst_gap and not any(gap_start <= s < gap_end for s in sync_starts):
                    active.append((gap_start, gap_end))
        return busy, queued, sync, active

    def split(self, device: int, windows: list[tuple[int, int]], burst_gap: int) -> dict[str, int]:
        """busy / launch / sync / host ns summed over the windows, each part counted directly."""
        total = {"busy": 0, "launch": 0, "sync": 0, "host": 0}
        for p, q, label in self.pieces(device, windows, burst_gap):
            total[label] += q - p
        return total

    def pieces(self, device: int, windows: list[tuple[int, int]], burst_gap: int) -> list[tuple[int, int, str]]:
        """The windows cut at every boundary of the four sets, each piece with its label."""
        key = (device, burst_gap)
        if key not in self._cache:
            self._cache[key] = [union(s) for s in self._sets(device, burst_gap)]
        sets = self._cache[key]
        out = []
        for t0, t1 in windows:
            points = {t0, t1}
            for starts, ends in sets:
                for a, b in zip(starts, ends):
                    if a < t1 and b > t0:
                        points.update(p for p in (a, b) if t0 < p < t1)
            points = sorted(points)
            for p, q in pairwise(points):
                busy, queued, sync, active = (covers(s, p) for s in sets)
                label = "busy" if busy else "launch" if queued else "sync" if sync else "launch" if active else "host"
                out.append((p, q, label))
        return out

    def lead(self, device: int, windows: list[tuple[int, int]]) -> dict:
        leads = []  # per window: a kernel in two overlapping windows counts in both
        for t0, t1 in windows:
            for o in self.ops:
                if o[2] != device or not o[5]:
                    continue
                call = self.call_of.get((o[3], o[4]))
                if call is not None and t0 <= call[0] < t1:
                    leads.append(o[0] - call[0])
        if not leads:
            return {"kernels": 0, "median": None, "p95": None, "max": None}
        ordered = sorted(leads)
        return {"kernels": len(leads), "median": statistics.median(leads),
                "p95": ordered[math.ceil(0.95 * len(ordered)) - 1], "max": max(leads)}

    def queue(self, device: int, windows: list[tuple[int, int]]) -> dict:
        intervals = []
        for o in self.ops:
            if o[2] != device:
                continue
            call = self.call_of.get((o[3], o[4]))
            if call is not None and call[1] < o[0]:
                intervals.append((call[1], o[0]))
        area, span, best = 0, 0, 0
        for t0, t1 in windows:
            span += t1 - t0
            events = []
            depth_at_t0 = 0
            for a, b in intervals:
                area += max(0, min(b, t1) - max(a, t0))
                if a <= t0 < b:
                    depth_at_t0 += 1
                if t0 < a < t1:
                    events.append((a, 1))
                if t0 < b < t1:
                    events.append((b, -1))
            depth = best_here = depth_at_t0
            events.sort()
            i = 0
            while i < len(events):  # all changes at one instant, then read the depth
                t = events[i][0]
                while i < len(events) and events[i][0] == t:
                    depth += events[i][1]
                    i += 1
                best_here = max(best_here, depth)
            best = max(best, best_here)
        return {"mean": area / span if span else None, "max": best, "area": area}


def union(intervals) -> tuple[list[int], list[int]]:
    """Merged intervals as (starts, ends) lists."""
    out: list[list[int]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [a for a, _ in out], [b for _, b in out]


def covers(merged, p) -> bool:
    starts, ends = merged
    k = bisect.bisect_right(starts, p) - 1
    return k >= 0 and p < ends[k]


def gaps(busy: list[tuple[int, int]], t0: int, t1: int) -> list[tuple[int, int]]:
    """Idle stretches of [t0, t1) (the complement of merged busy intervals)."""
    out, cur = [], t0
    for a, b in busy:
        if b <= t0 or a >= t1:
            continue
        if a > cur:
            out.append((cur, a))
        cur = max(cur, b)
    if cur < t1:
        out.append((cur, t1))
    return out
