"""The CPU time a library's choice of kernels brings with it, carried from a twin capture.

A kernel is launched by a library call (cuBLAS, for a GEMM) whose host work depends on the kernel
it picked: TF32's stream-K GEMMs come with a `cudaMemsetAsync` of their workspace before each
launch and more host time in the library, fp32's with other kernels and other calls. `kernels-from`
pairs the two captures' kernels; a kernel launched under the same name in both (an *anchor*: the
framework's own elementwise kernels) is the same op with the same host work around it, one whose
name changed or that one capture lacks is the library's choice. So per CPU thread, the time from
one anchor's launch call to the next anchor's (a *stretch*: the framework's work between the two
ops, and the library's calls where it has any) is split in two kinds:

- a stretch without a changed kernel on either side is the same work in both captures: the ratio
  of its time in the twin to its time here is the twin's CPU pace relative to this capture's
  (captures of one machine differ in pace by tens of percent, both ways, and that is not the edit);
- a stretch that launches a changed kernel (on either side) takes the twin's time for its stretch,
  divided by that pace: the library's work as the twin did it, at this capture's CPU pace.

Time a thread spends waiting (a blocking call's wait, a hand-over from another thread) is no host
work and stays out of both sides."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.pace import own_time


@dataclass
class Carried:
    """Per CPU point of this capture: the factor its time between points is scaled by (1: kept)."""

    factor: np.ndarray
    changed: int  # stretches that launch a changed kernel, on either side
    same: int  # stretches without one: the pace is read off these
    pace: dict[int, float]  # per thread (this capture's gtid): the twin's time / this one's, unchanged
    # stretches (the median over its iterations of each iteration's median)
    added_ns: int  # host time the changed stretches that begin inside `inside` gain (negative: lose)


def _launch_counts(g: Graph, ops: np.ndarray) -> np.ndarray:
    """Per CPU point: how many of `ops` (a mask over the graph's ops) it launched."""
    out = np.zeros(len(g.pt_time), np.int64)
    np.add.at(out, g.op_launch_pt[(g.op_launch_pt >= 0) & ops], 1)
    return out


def carry(g: Graph, twin: Graph, anchors: np.ndarray, inside: np.ndarray, iteration: np.ndarray,
          twin_iteration: np.ndarray, ignore: tuple[np.ndarray, np.ndarray] | None = None,
          twin_pace: bool = False, counted: tuple[np.ndarray, np.ndarray] | None = None) -> Carried:
    """`anchors`: (this capture's kernel, the twin's kernel) pairs of kernels launched under the same
    name in both, in any order; `inside` per point of this capture: counted in `added_ns`;
    `iteration` per point: the iteration it falls in (the pace is read per thread and iteration: it
    moves within a capture too), `twin_iteration` the same per point of the twin. A stretch counts
    only where it crosses as many iteration starts on both sides (an optimizer's stretch runs into
    the next step's first launch on both): where this capture's iterations take their kernels from
    the twin's out of order (each planted step of one capture from the step before it), the stretch
    from a planted step's end to the next step's start would, in the twin, hold the whole planted
    step between. `ignore`: per op of each capture, ops whose launch neither anchors nor changes a
    stretch (collectives, which kernels-from re-times where this capture launched them).
    `counted`: per op of each capture, ops matched by neither side's name that change a stretch only
    where the two sides launch a different number of them in it (memsets: cuBLAS zeroing a split-K
    GEMM's output comes and goes with the kernel it picks; as many on both sides is the same work,
    and a capture taken as its own twin replays as it is).
    `twin_pace`: the twin's CPU pace instead of this capture's: every unchanged stretch scaled by
    the pace read off them, a changed one as long as it ran in the twin: a diagnostic (the pace
    comes from the twin, and one capture cannot know another's), not a prediction."""
    factor = np.ones(len(g.pt_time), np.float64)
    out = Carried(factor, 0, 0, {}, 0)
    if len(anchors) < 2:
        return out
    a_pt, b_pt = g.op_launch_pt[anchors[:, 0]], twin.op_launch_pt[anchors[:, 1]]
    ok = (a_pt >= 0) & (b_pt >= 0)
    a_pt, b_pt = a_pt[ok], b_pt[ok]
    # launches of kernels that are not anchors (the library's choice), as launch points per side
    skip_a, skip_b = ignore if ignore is not None else (np.zeros(g.n_ops, bool), np.zeros(twin.n_ops, bool))
    count_a, count_b = counted if counted is not None else (np.zeros(g.n_ops, bool), np.zeros(twin.n_ops, bool))
    other_a = _launch_counts(g, ~skip_a & ~count_a)
    other_a[a_pt] -= 1
    other_b = _launch_counts(twin, ~skip_b & ~count_b)
    other_b[b_pt] -= 1
    n_counted_a = np.concatenate([[0], np.cumsum(_launch_counts(g, count_a & ~skip_a))])
    n_counted_b = np.concatenate([[0], np.cumsum(_launch_counts(twin, count_b & ~skip_b))])
    free_a, free_b = own_time(g), own_time(twin)
    own_a = np.concatenate([[0], np.cumsum(np.where(free_a, g.delta_ns, 0))])
    own_b = np.concatenate([[0], np.cumsum(np.where(free_b, twin.delta_ns, 0))])
    n_other_a = np.concatenate([[0], np.cumsum(other_a)])
    n_other_b = np.concatenate([[0], np.cumsum(other_b)])
    order = np.argsort(a_pt, kind="stable")
    a_pt, b_pt = a_pt[order], b_pt[order]
    added = 0.0
    for ti in range(len(g.thread_gtids)):
        mine = g.pt_thread[a_pt] == ti
        pa, pb = a_pt[mine], b_pt[mine]
        if len(pa) < 2:
            continue
        # a stretch: from the end of one anchor's launch call to the next anchor's launch call's start
        # (inclusive: that start's own time since the point before it), both on one thread each side
        lo_a = g.call_end_pt[g.pt_call[pa[:-1]]] + 1
        hi_a = pa[1:]
        lo_b = twin.call_end_pt[twin.pt_call[pb[:-1]]] + 1
        hi_b = pb[1:]
        valid = ((lo_a <= hi_a) & (lo_b <= hi_b) & (twin.pt_thread[pb[:-1]] == twin.pt_thread[pb[1:]])
                 & (lo_a > 0) & (lo_b > 0)
                 & (iteration[pa[1:]] - iteration[pa[:-1]] == twin_iteration[pb[1:]] - twin_iteration[pb[:-1]]))
        lo_a, hi_a, lo_b, hi_b = lo_a[valid], hi_a[valid], lo_b[valid], hi_b[valid]
        t_a = own_a[hi_a + 1] - own_a[lo_a]
        t_b = own_b[hi_b + 1] - own_b[lo_b]
        # launches of other kernels strictly between the two anchors' launch points
        changed = (((n_other_a[hi_a] - n_other_a[lo_a]) > 0) | ((n_other_b[hi_b] - n_other_b[lo_b]) > 0)
                   | ((n_counted_a[hi_a] - n_counted_a[lo_a]) != (n_counted_b[hi_b] - n_counted_b[lo_b])))
        same = ~changed & (t_a > 0) & (t_b > 0)
        it = iteration[lo_a]
        ratios = []
        for k in np.unique(it).tolist():
            here = it == k
            if not (same & here).any():
                continue
            pace = float(np.median(t_b[same & here] / t_a[same & here]))
            ratios.append(pace)
            out.same += int((same & here).sum())
            hit = changed & here & (t_a > 0)
            out.changed += int(hit.sum())
            at = 1.0 if twin_pace else pace  # the pace the CPU runs at after the change
            if twin_pace:
                t_b = np.where(same & here, t_a * pace, t_b)
                hit = (t_a > 0) & here
            for lo, hi, ta, tb in zip(lo_a[hit].tolist(), hi_a[hit].tolist(), t_a[hit].tolist(), t_b[hit].tolist()):
                target = tb / at
                sel = slice(lo, hi + 1)
                factor[sel] = np.where(free_a[sel], target / ta, 1.0)
                if inside[lo]:
                    added += target - ta
        if ratios:
            out.pace[g.thread_gtids[ti]] = float(np.median(ratios))
    out.added_ns = int(round(added))
    return out
