"""Kernels beside a collective run slower: the contention the replay re-times when an edit moves it.

A NCCL collective's kernel holds some of its GPU's SMs and keeps its memory busy while it runs, and
it runs as long as its slowest rank keeps it waiting; a compute kernel running beside it on another
stream takes longer than alone. The replay keeps each op's measured time, so an edit that moves a
collective against the compute (a straggler's pause removed: rank 0's all-reduce no longer spins
through its backward) would keep the compute at its contended length.

How much longer is read off the capture itself, per GPU: the same kernel (name, grid and block) run
fully beside a collective and, elsewhere in the capture, with none beside it (a transformer's layers
repeat their kernels, and only some layers' backward overlaps a bucket's all-reduce); the factor is
those runs' time over their time at the kernel's median alone, weighted by time (at least
MIN_KERNELS kernels with MIN_EACH runs each way, else no factor: 1). A kernel partly beside a
collective is slowed in proportion to the part: time = alone x (1 + (factor - 1) x overlap).

Checked on the committed DDP pair (sample_traces/async: 25 MB buckets and one bucket, H100,
tests/core/test_contention.py): read off the bucketed capture alone, the factors (1.50 and 1.41 on
the two GPUs) against those of the twin's kernels, which ran the same kernels without the overlap
(1.44 and 1.39, time-weighted); re-timed to the twin's overlap, the compute's time over the capture
453.55 -> 449.20 ms against the twin's 448.19 (kept as measured: 453.55), and 451.63 -> 447.93
against 447.96. On a straggler (per-rank exports, a sleep on rank 1 alone: tests/core/test_straggler_replay.py)
removing the sleep measured -4.00 ms on rank 0's clock; re-timed, the replay predicts -4.29, kept at the
measured lengths +0.04."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nsight_tui.parsers.kernels.families import COMMUNICATION, name_families
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import KERNEL_TABLE, LAUNCH_COLUMNS
from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.simulate import Plan, Timeline, simulate
from nsight_tui.parsers.replay.steps import StepRanges, step_spans

FULLY_BESIDE = 0.9  # a run this much beside a collective is one of the kernel's contended runs
MIN_EACH = 3
MIN_KERNELS = 3


@dataclass(frozen=True)
class Contention:
    """Per op: a collective's kernel (`collective`), a kernel the contention re-times (`retimed`), its
    GPU (`device`); per GPU the factor (time fully beside a collective over time alone) and the
    kernels it was read off."""

    collective: np.ndarray
    retimed: np.ndarray
    device: np.ndarray
    factor: dict[int, float]
    kernels: dict[int, int]

    @property
    def any(self) -> bool:
        return any(f > 1.0 for f in self.factor.values())

    def slowdown(self, overlap: np.ndarray) -> np.ndarray:
        """Per op: its time at `overlap` (the fraction of it beside a collective) over its time alone."""
        f = np.ones(len(overlap))
        for dev, k in self.factor.items():
            sel = self.device == dev
            f[sel] = 1.0 + (k - 1.0) * overlap[sel]
        return f


def beside(start: np.ndarray, end: np.ndarray, collective: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Per op: the fraction of its time (start..end) during which a collective's kernel ran on its GPU
    (the collectives' union: two at once count once); 0 for a collective itself."""
    out = np.zeros(len(start))
    for dev in np.unique(device[collective]):
        c = collective & (device == dev)
        cs, ce = start[c], end[c]
        order = np.argsort(cs, kind="stable")
        cs, ce = cs[order], np.maximum.accumulate(ce[order])
        new = np.concatenate(([True], cs[1:] > ce[:-1]))  # the union of the collectives' intervals
        us, ue = cs[new], np.maximum.reduceat(ce, np.flatnonzero(new))
        sel = (device == dev) & ~collective
        dur = np.maximum(end[sel] - start[sel], 1)
        out[sel] = (_covered_upto(us, ue, end[sel]) - _covered_upto(us, ue, start[sel])) / dur
    return out


