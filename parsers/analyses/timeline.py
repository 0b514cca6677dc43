"""The timeline as lanes of intervals, and any visible window cut into N cells.

Lanes, top to bottom: the main thread's NVTX ranges, one lane per nesting level; the CUDA API
calls of every thread that launched GPU work (launch / sync / other); per GPU and stream the
ops (kernels by family, memcpy, memset); per GPU its communication (NCCL and other collective
kernels) as a lane of its own: the stream whose kernels are all collectives, titled `comm`, or,
where they share a stream with compute kernels, an extra `comm` lane; per GPU the idle time by cause
(parsers/analyses/idle.py). In an export of several ranks (parsers.ranks) lanes say their rank (`r1`).

`Lane.cells(t0, t1, n)` says for each of n equal cells of [t0, t1) which category covered
the most of it and what fraction of it was covered. Each lane keeps, per category, the union
of its intervals with prefix sums (parsers/model/intervals.py), so a cell costs two binary searches
per category: the cost of a redraw depends on the width of the screen, not on how many
items are visible (600k kernels in view cost what 6 do).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.analyses import ranks
from nsight_tui.parsers.analyses.idle import (
    API_KINDS,
    API_LAUNCH,
    BUSY,
    CAUSES,
    HOST_BOUND,
    IdleAnalysis,
    base_api_name,
)
from nsight_tui.parsers.model.intervals import IntervalSet, pieces
from nsight_tui.parsers.read.ids import KERNEL, MEMCPY, MEMSET, OP_KINDS, PID_MASK, pid_of, tid_of
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel, display_name, path_key

NVTX, API, GPU, IDLE, MEMORY, METRIC = "nvtx", "api", "gpu", "idle", "memory", "metric"
MEMORY_CATEGORIES = ("in use",)
METRIC_CATEGORIES = ("sampled",)
# GPU-metric lanes: these metrics when the export samples them, lane title beside each
METRIC_LANES = (("SMs Active", "SM act"), ("Tensor Active", "tensor"), ("DRAM Read Bandwidth", "DRAM rd"),
                ("DRAM Write Bandwidth", "DRAM wr"))
GPU_CATEGORIES = (*families.FAMILY_KEYS, "memcpy", "memset")
COMMUNICATION = ranks.COMMUNICATION  # the family of NCCL and other collective kernels
IDLE_CATEGORIES = CAUSES[1:]  # launch-bound, sync-bound, host-bound
GAP_SCAN_CHUNK = 4096


@dataclass(frozen=True)
class Cells:
    """One lane over one window: per cell, the category that covered most of it (-1: nothing)
    and the covered fraction (0..1; overlapping items count once)."""

    dominant: np.ndarray
    fullness: np.ndarray


@dataclass(eq=False)
class Lane:
    key: str  # stable id: nvtx:<gtid>:<depth>, api:<gtid>, gpu:<device>:<stream>, comm:<device>, idle:<device>
    title: str
    kind: str  # NVTX | API | GPU | IDLE
    categories: tuple[str, ...]  # category code -> name
    start: np.ndarray  # items sorted by start
    end: np.ndarray
    cat: np.ndarray
    ref: np.ndarray  # position of the item in trace.ranges / trace.api / trace.ops (-1: none)
    device: int = -1
    stream: int = -1
    gtid: int = -1
    depth: int = -1
    _sets: list = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.start)

    @cached_property
    def union(self) -> IntervalSet:
        return IntervalSet.union(self.start, self.end)

    @cached_property
    def _run_end(self) -> np.ndarray:
        """Running maximum of ends: items before the first index whose value exceeds t all end by t."""
        return np.maximum.accumulate(self.end) if len(self.end) else self.end

    def category_sets(self) -> list[IntervalSet]:
        if not self._sets and len(self.categories):
            order = np.argsort(self.cat, kind="stable")  # start order kept within a category
            cats = self.cat[order]
            bounds = np.searchsorted(cats, np.arange(len(self.categories) + 1))
            for c in range(len(self.categories)):
                sel = order[bounds[c]:bounds[c + 1]]
                self._sets.append(IntervalSet.union(self.start[sel], self.end[sel]))
        return self._sets

    def cells(self, t0: int, t1: int, n: int) -> Cells:
        edges = cell_edges(t0, t1, n)
        width = np.maximum(np.diff(edges), 1)
        used = [(c, s) for c, s in enumerate(self.category_sets()) if len(s)]
        if not used:
            return Cells(np.full(n, -1, dtype=np.int32), np.zeros(n))
        # coverage before each edge, differenced: one search per edge and category
        cover = np.stack([np.diff(s.before(edges)) for _, s in used])
        codes = np.array([c for c, _ in used], dtype=np.int32)
        dominant = np.where(cover.max(axis=0) > 0, codes[np.argmax(cover, axis=0)], -1).astype(np.int32)
        return Cells(dominant, np.minimum(np.diff(self.union.before(edges)) / width, 1.0))

    def overlapping(self, t0: int, t1: int) -> np.ndarray:
        """Indices of the items that overlap [t0, t1)."""
        lo = int(np.searchsorted(self._run_end, t0, side="right"))
        hi = int(np.searchsorted(self.start, t1, side="left"))
        idx = np.arange(lo, max(lo, hi))
        return idx[self.end[idx] > t0]

    def item_in(self, t0: int, t1: int) -> int | None:
        """The item covering most of [t0, t1) (the latest-starting one at a tie, the innermost)."""
        idx = self.overlapping(t0, t1)
        if len(idx) == 0:
            return None
        inside = np.minimum(self.end[idx], t1) - np.maximum(self.start[idx], t0)
        best = np.flatnonzero(inside == inside.max())
        return int(idx[best[-1]])

    def spans(self, t0: int, t1: int, n: int, min_cells: int) -> list[tuple[int, int, int]]:
        """(first cell, last cell + 1, item) for the items at least `min_cells` wide on screen."""
        idx = self.overlapping(t0, t1)
        if len(idx) == 0:
            return []
        scale = n / max(t1 - t0, 1)
        c0 = np.floor((np.maximum(self.start[idx], t0) - t0) * scale).astype(np.int64)
        c1 = np.ceil((np.minimum(self.end[idx], t1) - t0) * scale).astype(np.int64)
        wide = (c1 - c0) >= min_cells
        return list(zip(c0[wide].tolist(), np.minimum(c1[wide], n).tolist(), idx[wide].tolist()))


@dataclass(eq=False)
class MemoryLane(Lane):
    """Device memory in use on one GPU (nsys memory events, analyses.memory): item i is the stretch
    from event i to the next, holding `held[i]` bytes; a cell's height is the most held in it over
    the run's peak on that GPU (a bar chart of memory, not a coverage)."""

    held: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    peak: int = 1

    def cells(self, t0: int, t1: int, n: int) -> Cells:
        edges = cell_edges(t0, t1, n)
        first = np.searchsorted(self.start, edges[:-1], side="right") - 1  # the item open at the cell's start
        last = np.searchsorted(self.start, edges[1:], side="left") - 1  # the last item starting in it
        level = np.zeros(n)
        for k in range(n):
            lo, hi = max(int(first[k]), 0), int(last[k])
            if hi >= lo and self.end[hi] > edges[k]:  # items tile [first start, the trace's end)
                level[k] = self.held[lo:hi + 1].max()
        return Cells(np.where(level > 0, 0, -1).astype(np.int32), np.minimum(level / max(self.peak, 1), 1.0))


