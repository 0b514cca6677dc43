"""What to fix first: rules that name a cause of a slow step, with its evidence, a fix in
PyTorch terms and the step time fixing it would save, ranked by that saving.

Each rule reads the results of other analyses (parsers.idle: GPU idle by cause; parsers.roofline
and parsers.peaks: GEMM math paths and peaks; parsers.ranks: exposed communication; from the
hardware, analyses.ncu's joined kernels when an Nsight Compute report is given and
analyses.gpu_metrics' GEMM check where nsys sampled GPU metrics) plus the export's memcpy rows,
over the steady-state iterations (`step_N`). Figures are per step (the
sum over the steady-state steps divided by their count). Every threshold lives in THRESHOLDS
with the reason for its value. No presentation here (nsight_tui.render.findings makes text).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.model.steps import process_steps, steps_of
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.ids import KERNEL, PID_MASK, pid_of
from nsight_tui.parsers.analyses.idle import API_LAUNCH, API_SYNC, idle_analysis
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel, range_model

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.gpu_metrics import GemmCheck
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis
    from nsight_tui.parsers.analyses.ranks import Rank


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    reason: str


THRESHOLDS: dict[str, Threshold] = {
    "host_gap_min_ns": Threshold(1_000_000, "ns", "a host-bound stretch this long is one piece of Python/data work, "
                                 "not the 10-100 µs of framework dispatch between launch bursts"),
    "launch_min_share": Threshold(0.10, "of the step", "below a tenth of the step, CUDA graphs or a larger batch "
                                  "are not worth their complexity"),
    "optimizer_kernels_min": Threshold(200, "kernels per step", "foreach/fused optimizers launch tens of kernels per "
                                       "step; a per-parameter loop launches ~5-10 per parameter tensor (GPT-2 small: "
                                       "148 tensors, ~1,100 kernels)"),
    "fp32_gemm_min_share": Threshold(0.10, "of the step's GPU busy time", "fp32 GEMMs under a tenth of the GPU's "
                                     "work cannot move the step much"),
    "pageable_min_bytes": Threshold(1 << 20, "bytes per step", "smaller copies (a loss scalar from .item()) cost "
                                    "latency, not bandwidth: sync-stall covers them"),
    "pinned_gbps": Threshold(40.0, "GB/s", "what pinned host<->device copies reach over PCIe Gen4/Gen5 x16 "
                             "(measured 47 GB/s on the H200 of sample_traces/findings)"),
    "comm_min_share": Threshold(0.05, "of the step", "a few percent of exposed communication is the usual "
                                "tail of the last bucket"),
    "warmup_slow_ratio": Threshold(1.5, "x the median step", "a step this much slower than the median is "
                                   "compiling, autotuning or allocating, not steady state"),
    "occupancy_min_share": Threshold(0.02, "of the steps' GPU busy time", "a kernel name under 2% of the GPU's work "
                                     "cannot move the step by more than a fraction of that even at ncu's full "
                                     "estimated speedup"),
    "occupancy_low_pct": Threshold(50.0, "% theoretical occupancy", "below half the SM's warps the launch "
                                   "configuration (registers, shared memory, block size) caps the latency the "
                                   "scheduler can hide; at or above it, more warps rarely help"),
    "chain_kernel_max_ns": Threshold(20_000, "ns per kernel", "a kernel this short spends a sizeable share of its "
                                     "time on fixed costs (launch, ramp-up, tail: a few µs each) and on one read and "
                                     "write of its tensor; longer ones are single large passes"),
    "chain_min_kernels": Threshold(3, "kernels in a row", "two kernels in a row are one intermediate tensor; three "
                                   "or more is the pattern torch.compile's fusion removes with a gain worth naming"),
    "min_saving_ms": Threshold(0.0, "ms per step", "rules fire whenever their cause is present; the saving "
                               "ranks them"),
}


def _t(key: str) -> float:
    return THRESHOLDS[key].value


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

    @property
    def range(self) -> str:
        return ", ".join(self.ranges)

    def to_json(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("claim", "gpu_work")}
        return {**out, "range": self.range}


# A launch call returns in a few µs; one that returns this much later waited for room in the
# launch queue (the CPU ran as far ahead as the driver allows): that excess is waiting for the GPU.
BLOCKED_LAUNCH_NS = 50_000


@dataclass
class StepContext:
    """What every rule needs once: the steady-state steps and the idle analysis."""

    trace: Trace
    model: RangeModel
    steps: np.ndarray  # range positions of step_N
    t0: np.ndarray
    t1: np.ndarray
    device: int
    rank: Rank | None = None  # a rank filter: that rank's steps and GPU, not rank 0's
    ncu: NcuAnalysis | None = None  # an Nsight Compute report joined to the trace (report --ncu), its results

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def step_ns(self) -> float:
        """The mean step period (model.steps.StepTimes): the basis of every per-step saving."""
        return float((self.t1 - self.t0).mean())

    def phase(self, name: str) -> np.ndarray:
        """The phase's ranges inside the steady-state steps, in time order (whatever the export's row order)."""
        ids = steps_of(self.model).phase(name, self.steps)
        return ids[np.argsort(self.model.r_start[ids], kind="stable")]

    def idle(self):
        return idle_analysis(self.trace)

    @cached_property
    def step_kernels(self) -> np.ndarray:
        """Op positions of the kernels inside the steps on the steps' GPU, in time order."""
        ops = self.trace.ops
        pos = self.model.ops_of(self.steps)
        pos = np.unique(pos[(ops["kind"].to_numpy()[pos] == KERNEL) & (ops["device"].to_numpy()[pos] == self.device)])
        return pos[np.argsort(ops["start"].to_numpy()[pos], kind="stable")]

    @cached_property
    def gemm_check(self) -> GemmCheck | None:
        """Sampled GPU metrics' verdict on the GEMMs' math units (analyses.gpu_metrics), None
        where nsys sampled no GPU metrics."""
        if not self.trace.gpu_metrics.present:
            return None
        from nsight_tui.parsers.analyses.gpu_metrics import gpu_metrics_analysis

        return gpu_metrics_analysis(self.model, dict(self.trace.meta().config)).gemm

    @cached_property
    def cpu_wait_ns(self) -> float:
        """Per step: the time the steps' process waited for the GPU in CUDA calls: synchronising
        calls (and blocking copies), and launch calls held longer than BLOCKED_LAUNCH_NS (the launch
        queue full: the CPU is as far ahead as the driver lets it be)."""
        api = self.trace.api
        rows = _process_api(self)
        if len(rows) == 0:
            return 0.0
        kind = self.idle().api_kind[rows]
        start = api["start"].to_numpy()[rows].astype(np.int64)
        end = api["end"].to_numpy()[rows].astype(np.int64)
        k = np.searchsorted(self.t0, start, side="right") - 1
        inside = (k >= 0) & (start < self.t1[np.clip(k, 0, None)])
        end = np.minimum(end, self.t1[np.clip(k, 0, None)])
        dur = np.where(inside, end - start, 0)
        waited = np.where(kind == API_SYNC, dur, np.where(kind == API_LAUNCH, np.maximum(dur - BLOCKED_LAUNCH_NS, 0), 0))
        return float(waited.sum()) / self.n

    @cached_property
    def launch_or_sync(self) -> tuple[np.ndarray, np.ndarray]:
        """The device's launch- and sync-bound idle (the rest of idle is host-bound)."""
        from nsight_tui.parsers.model import intervals

        dev = self.idle().device(self.device)
        return intervals.union(np.concatenate([dev.launch.start, dev.sync.start]),
                               np.concatenate([dev.launch.end, dev.sync.end]))

    def split(self):
        return self.idle().windows(self.t0, self.t1, [self.device], top_gaps=0).devices[0].split

    @cached_property
    def host_gaps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The idle stretches inside the steps whose host-bound part is at least host_gap_min_ns:
        (start, end, host-bound ns), in time order: host-bound-gap's; shorter host-bound stretches are
        framework dispatch between launch bursts (launch-bound counts them)."""
        dev = self.idle().device(self.device)
        parts = [dev.gaps_in(int(a), int(b)) for a, b in zip(self.t0, self.t1)]  # a loop over steps, not ops
        gs = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        ge = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        host = dev.split(gs, ge)[3] if len(gs) else np.zeros(0, np.int64)
        keep = host >= _t("host_gap_min_ns")
        return gs[keep], ge[keep], host[keep]

    def range_of(self, t: int) -> str:
        """The innermost range on the main thread open at t (or the step)."""
        m = self.model
        g = m.r_gtid[self.steps[0]]
        mask = (m.r_gtid == g) & (m.r_start <= t) & (m.r_end > t)
        ids = np.flatnonzero(mask)
        if len(ids) == 0:
            return "step_N"
        inner = ids[np.argmax(m.r_start[ids])]
        return _path(m, int(inner))


def _path(m: RangeModel, i: int) -> str:
    texts = m.trace.ranges["text"].to_numpy()
    parts = []
    while i >= 0:
        parts.append(re.sub(r"\d+$", "N", str(texts[i])))
        i = int(m.parent[i]) if hasattr(m, "parent") else -1
    return "/".join(reversed(parts))


def _ms(ns: float) -> float:
    return float(ns) / 1e6


# -- rules ---------------------------------------------------------------------------------------
def host_bound_gap(c: StepContext) -> Finding | None:
    gs, ge, host = c.host_gaps
    if len(gs) == 0:
        return None
    total = float(host.sum())
    top = np.argsort(-host, kind="stable")[:10]
    # gap_ns: the whole gap, the one figure the timeline's idle lane and its detail give for it
    rows = [{"start_ns": int(gs[i]), "end_ns": int(ge[i]), "gap_ns": int(ge[i] - gs[i]), "host_bound_ns": int(host[i]),
             "after_range": c.range_of(int(gs[i]) - 1), "before_range": c.range_of(int(ge[i]))}
            for i in top.tolist()]
    where = sorted({f"{r['after_range']} → {r['before_range']}" for r in rows})
    claim = intervals.difference(intervals.union(gs, ge), c.launch_or_sync)
    return Finding(
        "host-bound-gap", "GPU idle while the CPU runs Python/data work with no CUDA call",
        where, _ms(total / c.n),
        f"host-bound idle in gaps ≥ {_t('host_gap_min_ns') / 1e6:.0f} ms, per step (the idle time it explains)",
        "move the work off the step: DataLoader(num_workers>0, pin_memory=True, prefetch), precompute, "
        "or overlap it with GPU work (no CUDA call means nothing is queued behind it)",
        {"gaps": len(gs), "host_bound_ns_per_step": total / c.n, "step_ns": c.step_ns},
        rows, int(gs[top[0]]), int(ge[top[0]]), claim=claim)


def _process_api(c: StepContext) -> np.ndarray:
    """Rows of trace.api made by the steps' process (a multi-rank export holds every rank's calls)."""
    api = c.trace.api
    if len(api) == 0:
        return np.zeros(0, dtype=np.int64)
    pid = int(c.model.r_gtid[c.steps[0]]) & PID_MASK
    return np.flatnonzero((api["gtid"].to_numpy() & PID_MASK) == pid)


def _first_ns(starts: np.ndarray, ends: np.ndarray, amount: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `amount` ns of sorted disjoint intervals."""
    before = np.concatenate(([0], np.cumsum(ends - starts)))[:-1]
    keep = before < amount
    s, e = starts[keep], ends[keep].copy()
    e = np.minimum(e, s + (amount - before[keep]))
    return s, e


