"""When the GPU sat idle, and why: busy time, idle time split by cause, the CPU's lead over
the GPU and the depth of the launch queue, for any time window (a range instance, a phase,
a step, what the timeline shows).

Definitions (the README's "GPU idle time by cause" repeats them). Per device d and window
W = [t0, t1), every nanosecond of W is exactly one of:

* **busy**: some GPU operation on d (kernel, memcpy, memset; any stream, any process) runs.
  busy = |W ∩ union of the op intervals on d|.
* **launch-bound**: d is idle and either
  (a) an op for d has been issued and has not started: its launching call has returned
      and the op has not begun (the launch is in flight: launch latency, or the gap between
      ops already queued); or
  (b) no op is waiting, no synchronising call is in progress (see sync-bound), and a CPU
      thread is issuing work: inside any non-synchronising CUDA API call, or between two
      consecutive launch calls of one thread that are at most `burst_gap_ns` apart with no
      synchronising call between them (the framework's dispatch overhead between launches).
* **sync-bound**: d is idle, no op is waiting, and a CPU thread sits in a synchronising
  call: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and
  cudaThreadSynchronize, cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize) or a
  blocking copy (a cudaMemcpy*/cuMemcpy* call without `Async` in its name). The GPU drained
  the queue and waits for that thread to come back and issue more.
* **host-bound**: d is idle and none of the above: no CUDA API activity on any thread, no
  launch burst going on (Python, data loading, the optimizer's CPU work, I/O).

So busy + launch-bound + sync-bound + host-bound = t1 - t0 exactly (integers, ns).

"A CPU thread" means a thread of a process that launched work on d (in multi-process
traces, another process's calls do not explain this device's idle time). A launch call is a
non-synchronising call that started at least one GPU operation (cudaLaunchKernel,
cudaGraphLaunch, cudaMemcpyAsync, cuLaunchKernel, ...).

The CPU's lead of a kernel = its start on the GPU - the start of its launching call (the
launch latency when the queue is empty; the time it waited behind other work otherwise).
A window's lead statistics are over the kernels on d whose launching call started in W:
median (mean of the middle two for an even count), p95 (nearest rank: the ceil(0.95 n)-th
smallest) and max. Graph kernels share their cudaGraphLaunch call.

Queue depth at time t = the ops for d whose launching call has returned and that have not
started at t. Its mean over W is the time average (integral / |W|), its max the largest
value taken inside W. Ops with no launching call in the export count for busy only.

Everything is computed once per device for the whole trace as sorted interval sets with
prefix sums (parsers/model/intervals.py); a window is then a few binary searches, so every range
of a 600k-kernel trace costs milliseconds, and no Python loop runs per op.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from nsight_tui.parsers.model.intervals import IntervalSet, label_segments, pieces
from nsight_tui.parsers.model.inferred import with_inferred_ranges
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK, api_display_name
from nsight_tui.parsers.read.load import Trace

BUSY, LAUNCH_BOUND, SYNC_BOUND, HOST_BOUND = 0, 1, 2, 3
CAUSES = ("busy", "launch-bound", "sync-bound", "host-bound")

API_LAUNCH, API_SYNC, API_OTHER = 0, 1, 2
API_KINDS = ("launch", "sync", "other")

BURST_GAP_NS = 100_000  # launch calls closer than this on one thread form one burst

SYNC_NAMES = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
})
_SUFFIX = re.compile(r"(_v\d+)?(_ptds|_ptsz)?(_v\d+)?$")

DEFINITIONS = {
    "busy": "a GPU op (kernel, memcpy, memset, or a CUDA graph traced whole) runs on the device",
    "launch-bound": "idle while an issued op has not started yet (launch in flight), or while a CPU "
                    "thread is in a non-synchronising CUDA call or between launch calls at most "
                    "burst_gap_ns apart",
    "sync-bound": "idle, nothing queued, a CPU thread in cudaDeviceSynchronize / cudaStreamSynchronize / "
                  "cudaEventSynchronize / a blocking cudaMemcpy",
    "host-bound": "idle, nothing queued, no CUDA API activity and no launch burst on any CPU thread",
    "lead": "kernel start on the GPU - start of its launching CUDA call; kernels whose call started "
            "in the window; median, p95 (nearest rank), max",
    "queue": "ops whose launching call returned and that have not started; time-weighted mean and max "
             "over the window",
}


def base_api_name(name: str) -> str:
    """cudaStreamSynchronize_v3020 / cudaMemcpy_ptds_v7000 -> cudaStreamSynchronize / cudaMemcpy."""
    return _SUFFIX.sub("", api_display_name(name))


def is_sync_name(name: str) -> bool:
    base = base_api_name(name)
    return base in SYNC_NAMES or (base.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in base)


def api_kinds(trace: Trace) -> np.ndarray:
    """Kind of each CUDA API call: API_LAUNCH, API_SYNC or API_OTHER (see the module doc)."""
    api = trace.api
    if api.empty:
        return np.zeros(0, dtype=np.int8)
    sync_code = np.array([is_sync_name(n) for n in trace.api_names] + [False], dtype=bool)
    names = api["name"].to_numpy()
    kinds = np.where(sync_code[names], API_SYNC, API_OTHER).astype(np.int8)
    launching = trace.ops["api"].to_numpy()
    launching = launching[launching >= 0]
    launched = np.zeros(len(api), dtype=bool)
    launched[launching] = True
    kinds[launched & (kinds != API_SYNC)] = API_LAUNCH
    return kinds


# -- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class IdleSplit:
    """One device over one or more windows: the four parts add up to window_ns."""

    device: int
    window_ns: int
    busy_ns: int
    launch_bound_ns: int
    sync_bound_ns: int
    host_bound_ns: int

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns

    def parts_ns(self) -> dict[str, int]:
        return {"busy": self.busy_ns, "launch-bound": self.launch_bound_ns, "sync-bound": self.sync_bound_ns,
                "host-bound": self.host_bound_ns}


@dataclass(frozen=True)
class LeadStats:
    kernels: int
    median_ns: float | None
    p95_ns: int | None
    max_ns: int | None


@dataclass(frozen=True)
class QueueStats:
    mean_depth: float | None
    max_depth: int | None
    depth_ns: int  # integral of the depth over the windows (ops x ns): sums across windows


@dataclass(frozen=True)
class ThreadActivity:
    """What one CPU thread did during a gap."""

    gtid: int
    thread: str
    api_calls: list[tuple[str, int, int]]  # (call name, calls overlapping the gap, ns of the gap inside them)
    nvtx_open: list[str]  # ranges open at the gap's start, outermost first
    nvtx_started: list[str]  # ranges that began during the gap (first few)


@dataclass(frozen=True)
class Gap:
    """A maximal stretch of idle time on one device (clipped to the window)."""

    device: int
    start_ns: int
    end_ns: int
    launch_bound_ns: int
    sync_bound_ns: int
    host_bound_ns: int
    threads: list[ThreadActivity] = field(default_factory=list)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def cause(self) -> str:
        """The cause holding most of the gap."""
        parts = {"launch-bound": self.launch_bound_ns, "sync-bound": self.sync_bound_ns,
                 "host-bound": self.host_bound_ns}
        return max(parts, key=lambda k: parts[k])


@dataclass(frozen=True)
class DeviceWindowIdle:
    split: IdleSplit
    lead: LeadStats
    queue: QueueStats

    @property
    def device(self) -> int:
        return self.split.device


@dataclass(frozen=True)
class WindowIdle:
    """Busy/idle by cause, lead and queue per device, and the longest gaps, over windows."""

    windows: int
    span_ns: int
    burst_gap_ns: int
    devices: list[DeviceWindowIdle]
    gaps: list[Gap]


# -- per device, for the whole trace ------------------------------------------------------------
@dataclass
class DeviceIdle:
    """The whole trace's time line for one device, labelled once; windows are searches."""

    device: int
    api_rows: np.ndarray  # positions in trace.api of the calls of this device's processes
    busy: IntervalSet
    launch: IntervalSet  # idle and launch-bound
    sync: IntervalSet  # idle and sync-bound
    edges: np.ndarray  # the labelled cut: piece i = [edges[i], edges[i+1]) has labels[i]
    labels: np.ndarray
    lead_call_start: np.ndarray  # kernels on the device with a launching call, by call start
    lead_ns: np.ndarray
    lead_op: np.ndarray
    queue_t: np.ndarray  # times where the queue depth changes; depth after each; integral before each
    queue_depth: np.ndarray
    queue_integral: np.ndarray

    def split(self, t0, t1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(busy, launch-bound, sync-bound, host-bound) ns per window (arrays broadcast)."""
        t0 = np.asarray(t0, dtype=np.int64)
        t1 = np.asarray(t1, dtype=np.int64)
        busy = self.busy.measure(t0, t1)
        launch = self.launch.measure(t0, t1)
        sync = self.sync.measure(t0, t1)
        return busy, launch, sync, (t1 - t0) - busy - launch - sync

    def lead_slice(self, t0: int, t1: int) -> slice:
        return slice(int(np.searchsorted(self.lead_call_start, t0, side="left")),
                     int(np.searchsorted(self.lead_call_start, t1, side="left")))

    def queue_at(self, t) -> np.ndarray:
        """Depth at t (after every change at or before t)."""
        k = np.searchsorted(self.queue_t, np.asarray(t, dtype=np.int64), side="right") - 1
        return np.where(k >= 0, self.queue_depth[np.maximum(k, 0)] if len(self.queue_depth) else 0, 0)

    def queue_integral_before(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        if len(self.queue_t) == 0:
            return np.zeros_like(t)
        k = np.searchsorted(self.queue_t, t, side="right") - 1
        safe = np.maximum(k, 0)
        return np.where(k >= 0, self.queue_integral[safe] + self.queue_depth[safe] * (t - self.queue_t[safe]), 0)

    def queue_max(self, t0: int, t1: int) -> int:
        lo = int(np.searchsorted(self.queue_t, t0, side="right"))
        hi = int(np.searchsorted(self.queue_t, t1, side="left"))
        inside = int(self.queue_depth[lo:hi].max()) if hi > lo else 0
        return max(int(self.queue_at(t0)), inside)

    def gaps_in(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        """Idle stretches (complement of busy) inside [t0, t1), clipped to it."""
        bs, be = self.busy.clip(t0, t1)
        starts = np.concatenate(([t0], be))
        ends = np.concatenate((bs, [t1]))
        keep = ends > starts
        return starts[keep], ends[keep]


class IdleAnalysis:
    """Idle time by cause for one trace; build with `idle_analysis(trace)` (cached)."""

    def __init__(self, trace: Trace, burst_gap_ns: int = BURST_GAP_NS):
        self.trace = trace
        self.burst_gap_ns = int(burst_gap_ns)
        ops = trace.ops
        dev = ops["device"].to_numpy()
        self.devices: list[int] = sorted(int(d) for d in np.unique(dev)) if len(dev) else []
        self._devices: dict[int, DeviceIdle] = {}
        self._pids: dict[int, set[int]] = {}  # by id() of a DeviceIdle held in _devices

    @cached_property
    def api_kind(self) -> np.ndarray:
        return api_kinds(self.trace)

    def device(self, d: int) -> DeviceIdle:
        if d not in self._devices:
            self._devices[d] = self._build(d)
        return self._devices[d]

    def devices_of_process(self, gpid: int) -> list[int]:
        ops = self.trace.ops
        g = ops["gpid"].to_numpy()
        mine = ops["device"].to_numpy()[(g & PID_MASK) == (gpid & PID_MASK)]
        return sorted(int(d) for d in np.unique(mine)) if len(mine) else list(self.devices)

    # -- building ---------------------------------------------------------------------------
    def _build(self, d: int) -> DeviceIdle:
        t = self.trace
        ops, api = t.ops, t.api
        on = np.flatnonzero(ops["device"].to_numpy() == d)
        o_start = ops["start"].to_numpy()[on]
        o_end = ops["end"].to_numpy()[on]
        o_api = ops["api"].to_numpy()[on]
        busy = IntervalSet.union(o_start, o_end)

        a_start = api["start"].to_numpy() if len(api) else np.zeros(0, np.int64)
        a_end = api["end"].to_numpy() if len(api) else np.zeros(0, np.int64)
        a_gtid = api["gtid"].to_numpy() if len(api) else np.zeros(0, np.int64)
        rows = self._scope(on, a_gtid)
        kind = self.api_kind[rows]

        # (a) issued, not started: from the launching call's return to the op's start
        linked = o_api >= 0
        call_end = a_end[o_api[linked]]
        queued = IntervalSet.union(call_end, o_start[linked])
        # sync calls; other calls plus the gaps inside launch bursts
        sync = IntervalSet.union(a_start[rows[kind == API_SYNC]], a_end[rows[kind == API_SYNC]])
        b_start, b_end = self._burst_gaps(rows, kind, a_start, a_end, a_gtid)
        other = rows[kind != API_SYNC]
        active = IntervalSet.union(np.concatenate((a_start[other], b_start)), np.concatenate((a_end[other], b_end)))

        # bits: busy 1, queued 2, sync 4, active 8 -> label by priority busy > queued > sync > active
        table = np.full(16, HOST_BOUND, dtype=np.int8)
        for mask in range(16):
            if mask & 1:
                table[mask] = BUSY
            elif mask & 2:
                table[mask] = LAUNCH_BOUND
            elif mask & 4:
                table[mask] = SYNC_BOUND
            elif mask & 8:
                table[mask] = LAUNCH_BOUND
        edges, labels = label_segments([busy, queued, sync, active], table)

        # lead: kernels with a launching call, ordered by the call's start
        is_k = (ops["kind"].to_numpy()[on] == KERNEL) & linked
        k_pos = on[is_k]
        k_call = a_start[o_api[is_k]]
        k_lead = o_start[is_k] - k_call
        order = np.argsort(k_call, kind="stable")

        q_t, q_depth, q_int = _step_function(call_end, o_start[linked])
        return DeviceIdle(
            device=d, api_rows=rows, busy=busy,
            launch=pieces(edges, labels, LAUNCH_BOUND), sync=pieces(edges, labels, SYNC_BOUND),
            edges=edges, labels=labels,
            lead_call_start=k_call[order], lead_ns=k_lead[order], lead_op=k_pos[order],
            queue_t=q_t, queue_depth=q_depth, queue_integral=q_int,
        )

    def _scope(self, on: np.ndarray, a_gtid: np.ndarray) -> np.ndarray:
        """API rows of the processes that launched work on the device (all, if unknown)."""
        if len(a_gtid) == 0:
            return np.zeros(0, dtype=np.int64)
        gpids = np.unique(self.trace.ops["gpid"].to_numpy()[on] & PID_MASK)
        gpids = gpids[gpids >= 0]
        if len(gpids) == 0:
            return np.arange(len(a_gtid), dtype=np.int64)
        return np.flatnonzero(np.isin(a_gtid & PID_MASK, gpids))

    def _burst_gaps(self, rows, kind, a_start, a_end, a_gtid) -> tuple[np.ndarray, np.ndarray]:
        """Per thread, [end of a launch call, start of the next launch call) when at most
        burst_gap_ns long and no synchronising call of that thread starts in between."""
        out_s, out_e = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        if len(rows) == 0:
            return out_s[0], out_e[0]
        gtid = a_gtid[rows]
        for g in np.unique(gtid):  # a loop over threads (a handful), never over calls
            mine = rows[gtid == g]
            k = kind[gtid == g]
            launch = mine[k == API_LAUNCH]
            if len(launch) < 2:
                continue
            launch = launch[np.argsort(a_start[launch], kind="stable")]
            gs, ge = a_end[launch[:-1]], a_start[launch[1:]]
            ok = (ge > gs) & (ge - gs <= self.burst_gap_ns)
            sync = np.sort(a_start[mine[k == API_SYNC]])
            if len(sync):
                ok &= np.searchsorted(sync, gs, side="left") == np.searchsorted(sync, ge, side="left")
            out_s.append(gs[ok])
            out_e.append(ge[ok])
        return np.concatenate(out_s), np.concatenate(out_e)

    # -- windows ----------------------------------------------------------------------------
    def window(self, t0: int, t1: int, devices: list[int] | None = None, top_gaps: int = 10) -> WindowIdle:
        return self.windows(np.array([t0]), np.array([t1]), devices, top_gaps)

    def windows(self, t0s, t1s, devices: list[int] | None = None, top_gaps: int = 10) -> WindowIdle:
        """The windows [t0s[i], t1s[i]) taken together (the instances of a phase): their parts
        summed, lead over all their kernels, queue over their union in time."""
        t0s = np.asarray(t0s, dtype=np.int64)
        t1s = np.asarray(t1s, dtype=np.int64)
        keep = t1s > t0s
        t0s, t1s = t0s[keep], t1s[keep]
        span = int((t1s - t0s).sum())
        out = []
        all_gaps: list[tuple[int, int, int]] = []
        for d in self.devices if devices is None else devices:
            dev = self.device(d)
            busy, launch, sync, host = (int(x.sum()) for x in dev.split(t0s, t1s))
            split = IdleSplit(d, span, busy, launch, sync, host)
            leads = np.concatenate([dev.lead_ns[dev.lead_slice(a, b)] for a, b in zip(t0s.tolist(), t1s.tolist())]) \
                if len(t0s) else np.zeros(0, np.int64)
            integral = int((dev.queue_integral_before(t1s) - dev.queue_integral_before(t0s)).sum())
            qmax = max((dev.queue_max(a, b) for a, b in zip(t0s.tolist(), t1s.tolist())), default=None)
            queue = QueueStats(integral / span if span else None, qmax, integral)
            out.append(DeviceWindowIdle(split, lead_stats(leads), queue))
            if top_gaps:
                for a, b in zip(t0s.tolist(), t1s.tolist()):
                    gs, ge = dev.gaps_in(a, b)
                    longest = _top(ge - gs, top_gaps)
                    all_gaps += [(d, int(gs[i]), int(ge[i])) for i in longest]
        all_gaps.sort(key=lambda g: (-(g[2] - g[1]), g[1], g[0]))
        gaps = [self.gap(d, s, e) for d, s, e in all_gaps[:top_gaps]]
        return WindowIdle(len(t0s), span, self.burst_gap_ns, out, gaps)

    def gap(self, d: int, start: int, end: int) -> Gap:
        """One idle stretch with its split by cause and what each CPU thread was doing."""
        dev = self.device(d)
        _, launch, sync, host = (int(x) for x in dev.split(start, end))
        return Gap(d, start, end, launch, sync, host, self._activity(dev, start, end))

    def _activity(self, dev: DeviceIdle, start: int, end: int) -> list[ThreadActivity]:
        t = self.trace
        api = t.api
        out = []
        threads: dict[int, list] = {}
        # whole columns once: a column lookup per row costs more than the rows' own work
        api_start, api_end = api["start"].to_numpy(), api["end"].to_numpy()
        api_gtid, api_name = api["gtid"].to_numpy(), api["name"].to_numpy()
        if len(dev.api_rows):
            a_start = api_start[dev.api_rows]
            a_end = api_end[dev.api_rows]
            hit = dev.api_rows[(a_start < end) & (a_end > start)]  # 10 gaps: one mask each
            for row in hit.tolist():
                threads.setdefault(int(api_gtid[row]), []).append(row)
        ranges = t.ranges
        gtids = set(threads)
        if len(ranges):
            gpids = self._launching_pids(dev)
            r_g = ranges["gtid"].to_numpy()
            open_mask = (ranges["start"].to_numpy() <= start) & (ranges["end"].to_numpy() > start)
            gtids |= {int(g) for g in np.unique(r_g[open_mask]) if not gpids or (int(g) & PID_MASK) in gpids}
        for g in sorted(gtids):
            calls: dict[str, list[int]] = {}
            for row in threads.get(g, []):
                name = base_api_name(t.api_names[int(api_name[row])])
                inside = min(end, int(api_end[row])) - max(start, int(api_start[row]))
                c = calls.setdefault(name, [0, 0])
                c[0] += 1
                c[1] += inside
            opened, started = _nvtx_around(with_inferred_ranges(t), g, start, end)  # inferred ranges too
            out.append(ThreadActivity(g, t.thread_label(g), sorted(((n, c, ns) for n, (c, ns) in calls.items()),
                                                                   key=lambda x: -x[2]), opened, started))
        return out

    def _launching_pids(self, dev: DeviceIdle) -> set[int]:
        """The processes (gtid & PID_MASK) whose API calls launched this device's work: the same set
        for every gap of the device, so read once."""
        key = id(dev)
        if key not in self._pids:
            rows = dev.api_rows
            self._pids[key] = set(np.unique(self.trace.api["gtid"].to_numpy()[rows] & PID_MASK).tolist()) \
                if len(rows) else set()
        return self._pids[key]

    def ranges(self, model, range_ids, top_gaps: int = 10) -> WindowIdle:
        """The range instances' windows (NVTX start to end) on the devices of their process."""
        ids = np.atleast_1d(np.asarray(range_ids, dtype=np.int64))
        devices = sorted({d for g in np.unique(model.r_gtid[ids]) for d in self.devices_of_process(int(g))}) \
            if len(ids) else []
        return self.windows(model.r_start[ids], model.r_end[ids], devices, top_gaps)


def idle_analysis(trace: Trace, burst_gap_ns: int = BURST_GAP_NS) -> IdleAnalysis:
    """The trace's IdleAnalysis (built once per burst gap, then cached on the trace)."""
    key = ("idle", int(burst_gap_ns))
    if key not in trace.derived:
        trace.derived[key] = IdleAnalysis(trace, burst_gap_ns)
    return trace.derived[key]


# -- helpers -------------------------------------------------------------------------------------
def lead_stats(leads: np.ndarray) -> LeadStats:
    n = len(leads)
    if n == 0:
        return LeadStats(0, None, None, None)
    rank = math.ceil(0.95 * n) - 1
    part = np.partition(leads, [(n - 1) // 2, n // 2, rank])
    median = (float(part[(n - 1) // 2]) + float(part[n // 2])) / 2
    return LeadStats(n, median, int(part[rank]), int(leads.max()))


def _top(lengths: np.ndarray, k: int) -> np.ndarray:
    if len(lengths) <= k:
        return np.arange(len(lengths))
    return np.argpartition(-lengths, k - 1)[:k]


def _step_function(up: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count of intervals [up_i, down_i) open over time (empty ones skipped): the times where
    it changes, its value after each, and its integral from the first change to each."""
    keep = down > up
    up, down = np.sort(up[keep]), np.sort(down[keep])
    times = np.concatenate((up, down))
    if len(times) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    steps = np.concatenate((np.ones(len(up), np.int64), -np.ones(len(down), np.int64)))
    order = np.argsort(times, kind="stable")
    t = times[order]
    depth = np.cumsum(steps[order])
    last = np.empty(len(t), dtype=bool)
    last[:-1] = t[1:] != t[:-1]
    last[-1] = True
    t, depth = t[last], depth[last]
    integral = np.zeros(len(t), dtype=np.int64)
    np.cumsum(depth[:-1] * np.diff(t), out=integral[1:])
    return t, depth, integral


def _nvtx_around(trace: Trace, gtid: int, start: int, end: int, limit: int = 5) -> tuple[list[str], list[str]]:
    """NVTX ranges of a thread open at `start` (outermost first) and those begun in [start, end)."""
    r = trace.ranges
    if len(r) == 0:
        return [], []
    mine = r["gtid"].to_numpy() == gtid
    rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
    names = trace.range_names.objects
    open_ = np.flatnonzero(mine & (rs <= start) & (re_ > start))
    open_ = open_[np.lexsort((-re_[open_], rs[open_]))]
    began = np.flatnonzero(mine & (rs > start) & (rs < end))
    began = began[np.argsort(rs[began], kind="stable")][:limit]
    strip = lambda n: n.removeprefix(":")
    return [strip(names[i]) for i in open_], [strip(names[i]) for i in began]
