"""The replay for callers: `predict(trace, edits)` -> Prediction (baseline, predicted step with its
range, what holds the step after the edits, the GPU's idle split). The CLI's `whatif` and the
findings call this; nothing here formats text."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from nsight_tui.parsers.model.steps import steps_alike, typical_period_ns
from nsight_tui.parsers.read.bare import ProfilerCost, profiler_cost
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace, load_trace
from nsight_tui.parsers.read.rank_merge import MergedRanks, RankFiles
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.contention import assumption as contention_assumption, contended
from nsight_tui.parsers.replay.contention import of_trace as contention_of_trace
from nsight_tui.parsers.replay.critical import Holder, IdleSplit, critical_paths, holders, idle_splits
from nsight_tui.parsers.replay.edits import Applied, Edit, EditError
from nsight_tui.parsers.replay.graph import Graph, build
from nsight_tui.parsers.replay.launch_cost import QueueShift, queue_shift
from nsight_tui.parsers.replay.pace import cpu_range, own_time, typical_host
from nsight_tui.parsers.replay.simulate import Plan, Timeline, simulate
from nsight_tui.parsers.replay.steps import (StepRanges, clock_periods, gpu_step_windows, step_ranges, step_spans,
                                             walked_thread)


class NoSteps(EditError):
    """The capture has no steady-state step to replay."""


class NoCalls(EditError):
    """The export holds no CUDA API calls the replay can read (none captured, or their names
    column missing): nothing says when the ops were launched."""


@dataclass
class Replayed:
    """One replay: its steps' periods and the typical step (ns, model.steps.typical_period_ns)."""

    timeline: Timeline
    periods_ns: np.ndarray
    starts_ns: np.ndarray
    ends_ns: np.ndarray
    cpu_periods_ns: np.ndarray  # the same steps on each clock (steps.clock_periods)
    gpu_periods_ns: np.ndarray
    floor_ns: int = 0  # the plan's period_floor_ns: no longer run keeps a shorter step (edits `workers:N`)

    @property
    def typical_clocks_ns(self) -> tuple[int, int | None]:
        """The typical period on the CPU's clock, and on the GPU's (None: no step launched GPU work):
        the median where the steps are alike, the mean where they alternate (typical_period_ns)."""
        cpu = typical_period_ns(self.cpu_periods_ns)
        gpu = self.gpu_periods_ns[self.gpu_periods_ns > 0]
        return cpu, (typical_period_ns(gpu) if len(gpu) else None)

    @property
    def on_gpu_clock(self) -> bool:
        """The CPU ran ahead of its GPU work (an edit took away what held it): the GPU's period, longer
        than the CPU's, is the pace a longer run keeps."""
        if not len(self.periods_ns):
            return False
        cpu, gpu = self.typical_clocks_ns
        return gpu is not None and gpu > cpu

    @property
    def step_ns(self) -> int:
        """The pace a longer run keeps: the typical period on the slower of the two clocks
        (steps.clock_periods, typical_clocks_ns)."""
        if not len(self.periods_ns):
            return 0
        cpu, gpu = self.typical_clocks_ns
        return max(gpu if self.on_gpu_clock and gpu is not None else cpu, self.floor_ns)

    @property
    def floor_holds(self) -> bool:
        """The workers the host work moved to set the step, not the replayed timeline."""
        return self.floor_ns > 0 and self.step_ns == self.floor_ns