def _covered_upto(us: np.ndarray, ue: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per instant t: the time the disjoint sorted intervals us..ue cover before it."""
    before = np.concatenate(([0], np.cumsum(ue - us)))
    j = np.searchsorted(us, t, side="right")  # intervals starting at or before t
    last = np.maximum(j - 1, 0)
    part = np.clip(t - us[last], 0, ue[last] - us[last])
    return np.where(j > 0, before[last] + part, 0)


def contention_of(trace) -> Contention:
    """The capture's collectives and, per GPU with any, the factor read off its kernels (module doc)."""
    ops = trace.ops
    kind = ops["kind"].to_numpy()
    code = ops["name"].to_numpy()
    kernel = kind == KERNEL
    # a collective's kernels: the communication family (NCCL's, and the all-reduce kernels of others),
    # as the ranks' summaries count them
    collective = kernel & (name_families(trace)[code] == COMMUNICATION)
    device = ops["device"].to_numpy(np.int64)
    retimed = kernel & ~collective
    factor: dict[int, float] = {}
    kernels: dict[int, int] = {}
    # without the kernels' launch shapes a name stands for several kernels (a GEMM's name spans shapes,
    # ratios 0.4x to 4.4x by name alone): no factor read
    shapes = all(trace.schema.has(KERNEL_TABLE, c) for c in LAUNCH_COLUMNS)
    if collective.any() and shapes:
        start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
        over = beside(start, end, collective, device)
        config = trace.launch_configs()
        blocks = np.zeros(len(ops), np.int64)
        threads = np.zeros(len(ops), np.int64)
        blocks[config.index.to_numpy()] = config["grid_blocks"].to_numpy()
        threads[config.index.to_numpy()] = config["threads"].to_numpy()
        for dev in np.unique(device[collective]).tolist():
            factor[dev], kernels[dev] = _factor(retimed & (device == dev), over, end - start, code, blocks, threads)
    return Contention(collective, retimed, device, factor, kernels)


def _factor(sel: np.ndarray, over: np.ndarray, dur: np.ndarray, code: np.ndarray, blocks: np.ndarray,
            threads: np.ndarray) -> tuple[float, int]:
    """Over the kernels (name, grid, block) run at least MIN_EACH times fully beside a collective and
    MIN_EACH times with none, their contended runs' time over the same runs at their kernel's median time
    alone (each run at its kernel's median beside: one slow outlier weighs as a typical run); 1.0 where
    fewer than MIN_KERNELS kernels have both (never below 1: a kernel is not faster beside one). Weighted
    by time, not a median over kernels: a collective's blocks take SMs from a full-wave GEMM and barely
    touch a short elementwise kernel, and the short ones are the many (on a straggler's rank 0, three
    captures, the median over kernels read x1.03..1.10, the time-weighted x1.24..1.25, the twin's compute
    implied x1.23)."""
    contended = alone_time = 0.0
    used = 0
    keys = np.stack([code[sel], blocks[sel], threads[sel]], axis=1)
    o, d = over[sel], dur[sel]
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    full = np.bincount(inverse, weights=o >= FULLY_BESIDE, minlength=len(uniq))
    none = np.bincount(inverse, weights=o == 0, minlength=len(uniq))
    for k in np.flatnonzero((full >= MIN_EACH) & (none >= MIN_EACH)).tolist():  # the few run both ways
        mine = inverse == k
        with_c, alone = d[mine & (o >= FULLY_BESIDE)], d[mine & (o == 0)]
        contended += len(with_c) * float(np.median(with_c))
        alone_time += len(with_c) * max(float(np.median(alone)), 1.0)
        used += 1
    if used < MIN_KERNELS:
        return 1.0, used
    return max(1.0, contended / alone_time), used


# rounds of re-timing and replaying: the overlap moves with the compute's new lengths (a later
# all-reduce overlaps more of the next kernels), so a round takes all of the change the last replay
# asks for until that swings further than the round before, then half of it (a quarter, an eighth).
# The rounds end once the step they replay moves by under SETTLED_NS two rounds running (the answers are given to
# 0.01 ms), or the asked lengths differ from those replayed by under that much a step in all: a kernel
# at the edge of an all-reduce can flip in and out of it from round to round without moving the step
MAX_ROUNDS = 12
SETTLED_NS = 10_000


def of_trace(trace) -> Contention:
    """contention_of, read once and kept with the trace."""
    if "replay.contention" not in trace.derived:
        trace.derived["replay.contention"] = contention_of(trace)
    return trace.derived["replay.contention"]


def contended(g: Graph, plan: Plan, tl: Timeline, sr: StepRanges) -> Timeline:
    """`plan`'s timeline with each kernel re-timed to the collectives beside it there, replayed until
    the step settles: its time in `plan` x slowdown(overlap now) / slowdown(overlap in the graph's
    unchanged replay), so the unchanged plan replays unchanged and an edit that leaves the overlap
    where it was changes nothing. A kernel whose time an edit set (kernels-from, speed) keeps it:
    that time is the edit's, at the overlap the edit assumed."""
    c = of_trace(g.trace)
    if not c.any:
        return tl
    key = ("replay.contention_ref", id(g))
    if key not in g.trace.derived:
        unchanged = simulate(g, Plan.of(g))
        g.trace.derived[key] = c.slowdown(beside(unchanged.op_start_ns, unchanged.op_end_ns, c.collective, c.device))
    ref = g.trace.derived[key]
    mine = c.retimed & (plan.op_dur == g.op_dur) & (plan.op_dur > 0)
    if not mine.any():
        return tl
    dur = plan.op_dur.astype(np.float64)
    share, last, step, still = 1.0, np.inf, _step_ns(g, sr, tl), 0
    for _ in range(MAX_ROUNDS):
        now = c.slowdown(beside(tl.op_start_ns, tl.op_end_ns, c.collective, c.device))
        asked = plan.op_dur.astype(np.float64)
        asked[mine] = plan.op_dur[mine] * now[mine] / ref[mine]
        off = float(np.abs(asked - dur).sum())
        if off < SETTLED_NS * max(sr.n_steps, 1):
            break
        if off > last:
            share = max(share / 2, 0.125)
        last = off
        dur = dur + share * (asked - dur)
        tl = simulate(g, replace(plan, op_dur=np.round(dur).astype(np.int64)))
        step, was = _step_ns(g, sr, tl), step
        still = still + 1 if abs(step - was) < SETTLED_NS else 0
        if still == 2:  # twice: one round can leave the step where it was while the overlap still moves
            break
    return tl


def _step_ns(g: Graph, sr: StepRanges, tl: Timeline) -> float:
    """The steps' median period on `tl` (their start to the next one's), ns."""
    start, end = step_spans(g, sr, tl)
    return float(np.median(end - start)) if len(start) else 0.0


def assumption(c: Contention) -> str:
    """What the replay assumes of the contention, where it re-times any kernel ('' where not)."""
    if not c.any:
        return ""
    each = ", ".join(f"GPU {dev} x{k:.2f} (read off {c.kernels[dev]:,} kernels run both ways)"
                     for dev, k in sorted(c.factor.items()) if k > 1.0)
    return (f"a kernel beside a collective runs slower, in proportion to the part of it beside one, up to {each}; "
            "each kernel the edits leave as measured re-timed to the collectives beside it in the replay "
            "(replay.contention)")