@dataclass(eq=False)
class MetricLane(Lane):
    """One sampled GPU metric (nsys --gpu-metrics-devices, read.gpu_metrics): item i is sample i's
    period [t_i, t_i+1) holding `value[i]` (a percentage of the unit's peak); a cell's height is the
    mean of the samples whose period starts in it (the one open at its start when none does)."""

    value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    metric: str = ""  # as nsys names it, unit in brackets
    rate_hz: float | None = None

    def cells(self, t0: int, t1: int, n: int) -> Cells:
        edges = cell_edges(t0, t1, n)
        first = np.searchsorted(self.start, edges[:-1], side="left")  # first sample starting in the cell
        last = np.searchsorted(self.start, edges[1:], side="left") - 1  # last sample starting in it
        open_at = np.searchsorted(self.start, edges[:-1], side="right") - 1  # the sample open at its start
        lo = np.where(last >= first, first, open_at)
        hi = np.where(last >= first, last, open_at)
        total = np.concatenate([[0.0], np.cumsum(self.value)])
        ok = (lo >= 0) & (hi >= lo) & (self.end[np.clip(hi, 0, max(len(self.end) - 1, 0))] > edges[:-1]) \
            if len(self.end) else np.zeros(n, bool)
        mean = np.where(ok, (total[np.clip(hi, 0, None) + 1] - total[np.clip(lo, 0, None)])
                        / np.maximum(hi - lo + 1, 1), 0.0)
        return Cells(np.where(ok & (mean > 0), 0, -1).astype(np.int32), np.clip(mean / 100.0, 0.0, 1.0))