def sync_stall(c: StepContext) -> Finding | None:
    t = c.trace
    api = t.api
    rows_ = _process_api(c)
    if len(rows_) == 0:
        return None
    kind = c.idle().api_kind[rows_]
    a_start, a_end = api["start"].to_numpy()[rows_], api["end"].to_numpy()[rows_]
    # blocking calls inside a step (their own process's), in time order
    blocking = np.flatnonzero(kind == API_SYNC)
    blocking = blocking[np.argsort(a_start[blocking], kind="stable")]
    k = np.searchsorted(c.t0, a_start[blocking], side="right") - 1
    inside = (k >= 0) & (a_end[blocking] <= c.t1[np.clip(k, 0, None)])
    blocking, k = blocking[inside], k[inside]
    if len(blocking) == 0:
        return None
    s0, s1 = a_start[blocking], a_end[blocking]
    # Where each one's effect ends: the next blocking call in the same step, or the step's end
    # (the step-end synchronise drains the GPU whatever came before).
    nxt = np.append(s0[1:], np.iinfo(np.int64).max)
    same = np.append(k[1:] == k[:-1], False)
    until = np.where(same, np.minimum(nxt, c.t1[k]), c.t1[k])
    # A stall needs GPU work issued after the call in its window (the step's last synchronise stalls nothing)
    launches = np.sort(a_start[kind == API_LAUNCH])
    stalls = np.searchsorted(launches, s1, side="left") < np.searchsorted(launches, until, side="left")
    blocking, k, s0, s1, until = blocking[stalls], k[stalls], s0[stalls], s1[stalls], until[stalls]
    if len(blocking) == 0:
        return None
    # The saving: the call throws away the CPU's lead over the GPU (the time it waited in the
    # call, `lead`); without it the CPU would stay that far ahead and fill that much of the GPU
    # idle that follows until the next blocking point, whatever the CPU was doing meanwhile
    # (launching, framework dispatch, Python work: host-bound-gap may name the same idle; its
    # fix is another way to save it). So min(lead, that idle). The idle is counted from the call's
    # end: while the CPU waits in it the GPU runs work issued before the call, and gaps there (a
    # GPU-bound backward's own) are in the twin without the sync too; the queue drains as it returns.
    dev = c.idle().device(c.device)
    s_from = np.minimum(s1, until)
    busy_ns = dev.split(s_from, until)[0]
    idle_ns = (until - s_from) - busy_ns
    lead_ns = s1 - s0
    saved = np.minimum(lead_ns, idle_ns)
    names = [t.api_names[int(x)] for x in api["name"].to_numpy()[rows_[blocking]]]
    rows = [{"call": names[i], "start_ns": int(s0[i]), "end_ns": int(s1[i]), "call_ns": int(lead_ns[i]),
             "gpu_idle_until_next_block_ns": int(idle_ns[i]), "saving_ns": int(saved[i]),
             "range": c.range_of(int(s0[i]))}
            for i in np.argsort(-saved, kind="stable")[:10].tolist()]
    total = float(saved.sum())
    # what it claims is what it saves: the first `saved` ns of idle after each call (the lead it
    # keeps would fill the earliest idle), not the whole window
    pieces = [_first_ns(gs, ge, int(n)) for (gs, ge), n in
              zip((dev.gaps_in(int(a), int(b)) for a, b in zip(s_from, until)), saved)]
    claim = intervals.union(np.concatenate([q[0] for q in pieces]), np.concatenate([q[1] for q in pieces]))
    return Finding(
        "sync-stall", "blocking synchronisation inside the step",
        sorted({str(r["range"]) for r in rows}), _ms(total / c.n),
        "per blocking call, min(time the CPU waited in it = the lead it throws away, GPU idle from its end "
        "to the next blocking call or the step's end), per step",
        "drop .item()/.cpu()/print(tensor) and torch.cuda.synchronize() from the step; log losses every N "
        "steps or accumulate them on the GPU; use non_blocking copies and events",
        {"calls_per_step": len(blocking) / c.n, "call_ns_per_step": float(lead_ns.sum()) / c.n,
         "gpu_idle_ns_per_step": float(idle_ns.sum()) / c.n},
        rows, int(rows[0]["start_ns"]), int(rows[0]["end_ns"]), claim=claim)


