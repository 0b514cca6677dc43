"""The straggler evened out: what the edit `straggler` replays.

Data-parallel ranks run one program: step by step, each rank's CPU threads make the same CUDA calls
in the same order and its streams run the same kernels. The rank that arrives last at the collectives
(its collective kernels start latest behind the first rank's, on average over the collectives they
share, as analyses.ranks judges it) holds every other rank in its all-reduces. Evened out, what it runs
longer than the other ranks at the same place is taken at their length (their median): a pause of its own
(host time at least `pause_ns` longer before the same CUDA call) and another kernel in a kernel's place
(over OP_OUTLIER x the others' time: another precision, a larger share of the data, a slower GPU; never a
collective, whose length is the wait the replay couples); at the range's low end each of its threads and
streams also at the others' pace (the median ratio over its pairs), which may be the machine's. Paired
step by step (`step_N` of the same name) and, inside a step, a thread with the other rank's thread of the
same name and order (the main thread with the main thread, `pt_autograd_1` with `pt_autograd_0`), a
stream with the stream of the same order, by what they hold in common: runs of calls of the same names in
the same order, runs of ops of the same kernel family (a GEMM of another precision, another name, stands
in a GEMM's place), aligned (align.opcodes). What does not pair stays as measured, and the edit says how
much paired. A blocking call the straggler makes where the others make none (a `.item()` of its own: a
call its sequence holds and no other rank's does there) no longer waits, as `nosync` has it. The others'
kernels are read at their time alone and slowed as the straggler's kernel at
that place was (replay.contention): they spun beside collectives waiting for the straggler.

Checked on the committed stragglers (sample_traces/replay/straggler, a 5 ms sleep on rank 1 alone, and
straggler_uneven, rank 1's batch 12 of 8; two H200s; tests/core/test_straggler_replay.py) against their
twins without the straggler."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.replay import contention
from nsight_tui.parsers.replay.align import opcodes
from nsight_tui.parsers.replay.graph import Graph, host_points
from nsight_tui.parsers.replay.steps import StepRanges

# two ranks' calls in one step differ by a few (an event query, a bucket's timing): Myers' walk up to this
# many insertions and deletions, difflib's block matching beyond (align.opcodes)
MAX_EDITS = 64
# a stretch or op read for the pace only where the others' is at least this long (shorter ones' ratios
# are the clock's grain)
MIN_REF_NS = 1_000
# an op of the straggler's this much longer than the others' (and by this much) is another kernel in
# its place (another precision, another algorithm), taken at the others' length; a kernel's own
# jitter from step to step is a few percent
OP_OUTLIER = 1.25
OP_OUTLIER_MIN_NS = 2_000
# a rank straggles where what it runs longer than the others (excess_ns_per_step) is at least this share of
# the step: the `straggler` finding fires from it (findings.thresholds' comm_min_share takes its value from
# here) and below it the edit says that no rank straggles by the finding's measure (edits._straggler)
STRAGGLES_MIN_SHARE = 0.05


@dataclass(frozen=True)
class Evened:
    """The straggler's process, how late it arrived, and its stretches and ops evened out (module doc)."""

    pid: int
    others: list[int]
    lateness_ns: float  # its collective kernels' mean start behind the first rank's, per collective
    steps: int  # its steps
    # per CPU point, its host time, and per op, its duration: the straggler's pauses and other kernels
    # (pairs longer than the others' by an outlier's excess) at the others' length
    delta_ns: np.ndarray
    op_dur: np.ndarray
    # the same with each of the straggler's threads and streams also at the others' pace (scaled by
    # the median ratio of its pairs: a slower core, a throttled GPU)
    paced_delta_ns: np.ndarray
    paced_op_dur: np.ndarray
    pace: dict[str, float]  # per thread or stream of the straggler with pairs: its pace over the others'
    # the end points (graph.blocks) of blocking calls it makes where the others make none (a `.item()` of
    # its own): they no longer wait
    unblocked: list[int]
    threads: tuple[int, int]  # (thread-steps matched, the straggler's thread-steps with a partner)
    streams: tuple[int, int]  # (stream-steps matched, the straggler's stream-steps with a partner)


def excess_ns_per_step(g: Graph, ev: Evened) -> float:
    """What the straggler runs longer than the others at the same place, ns per step of its own: its pauses
    and other kernels (its host time and ops less theirs evened out) and the time its thread spent in blocking
    calls of its own (the wait evening them out takes away, at most); the `straggler` finding's estimate."""
    waited = sum(int(g.delta_ns[k]) for k in ev.unblocked)
    return (int((g.delta_ns - ev.delta_ns).sum()) + int((g.op_dur - ev.op_dur).sum()) + waited) / ev.steps


def lateness(g: Graph) -> dict[int, float]:
    """Per process sharing collectives with another: the mean, over those collectives, of its
    collective kernel's start behind the earliest member's (ns)."""
    pid = pid_of(g.trace.ops["gpid"].to_numpy(np.int64))
    late: dict[int, list[int]] = defaultdict(list)
    for members in g.coll_members:
        m = np.asarray(members, np.int64)
        if len(np.unique(pid[m])) < 2:
            continue
        first = int(g.op_start[m].min())
        for op in m.tolist():
            late[int(pid[op])].append(int(g.op_start[op]) - first)
    return {p: float(np.mean(v)) for p, v in late.items()} if len(late) >= 2 else {}


