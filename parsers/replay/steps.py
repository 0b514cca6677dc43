"""Which ranges are the steps, and the step period on the measured or the replayed timeline.

The one place the replay chooses its steps: the model's iterations (`step_N`, `warmup_N`, named
by the capture or inferred from the kernel sequence), the steady-state ones measured, less the one a
run died in (out of GPU memory: no finished step). The period
is the model's (parsers/model/steps.py): from a step's start to the next iteration's start
on its thread; the last ends with the later of its range's end and its GPU work's end (the ops
whose launching call starts inside the range, in its process)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.steps import period_ends, steps_of
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.replay.graph import Graph
from nsight_tui.parsers.replay.simulate import Timeline


@dataclass(frozen=True)
class StepRanges:
    """Iterations in time order (steps and warm-ups: a warm-up's start ends the step before)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    gtid: np.ndarray
    is_step: np.ndarray
    names: list[str]
    # the iterations the run died in (out of GPU memory: model.steps.Steps.died), by name: no step
    # (their span is the time to the failure); one among the steady steps is kept as an iteration
    # that ends the step before
    died: tuple[str, ...] = ()

    @property
    def n_steps(self) -> int:
        return int(self.is_step.sum())


def step_ranges(trace) -> StepRanges:
    model = trace.derived.get("replay.model") or range_model(trace)
    trace.derived["replay.model"] = model
    taken = steps_of(model)
    # a step the run died in never finished: replayed as a step, its span to the failure (and the
    # allocator's retries) was the one "steady-state step" of a run that finished none
    steps, cut = taken.finished, np.setdiff1d(taken.steady, taken.finished)
    warm = np.concatenate([taken.warmup, cut]).astype(np.int64)
    ids = np.concatenate([steps, warm]).astype(np.int64)
    is_step = np.concatenate([np.ones(len(steps), bool), np.zeros(len(warm), bool)])
    start = model.r_start[ids].astype(np.int64)
    order = np.argsort(start, kind="stable")
    ids, is_step = ids[order], is_step[order]
    texts = model.trace.range_texts.objects
    return StepRanges(model.r_start[ids].astype(np.int64), model.r_end[ids].astype(np.int64),
                      model.r_gtid[ids].astype(np.int64), is_step, [str(texts[i]) for i in ids],
                      tuple(str(texts[i]) for i in taken.died))


def walked_thread(g: Graph, gtid: int) -> int:
    """The CPU thread a step's critical path is walked back on: the thread that frames the step, or
    where that thread made no CUDA call (a step marked for its process, not a thread: emit_nvtx
    captures of two ranks, h100_2gpu_1s), its process's thread with the most CUDA calls; before,
    the walk found no such thread and said nothing held the step. The step's instants are mapped onto
    the replayed timeline on the same thread (cpu_time_map): on a thread of no CUDA call they never
    moved, and every edit saved exactly nothing."""
    if gtid in g.thread_gtids or not g.thread_gtids:
        return gtid
    mine = [i for i, t in enumerate(g.thread_gtids) if pid_of(t) == pid_of(gtid)]
    if not mine:
        return gtid
    busiest = max(mine, key=lambda i: g.thread_slices[i][1] - g.thread_slices[i][0])
    return g.thread_gtids[busiest]


def cpu_time_map(g: Graph, tl: Timeline | None, gtid: int, t: np.ndarray) -> np.ndarray:
    """Replayed times of instants `t` on thread `gtid`'s clock (walked_thread: its process's busiest
    CUDA thread where `gtid` made no CUDA call): between two of its points, as late before the next
    point as it was measured (host time that an edit removed before a call moves the instant with that
    call), never before the previous point."""
    t = np.asarray(t, np.int64)
    gtid = walked_thread(g, gtid)
    if tl is None or gtid not in g.thread_gtids:
        return t.copy()
    a, b = g.thread_slices[g.thread_gtids.index(gtid)]
    pt, R = g.pt_time[a:b], tl.pt_ns[a:b]
    nxt = np.searchsorted(pt, t, side="left")
    prev = nxt - 1
    out = t.copy()
    has_next, has_prev = nxt < len(pt), prev >= 0
    n_ = np.minimum(nxt, len(pt) - 1)
    p_ = np.maximum(prev, 0)
    from_next = R[n_] - (pt[n_] - t)
    from_prev = R[p_] + (t - pt[p_])
    out = np.where(has_next, from_next, np.where(has_prev, from_prev, t))
    out = np.where(has_next & has_prev, np.maximum(out, R[p_]), out)
    return out


def step_periods(g: Graph, sr: StepRanges, tl: Timeline | None) -> np.ndarray:
    """Each step's period (ns) on the replayed timeline `tl`, or the measured one (None)."""
    start, end = step_spans(g, sr, tl)
    return end - start


def step_spans(g: Graph, sr: StepRanges, tl: Timeline | None) -> tuple[np.ndarray, np.ndarray]:
    """Each step's period as (start, end) ns on the replayed timeline `tl`, or the measured one."""
    start, end, _, _ = _spans(g, sr, tl)
    return start, end


def clock_periods(g: Graph, sr: StepRanges, tl: Timeline | None) -> tuple[np.ndarray, np.ndarray]:
    """Each step's period on each clock (ns): (the CPU's, the GPU's).

    The GPU's: from its first op's start to the next iteration's first op's start, the last to its
    work's end. Where the CPU runs ahead (no sync holds it), its periods shrink while the GPU's queue
    grows: the pace a long run keeps is then the GPU's, which a window of a few steps shows only on
    this clock.
    The CPU's: the step's period (step_spans), but the last step's ends with its range on the CPU's
    clock, not with its GPU work: a CPU that ran ahead leaves the last step the GPU's whole backlog to
    wait for, a drain at the window's end which no step of a longer run pays (one 3-step capture with
    its syncs and host pauses taken away: CPU periods 117.6, 88.2 and 140.8 ms, the last 40.2 of it
    the drain)."""
    _, _, gpu, cpu = _spans(g, sr, tl)
    return cpu, gpu


def _spans(g: Graph, sr: StepRanges, tl: Timeline | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = len(sr.start_ns)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    start, end = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for gt in np.unique(sr.gtid):
        m = sr.gtid == gt
        start[m] = cpu_time_map(g, tl, int(gt), sr.start_ns[m])
        end[m] = cpu_time_map(g, tl, int(gt), sr.end_ns[m])
    op_end = g.op_end if tl is None else tl.op_end_ns
    op_start = g.op_start if tl is None else tl.op_start_ns
    first_op, last_op = _range_ops(g, sr, op_start, op_end)
    has_ops = first_op >= 0
    last = end.copy()
    last[has_ops] = np.maximum(end[has_ops], op_end[last_op[has_ops]])
    first = np.full(n, -1, np.int64)
    first[has_ops] = op_start[first_op[has_ops]]
    ends, cpu_ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
    gpu = np.zeros(n, np.int64)
    for gt in np.unique(sr.gtid):
        m = np.flatnonzero(sr.gtid == gt)
        ends[m] = period_ends(start[m], last[m], start[m])
        cpu_ends[m] = period_ends(start[m], end[m], start[m])
        has = first[m] >= 0
        if has.any():
            gs = first[m][has]
            gpu[m[has]] = period_ends(gs, last[m][has], gs) - gs
    st = sr.is_step
    return start[st], ends[st], gpu[st], cpu_ends[st] - start[st]


def _range_ops(g: Graph, sr: StepRanges, op_start: np.ndarray, op_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per iteration range, its first-starting and its last-ending op (positions; -1 where it has
    none): the ops whose launch call starts inside the range, in its process."""
    n = len(sr.start_ns)
    api_start = g.trace.api["start"].to_numpy(np.int64)
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    o_pid = pid_of(g.trace.ops["gpid"].to_numpy(np.int64))
    first, last = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    if not len(api_start):
        return first, last
    for pid in np.unique(pid_of(sr.gtid)):
        sel = np.flatnonzero((o_api >= 0) & (o_pid == pid))
        launch = api_start[o_api[sel]]
        order = np.argsort(launch, kind="stable")
        sel, launch = sel[order], launch[order]
        for i in np.flatnonzero(pid_of(sr.gtid) == pid).tolist():
            mine = sel[np.searchsorted(launch, sr.start_ns[i], "left"):np.searchsorted(launch, sr.end_ns[i], "right")]
            if len(mine):
                first[i] = int(mine[np.argmin(op_start[mine])])
                last[i] = int(mine[np.argmax(op_end[mine])])
    return first, last


def gpu_step_windows(g: Graph, sr: StepRanges, tl: Timeline) -> tuple[np.ndarray, np.ndarray, list[tuple[str, int]]]:
    """Each steady step's period on the GPU's clock (clock_periods) as a window to walk back for
    what holds it, where that clock sets the step (the CPU ran ahead): (starts, ends, origins), a
    window from its first op's start to the next iteration's first op's start, the last to its work's
    end; its origin the op the walk begins at, ("start", the next iteration's first op) or ("end",
    its own last-ending op). A step without GPU work gets the empty window (its start twice)."""
    n = len(sr.start_ns)
    first, last = _range_ops(g, sr, tl.op_start_ns, tl.op_end_ns)
    starts, ends, origins = [], [], []
    for i in np.flatnonzero(sr.is_step).tolist():
        if first[i] < 0:
            t = int(sr.start_ns[i])
            starts.append(t)
            ends.append(t)
            origins.append(("end", -1))
            continue
        nxt = next((j for j in range(i + 1, n) if sr.gtid[j] == sr.gtid[i] and first[j] >= 0), None)
        starts.append(int(tl.op_start_ns[first[i]]))
        if nxt is None:
            ends.append(int(tl.op_end_ns[last[i]]))
            origins.append(("end", int(last[i])))
        else:
            ends.append(int(tl.op_start_ns[first[nxt]]))
            origins.append(("start", int(first[nxt])))
    return np.array(starts, np.int64), np.array(ends, np.int64), origins