def _graph_replays(c: StepContext) -> tuple[np.ndarray, np.ndarray]:
    """The steps' CUDA graph replays on the device: from each cudaGraphLaunch call's start to the
    end of the last op it launched, merged, clipped to the steps."""

    t = c.trace
    ops, api = t.ops, t.api
    call = ops["api"].to_numpy()
    on = np.flatnonzero((ops["device"].to_numpy() == c.device) & (call >= 0))
    if len(on) == 0:
        return intervals.EMPTY
    graph_name = np.array([n.startswith(("cudaGraphLaunch", "cuGraphLaunch")) for n in t.api_names] + [False])
    on = on[graph_name[api["name"].to_numpy()[call[on]]]]
    if len(on) == 0:
        return intervals.EMPTY
    calls, first = np.unique(call[on], return_inverse=True)
    last_end = np.zeros(len(calls), dtype=np.int64)
    np.maximum.at(last_end, first, ops["end"].to_numpy()[on])
    replays = intervals.union(api["start"].to_numpy()[calls], last_end)
    return intervals.intersect(replays, intervals.union(c.t0, c.t1))


def launch_bound(c: StepContext) -> Finding | None:
    s = c.split()
    # What a replayed CUDA graph removes: the GPU idle while the CPU issues launches, and the
    # short host-bound stretches between launch bursts (framework dispatch; stretches of at least
    # host_gap_min_ns are one piece of Python/data work, host-bound-gap's). Idle inside a graph
    # replay (the GPU's own gaps between the graph's kernels) is what a graph leaves: not counted.
    dispatch = s.host_bound_ns - float(c.host_gaps[2].sum())
    rs, re_ = _graph_replays(c)
    in_graphs = float(c.idle().device(c.device).launch.measure(rs, re_).sum()) if len(rs) else 0.0
    per = (s.launch_bound_ns - in_graphs + dispatch) / c.n
    if per < _t("launch_min_share") * c.step_ns:
        return None
    kernels = int(c.model.kernel_count[c.steps].sum()) / c.n
    return Finding(
        "launch-bound", "GPU waits on kernel launches: many short kernels issued one by one",
        ["step_N"], _ms(per),
        f"launch-bound GPU idle outside CUDA graph replays + host-bound idle in stretches under "
        f"{_t('host_gap_min_ns') / 1e6:.0f} ms (dispatch between launch bursts), per step: what replaying the step "
        "as a CUDA graph removes",
        "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), "
        "fuse elementwise ops (torch.compile), or raise the batch size so each kernel does more",
        {"launch_bound_ns_per_step": (s.launch_bound_ns - in_graphs) / c.n, "dispatch_host_ns_per_step": dispatch / c.n,
         "launch_bound_in_graph_replays_ns_per_step": in_graphs / c.n,
         "kernels_per_step": kernels, "busy_ns_per_step": s.busy_ns / c.n, "step_ns": c.step_ns},
        [], int(c.t0[0]), int(c.t1[0]), claim=_launch_claim(c, rs, re_))