def _thread_roles(g: Graph) -> dict[tuple[int, str, int], int]:
    """(process, thread name without its digits, order among such threads by tid) -> thread index."""
    by: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for t, gtid in enumerate(g.thread_gtids):
        name = re.sub(r"\d+", "", g.trace.threads.get(int(gtid), ""))
        by[(int(pid_of(np.int64(gtid))), name)].append((int(gtid), t))
    return {(p, name, k): t for (p, name), ts in by.items() for k, (_, t) in enumerate(sorted(ts))}


def _stream_roles(g: Graph) -> dict[tuple[int, int], int]:
    """(process, order of the stream among the process's streams by device and id) -> stream index."""
    by: dict[int, list[tuple[tuple[int, int], int]]] = defaultdict(list)
    for s, (gpid, device, stream) in enumerate(g.stream_keys):
        by[int(pid_of(np.int64(gpid)))].append(((device, stream), s))
    return {(p, k): s for p, ss in by.items() for k, (_, s) in enumerate(sorted(ss))}


def rank_steps(sr: StepRanges, pid: int) -> dict[str, tuple[int, int]]:
    gp = pid_of(sr.gtid.astype(np.int64))
    return {sr.names[i]: (int(sr.start_ns[i]), int(sr.end_ns[i])) for i in np.flatnonzero(sr.is_step & (gp == pid))}


def even_out(g: Graph, sr: StepRanges, pause_ns: int) -> Evened | None:
    """The straggler evened out (module doc): `pause_ns`, a stretch of host time this much longer than
    the others' is a pause of the straggler's own. None where no two processes share a collective."""
    late = lateness(g)
    if not late:
        return None
    me = max(late, key=lambda p: late[p])
    others = sorted(p for p in late if p != me)
    names = g.trace.api["name"].to_numpy(np.int64)
    my_steps = rank_steps(sr, me)
    their_steps = {p: rank_steps(sr, p) for p in others}

    roles = _thread_roles(g)
    ref_delta = np.full((len(others), len(g.delta_ns)), np.nan)
    own_only = np.zeros(len(g.delta_ns), bool)  # the straggler's points no other rank's sequence holds
    threads = [0, 0]
    for (p, name, k), t in roles.items():
        if p != me:
            continue
        for step, span in my_steps.items():
            mine = _points(g, t, span)
            partners = [(i, _points(g, roles[(o, name, k)], their_steps[o][step])) for i, o in enumerate(others)
                        if (o, name, k) in roles and step in their_steps[o]]
            if not len(mine) or not partners:
                continue
            threads[1] += 1
            matched = False
            alone = np.ones(len(mine), bool)
            my_keys = _call_keys(g, names, mine)
            for i, theirs in partners:
                a, b, run_start = _paired(my_keys, _call_keys(g, names, theirs))
                alone[a] = False
                # a point's stretch is the time since the one before it: a run's first pair is a call
                # paired, not a stretch, unless the run opens the step
                a, b = a[~run_start], b[~run_start]
                ref_delta[i, mine[a]] = g.delta_ns[theirs[b]]
                matched |= len(a) > 0
            threads[0] += matched
            if matched:
                own_only[mine[alone]] = True
    in_steps = _inside_any(g.pt_time, list(my_steps.values()))
    cpu_outlier = lambda own, ref: own - ref >= pause_ns  # noqa: E731
    ref = _median(ref_delta)
    host = host_points(g)
    delta = _evened(g.delta_ns, ref, host & in_steps, g.pt_thread, cpu_outlier)
    paced_delta, cpu_pace = _evened(g.delta_ns, ref, host & in_steps, g.pt_thread, cpu_outlier, paced=True)

    sroles = _stream_roles(g)
    ref_dur = np.full((len(others), len(g.op_dur)), np.nan)
    streams = [0, 0]
    # kernels aligned by family: a GEMM of another precision (another name) stands in a GEMM's place
    families = np.unique(np.asarray(name_families(g.trace)).astype(str), return_inverse=True)[1]
    op_keys = families.reshape(-1)[g.trace.ops["name"].to_numpy(np.int64)]
    launch_t = np.where(g.op_launch_pt >= 0, g.pt_time[np.maximum(g.op_launch_pt, 0)], -1)
    # a kernel beside a collective ran slower (replay.contention): the others' kernels spin beside their
    # waits for the straggler, so each is taken at its time alone, then slowed as much as the straggler's
    # own kernel at that place was (its overlap as measured)
    con = contention.of_trace(g.trace)
    slow = con.slowdown(contention.beside(g.op_start, g.op_end, con.collective, con.device))
    op_stream = np.full(len(g.op_dur), -1, np.int64)
    for s, ops in enumerate(g.streams):
        op_stream[ops] = s
    for (p, k), s in sroles.items():
        if p != me:
            continue
        for step, span in my_steps.items():
            mine = _ops(g, s, launch_t, span)
            partners = [(i, _ops(g, sroles[(o, k)], launch_t, their_steps[o][step])) for i, o in enumerate(others)
                        if (o, k) in sroles and step in their_steps[o]]
            if not len(mine) or not partners:
                continue
            streams[1] += 1
            matched = False
            for i, theirs in partners:
                a, b, _ = _paired(op_keys[mine], op_keys[theirs])
                ref_dur[i, mine[a]] = g.op_dur[theirs[b]] / slow[theirs[b]] * slow[mine[a]]
                matched |= len(a) > 0
            streams[0] += matched
    # a collective's length is its wait: the coupling replays it
    gpu_outlier = lambda own, ref: (own > OP_OUTLIER * ref) & (own - ref > OP_OUTLIER_MIN_NS)  # noqa: E731
    ref = _median(ref_dur)
    in_steps = (launch_t >= 0) & _inside_any(launch_t, list(my_steps.values()))
    dur = _evened(g.op_dur, ref, (g.op_coll < 0) & in_steps, op_stream, gpu_outlier)
    paced_dur, gpu_pace = _evened(g.op_dur, ref, (g.op_coll < 0) & in_steps, op_stream, gpu_outlier, paced=True)
    pace = {g.trace.thread_label(g.thread_gtids[t]): r for t, r in cpu_pace.items()}
    pace.update({f"stream {g.stream_keys[st][2]}": r for st, r in gpu_pace.items()})
    unblocked = sorted(k for k in g.blocks if own_only[k])
    return Evened(me, others, late[me], max(len(my_steps), 1), delta, dur, paced_delta, paced_dur, pace, unblocked,
                  (threads[0], threads[1]), (streams[0], streams[1]))