@dataclass
class Prediction:
    path: Path
    steps: int
    measured_step_ns: int  # the measured period over the steady-state steps (typical_period_ns)
    replayed_step_ns: int  # the same, of the unchanged replay
    identity_error: float  # median over steps of |replayed - measured| / measured
    edits: list[Applied]
    step_ns: int  # predicted: the edits at their assumptions' central values
    low_ns: int
    high_ns: int
    holders: list[Holder]  # what holds the (predicted) step: its critical path, ns per step and share
    idle: IdleSplit  # the (predicted) step's GPU idle time by cause, mean per step
    baseline_holders: list[Holder] = field(default_factory=list)
    baseline_idle: IdleSplit | None = None
    launch_latency_ns: int = 0  # measured: median op start - launch call start onto an idle stream
    queue_gap_ns: int = 0  # measured: median gap between queued ops on a stream
    assumptions: list[str] = field(default_factory=list)
    cpu_assumption: str = ""  # where the range moves with the CPU's pace: what it assumes of it
    # the workload run alone beside the capture (`capture --bare-run`): the step without the profiler
    profiler: ProfilerCost | None = None
    # launches the edits leave onto an empty queue, or behind queued work, and the CPU time that may
    # move with them (launch_cost: not in the prediction)
    queue: QueueShift | None = None
    # the range's two sources apart, each (low, high) predicted step, ns: the edits' assumptions at
    # their ends with the CPU at this capture's pace, and the CPU's pace at its ends with the edits central
    edits_range_ns: tuple[int, int] | None = None
    pace_range_ns: tuple[int, int] | None = None
    # the predicted step's typical period on each clock, ns (Replayed.step_ns takes the slower): the CPU's
    # and the GPU's (None: no step launched GPU work)
    clocks_ns: tuple[int, int | None] = (0, None)
    # the measured steps' median period, ns, where the steps are not alike (model.steps.steps_alike:
    # more than one of them, and one in ten, over 1.5x the median) and measured_step_ns is their mean; None where alike
    unlike_median_ns: int | None = None
    # the predicted step where the workers the host work went to set it (`workers:N`), ns; None: they don't
    workers_floor_ns: int | None = None
    moved_host_ns: int = 0  # the host work the nohost edits took off the steps, ns per step
    # per-rank exports replayed as one (read.rank_merge): the files, their clock offsets and how
    # closely their shared collectives' ends line up on the one clock; None for one export
    rank_files: RankFiles | None = None
    # the unchanged replay's typical period on each clock, ns, as clocks_ns: replayed_step_ns is the slower
    baseline_clocks_ns: tuple[int, int | None] = (0, None)
    # where kernels beside a collective are re-timed as the edits move the collectives: what that
    # assumes (replay.contention); '' where no GPU's factor is above 1
    contention: str = ""
    # per process that holds steady-state steps (a rank), how many, largest first: `steps` counts every
    # rank's, so two ranks of 6 steps are 12 periods (one entry: one process's steps)
    steps_per_rank: tuple[int, ...] = ()

    @property
    def saving_ns(self) -> int:
        return self.replayed_step_ns - self.step_ns

    @property
    def workers_to_keep_up(self) -> int | None:
        """Where the edits take host work off the steps and no `workers:N` says where it goes: how many
        loader workers, each doing one step's share at this capture's pace, deliver a batch as fast as
        the predicted step (None otherwise)."""
        if not self.moved_host_ns or self.step_ns <= 0 or any(a.edit.startswith("workers:") for a in self.edits):
            return None
        return max(1, math.ceil(self.moved_host_ns / self.step_ns))

    @property
    def workers_factor_if_waiting(self) -> float | None:
        """Where the host work taken off is the loop's wait for N loader workers it already runs: each
        worker delivers a batch every N measured steps, so N x this many keep up with the predicted step
        (None where workers_to_keep_up is)."""
        return None if self.workers_to_keep_up is None else self.measured_step_ns / self.step_ns


def replay(g: Graph, sr: StepRanges, plan: Plan) -> Replayed:
    tl = contended(g, plan, simulate(g, plan), sr)
    s, e = step_spans(g, sr, tl)
    return Replayed(tl, e - s, s, e, *clock_periods(g, sr, tl), plan.period_floor_ns)


def _same(a: Plan, b: Plan) -> bool:
    return (a.blocking == b.blocking and a.handoffs == b.handoffs and a.block_after_ns == b.block_after_ns
            and all(np.array_equal(x, y) for x, y in ((a.delta_ns, b.delta_ns), (a.op_dur, b.op_dur),
                                                       (a.op_launch_off, b.op_launch_off),
                                                       (a.op_prev_off, b.op_prev_off),
                                                       (a.op_launch_pt, b.op_launch_pt), (a.op_src, b.op_src),
                                                       (a.op_src_off, b.op_src_off), (a.op_coll, b.op_coll),
                                                       (a.coll_tail_ns, b.coll_tail_ns))))


def replay_plans(g: Graph, sr: StepRanges, plans: Sequence[Plan]) -> list[Replayed]:
    """Each plan replayed; a plan equal to one before it (an edit without an assumption has its
    low, mid and high alike) takes that one's replay."""
    out: list[Replayed] = []
    for i, plan in enumerate(plans):
        same = next((out[j] for j in range(i) if _same(plans[j], plan)), None)
        # the same timeline; a floor is the plan's own (workers:N at an assumption's ends)
        out.append(replay(g, sr, plan) if same is None else replace(same, floor_ns=plan.period_floor_ns))
    return out