def cell_edges(t0: int, t1: int, n: int) -> np.ndarray:
    """n + 1 integer cell boundaries from t0 to t1 (cells differ by at most 1 ns)."""
    return t0 + (np.arange(n + 1, dtype=np.int64) * (int(t1) - int(t0))) // n


@dataclass(frozen=True)
class Item:
    """What is under the cursor: one range, API call, GPU op or idle stretch."""

    lane: Lane
    index: int  # in the lane
    kind: str  # "range" | "api" | "kernel" | "memcpy" | "memset" | "graph" | cause
    name: str
    start_ns: int
    end_ns: int
    ref: int  # position in trace.ranges / api / ops (-1 for idle)
    corr: int | None = None
    gpid: int | None = None
    lead_ns: int | None = None  # kernels: GPU start - launching call start
    call_ref: int | None = None  # kernels: the launching call's position in trace.api
    call_name: str = ""
    call_thread: str = ""

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


class Timeline:
    """Every lane of one trace; build in a worker (a second or so at 600k kernels)."""

    def __init__(self, trace: Trace, model: RangeModel, idle: IdleAnalysis):
        trace = model.trace  # its ranges are the model's: the export's and any inferred ones
        self.trace, self.model, self.idle = trace, model, idle
        self._rank_of_device, self._rank_of_process = _rank_numbers(trace)
        self.range_names = trace.range_names.objects
        self._cache: dict = {}
        self.lanes: list[Lane] = [*self._nvtx_lanes(), *self._api_lanes(), *self._gpu_lanes(), *self._memory_lanes(),
                                 *self._metric_lanes()]
        for lane in self.lanes:  # the per-category unions, here (a worker), not in the first frame
            lane.category_sets()
            lane.union  # noqa: B018
        for d in idle.devices:
            self._gaps(d)
        starts = [lane.start[:1] for lane in self.lanes if len(lane)]
        ends = [lane._run_end[-1:] for lane in self.lanes if len(lane)]
        self.t_min = int(np.concatenate(starts).min()) if starts else 0
        self.t_max = int(np.concatenate(ends).max()) if ends else 1
        if self.t_max <= self.t_min:
            self.t_max = self.t_min + 1

    # -- lanes ------------------------------------------------------------------------------
    def _nvtx_lanes(self) -> list[Lane]:
        m, t = self.model, self.trace
        if m.n == 0:
            return []
        codes, uniques = t.range_names.codes, t.range_names.values  # path keys per distinct name
        keys = np.array([path_key(display_name(n)) for n in uniques], dtype=object)[codes]
        out = []
        mains = sorted(m.main_threads.values())
        if not mains:  # no thread qualifies as main: the one with the most ranges
            gtids, counts = np.unique(m.r_gtid, return_counts=True)
            mains = [int(gtids[np.argmax(counts)])]
        for g in mains:
            mine = m.r_gtid == g
            for depth in np.unique(m.depth[mine]).tolist():
                idx = np.flatnonzero(mine & (m.depth == depth))
                idx = idx[np.argsort(m.r_start[idx], kind="stable")]
                cats, codes = np.unique(keys[idx], return_inverse=True)
                rank = self._rank_of_process.get(g & PID_MASK)
                prefix = "" if len(mains) < 2 else f"r{rank} " if rank is not None else \
                    f"p{t.processes.get(g & PID_MASK, (pid_of(g),))[0]} "
                out.append(Lane(f"nvtx:{g}:{depth}", f"{prefix}NVTX {depth}", NVTX, tuple(cats),
                                m.r_start[idx], m.r_end[idx], codes.astype(np.int32), idx, gtid=g, depth=depth))
        return out

    def _api_lanes(self) -> list[Lane]:
        api = self.trace.api
        if api.empty:
            return []
        kind = self.idle.api_kind
        gtid = api["gtid"].to_numpy()
        launchers = np.unique(gtid[kind == API_LAUNCH])
        mains = set(self.model.main_threads.values())
        order = sorted(launchers.tolist(), key=lambda g: (g & PID_MASK, g not in mains, g))
        start, end = api["start"].to_numpy(), api["end"].to_numpy()
        out = []
        for g in order:
            idx = np.flatnonzero(gtid == g)
            idx = idx[np.argsort(start[idx], kind="stable")]
            title = self.trace.threads.get(g) or f"tid {tid_of(g)}"
            out.append(Lane(f"api:{g}", f"{title} {tid_of(g)}", API, API_KINDS, start[idx], end[idx],
                            kind[idx].astype(np.int32), idx, gtid=g))
        return out

    def _gpu_lanes(self) -> list[Lane]:
        ops = self.trace.ops
        if ops.empty:
            return []
        fam_code = {k: i for i, k in enumerate(GPU_CATEGORIES)}
        comm_code = fam_code[COMMUNICATION]
        name_cat = np.array([fam_code[f] for f in families.name_families(self.trace)], dtype=np.int32)
        kind = ops["kind"].to_numpy()
        cat = np.where(kind == MEMCPY, fam_code["memcpy"],
                       np.where(kind == MEMSET, fam_code["memset"], name_cat[ops["name"].to_numpy()]))
        dev, stream = ops["device"].to_numpy(), ops["stream"].to_numpy()
        start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
        # one sort by (device, stream, start); each lane is then a contiguous slice of it
        key = (dev.astype(np.int64) << 32) | (stream.astype(np.int64) & 0xFFFFFFFF)
        order = np.lexsort((start, key))
        keys = key[order]
        bounds = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1], [True])))
        out: list[Lane] = []
        shared_comm: list[np.ndarray] = []  # this device's communication ops on streams shared with compute
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            sel = order[a:b]
            d, s = int(dev[sel[0]]), int(stream[sel[0]])
            if out and out[-1].device != d:
                out += self._device_end(out[-1].device, shared_comm, start, end, cat)
                shared_comm = []
            # the communication stream: its kernels are all collectives (copies may run there too)
            is_comm = cat[sel] == comm_code
            computes = bool(((kind[sel] == KERNEL) & ~is_comm).any())
            only_comm = bool(is_comm.any()) and not computes
            if is_comm.any() and computes:
                shared_comm.append(sel[is_comm])
            title = f"{self._rank_prefix(d)}GPU{d} " + ("comm" if only_comm else f"s{s}")
            out.append(Lane(f"gpu:{d}:{s}", title, GPU, GPU_CATEGORIES, start[sel], end[sel],
                            cat[sel].astype(np.int32), sel, device=d, stream=s))
        out += self._device_end(out[-1].device, shared_comm, start, end, cat)
        return out

    def _rank_prefix(self, device: int) -> str:
        rank = self._rank_of_device.get(device)
        return "" if rank is None else f"r{rank} "

    def _device_end(self, d: int, shared_comm: list[np.ndarray], start, end, cat) -> list[Lane]:
        """After a device's stream lanes: its communication where it shares streams with
        compute (the same ops again, in a lane of their own), then its idle lane."""
        out = []
        if shared_comm:
            sel = np.concatenate(shared_comm)
            sel = sel[np.argsort(start[sel], kind="stable")]
            out.append(Lane(f"comm:{d}", f"{self._rank_prefix(d)}GPU{d} comm", GPU, GPU_CATEGORIES, start[sel],
                            end[sel], cat[sel].astype(np.int32), sel, device=d))
        return [*out, self._idle_lane(d)]

    def _idle_lane(self, d: int) -> Lane:
        """Idle stretches by cause, from the trace's first to its last event (before and after
        the device's own activity the GPU is idle and nothing happens: host-bound)."""
        dev = self.idle.device(d)
        lo, hi = _bounds(self.trace)
        edges = np.concatenate(([lo], dev.edges, [max(hi, int(dev.edges[-1]) if len(dev.edges) else hi)]))
        labels = np.concatenate(([HOST_BOUND], dev.labels, [HOST_BOUND])).astype(np.int8)
        keep = np.ones(len(edges), dtype=bool)
        keep[:-1] = edges[1:] > edges[:-1]  # drop empty pieces at the ends
        edges, labels = edges[keep], labels[keep]
        idx = np.flatnonzero(labels[:-1] != BUSY)
        lane = Lane(f"idle:{d}", f"{self._rank_prefix(d)}GPU{d} idle", IDLE, IDLE_CATEGORIES, edges[idx], edges[idx + 1],
                    (labels[idx] - 1).astype(np.int32), np.full(len(idx), -1, dtype=np.int64), device=d)
        # the analysis's own sets: the lane shows exactly what the idle numbers count
        lane._sets = [dev.launch, dev.sync, pieces(edges, labels, HOST_BOUND)]
        return lane

    def _memory_lanes(self) -> list[Lane]:
        """One lane per GPU with memory events (nsys --cuda-memory-usage=true): bytes in use."""
        gm = self.trace.gpu_memory
        if not gm.present or not len(gm.events):
            return []
        from nsight_tui.parsers.analyses.memory import signed_bytes  # a sibling analysis: its results only

        ev = gm.events
        out: list[Lane] = []
        hi = max(_bounds(self.trace)[1], int(ev["start"].iloc[-1]) + 1)
        for d in sorted(set(ev["device"].tolist())):
            sel = ev[ev["device"] == d]
            held = np.cumsum(signed_bytes(sel))
            start = sel["start"].to_numpy(np.int64)
            end = np.concatenate((start[1:], [hi]))
            keep = end > start  # events at the same ns: the last one's level stands
            idx = np.flatnonzero(keep)
            out.append(MemoryLane(f"memory:{d}", f"{self._rank_prefix(d)}GPU{d} mem", MEMORY, MEMORY_CATEGORIES,
                                  start[idx], end[idx], np.zeros(len(idx), np.int32), np.full(len(idx), -1, np.int64),
                                  device=d, held=held[idx], peak=int(held.max()) if len(held) else 1))
        return out

    def _metric_lanes(self) -> list[Lane]:
        """One lane per sampled metric of METRIC_LANES (nsys --gpu-metrics-devices), over the trace's
        own span (nsys samples from its session's start, seconds before the first kernel)."""
        gm = self.trace.gpu_metrics
        if not gm.present:
            return []
        lo, hi = _bounds(self.trace)
        out: list[Lane] = []
        for series in gm.series:
            t = series.times_ns
            end_all = np.concatenate((t[1:], [t[-1] + (t[-1] - t[-2] if len(t) > 1 else 1)]))
            keep = np.flatnonzero((end_all > lo) & (t < hi))
            for name, title in METRIC_LANES:
                metric = series.find(name)
                if metric is None:
                    continue
                value = series.column(metric)[keep]
                fine = ~np.isnan(value)
                idx = keep[fine]
                out.append(MetricLane(f"metric:{series.type_id}:{name}", f"GPU {title}", METRIC, METRIC_CATEGORIES,
                                      t[idx], end_all[idx], np.zeros(len(idx), np.int32), np.full(len(idx), -1, np.int64),
                                      value=value[fine], metric=metric.full_name, rate_hz=series.rate_hz))
        return out

    # -- queries ----------------------------------------------------------------------------
    def lane_index(self, key: str) -> int | None:
        return next((i for i, lane in enumerate(self.lanes) if lane.key == key), None)

    def cells(self, t0: int, t1: int, n: int, lanes: list[int] | None = None) -> list[Cells]:
        chosen = range(len(self.lanes)) if lanes is None else lanes
        return [self.lanes[i].cells(t0, t1, n) for i in chosen]

    def item(self, lane_index: int, t0: int, t1: int) -> Item | None:
        """The item of a lane that covers most of [t0, t1) (the cursor's cell)."""
        lane = self.lanes[lane_index]
        i = lane.item_in(t0, t1)
        return None if i is None else self.describe(lane, i)

    @cached_property
    def _cols(self) -> dict[str, np.ndarray]:
        """The columns describe() reads, as numpy arrays (pandas' per-cell access costs µs each)."""
        t = self.trace
        cols = {f"op_{c}": t.ops[c].to_numpy() for c in ("kind", "api", "name", "corr", "gpid")}
        cols.update({f"api_{c}": t.api[c].to_numpy() for c in ("start", "gtid", "name", "corr")})
        return cols

    def describe(self, lane: Lane, i: int) -> Item:
        t, c = self.trace, self._cols
        ref = int(lane.ref[i])
        start, end = int(lane.start[i]), int(lane.end[i])
        if lane.kind == NVTX:
            return Item(lane, i, "range", display_name(self.range_names[ref]), start, end, ref)
        if lane.kind == API:
            name = base_api_name(t.api_names[int(c["api_name"][ref])])
            return Item(lane, i, "api", name, start, end, ref, corr=int(c["api_corr"][ref]),
                        gpid=int(c["api_gtid"][ref]) & PID_MASK)
        if lane.kind == IDLE:
            cause = lane.categories[int(lane.cat[i])]
            return Item(lane, i, cause, cause, start, end, -1)
        if isinstance(lane, MemoryLane):
            held = int(lane.held[i])
            return Item(lane, i, MEMORY, f"{held / 2**30:.2f} GiB in use ({held:,} B, "
                        f"{held / max(lane.peak, 1):.0%} of the peak)", start, end, -1)
        if isinstance(lane, MetricLane):
            rate = f", {lane.rate_hz:,.0f} samples a second" if lane.rate_hz else ""
            return Item(lane, i, METRIC, f"{lane.metric} {float(lane.value[i]):.0f} (sampled{rate})", start, end, -1)
        kind, call = int(c["op_kind"][ref]), int(c["op_api"][ref])
        item = Item(lane, i, OP_KINDS[kind], t.op_names[int(c["op_name"][ref])], start, end,
                    ref, corr=int(c["op_corr"][ref]), gpid=int(c["op_gpid"][ref]))
        if call >= 0:
            c_start = int(c["api_start"][call])
            item = replace(item, lead_ns=start - c_start if kind == KERNEL else None, call_ref=call,
                           call_name=base_api_name(t.api_names[int(c["api_name"][call])]),
                           call_thread=t.thread_label(int(c["api_gtid"][call])))
        return item

    def op_lane(self, op: int) -> tuple[int, int] | None:
        """(lane index, item index) of a GPU op."""
        ops = self.trace.ops
        i = self.lane_index(f"gpu:{int(ops['device'].iat[op])}:{int(ops['stream'].iat[op])}")
        if i is None:
            return None
        hit = np.flatnonzero(self.lanes[i].ref == op)
        return (i, int(hit[0])) if len(hit) else None

    def api_lane(self, call: int) -> tuple[int, int] | None:
        i = self.lane_index(f"api:{int(self.trace.api['gtid'].iat[call])}")
        if i is None:
            return None
        lane = self.lanes[i]
        k = int(np.searchsorted(lane.start, int(self.trace.api["start"].iat[call]), side="left"))
        hit = np.flatnonzero(lane.ref[k:k + 64] == call)
        return (i, k + int(hit[0])) if len(hit) else None

    def next_gap(self, device: int, t: int, min_ns: int, forward: bool = True) -> tuple[int, int] | None:
        """The first idle stretch of at least `min_ns` on `device` starting after t (forward)
        or ending before t (backward)."""
        gs, ge, length = self._gaps(device)
        chunk = GAP_SCAN_CHUNK  # scan outward from t a block at a time: a press costs the gaps it passes
        if forward:
            k = int(np.searchsorted(gs, t, side="right"))
            while k < len(gs):
                hit = np.flatnonzero(length[k:k + chunk] >= min_ns)
                if len(hit):
                    return int(gs[k + hit[0]]), int(ge[k + hit[0]])
                k += chunk
            return None
        k = int(np.searchsorted(ge, t, side="left"))  # gaps [0, k) end before t
        while k > 0:
            lo = max(0, k - chunk)
            hit = np.flatnonzero(length[lo:k] >= min_ns)
            if len(hit):
                return int(gs[lo + hit[-1]]), int(ge[lo + hit[-1]])
            k = lo
        return None

    def _gaps(self, device: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The device's idle stretches between busy blocks: starts, ends, lengths (cached)."""
        key = ("gaps", device)
        if key not in self._cache:
            busy = self.idle.device(device).busy
            gs, ge = busy.end[:-1], busy.start[1:]
            self._cache[key] = (gs, ge, ge - gs)
        return self._cache[key]

    def window_table(self, t0: int, t1: int) -> pd.DataFrame:
        """Every range, API call and GPU op overlapping [t0, t1), lane by lane in start order:
        lane, kind, name, start, duration, correlation ID and (kernels) CPU lead, built with
        array lookups per lane (an export of a whole 600k-kernel trace stays linear)."""
        t, c = self.trace, self._cols
        api_base = np.array([base_api_name(n) for n in t.api_names] + [""], dtype=object)
        op_names = np.array(t.op_names + [""], dtype=object)
        parts = []
        for lane in self.lanes:
            if lane.kind == IDLE:
                continue
            idx = lane.overlapping(t0, t1)
            ref = lane.ref[idx]
            n = len(idx)
            corr = np.full(n, None, dtype=object)
            lead = np.full(n, None, dtype=object)
            if lane.kind == NVTX:
                kind = np.full(n, "range", dtype=object)
                # per distinct name, by code (a fixed-width copy of every row's name held 10 MB names n times)
                names = self.trace.range_names
                uniq, inv = np.unique(names.codes[ref], return_inverse=True)
                name = np.array([display_name(names.values[u]) for u in uniq.tolist()] + [""],
                                dtype=object)[:-1][inv.reshape(-1)] if n else np.zeros(0, object)
            elif lane.kind == API:
                kind = np.full(n, "api", dtype=object)
                name = api_base[c["api_name"][ref]]
                corr[:] = c["api_corr"][ref]
            else:
                k = c["op_kind"][ref]
                kind = np.array(OP_KINDS, dtype=object)[k]
                name = op_names[c["op_name"][ref]]
                corr[:] = c["op_corr"][ref]
                call = c["op_api"][ref]
                has = (call >= 0) & (k == KERNEL)
                if len(c["api_start"]):
                    lead[has] = (lane.start[idx] - c["api_start"][np.where(has, call, 0)])[has]
            parts.append(pd.DataFrame({"lane": lane.title, "kind": kind, "name": name, "start": lane.start[idx],
                                       "duration": lane.end[idx] - lane.start[idx], "corr": corr, "lead": lead}))
        cols = ["lane", "kind", "name", "start", "duration", "corr", "lead"]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def _rank_numbers(trace: Trace) -> tuple[dict[int, int], dict[int, int]]:
    """device -> rank and process (gpid) -> rank, where the export has several ranks and the
    device (the process) belongs to exactly one of them; empty otherwise (titles stay plain)."""
    found = ranks.find_ranks(trace)
    if len(found) < 2:
        return {}, {}
    by_device: dict[int, list[int]] = {}
    by_process: dict[int, list[int]] = {}
    for r in found:
        if r.rank is not None:
            by_device.setdefault(r.device, []).append(r.rank)
            by_process.setdefault(r.gpid, []).append(r.rank)
    return ({d: rs[0] for d, rs in by_device.items() if len(rs) == 1},
            {g: rs[0] for g, rs in by_process.items() if len(rs) == 1})


def _bounds(trace: Trace) -> tuple[int, int]:
    """First start and last end over GPU ops, API calls and NVTX ranges."""
    lo, hi = [], []
    for frame in (trace.ops, trace.api, trace.ranges):
        if len(frame):
            lo.append(int(frame["start"].min()))
            hi.append(int(frame["end"].max()))
    return (min(lo), max(hi)) if lo else (0, 1)


def timeline(trace: Trace, model: RangeModel, idle: IdleAnalysis) -> Timeline:
    """The trace's Timeline under this model (built once, then cached on the trace)."""
    key = ("timeline", model.mode, idle.burst_gap_ns)
    if key not in trace.derived:
        trace.derived[key] = Timeline(trace, model, idle)
    return trace.derived[key]