def _inside_any(t: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    out = np.zeros(len(t), bool)
    for a, b in spans:
        out |= (t >= a) & (t < b)
    return out


def _median(ref: np.ndarray) -> np.ndarray:
    """Per item, the median over the other ranks' paired values (NaN: paired with none)."""
    if len(ref) == 1:
        return ref[0]
    with np.errstate(all="ignore"):
        return np.nanmedian(ref, axis=0)


def _evened(own: np.ndarray, ref: np.ndarray, mask: np.ndarray, group: np.ndarray, outlier, paced: bool = False):
    """`own` (the straggler's stretches or ops, where `mask`) with each pair longer than the others' by
    `outlier` (a pause, a kernel of another precision) at the others' length; with `paced`, first each
    `group` (a thread, a stream) with pairs scaled by the median over its pairs of own / the others'
    (slower throughout; never made slower), and then also that pace per group. Per pair an outlier,
    not its shorter side: the ranks' jitter would add up to a rank faster than either."""
    out = own.astype(np.float64)
    paired = mask & ~np.isnan(ref)
    pace: dict[int, float] = {}
    if paced:
        for gr in np.unique(group[paired]).tolist():
            base = paired & (group == gr) & (ref >= MIN_REF_NS)
            if base.any():
                pace[gr] = float(np.median(own[base] / ref[base]))
                out[mask & (group == gr)] /= max(pace[gr], 1.0)
    hit = paired & outlier(out, np.where(np.isnan(ref), np.inf, ref))
    out[hit] = ref[hit]
    evened = np.minimum(np.round(out).astype(np.int64), own)
    return (evened, pace) if paced else evened


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of a and b paired by their runs of equal items (align.opcodes), and per pair whether
    it opens a run that does not open `a` (its item's predecessor is not paired with b's)."""
    if len(a) == len(b) and np.array_equal(a, b):
        return np.arange(len(a)), np.arange(len(b)), np.zeros(len(a), bool)
    ia: list[int] = []
    ib: list[int] = []
    opens: list[bool] = []
    for tag, i1, i2, j1, j2 in opcodes(a.tolist(), b.tolist(), max_d=MAX_EDITS):
        if tag == "equal":
            ia.extend(range(i1, i2))
            ib.extend(range(j1, j2))
            opens.extend([i1 > 0] + [False] * (i2 - i1 - 1))
    return np.asarray(ia, np.int64), np.asarray(ib, np.int64), np.asarray(opens, bool)


def _points(g: Graph, t: int, span: tuple[int, int]) -> np.ndarray:
    """Thread t's CPU points inside span (start..end), in order."""
    a, b = g.thread_slices[t]
    lo, hi = np.searchsorted(g.pt_time[a:b], span, side="left")
    return np.arange(a + lo, a + hi)


def _call_keys(g: Graph, names: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Per point: its call's name code, twice over for its end (a start and an end of one call differ)."""
    return names[g.pt_call[pts]] * 2 + g.pt_is_end[pts].astype(np.int64)


def _ops(g: Graph, s: int, launch_t: np.ndarray, span: tuple[int, int]) -> np.ndarray:
    """Stream s's ops launched inside span, in stream order."""
    ops = g.streams[s]
    t = launch_t[ops]
    return ops[(t >= span[0]) & (t < span[1])]