def _why(g: Graph, sr: StepRanges, r: Replayed) -> tuple[list[Holder], IdleSplit]:
    """What holds the step and the GPU's idle split, over the windows that set the step: each step's
    period on the CPU's clock, or where the CPU ran ahead and the GPU's clock sets the step
    (Replayed.step_ns), each on the GPU's, walked back from the op that ends it."""
    gt = np.array([walked_thread(g, int(x)) for x in sr.gtid[sr.is_step]], np.int64)
    n = len(r.starts_ns)
    starts, ends, origins, period = r.starts_ns, r.ends_ns, None, int(r.periods_ns.mean()) if n else 0
    if n and r.on_gpu_clock:
        starts, ends, origins = gpu_step_windows(g, sr, r.timeline)
        period = int((ends - starts).mean())
    charged = critical_paths(g, r.timeline, starts, ends, gt, origins)
    idle = idle_splits(g, r.timeline, starts, ends, pid_of(gt)).sum(axis=0)
    per_step = {k: v // max(n, 1) for k, v in charged.items()}
    if r.floor_holds and r.floor_ns > period:
        # the step waits for the workers' next batch: the wait is theirs (the replay's window ran shorter)
        per_step[("loader workers: the host work moved to them (their batch not ready)", "workers")] = r.floor_ns - period
        period = r.floor_ns
    return holders(per_step, period), IdleSplit(*(idle // max(n, 1)).tolist())


def graph_of(trace: Trace) -> tuple[Graph, StepRanges]:
    """The trace's graph and steps, built once and kept with the trace."""
    if "replay.graph" not in trace.derived:
        if not len(trace.api):
            raise NoCalls(f"{trace.path.name}: no CUDA API calls read from the export, so no launches to replay")
        trace.derived["replay.graph"] = (build(trace), step_ranges(trace))
    return trace.derived["replay.graph"]


def baseline(trace: Trace) -> Replayed:
    """The unchanged replay of the trace's steps, computed once and kept with the trace (every
    finding's saving is measured against it)."""
    if "replay.baseline" not in trace.derived:
        g, sr = graph_of(trace)
        trace.derived["replay.baseline"] = replay(g, sr, Plan.of(g))
    return trace.derived["replay.baseline"]


def typical(trace: Trace) -> tuple[Graph, Replayed]:
    """The graph the edits change, and its unchanged replay, built once and kept with the trace: the
    steps' host time at the typical step's (pace.typical_host). The identity replays each step as it
    ran; an edit that leaves the host time as it is replays the step the CPU usually runs, so a step
    or two that ran slow by chance (where the GPU set the step and hid it) do not decide the step the
    edit hands to the CPU."""
    if "replay.typical" not in trace.derived:
        g, sr = graph_of(trace)
        start, end = step_spans(g, sr, None)
        t = replace(g, delta_ns=typical_host(g, edit_mod.range_spans(g, sr, edit_mod.STEP_RANGE),
                                             steps_alike(end - start)))
        trace.derived["replay.typical"] = (t, replay(t, sr, Plan.of(t)))
    return trace.derived["replay.typical"]


@dataclass
class EditedReplay:
    """`edits` replayed on the typical step (predict.typical): at this
    capture's CPU pace with the edits' assumptions at their low, central and high values, and at the
    central values with the CPU at the slow and fast ends of its pace (pace.cpu_range); the unchanged
    replay at each of those three paces."""

    graph: Graph
    unchanged: Replayed
    low: Replayed
    mid: Replayed
    high: Replayed
    fast: Replayed  # the CPU at the fast end, unchanged beside it: unchanged_fast
    slow: Replayed
    unchanged_fast: Replayed
    unchanged_slow: Replayed
    applied: list[Applied]
    cpu_assumption: str = ""  # what the range says of the CPU's pace (pace.cpu_range)
    mid_plan: Plan | None = None  # the plan `mid` replays
    moved_host_ns: int = 0  # the host work the nohost edits took off the steps, ns per step (edits.moved_host_ns)

    def _savings(self) -> list[int]:
        """The savings at the edits' low, central and high figures, then at the CPU's fast and slow
        ends: the unchanged and the edited replays at one CPU pace (the saving of the change, not the
        difference between two runs' machines)."""
        u = self.unchanged.step_ns
        saves = [u - self.low.step_ns, u - self.mid.step_ns, u - self.high.step_ns,
                 self.unchanged_fast.step_ns - self.fast.step_ns, self.unchanged_slow.step_ns - self.slow.step_ns]
        # a slow end's saving can outgrow this capture's step (a launch-bound step graphed: the unchanged
        # step at the slow pace grows, the graphed one hardly): never a step shorter than the edited
        # program's fastest replay
        floor = min(r.step_ns for r in (self.low, self.mid, self.high, self.fast, self.slow))
        return [min(s, u - floor) for s in saves]

    def steps_ns(self, baseline_ns: int) -> tuple[int, int, int]:
        """Predicted (low, mid, high) steps: the baseline's replayed step less the saving; the range
        over the edits' assumptions and the CPU's pace, each at its ends while the other stays central."""
        saves = self._savings()
        return baseline_ns - max(saves), baseline_ns - saves[1], baseline_ns - min(saves)

    def parts_ns(self, baseline_ns: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The range's two sources apart, each (low, high) predicted step: the edits' assumptions at their
        ends (the CPU at this capture's pace), and the CPU at its pace's ends (the edits central)."""
        saves = self._savings()
        edits, pace = saves[:3], [saves[1], *saves[3:]]
        return ((baseline_ns - max(edits), baseline_ns - min(edits)),
                (baseline_ns - max(pace), baseline_ns - min(pace)))


def _at_pace(plan: Plan, g: Graph, own: np.ndarray, factors: dict[int, tuple[float, float]], end: int) -> Plan:
    """`plan` with each thread's own time in the steps (`own`) scaled by its factor at `end` (0 the
    fast end, 1 the slow)."""
    out = replace(plan, delta_ns=plan.delta_ns.copy())
    if plan.floor_thread in factors:  # the workers run the host work at the pace of the thread it came off
        out.period_floor_ns = round(plan.period_floor_ns * factors[plan.floor_thread][end])
    for ti, ends in factors.items():
        first, last = g.thread_slices[ti]
        sel = np.zeros(len(g.pt_time), bool)
        sel[first:last] = own[first:last]
        out.delta_ns[sel] = np.round(out.delta_ns[sel] * ends[end]).astype(np.int64)
    return out


def edited(trace: Trace, edits: Sequence[Edit], load=load_trace, twin_host: bool = False,
           pace: bool = True) -> EditedReplay:
    """`edits` applied and replayed (EditError as predict's); `twin_host`: edits.apply's diagnostic;
    without `pace`, the range is the edits' assumptions alone (two replays fewer)."""
    g, sr = graph_of(trace)
    # every edit on the one typical step, host edits too: a saving is the same step's whatever else is
    # edited beside it (on the steps as they ran, a host edit beside a faster GEMM gave back the slow
    # steps the typical step smooths, and every fix together came out 14 ms slower than one of them)
    t, unchanged = typical(trace)
    ed = edit_mod.apply(t, sr, list(edits), load, twin_host)
    if not pace:
        low, mid, high = replay_plans(t, sr, ed.plans)
        return EditedReplay(t, unchanged, low, mid, high, mid, mid, unchanged, unchanged, ed.applied, mid_plan=ed.mid,
                            moved_host_ns=edit_mod.moved_host_ns(t, sr, ed))
    if "replay.cpu_range" not in trace.derived:
        trace.derived["replay.cpu_range"] = (cpu_range(g, edit_mod.range_spans(g, sr, edit_mod.STEP_RANGE)),
                                             own_time(g) & edit_mod.in_steps(g, sr))
    rng, own = trace.derived["replay.cpu_range"]  # the typical step's graph has the same points
    key = "replay.at_pace"
    if key not in trace.derived:
        trace.derived[key] = tuple(replay(t, sr, _at_pace(Plan.of(t), t, own, rng.factors, end)) for end in (0, 1))
    low, mid, high, fast, slow = replay_plans(t, sr, [*ed.plans, *(_at_pace(ed.mid, t, own, rng.factors, end)
                                                                   for end in (0, 1))])
    unchanged_fast, unchanged_slow = trace.derived[key]
    return EditedReplay(t, unchanged, low, mid, high, fast, slow, unchanged_fast, unchanged_slow, ed.applied,
                        rng.assumption, ed.mid, edit_mod.moved_host_ns(t, sr, ed))


@dataclass
class Saving:
    """What `edits` save per step on the replay: the unchanged replay's step minus the edited one's
    (the typical step period, typical_period_ns, ns), at the assumptions' central value and ends."""

    baseline_step_ns: int
    step_ns: int
    low_ns: int  # the smaller predicted step (the larger saving)
    high_ns: int
    applied: list[Applied]

    @property
    def saving_ns(self) -> int:
        return self.baseline_step_ns - self.step_ns


def saving(trace: Trace, edits: Sequence[str | Edit], load=load_trace) -> Saving:
    """The replayed saving of `edits` alone, without the critical path (the findings' ranking), its
    range over the edits' assumptions (the CPU's pace is `predict`'s: `whatif fix:ID`); EditError as
    predict's."""
    parsed = [e if isinstance(e, Edit) else edit_mod.parse(e) for e in edits]
    _, sr = graph_of(trace)
    if sr.n_steps == 0:
        raise no_steps(trace, sr)
    base = baseline(trace)
    ed = edited(trace, parsed, load, pace=False)
    lo, mid, hi = ed.steps_ns(base.step_ns)
    return Saving(base.step_ns, mid, lo, hi, ed.applied)


def no_steps(trace: Trace, sr: StepRanges) -> NoSteps:
    """Why there is no step to replay, in one line: the run died in its only steps, or it has none."""
    if sr.died:
        return NoSteps(f"{trace.path.name}: the run ran out of GPU memory in {', '.join(sr.died)} before it finished a "
                       "step: no step to replay (the report's out-of-memory section says the failed allocation and "
                       "the fixes that apply)")
    if sr.names:  # iterations, none of them a steady-state step
        return NoSteps(f"{trace.path.name}: no steady-state step to replay: its iterations "
                       f"({', '.join(dict.fromkeys(sr.names))}) are warm-ups; the replay takes the step_N ones")
    from nsight_tui.parsers.model.inferred import inference

    return NoSteps(f"{trace.path.name}: no steady-state step to replay: no NVTX range step_N names an iteration, and "
                   f"none was inferred from the kernel sequence ({inference(trace).reason}); name each iteration "
                   "step_0, step_1, ... with an NVTX range (torch.cuda.nvtx.range_push/range_pop around the loop's "
                   "body), as `nsight-tui capture` does")


def predict(trace: Trace, edits: Sequence[str | Edit], load=load_trace) -> Prediction:
    """Replay `trace` unchanged and with `edits`; EditError (one line) for an edit that cannot
    apply, NoSteps where the capture has no step."""
    parsed = [e if isinstance(e, Edit) else edit_mod.parse(e) for e in edits]
    g, sr = graph_of(trace)
    if sr.n_steps == 0:
        raise no_steps(trace, sr)
    measured = step_spans(g, sr, None)
    m_periods = measured[1] - measured[0]
    base = baseline(trace)
    err = float(np.median(np.abs(base.periods_ns - m_periods) / np.maximum(m_periods, 1)))
    if not parsed:
        hold, idle = _why(g, sr, base)
        return Prediction(Path(trace.given), int(len(m_periods)), typical_period_ns(m_periods), base.step_ns, err, [],
                          base.step_ns, base.step_ns, base.step_ns, hold, idle, hold, idle, g.launch_latency_ns,
                          g.queue_gap_ns, [], profiler=profiler_cost(trace), clocks_ns=_clocks(base),
                          unlike_median_ns=_unlike_median(m_periods), rank_files=_rank_files(trace),
                          baseline_clocks_ns=_clocks(base), steps_per_rank=_steps_per_rank(sr))
    ed = edited(trace, parsed, load)
    lo, mid, hi = ed.steps_ns(base.step_ns)
    by_edits, by_pace = ed.parts_ns(base.step_ns)
    hold, idle = _why(ed.graph, sr, ed.mid)
    b_hold, b_idle = _why(g, sr, base)
    queue = None if ed.mid_plan is None else queue_shift(
        ed.graph, ed.unchanged.timeline, (ed.mid_plan, ed.mid.timeline),
        edit_mod.in_steps(ed.graph, sr), sr.n_steps)
    return Prediction(Path(trace.given), int(len(m_periods)), typical_period_ns(m_periods), base.step_ns, err,
                      ed.applied, mid, lo, hi, hold, idle, b_hold, b_idle,
                      g.launch_latency_ns, g.queue_gap_ns, [a.assumption for a in ed.applied if a.assumption],
                      ed.cpu_assumption if lo != hi else "", profiler_cost(trace), queue, by_edits, by_pace,
                      _clocks(ed.mid), _unlike_median(m_periods),
                      ed.mid.floor_ns if ed.mid.floor_holds else None, ed.moved_host_ns, _rank_files(trace),
                      _clocks(base), contention_assumption(contention_of_trace(trace)), _steps_per_rank(sr))


def _steps_per_rank(sr: StepRanges) -> tuple[int, ...]:
    _, counts = np.unique(pid_of(sr.gtid[sr.is_step].astype(np.int64)), return_counts=True)
    return tuple(sorted((int(c) for c in counts), reverse=True))


def _rank_files(trace: Trace) -> RankFiles | None:
    return trace.rank_files if isinstance(trace, MergedRanks) else None


def _unlike_median(periods: np.ndarray) -> int | None:
    return None if steps_alike(periods) else int(np.median(periods))


def _clocks(r: Replayed) -> tuple[int, int | None]:
    return r.typical_clocks_ns if len(r.periods_ns) else (0, None)