def _launch_claim(c: StepContext, rs: np.ndarray, re_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """launch-bound's time: launch-bound idle in the steps outside graph replays, and host-bound
    idle in the steps outside the long stretches host-bound-gap names."""

    dev = c.idle().device(c.device)
    steps = intervals.union(c.t0, c.t1)
    launch = intervals.difference(intervals.intersect((dev.launch.start, dev.launch.end), steps),
                                  intervals.union(rs, re_))
    gaps = [dev.gaps_in(int(a), int(b)) for a, b in zip(c.t0, c.t1)]
    idle = intervals.union(np.concatenate([g[0] for g in gaps]), np.concatenate([g[1] for g in gaps]))
    host = intervals.difference(idle, c.launch_or_sync)
    gs, ge, _ = c.host_gaps
    short_host = intervals.difference(host, intervals.union(gs, ge))
    return intervals.union(np.concatenate([launch[0], short_host[0]]), np.concatenate([launch[1], short_host[1]]))


# Kernels of an optimizer that already works on many tensors per launch: PyTorch's foreach path
# (`multi_tensor_apply_kernel`) and its fused AdamW/Adam/SGD kernels (`Fused...Functor`, apex's
# `multi_tensor_adam`). An optimizer whose kernel time is mostly these is not "unfused".
_MULTI_TENSOR = re.compile(r"multi_tensor_apply|multi_tensor_adam|Fused\w*(Adam|Sgd|SGD)|fused_adam", re.IGNORECASE)


def unfused_optimizer(c: StepContext) -> Finding | None:
    opt = c.phase("optimizer")
    if len(opt) == 0:
        return None
    per = int(c.model.kernel_count[opt].sum()) / c.n
    if per < _t("optimizer_kernels_min"):
        return None
    t = c.trace
    pos = c.model.ops_of(opt)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    multi = np.array([bool(_MULTI_TENSOR.search(t.op_names[int(k)])) for k in range(len(t.op_names))], dtype=bool)
    if len(pos) and int(dur[multi[codes]].sum()) * 2 >= int(dur.sum()):
        return None  # foreach or fused already: many tensors per launch
    from nsight_tui.parsers.analyses import roofline

    r = roofline.build(c.trace)
    point = r.range_point(opt, "step_N/optimizer")
    # Its GPU time (its work's first start to last end), not its CPU span: without phase syncs the
    # CPU's optimizer range also holds its wait on a full launch queue behind the backward.
    opt_ns = float(c.model.proj_ns[opt].sum()) / c.n
    cpu_ns = float(c.model.cpu_ns[opt].sum()) / c.n
    pk = r.peaks.peaks
    floor_ns = (point.bytes / len(opt)) / (pk.bandwidth_gbps * 1e9) * 1e9 if point.bytes and pk else None
    saving = opt_ns - (floor_ns or float(c.model.busy_ns[opt].sum()) / c.n)
    basis = ("optimizer GPU time per step (its work's span) − its bytes at the memory roof (a fused optimizer "
             "is memory-bound)" if floor_ns is not None else "optimizer GPU time per step − its GPU busy time")
    return Finding(
        "unfused-optimizer", "optimizer phase of many small per-parameter kernels",
        ["step_N/optimizer"], _ms(max(saving, 0.0)), basis,
        "torch.optim.AdamW(params, fused=True) (or foreach=True); avoid per-parameter Python loops",
        {"kernels_per_step": per, "optimizer_ns_per_step": opt_ns, "optimizer_cpu_ns_per_step": cpu_ns,
         "memory_roof_ns_per_step": floor_ns,
         "optimizer_bytes_per_step": None if point.bytes is None else point.bytes / len(opt)},
        [], int(c.model.r_start[opt[0]]), int(c.model.r_end[opt[0]]),
        claim=intervals.union(c.model.gpu_end[opt] - c.model.proj_ns[opt], c.model.gpu_end[opt]))


def fp32_gemm(c: StepContext) -> Finding | None:
    from nsight_tui.parsers.analyses import roofline

    t = c.trace
    pos = c.model.ops_of(c.steps)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    r = roofline.build(t)
    pk = r.peaks.peaks
    if pk is None or "fp32" not in pk.tflops:
        return None
    fast = max((p for p in ("tf32", "bf16") if p in pk.tflops), key=lambda p: pk.tflops[p], default=None)
    if fast is None:
        return None
    rows: list[dict[str, Any]] = []
    gemm_ns = 0
    for code in np.unique(codes[fam == "gemm"]):
        name = t.op_names[int(code)]
        if roofline.kernel_math_path(name, r.config) == "fp32":
            ns = int(dur[codes == code].sum())
            gemm_ns += ns
            rows.append({"kernel": name, "count": int((codes == code).sum()), "kernel_ns": ns, "code": int(code)})
    s = c.split()
    if gemm_ns == 0 or gemm_ns < _t("fp32_gemm_min_share") * s.busy_ns:
        return None
    ratio = pk.tflops["fp32"] / pk.tflops["tf32" if "tf32" in pk.tflops else fast]
    gpu_share = s.busy_ns / (s.window_ns or 1)
    # The step shortens by what the GPU saves only while the CPU waits for the GPU: once faster
    # GEMMs drain the queue the CPU sets the pace (the TF32 twins of the fp32 captures turn
    # launch-bound). So the GEMM time saved, at most the time the CPU waited for the GPU.
    gpu_saved = gemm_ns * (1 - ratio) / c.n
    saved = min(gpu_saved, c.cpu_wait_ns)
    # The pace the CPU keeps once the GPU keeps up is not in an fp32 trace: between twins it moved
    # 0.8-1.3x this capture's CPU work, by run and machine. So the range it can fall in too: at most
    # all the GPU time saved (a CPU that keeps up); at least what is left if the CPU's work and the
    # GPU's remaining work ran back to back, not overlapping at all (step = CPU work + GPU busy − saved).
    cpu_work = c.step_ns - c.cpu_wait_ns
    busy = s.busy_ns / c.n
    low = min(max(c.step_ns - (cpu_work + busy - gpu_saved), 0.0), saved)
    fp32_pos = pos[np.isin(codes, [row.pop("code") for row in rows])]
    claim = intervals.union(t.ops["start"].to_numpy()[fp32_pos], t.ops["end"].to_numpy()[fp32_pos])
    rows.sort(key=lambda x: -x["kernel_ns"])
    return Finding(
        "fp32-gemm-without-tensor-cores", f"fp32 GEMMs on CUDA cores on a GPU with TF32 tensor cores ({pk.name})",
        ["step_N"], _ms(saved),
        f"estimated, per step of the step period (the GPU's pace): the fp32 GEMM time × (1 − fp32/tf32 peak = "
        f"{pk.tflops['fp32']:g}/{pk.tflops.get('tf32', 0):g}) the GPU saves, at most the time the CPU waited for the "
        "GPU (synchronising calls, launches held by a full queue): below that the CPU sets the pace, taken as this "
        "capture's CPU work per step (step − that wait); a CPU that issues the fixed step more slowly saves less: "
        f"between {_ms(low):.1f} (its work and the GPU's remaining work back to back) and {_ms(gpu_saved):.1f} ms "
        "(all the GPU time saved)",
        "torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision('high')), or bf16 "
        "autocast: torch.autocast('cuda', dtype=torch.bfloat16)",
        {"fp32_gemm_ns_per_step": gemm_ns / c.n, "fp32_tflops": pk.tflops["fp32"], "tf32_tflops": pk.tflops.get("tf32"),
         "gpu_saved_ns_per_step": gpu_saved, "cpu_wait_ns_per_step": c.cpu_wait_ns,
         # the pace the estimate assumes the CPU keeps once the GPU no longer holds it back
         "cpu_work_ns_per_step": cpu_work, "gpu_busy_ns_per_step": busy, "gpu_busy_share": gpu_share,
         "saving_low_ns_per_step": low, "saving_high_ns_per_step": gpu_saved,
         **_sampled(c.gemm_check)},  # where nsys sampled GPU metrics: Tensor Active over the GEMM-dominated samples
        rows[:10], int(c.t0[0]), int(c.t1[0]), claim=claim, gpu_work=True)


def unfused_attention(c: StepContext) -> Finding | None:
    t = c.trace
    attn = c.phase("scaled_dot_product_attention")
    if len(attn) == 0:
        return None
    pos = c.model.ops_of(attn)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    if not (fam == "softmax").any() or (fam == "attention").any():
        return None
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    # what fusion removes: the memory round trips of the scores (softmax, masking, scaling)
    unfused = fam != "gemm"
    ns = float(dur[unfused].sum())
    s = c.split()
    gpu_share = s.busy_ns / (s.window_ns or 1)
    saved = 3 * ns * gpu_share / c.n
    return Finding(
        "unfused-attention", "attention as separate score / softmax / matmul kernels (memory-bound softmax)",
        ["step_N/forward/scaled_dot_product_attention"], _ms(saved),
        "3 × the forward attention's non-GEMM kernel time (forward + backward ≈ 3× forward) × the share of "
        "the step the GPU is busy",
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) (FlashAttention / "
        "memory-efficient kernels)",
        {"softmax_kernels_per_step": int((fam == "softmax").sum()) / c.n, "non_gemm_ns_per_step": ns / c.n,
         "gpu_busy_share": gpu_share},
        [], int(c.model.r_start[attn[0]]), int(c.model.r_end[attn[0]]),
        claim=intervals.union(t.ops["start"].to_numpy()[pos[unfused]], t.ops["end"].to_numpy()[pos[unfused]]),
        gpu_work=True)


# -- findings from the hardware: ncu's occupancy, sampled tensor activity, elementwise chains ------
def _kernel_claim(c: StepContext, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ops = c.trace.ops
    return intervals.union(ops["start"].to_numpy()[pos], ops["end"].to_numpy()[pos])


def occupancy_limited(c: StepContext) -> list[Finding]:
    """Per kernel name that matters (share of the steps' GPU busy time), one finding where ncu
    measured a theoretical occupancy under occupancy_low_pct and its TheoreticalOccupancy rule
    estimates a speedup: that share of the name's nsys time per step (the real run's clocks, every
    steady-state step, not ncu's replay of one), an upper bound (occupancy hides latency only while
    nothing else limits first). Reads the ncu analysis' JoinedKernel results only."""
    a = c.ncu
    if a is None:
        return []
    from nsight_tui.parsers.analyses.ncu import OCCUPANCY_FIXES, OCCUPANCY_RULE as NCU_OCCUPANCY_RULE

    t = c.trace
    pos = c.step_kernels
    codes = t.ops["name"].to_numpy()[pos]
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[pos]
    busy = c.split().busy_ns
    name_of = t.ops["name"].to_numpy()
    groups: dict[int, list] = {}
    for k in a.joined:
        groups.setdefault(int(name_of[k.op]), []).append(k)
    out = []
    for code, ks in groups.items():
        theo = [k.figures.theoretical_occupancy_pct for k in ks if k.figures.theoretical_occupancy_pct is not None]
        mine = codes == code
        ns = float(dur[mine].sum())
        if not theo or max(theo) >= _t("occupancy_low_pct") or not busy or ns < _t("occupancy_min_share") * busy:
            continue
        # ncu's estimate per profiled instance (0 where its rule did not fire), weighted by nsys's time
        pct = []
        for k in ks:
            rule = next((r for r in k.figures.rules if r.rule == NCU_OCCUPANCY_RULE and r.speedup_pct is not None), None)
            pct.append(float(rule.speedup_pct) if rule is not None and rule.speedup_pct is not None else 0.0)
        w = np.array([k.nsys_duration_ns or 0 for k in ks], dtype=np.float64)
        speedup = float(np.average(pct, weights=w)) if w.sum() else float(np.mean(pct))
        if speedup <= 0:
            continue  # ncu measured the limit but expects nothing from lifting it
        limiters = [k.figures.occupancy_limiter for k in ks if k.figures.occupancy_limiter]
        limiter = max(set(limiters), key=limiters.count) if limiters else "unknown"
        achieved = [k.figures.achieved_occupancy_pct for k in ks if k.figures.achieved_occupancy_pct is not None]
        name = t.op_names[code]
        from nsight_tui.parsers.kernels.kernel_names import table_name

        rows = [{"ncu_index": k.index, "range": k.path, "nsys_duration_ns": k.nsys_duration_ns,
                 "theoretical_occupancy_pct": k.figures.theoretical_occupancy_pct,
                 "achieved_occupancy_pct": k.figures.achieved_occupancy_pct,
                 "occupancy_limiter": k.figures.occupancy_limiter, "ncu_estimated_speedup_pct": p}
                for k, p in zip(ks, pct)]
        first = pos[mine][0] if mine.any() else ks[0].op
        out.append(Finding(
            "occupancy-limited", f"{table_name(name)}: theoretical occupancy {max(theo):.1f}% (limited by {limiter})",
            sorted({k.path for k in ks if k.path}) or ["step_N"], _ms(speedup / 100 * ns / c.n),
            f"ncu's {NCU_OCCUPANCY_RULE} rule: its estimated speedup ({speedup:.1f}% of the kernel's time, measured by "
            "ncu on the profiled instances, weighted by their nsys time) × the kernel's nsys time per step; "
            "ncu's estimate, an upper bound",
            OCCUPANCY_FIXES.get(limiter, ""),
            {"kernel": name, "nsys_ns_per_step": ns / c.n, "instances_per_step": int(mine.sum()) / c.n,
             "share_of_gpu_busy": ns / busy, "ncu_theoretical_occupancy_pct": max(theo),
             "ncu_achieved_occupancy_pct": float(np.mean(achieved)) if achieved else None,
             "ncu_occupancy_limiter": limiter, "ncu_estimated_speedup_pct": speedup,
             "ncu_blocks_per_sm_by_limit": ks[0].figures.occupancy_limit_blocks, "ncu_profiled_instances": len(ks)},
            rows[:10], int(t.ops["start"].to_numpy()[first]), int(t.ops["end"].to_numpy()[first]),
            claim=_kernel_claim(c, pos[mine]), gpu_work=True))
    return out


def _gemm_kernels(c: StepContext) -> np.ndarray:
    t = c.trace
    pos = c.step_kernels
    codes = t.ops["name"].to_numpy()[pos]
    fam = name_families(t)[codes] if len(codes) else np.array([], dtype=object)
    return pos[fam == "gemm"]


def _sampled(check: GemmCheck | None) -> dict:
    """The sampled GPU metrics' figures on the GEMMs, for a finding's evidence."""
    if check is None:
        return {}
    from nsight_tui.parsers.analyses.gpu_metrics import GEMM_SHARE

    return {"sampled_tensor_active_pct": check.tensor_active_pct, "sampled_gemm_samples": check.gemm_samples,
            "sampled_gemm_share_min": GEMM_SHARE, "sampled_verdict": check.verdict, "sampled_text": check.text}


def tensor_cores_idle(c: StepContext) -> Finding | None:
    """GEMMs named as tensor-core kernels (TF32/bf16/fp8 by name, or by the run's settings where the
    names do not say) while the sampled Tensor Active over the GEMM-dominated samples is ~0
    (gpu_metrics.gemm_check: refuted). GEMMs whose names say fp32, or say nothing on a run set to
    fp32, are fp32-gemm-without-tensor-cores' (its evidence carries the same samples)."""
    from nsight_tui.parsers.analyses import roofline
    from nsight_tui.parsers.analyses.gpu_metrics import TENSOR_PATHS

    check = c.gemm_check
    if check is None or check.verdict != "refuted" or check.named_path not in TENSOR_PATHS:
        return None
    t = c.trace
    gemm = _gemm_kernels(c)
    if not len(gemm):
        return None
    gemm_ns = float((t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[gemm].sum())
    s = c.split()
    if gemm_ns < _t("fp32_gemm_min_share") * s.busy_ns:
        return None  # GEMMs under a tenth of the GPU's work: whichever units ran them, the step hardly moves
    pk = roofline.build(t).peaks.peaks
    fast = pk.tflops.get(check.named_path) if pk is not None else None
    slow = pk.tflops.get("fp32") if pk is not None else None
    ratio = slow / fast if fast and slow else None
    gpu_saved = gemm_ns * (1 - ratio) / c.n if ratio is not None else 0.0
    return Finding(
        "tensor-cores-idle", f"GEMMs named as {check.named_path} tensor-core kernels, but the sampled tensor cores sat idle",
        ["step_N"], _ms(min(gpu_saved, c.cpu_wait_ns)),
        (f"GEMM time per step × (1 − fp32/{check.named_path} peak = {slow:g}/{fast:g}), at most the time the CPU waited "
         "for the GPU per step; an estimate: the samples say the tensor cores did not run them" if ratio is not None
         else "no peak for this GPU: the saving cannot be estimated"),
        "check the math mode really in force where the GEMMs run (torch.backends.cuda.matmul.allow_tf32, "
        "torch.set_float32_matmul_precision('high'), autocast's scope and dtype); profile with --gpu-metrics again",
        {"gemm_ns_per_step": gemm_ns / c.n, "gemm_share_of_gpu_busy": gemm_ns / (s.busy_ns or 1),
         "named_path": check.named_path, "gpu_saved_ns_per_step": gpu_saved, "cpu_wait_ns_per_step": c.cpu_wait_ns,
         **_sampled(check)},
        [], int(c.t0[0]), int(c.t1[0]), claim=_kernel_claim(c, gemm), gpu_work=True)


# The families a fused elementwise pass stands for (kernels.families): pointwise math and reductions
# (sums, means, norms of a row). Copies/casts ("memory") and normalisations are other fixes.
CHAIN_FAMILIES = ("elementwise", "reduction")


def _innermost(c: StepContext, pos: np.ndarray) -> np.ndarray:
    """Per op (positions `pos`): the deepest range it is attributed to, -1 if none."""
    m = c.model
    pair_op, pair_range = np.asarray(m.pair_op, dtype=np.int64), np.asarray(m.pair_range, dtype=np.int64)
    sel = np.isin(pair_op, pos)
    po, pr = pair_op[sel], pair_range[sel]
    order = np.lexsort((np.asarray(m.depth)[pr], po))  # per op, deepest last
    po, pr = po[order], pr[order]
    last = np.r_[po[1:] != po[:-1], True] if len(po) else np.zeros(0, dtype=bool)
    where = dict(zip(po[last].tolist(), pr[last].tolist()))
    return np.array([where.get(int(p), -1) for p in pos.tolist()], dtype=np.int64)


def _unfused_attention_ops(c: StepContext) -> np.ndarray:
    """The kernels unfused-attention's saving stands on (the manual attention's scale/mask/softmax/
    dropout kernels), empty where it does not fire: the elementwise-chain rule leaves them to it."""
    attn = c.phase("scaled_dot_product_attention")
    if len(attn) == 0:
        return np.zeros(0, dtype=np.int64)
    t = c.trace
    pos = c.model.ops_of(attn)
    pos = pos[t.ops["kind"].to_numpy()[pos] == KERNEL]
    fam = name_families(t)[t.ops["name"].to_numpy()[pos]] if len(pos) else np.array([], dtype=object)
    if not (fam == "softmax").any() or (fam == "attention").any():
        return np.zeros(0, dtype=np.int64)
    return pos[fam != "gemm"]


def _memory_bound_names(c: StepContext) -> dict[int, bool] | None:
    """Per export kernel name code: ncu measured it memory-bound (memory % of peak > SM %, the mean
    over its profiled instances); None without a report."""
    if c.ncu is None:
        return None
    name_of = c.trace.ops["name"].to_numpy()
    mem: dict[int, list[float]] = {}
    sm: dict[int, list[float]] = {}
    for k in c.ncu.joined:
        if k.figures.memory_throughput_pct is not None and k.figures.sm_throughput_pct is not None:
            mem.setdefault(int(name_of[k.op]), []).append(k.figures.memory_throughput_pct)
            sm.setdefault(int(name_of[k.op]), []).append(k.figures.sm_throughput_pct)
    return {code: float(np.mean(mem[code])) > float(np.mean(sm[code])) for code in mem}


def elementwise_chains(c: StepContext) -> list[tuple[np.ndarray, int]]:
    """Runs of at least chain_min_kernels consecutive kernels on one stream (no other kernel of that
    stream between them) inside one range instance, each an elementwise/reduction kernel no longer
    than chain_kernel_max_ns and, with an ncu report, measured memory-bound by ncu (a name ncu did
    not profile counts by its family); the manual attention's kernels unfused-attention claims are
    left out. Each chain: (its op positions in order, its range instance)."""
    t = c.trace
    pos = c.step_kernels
    if not len(pos):
        return []
    ops = t.ops
    codes = ops["name"].to_numpy()[pos]
    dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos]
    fam = name_families(t)[codes]
    ok = np.isin(fam, CHAIN_FAMILIES) & (dur <= _t("chain_kernel_max_ns")) & ~np.isin(pos, _unfused_attention_ops(c))
    bound = _memory_bound_names(c)
    if bound is not None:
        ok &= np.array([bound.get(int(k), True) for k in codes.tolist()], dtype=bool)
    inner = _innermost(c, pos)
    stream = ops["stream"].to_numpy()[pos]
    out = []
    for s in np.unique(stream).tolist():
        on = np.flatnonzero(stream == s)  # in time order (pos is)
        run: list[int] = []
        for i in on.tolist() + [-1]:
            if i >= 0 and ok[i] and inner[i] >= 0 and (not run or inner[i] == inner[run[0]]):
                run.append(i)
                continue
            if len(run) >= _t("chain_min_kernels"):
                out.append((pos[run], int(inner[run[0]])))
            run = [i] if i >= 0 and ok[i] and inner[i] >= 0 else []
    return out


def elementwise_chain(c: StepContext) -> Finding | None:
    chains = elementwise_chains(c)
    if not chains:
        return None
    t = c.trace
    ops = t.ops
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    groups: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # per (range path, names): [count, ns, saving]
    saved = chain_ns = 0.0
    shorter: list[np.ndarray] = []
    first = None
    for p, rid in chains:
        d = (end[p] - start[p]).astype(np.float64)
        keep = int(np.argmax(d))
        chain_ns += float(d.sum())
        saved += float(d.sum() - d[keep])
        shorter.append(np.delete(p, keep))
        names = tuple(t.op_names[int(k)] for k in ops["name"].to_numpy()[p])
        g = groups.setdefault((_path(c.model, rid), names), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += float(d.sum())
        g[2] += float(d.sum() - d[keep])
        if first is None or d.sum() > first[2]:
            first = (int(start[p[0]]), int(end[p[-1]]), float(d.sum()))
    from nsight_tui.parsers.kernels.kernel_names import table_name

    rows = [{"range": path, "kernels": len(names), "names": [table_name(n) for n in names],
             "chains_per_step": g[0] / c.n, "chain_ns_per_step": g[1] / c.n, "saving_ns_per_step": g[2] / c.n}
            for (path, names), g in sorted(groups.items(), key=lambda kv: -kv[1][2])]
    kernels = sum(len(p) for p, _ in chains)
    how = "memory-bound by ncu's figures (memory % of peak > SM %)" if c.ncu is not None else \
        "memory-bound by family (elementwise/reduction: a pass over memory per kernel)"
    assert first is not None
    return Finding(
        "elementwise-chain", "chains of short elementwise kernels, each a round trip through memory (fusion candidates)",
        sorted({str(r["range"]) for r in rows})[:10], _ms(saved / c.n),
        f"per chain, its kernels' time − its longest kernel's (one fused pass), per step; an estimate. Chains: ≥ "
        f"{_t('chain_min_kernels'):g} consecutive elementwise/reduction kernels on one stream in one range instance, each "
        f"≤ {_t('chain_kernel_max_ns') / 1e3:g} µs, {how}; the manual attention's kernels are unfused-attention's",
        "fuse them: torch.compile(model) (Inductor fuses pointwise chains), a fused op (F.gelu, fused LayerNorm), "
        "or a custom Triton kernel",
        {"chains_per_step": len(chains) / c.n, "kernels_per_step": kernels / c.n, "chain_ns_per_step": chain_ns / c.n,
         "memory_bound_by": "ncu" if c.ncu is not None else "family"},
        rows[:10], first[0], first[1], claim=intervals.union(
            start[np.concatenate(shorter)], end[np.concatenate(shorter)]), gpu_work=True)


# Only rows whose values are what nsys writes (integers, end >= start) count, as the loader
# leaves the others out: a text `start` in one API call must not stop the whole report.
_MEMCPY_SQL = """
SELECT m.start, m.end, m.bytes, m.copyKind, m.srcKind, m.dstKind, r.start, r.end, s.value
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
  AND (r.globalTid >> 24) = (m.globalPid >> 24)
  AND typeof(r.start) = 'integer' AND typeof(r.end) = 'integer' AND r.end >= r.start
LEFT JOIN StringIds s ON s.id = r.nameId
WHERE m.deviceId = ? AND typeof(m.start) = 'integer' AND typeof(m.end) = 'integer' AND m.end >= m.start
  AND typeof(m.bytes) = 'integer' AND typeof(m.copyKind) = 'integer'
  AND typeof(m.srcKind) = 'integer' AND typeof(m.dstKind) = 'integer'
ORDER BY m.start"""
# Every column the two memcpy rules read, by table: without one of them they are not checked
# (a line in the findings' `not_checked` says so), rather than stopping the report.
MEMCPY_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "bytes", "copyKind", "srcKind", "dstKind", "correlationId",
                                   "globalPid", "deviceId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "correlationId", "globalTid", "nameId"),
    "StringIds": ("id", "value"),
}


def missing_columns(schema, needed: dict[str, tuple[str, ...]]) -> list[str]:
    """`TABLE` or `TABLE.column` for each of `needed` the export lacks."""
    out = []
    for table, columns in needed.items():
        if not schema.has(table):
            out.append(table)
        else:
            out += [f"{table}.{col}" for col in columns if not schema.has(table, col)]
    return out


def _memcpys(c: StepContext) -> np.ndarray | None:
    from nsight_tui.parsers.read.source import connect_readonly

    if not c.trace.schema.has("CUPTI_ACTIVITY_KIND_MEMCPY") or missing_columns(c.trace.schema, MEMCPY_COLUMNS):
        return None
    if c.trace.info.export_kind == "sqlite":
        con = connect_readonly(c.trace.path)
        try:
            rows = con.execute(_MEMCPY_SQL, (c.device,)).fetchall()
        finally:
            con.close()
    else:
        rows = _memcpy_rows_columnar(c)
    if not rows:
        return None
    a = np.array([r[:8] for r in rows], dtype=object)
    names = np.array([r[8] or "" for r in rows], dtype=object)
    start = a[:, 6].astype(np.float64)
    k = np.searchsorted(c.t0, np.nan_to_num(start, nan=-1), side="right") - 1
    in_step = (k >= 0) & (start < c.t1[np.clip(k, 0, None)])
    return np.array([(*r[:8], n) for r, n, keep in zip(rows, names, in_step) if keep], dtype=object) \
        if in_step.any() else None


def _memcpy_rows_columnar(c: StepContext) -> list[tuple]:
    """_MEMCPY_SQL's rows from nsys's Parquet/Arrow folders (no SQL there): the same LEFT
    JOINs in pandas, ordered by memcpy start."""
    import pandas as pd

    from nsight_tui.parsers.read.columns import open_tables

    m_cols = ["start", "end", "bytes", "copyKind", "srcKind", "dstKind", "correlationId", "globalPid", "deviceId"]
    with open_tables(c.trace.path, probe=False) as tables:
        m = tables.read("CUPTI_ACTIVITY_KIND_MEMCPY", m_cols)
        r = tables.read("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "correlationId", "globalTid", "nameId"])
        s = tables.read("StringIds", ["id", "value"])
    mf = pd.DataFrame({k: m.text(k) for k in m_cols})
    mf = mf[mf["deviceId"] == c.device]
    mf["pid"] = [None if g is None else g >> 24 for g in mf["globalPid"]]
    rf = pd.DataFrame({"r_start": r.text("start"), "r_end": r.text("end"), "correlationId": r.text("correlationId"),
                       "pid": [None if g is None else g >> 24 for g in r.text("globalTid")], "nameId": r.text("nameId")})
    sf = pd.DataFrame({"nameId": s.text("id"), "value": s.text("value")})
    j = mf.merge(rf, on=["correlationId", "pid"], how="left").merge(sf, on="nameId", how="left")
    j = j.sort_values("start", kind="stable")
    cols = ["start", "end", "bytes", "copyKind", "srcKind", "dstKind", "r_start", "r_end", "value"]
    return [tuple(None if pd.isna(v) else v for v in row) for row in j[cols].itertuples(index=False)]


def pageable_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    pageable = (m[:, 4] == 0) | (m[:, 5] == 0)
    host = np.isin(m[:, 3], (1, 2))  # HtoD, DtoH
    sel = m[pageable & host]
    if len(sel) == 0:
        return None
    nbytes = float(sel[:, 2].sum())
    if nbytes / c.n < _t("pageable_min_bytes"):
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    pinned_ns = nbytes / (_t("pinned_gbps") * 1e9) * 1e9
    saved = max(call_ns - pinned_ns, 0.0) / c.n
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "copy_ns": int(r[1] - r[0]), "call_ns": int(r[7] - r[6]),
             "direction": {1: "HtoD", 2: "DtoH"}[int(r[3])], "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "pageable-memcpy", "host<->device copies from pageable memory (staged, blocking the CPU)",
        sorted({str(r["range"]) for r in rows}), _ms(saved),
        f"time in the copies' CUDA calls − their bytes at {_t('pinned_gbps'):g} GB/s (pinned), per step",
        "pin the host buffers (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
        ".to(device, non_blocking=True)",
        {"copies_per_step": len(sel) / c.n, "bytes_per_step": nbytes / c.n, "call_ns_per_step": call_ns / c.n,
         "copy_ns_per_step": float((sel[:, 1] - sel[:, 0]).sum()) / c.n},
        rows, int(sel[0][6]), int(sel[0][7]))


def sync_memcpy(c: StepContext) -> Finding | None:
    m = _memcpys(c)
    if m is None:
        return None
    sync = np.array(["Async" not in str(n) and str(n).startswith(("cudaMemcpy", "cuMemcpy")) for n in m[:, 8]],
                    dtype=bool)
    sel = m[sync]
    if len(sel) == 0:
        return None
    call_ns = float((sel[:, 7] - sel[:, 6]).sum())
    copy_ns = float((sel[:, 1] - sel[:, 0]).sum())
    rows = [{"api": str(r[8]), "bytes": int(r[2]), "call_ns": int(r[7] - r[6]), "range": c.range_of(int(r[6]))}
            for r in sorted(sel, key=lambda r: -(r[7] - r[6]))[:10]]
    return Finding(
        "sync-memcpy", "synchronous copies inside the step",
        sorted({str(r["range"]) for r in rows}), _ms(max(call_ns - copy_ns, 0.0) / c.n),
        "time the CPU spent in the copies' calls beyond the copies themselves, per step",
        "use cudaMemcpyAsync semantics: tensor.to(device, non_blocking=True) from pinned memory",
        {"copies_per_step": len(sel) / c.n, "call_ns_per_step": call_ns / c.n}, rows,
        int(sel[0][6]), int(sel[0][7]))


def waited_communication(trace: Trace, rank) -> dict:
    """One rank's communication over its steady-state steps: `comm_ns` (its collective kernels'
    union), `exposed_ns` (of that, the time no compute kernel ran) and `waited_ns` (of the
    exposed time, the part during which the step was held up by it: compute work already issued
    and queued behind it, or a CPU thread of the rank blocked in a synchronising call). Exposed
    communication while the CPU is still issuing work sits in launch gaps that overlap would not
    shorten. Per the rank's `step_N` ranges; `steps` is their count."""
    from nsight_tui.parsers.analyses.ranks import COMMUNICATION

    ops, api = trace.ops, trace.api
    mine = (ops["gpid"].to_numpy(np.int64) == rank.gpid) & (ops["device"].to_numpy(np.int64) == rank.device)
    start, end = ops["start"].to_numpy(np.int64)[mine], ops["end"].to_numpy(np.int64)[mine]
    kernel = ops["kind"].to_numpy()[mine] == KERNEL
    comm_op = kernel & (name_families(trace)[ops["name"].to_numpy()[mine]] == COMMUNICATION)
    comm = intervals.union(start[comm_op], end[comm_op])
    compute = intervals.union(start[kernel & ~comm_op], end[kernel & ~comm_op])
    exposed = intervals.difference(comm, compute)
    # compute ops issued and not started: from their launching call's return to their start
    call = ops["api"].to_numpy()[mine]
    issued = ~comm_op & (call >= 0)
    a_end = api["end"].to_numpy(np.int64) if len(api) else np.zeros(0, np.int64)
    queued_s, queued_e = a_end[call[issued]], start[issued]
    pid_rows = np.flatnonzero((api["gtid"].to_numpy() & PID_MASK) == (rank.gpid & PID_MASK)) if len(api) else \
        np.zeros(0, np.int64)
    sync = pid_rows[idle_analysis(trace).api_kind[pid_rows] == API_SYNC]
    held = intervals.union(np.concatenate((queued_s, api["start"].to_numpy(np.int64)[sync] if len(sync) else [])),
                           np.concatenate((queued_e, a_end[sync] if len(sync) else [])))
    waited = intervals.intersect(exposed, held)
    own = process_steps(trace, rank.pid, infer=False)
    s0, s1 = own.start_ns, own.end_ns
    steps = intervals.union(s0, s1)
    return {"steps": len(s0), "step_ns": float((s1 - s0).mean()) if len(s0) else 0.0,
            "comm_ns": intervals.overlap(comm, steps), "exposed_ns": intervals.overlap(exposed, steps),
            "waited_ns": intervals.overlap(waited, steps)}


def exposed_communication(c: StepContext) -> Finding | None:
    from nsight_tui.parsers.analyses.ranks import find_ranks

    ranks = find_ranks(c.trace)
    rows = []
    for r in ranks:
        w = waited_communication(c.trace, r)
        if w["steps"] and w["comm_ns"]:
            rows.append({"rank": r.rank, "steps": w["steps"], "step_ns": w["step_ns"],
                         "comm_ns_per_step": w["comm_ns"] / w["steps"],
                         "exposed_comm_ns_per_step": w["exposed_ns"] / w["steps"],
                         "waited_comm_ns_per_step": w["waited_ns"] / w["steps"]})
    if not rows:
        return None
    # Data-parallel ranks move in lockstep: a rank that reaches a collective early waits inside it
    # for the slowest rank, and that wait (the straggler's gap) is no overlap problem. The rank that
    # waits least sets the pace; what its step waits on communication is what overlap can save.
    pace = min(rows, key=lambda x: x["waited_comm_ns_per_step"])
    alone = " (only this rank is in the export: part of its wait may be for a slower rank)" if len(rows) == 1 else ""
    if c.rank is not None:  # a rank filter: that rank's own exposed communication
        pace = next((x for x in rows if x["rank"] == c.rank.rank), pace)
        alone = (f" (rank {c.rank.rank} alone, under the rank filter: part of its wait may be for a slower rank)"
                 if pace["waited_comm_ns_per_step"] > min(x["waited_comm_ns_per_step"] for x in rows) else "")
    per = pace["waited_comm_ns_per_step"]
    if per < _t("comm_min_share") * pace["step_ns"]:
        return None
    return Finding(
        "exposed-communication", "collective communication not hidden behind compute",
        ["step_N/backward"], _ms(per),
        "per step of the rank that waits least (the others also wait for it): collective time with no compute "
        "kernel running while the step waited on it (compute work queued behind it, or the CPU blocked in a "
        "synchronise)" + alone,
        "overlap it: DDP(bucket_cap_mb=..., gradient_as_bucket_view=True), no_sync() for accumulation, "
        "FSDP prefetch; check the interconnect (NCCL_DEBUG=INFO)",
        {"waited_comm_ns_per_step": per, "exposed_comm_ns_per_step": pace["exposed_comm_ns_per_step"],
         "comm_ns_per_step": pace["comm_ns_per_step"], "rank": pace["rank"], "ranks": len(ranks)}, rows)


def warmup_in_window(c: StepContext) -> Finding | None:
    d = (c.t1 - c.t0).astype(np.float64)
    if len(d) < 3:
        return None
    med = float(np.median(d))
    slow = np.flatnonzero(d > _t("warmup_slow_ratio") * med)
    if len(slow) == 0:
        return None
    extra = float((d[slow] - med).sum())
    return Finding(
        "warmup-in-window", "compilation/autotuning inside what is taken as steady state",
        ["step_N"], _ms(extra / c.n), "the slow steps' time above the median step, spread over the steps",
        "run more warm-up iterations before the profiled ones (torch.compile, cuDNN/cuBLAS autotuning, the "
        "caching allocator), or start the capture later (nsys --capture-range=nvtx / cudaProfilerStart)",
        {"slow_steps": len(slow), "median_step_ns": med},
        [{"step": int(i), "step_ns": int(d[i])} for i in slow], int(c.t0[slow[0]]), int(c.t1[slow[0]]))


RULES = {
    "host-bound-gap": host_bound_gap,
    "sync-stall": sync_stall,
    "launch-bound": launch_bound,
    "unfused-optimizer": unfused_optimizer,
    "fp32-gemm-without-tensor-cores": fp32_gemm,
    "unfused-attention": unfused_attention,
    "occupancy-limited": occupancy_limited,
    "tensor-cores-idle": tensor_cores_idle,
    "elementwise-chain": elementwise_chain,
    "pageable-memcpy": pageable_memcpy,
    "sync-memcpy": sync_memcpy,
    "exposed-communication": exposed_communication,
    "warmup-in-window": warmup_in_window,
}
RULE_IDS = tuple(RULES)


def context(trace: Trace, attribution: str = "process", rank: Rank | None = None,
            ncu: NcuAnalysis | None = None) -> StepContext | None:
    """The steady-state steps the rules read: rank 0's (the lowest rank's) in an export of several,
    or `rank`'s (a rank filter), on that rank's GPU."""
    model = range_model(trace, attribution)
    every = steps_of(model)
    if not every.found:
        return None
    # One process's steps: an export around torchrun holds every rank's, and each rank is a run
    # of its own (per-step figures over two ranks' overlapping windows would count time twice).
    # The lowest rank's (rank 0's) where the ranks are known; exposed-communication looks at all.
    from nsight_tui.parsers.analyses.ranks import find_ranks

    first = rank.pid if rank is not None else next((r.pid for r in find_ranks(trace) if r.pid in every.pids),
                                                   int(pid_of(model.r_gtid[every.steady[:1]])[0]))
    steps = every.of_process(first)
    if len(steps) == 0:
        return None
    devices = [rank.device] if rank is not None else idle_analysis(trace).devices_of_process(int(model.r_gtid[steps[0]]))
    if not devices:
        return None
    # Each step's window is its period (this step's start to the next's), not its NVTX span: on a
    # capture without phase syncs the GPU works on a step long after the CPU closed its range.
    times = every.times(steps)
    return StepContext(trace, model, times.ids, times.start_ns, times.end_ns, devices[0], rank, ncu)


def findings(trace: Trace, attribution: str = "process", rules: dict | None = None,
             rank: Rank | None = None, ncu: NcuAnalysis | None = None) -> list[Finding]:
    """Every rule that fires on the trace's steady-state steps (`rank`'s under a rank filter),
    largest saving first, with each nanosecond of device time claimed by one finding only. `ncu`:
    an Nsight Compute report joined to the trace (analyses.ncu.analyse), for the rules that read it."""
    c = context(trace, attribution, rank, ncu)
    if c is None:
        return []
    out: list[Finding] = []
    for rule in (rules or RULES).values():
        found = rule(c)  # a rule per kernel name (occupancy-limited) gives a list
        out += found if isinstance(found, list) else [found] if found is not None else []
    return sorted(partition(out, c.cpu_wait_ns / 1e6), key=lambda f: (-f.saving_ms_per_step, f.id))


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


# Below this a finding's cause is present but fixing it gains nothing measurable: it stands apart.
NOTHING_TO_GAIN_MS = 0.01


def not_checked(trace: Trace) -> list[str]:
    """The rules that could not look at this export, each with the columns it lacks."""
    schema = trace.schema
    if not schema.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        return []  # no copies: nothing for the memcpy rules to find, nothing missing
    gone = missing_columns(schema, MEMCPY_COLUMNS)
    return [f"pageable-memcpy, sync-memcpy not checked: the export lacks {', '.join(gone)}"] if gone else []


def answers(trace: Trace, attribution: str = "process", ncu: NcuAnalysis | None = None) -> dict:
    """The JSON under "findings" in `report -f json`: the findings with a saving, their combined
    saving (each nanosecond once), and apart those present with nothing to gain."""
    c = context(trace, attribution, ncu=ncu)
    every = findings(trace, attribution, ncu=ncu)
    gain = [f for f in every if f.saving_ms_per_step >= max(NOTHING_TO_GAIN_MS, _t("min_saving_ms"))]
    apart = [f for f in every if f not in gain]
    alone = sum(f.saving_alone_ms_per_step or f.saving_ms_per_step for f in gain)
    combined = sum(f.saving_ms_per_step for f in gain)
    return {"step_ns": None if c is None else c.step_ns, "steps": 0 if c is None else c.n,
            "step_basis": "the step period: each step's start to the next's (the last ends with its GPU work)",
            "findings": [f.to_json() for f in gain],
            "combined_saving_ms_per_step": combined,
            "overlap_ms_per_step": alone - combined,
            "present_no_saving": [{"id": f.id, "title": f.title, "saving_alone_ms_per_step": f.saving_alone_ms_per_step,
                                   "evidence": f.evidence,
                                   "overlaps": f.overlaps, "capped_by_cpu_wait": f.capped_by_cpu_wait}
                                  for f in apart],
            "cpu_wait_ms_per_step": None if c is None else c.cpu_wait_ns / 1e6,
            "not_checked": not_checked(trace),
            "thresholds": {k: asdict(v) for k, v in THRESHOLDS.items()}}
