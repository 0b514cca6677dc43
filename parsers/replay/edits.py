"""What-if edits: each turns the measured plan into the changed one (simulate.Plan).

    speed:PATTERN=K       ops whose name matches a glob, or of a kernel family, K times faster;
                          speed:PATTERN@RANGE=K only those launched inside RANGE;
                          speed:PATTERN=K1..K2 a factor not known, between K1 and K2 (the
                          answer's ends; central: the duration halfway between the ends');
                          speed:PATTERN=K1..KC..K2 the same with its central factor KC
    drop:PATTERN[@RANGE]  ops matching PATTERN (as speed: matches them) gone: no GPU time, the ops
                          after them on their streams in order, and the CPU time inside the calls
                          that launched only dropped ops gone too (the host time around them kept)
    fuse:P1+P2+...[@RANGE[,N+][,<DURATION]]
                          each longest run of at least two (N) consecutive kernels on one stream,
                          each matching one of P1, P2, ... (a name glob or a family) and no longer
                          than DURATION, launched inside one instance of RANGE (default: the step)
                          inside the steps, one kernel (fused.py: the fused kernel's time and the
                          host time between the launches are assumptions)
    kernels-from:TWIN     kernel and device-to-device copy durations from another capture,
                          matched by their sequence; its collectives where the twin launched
                          them (another DDP bucket size); the host time around each changed
                          kernel's launch from the twin, at this capture's CPU pace (stretches.py)
    nosync[:RANGE]        the blocking syncs inside RANGE (default: the step) no longer block;
                          nosync:CALL (a CUDA call's name, e.g. cudaStreamSynchronize): those
                          blocking calls inside the steps
    nohost[:RANGE]        host time between CUDA calls inside RANGE removed (default: the pauses
                          during which the GPU was idle, which the idle split calls launch-starved);
                          nohost:DURATION those pauses at least DURATION long; nohost:-DURATION
                          each of those pauses shortened by DURATION (a sleep or stall of known length)
    workers:N             the host work the nohost edits remove runs in N worker processes beside
                          the step (DataLoader(num_workers=N)): a step no shorter than that work / N,
                          the pace a longer run keeps once the workers' prefetched batches are spent
    graph[:RANGE]         RANGE's CPU work (default: the step) as one CUDA graph launch (the host
                          time before a range opens is not its: _before_span); for the step, the
                          loop's own long pauses outside the ranges nested in it stay (centrally:
                          _loop_pauses)
    attention[:RANGE]     attention written out (a score GEMM, passes over the scores, a GEMM;
                          kernels.attention finds them by their order) launched inside RANGE
                          (default: the step) as one fused kernel: the passes and the copies its
                          matmuls make of their operands and gradients gone with their launches
                          and, centrally, the framework's work between its launches (one op
                          left, forward and backward); the GEMMs kept, standing for the fused
                          kernel's matmuls
    pin[:RANGE]           the pageable host<->device copies launched inside RANGE (default: the
                          step) from pinned memory with non_blocking=True: a host-to-device copy's
                          call returns after its enqueue, each copy at a pinned copy's rate (_pin,
                          replay.pinned)
    straggler             the rank that arrives last at the collectives (several ranks: a folder of
                          per-rank exports, or one export of several) without what it runs longer
                          than the others at the same place: its pauses (host stretches 1 ms or more
                          longer), other kernels (ops over 1.25x) and blocking calls of its own (the
                          others make none there: they no longer wait); at the low end also at the
                          others' pace (replay.straggler); no argument, given once
    fix:FINDING_ID        the edits that finding names (resolved by the findings, over the trace)

RANGE is an NVTX range name (a glob; `step` is the steady-state steps' periods): the edit applies
to every thread of the range's process while the range is open. Where the export has no NVTX range
of that name, the ranges inferred from its kernel sequence (model.inferred: `forward`, `layer_N`,
a generate() call's `prefill` and `decode`, ...) on the thread that launched their kernels. An edit that rests on a figure
not measured in this capture carries a low and a high value (`Assumption`); the prediction is
replayed at both.

Over 900 lines on purpose: the parser of the edit grammar and each edit's change to the plan
sit together, so what an edit's words mean and what it does to the replay read in one place; what
an edit reads from the captures is apart (the twin's host time: replay.stretches; the chains and a
fused kernel's time: replay.fused; what a pinned copy costs: replay.pinned).
"""
from __future__ import annotations

import difflib
import fnmatch
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from nsight_tui.parsers.exception import NsightError
from nsight_tui.parsers.kernels.families import FAMILY_KEYS, device_work_ops, name_families
from nsight_tui.parsers.kernels.kernel_names import decode_gemm
from nsight_tui.parsers.read.ids import MEMSET, api_display_name, pid_of
from nsight_tui.parsers.read.process_ranks import rank_of
from nsight_tui.parsers.replay.align import opcodes
from nsight_tui.parsers.replay import fused, pinned, straggler, stretches
from nsight_tui.parsers.replay.cudagraph import graph_launch_calls, graph_timing, segment_ends
from nsight_tui.parsers.replay.graph import (HANDOFF_MIN_PAUSE_NS, Graph, build, calls_launching_only, host_points,
                                             inside_calls)
from nsight_tui.parsers.replay.simulate import Plan
from nsight_tui.parsers.replay.steps import StepRanges, step_ranges

STEP_RANGE = "step"
# `speed:` no slower than this (a thousand times slower): below it an op outlasts any capture, and
# its duration the replay's integer nanoseconds
MIN_SPEED = 1e-3


class EditError(NsightError):
    """An edit that cannot be read or applied: one line for the user (exit status 2)."""


class OneRank(EditError):
    """`straggler` on a trace of one rank: no collective shared by two ranks. `hint` says what to give
    instead; a caller that knows more (Profile.whatif: the trace came from a folder holding one rank's
    export) gives its own."""

    HINT = "a folder of per-rank exports, or one export of several ranks"

    def __init__(self, hint: str = HINT):
        super().__init__(f"no collective shared by two ranks in this trace: no straggler to even out ({hint})")


@dataclass(frozen=True)
class Edit:
    kind: str  # speed, drop, fuse, kernels-from, nosync, nohost, workers, graph, attention, pin, fix
    text: str
    pattern: str = ""
    factor: float = 1.0
    twin: str = ""
    range: str = ""
    # speed:PATTERN=K1..K2: the factor's ends (low, high) where it is not known; factor is the central
    factors: tuple[float, float] | None = None
    why: str = ""  # where a finding's fix names the edit: what its range stands on (the finding's words)


@dataclass
class Applied:
    """What an edit changed, in words and counts, and the assumption it rests on (if any)."""

    edit: str
    changed: str
    assumption: str = ""


@dataclass
class Edited:
    # the plans at the assumptions' ends and central values; an end's step is usually the smaller at
    # `low`, but where an assumption's direction is not known beforehand (kernels-from's host time at
    # the twin's pace) either may be: the replays are ordered after (EditedReplay.steps_ns)
    low: Plan
    mid: Plan  # at their central values: the prediction
    high: Plan
    applied: list[Applied] = field(default_factory=list)
    # kernels-from: per CPU thread (gtid), the twin's pace over this capture's on the same work
    twin_pace: dict[int, float] = field(default_factory=dict)
    # nohost: the CPU points whose host time it took away (what `workers:N` hands to workers)
    moved_host: np.ndarray | None = None

    @property
    def plans(self) -> tuple[Plan, Plan, Plan]:
        return (self.low, self.mid, self.high)


KINDS = ("speed", "drop", "fuse", "kernels-from", "nosync", "nohost", "workers", "graph", "attention", "pin", "straggler",
         "fix")
MAX_WORKERS = 4096


def parse(text: str) -> Edit:
    kind, colon, arg = text.partition(":")
    if kind not in KINDS:
        close = difflib.get_close_matches(kind.strip().lower(), KINDS, n=1, cutoff=0.6)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise EditError(f"unknown edit {text!r}: {guess}one of speed:PATTERN=K, drop:PATTERN, fuse:PATTERN, kernels-from:TWIN.sqlite, "
                        "nosync[:RANGE], nohost[:RANGE], workers:N, graph[:RANGE], attention[:RANGE], pin[:RANGE], "
                        "straggler, fix:FINDING_ID")
    if kind == "speed":
        pattern, eq, k = arg.rpartition("=")
        factors = _factors(k)
        if not eq or not pattern or factors is None:
            raise EditError(f"bad edit {text!r}: speed:PATTERN=K with K a number from {MIN_SPEED:g} up (e.g. "
                            "speed:gemm=2; below 1 slower), or K1..K2 / K1..KC..K2 a range of them, K1 <= KC <= K2 "
                            "(e.g. speed:gemm=1..1.8)")
        low, central, high = factors
        return Edit(kind, text, pattern=pattern, factor=central, factors=None if low == high else (low, high))
    if kind == "drop":
        if not arg or not arg.partition("@")[0]:
            raise EditError(f"bad edit {text!r}: drop:PATTERN names the ops (a name glob or a family, e.g. drop:layout)")
        return Edit(kind, text, pattern=arg)
    if kind == "fuse":
        fuse_spec(text, arg)
        return Edit(kind, text, pattern=arg)
    if kind == "kernels-from":
        if not arg:
            raise EditError(f"bad edit {text!r}: kernels-from:TWIN.sqlite names the other capture")
        return Edit(kind, text, twin=arg)
    if kind == "workers":
        if not (arg.isascii() and arg.isdigit() and 1 <= int(arg) <= MAX_WORKERS):
            raise EditError(f"bad edit {text!r}: workers:N takes a whole number of worker processes from 1 to "
                            f"{MAX_WORKERS} (e.g. workers:4)")
        return Edit(kind, text, factor=float(int(arg)))
    if kind == "straggler" and colon:  # `straggler:` too: an argument given empty is still one given
        raise EditError(f"bad edit {text!r}: straggler takes no argument (the rank that arrives last at the "
                        "collectives is found in the trace)")
    if kind == "fix" and not arg:
        raise EditError(f"bad edit {text!r}: fix:FINDING_ID names a finding (e.g. fix:launch-bound)")
    if kind == "nohost" and _looks_like_duration(arg.removeprefix("-")):
        at = _duration_ns(arg.removeprefix("-"))
        if at is None or (arg.startswith("-") and at == 0):
            raise EditError(f"bad edit {text!r}: nohost:DURATION (pauses at least that long) or nohost:-DURATION (each "
                            "such pause that much shorter) takes a duration up to a year, above 0 to shorten by "
                            "(e.g. nohost:2ms, nohost:-5ms)")
    return Edit(kind, text, range=arg or "")


# the edits that apply once over the whole trace: given twice, the second would even out what the first did
ONCE = ("straggler",)


def check_once(edits: list[Edit]) -> None:
    """EditError (one line) where an edit of ONCE is given more than once (`straggler straggler`, or
    `straggler` beside `fix:straggler`, whose fix is the same edit)."""
    for kind in ONCE:
        given = [e.text for e in edits if e.kind == kind]
        if len(given) > 1:
            times = "twice" if len(given) == 2 else f"{len(given)} times"
            raise EditError(f"{kind} given {times} ({', '.join(given)}): it evens out the one rank that arrives last, "
                            "once; give it once")


def _factors(text: str) -> tuple[float, float, float] | None:
    """`K`, `K1..K2` or `K1..KC..K2` -> (K1, KC, K2); None unless each is a finite number from
    MIN_SPEED up and K1 <= KC <= K2. Without KC the central is the factor whose duration lies halfway
    between the two ends' (1/KC the mean of 1/K1 and 1/K2): the middle of the time the range can save."""
    try:
        ks = [float(x) for x in text.split("..")]
    except ValueError:
        return None
    if len(ks) not in (1, 2, 3) or not all(MIN_SPEED <= k and np.isfinite(k) for k in ks) or ks != sorted(ks):
        return None
    if len(ks) == 1:
        return ks[0], ks[0], ks[0]
    if len(ks) == 2:
        return ks[0], 2 / (1 / ks[0] + 1 / ks[1]), ks[1]
    return ks[0], ks[1], ks[2]


# -- where an edit applies ---------------------------------------------------------------------
def _plain(text) -> str:
    text = str(text)
    return text.split(":", 1)[1] if ":" in text and not text.startswith("nsight-tui") else text


def range_spans(g: Graph, sr: StepRanges, name: str) -> list[tuple[int, int, int]]:
    """(pid, start, end) of the spans RANGE names: the steps' periods for `step` (or no name),
    else every NVTX range whose plain name matches the glob."""
    if not name or name == STEP_RANGE:
        out = []
        for i in range(len(sr.start_ns)):
            if not sr.is_step[i]:
                continue
            later = np.flatnonzero((sr.gtid == sr.gtid[i]) & (sr.start_ns > sr.start_ns[i]))
            end = int(sr.start_ns[later].min()) if len(later) else int(sr.end_ns[i])
            out.append((int(pid_of(sr.gtid[i])), int(sr.start_ns[i]), end))
        return out
    def named(trace):
        return trace.range_texts.per_value(lambda t: t is not None and glob_match(_plain(t), name))

    trace = g.trace
    hit = named(trace)
    if not hit.any():  # none in the export: the ranges inferred from its kernel sequence (a bare capture's)
        from nsight_tui.parsers.model.inferred import with_inferred_ranges

        inferred = with_inferred_ranges(g.trace)
        if inferred is not g.trace:
            trace, hit = inferred, named(inferred)
    if not hit.any():
        inferred_too = " nor one inferred from its kernels" if trace is not g.trace else ""
        raise EditError(f"no NVTX range named {name!r} in {g.trace.path.name}{inferred_too} (ranges there: "
                        f"{range_names_hint(trace)}; `{STEP_RANGE}` the steady-state steps; a glob matches the names)")
    r = trace.ranges
    return [(int(pid_of(gt)), int(s), int(e)) for gt, s, e in
            zip(r["gtid"].to_numpy()[hit], r["start"].to_numpy()[hit], r["end"].to_numpy()[hit])]


# A RANGE that names nothing is answered with the names there are: the first few, each cut short
# (a range's name can be megabytes), numbered ones (step_0, step_1, ...) said once as step_N
RANGE_HINT_NAMES = 12
RANGE_HINT_CHARS = 40


def range_names_hint(trace) -> str:
    """The trace's range names in first-appearance order, for an error line: numbered names said
    once, at most RANGE_HINT_NAMES of them, each at most RANGE_HINT_CHARS; 'none' where it has none."""
    seen: dict[str, None] = {}
    for text in trace.range_texts.values.tolist():
        if text is None:
            continue
        plain = re.sub(r"(?<=[_ -])\d+$", "N", _plain(text))
        seen.setdefault(plain if len(plain) <= RANGE_HINT_CHARS else plain[:RANGE_HINT_CHARS - 1] + "…", None)
    names = list(seen)
    if not names:
        return "none"
    more = f", … ({len(names) - RANGE_HINT_NAMES} more)" if len(names) > RANGE_HINT_NAMES else ""
    return ", ".join(names[:RANGE_HINT_NAMES]) + more


def in_steps(g: Graph, sr: StepRanges) -> np.ndarray:
    """Per CPU point: inside a steady-state step of its process."""
    return _inside(g.pt_time, _pt_pids(g), range_spans(g, sr, STEP_RANGE))


def _instance_of(times: np.ndarray, pids: np.ndarray, spans) -> np.ndarray:
    """Per instant: the span (an index into `spans`) it falls in, the latest started of its process;
    -1 in none."""
    out = np.full(len(times), -1, np.int64)
    for pid in {p for p, _, _ in spans}:
        idx = np.array([i for i, (p, _, _) in enumerate(spans) if p == pid], np.int64)
        s = np.array([spans[i][1] for i in idx], np.int64)
        e = np.array([spans[i][2] for i in idx], np.int64)
        order = np.argsort(s, kind="stable")
        idx, s, e = idx[order], s[order], np.maximum.accumulate(e[order])
        sel = pids == pid
        j = np.searchsorted(s, times[sel], side="right") - 1
        ok = (j >= 0) & (times[sel] <= e[np.maximum(j, 0)])
        out[sel] = np.where(ok, idx[np.maximum(j, 0)], -1)
    return out


def _inside(times: np.ndarray, pids: np.ndarray, spans) -> np.ndarray:
    """Per instant: inside one of `spans` (pid, start, end) of its process."""
    return _instance_of(times, pids, spans) >= 0


def _op_launches(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: its launching call (-1: none), that call's start (-1: none) and its process."""
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    a_start = g.trace.api["start"].to_numpy(np.int64)
    launch_t = np.where(o_api >= 0, a_start[np.maximum(o_api, 0)] if len(a_start) else 0, -1)
    return o_api, launch_t, pid_of(g.trace.ops["gpid"].to_numpy(np.int64))


def _pt_pids(g: Graph) -> np.ndarray:
    return pid_of(np.array(g.thread_gtids, np.int64)[g.pt_thread]) if len(g.pt_time) else np.zeros(0, np.int64)


# -- the edits ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _glob_parts(pattern: str) -> tuple[str, ...] | None:
    """A glob of literal text and `*` only, split at its stars; None where it has `?` or `[`."""
    return None if "?" in pattern or "[" in pattern else tuple(pattern.split("*"))


def glob_match(name: str, pattern: str) -> bool:
    """fnmatch.fnmatchcase(name, pattern), in time linear in the name for a glob of text and `*`
    (fnmatch's regex backtracks over the whole name at each star: 0.1 s a pattern on a 10 MB
    kernel name)."""
    parts = _glob_parts(pattern)
    if parts is None:
        return fnmatch.fnmatchcase(name, pattern)
    if len(parts) == 1:
        return name == pattern
    head, *middle, tail = parts
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    at, stop = len(head), len(name) - len(tail)
    for part in middle:
        at = name.find(part, at, stop)
        if at < 0:
            return False
        at += len(part)
    return True


def _matching_ops(g: Graph, sr: StepRanges, e: Edit) -> tuple[np.ndarray, str]:
    """Per op: matched by the edit's PATTERN (a name glob or a kernel family), launched inside
    RANGE where `PATTERN@RANGE`; and the match in words. EditError where nothing matches."""
    names = g.trace.op_names
    pattern, _, where = e.pattern.partition("@")  # PATTERN@RANGE: only the ops launched inside RANGE
    if pattern in FAMILY_KEYS:
        fam = name_families(g.trace)
        codes = np.flatnonzero(np.asarray(fam) == pattern)
        how = f"family {pattern}"
    else:
        short = g.trace.op_short if g.trace.op_short else names
        codes = np.array([i for i, n in enumerate(names) if glob_match(n, pattern)
                          or (i < len(short) and glob_match(str(short[i]), pattern))], np.int64)
        how = f"names matching {pattern!r}"
    hit = np.isin(g.trace.ops["name"].to_numpy(), codes)
    if not hit.any():  # the pattern itself names nothing (where it names ops, RANGE left none: said below)
        raise EditError(f"no GPU op matches {e.pattern!r} ({how}) in {g.trace.path.name} "
                        f"({_pattern_hint(g, pattern)})")
    if where:
        o_api, launched, pids = _op_launches(g)
        hit &= (o_api >= 0) & _inside(launched, pids, range_spans(g, sr, where))
        how += f" launched inside {where!r}"
    if not hit.any():
        raise EditError(f"no GPU op matches {e.pattern!r} ({how}) in {g.trace.path.name}")
    return hit, how


def _pattern_hint(g: Graph, pattern: str) -> str:
    """What a PATTERN may be, for the line that says it matched nothing: the families this capture's
    ops are in (a family key is exact and lower case: `GEMM` is a glob that matches no name)."""
    families = set(np.asarray(name_families(g.trace)).tolist())
    present = [k for k in FAMILY_KEYS if k in families]
    said = f"its families: {', '.join(present)}; else a glob over kernel names, case-sensitive, e.g. '*gemm*'"
    near = [k for k in FAMILY_KEYS if k.lower() == pattern.lower() and k != pattern]
    return f"did you mean the family {near[0]!r}? " + said if near else said


def _speed(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """The matching ops K times faster; with a range K1..K2, the favourable plan (the smaller step) at
    K2, the central at KC, the other at K1."""
    hit, how = _matching_ops(g, sr, e)
    low, high = e.factors or (e.factor, e.factor)
    for plan, k in zip(ed.plans, (high, e.factor, low)):
        plan.op_dur[hit] = np.round(plan.op_dur[hit] / k).astype(np.int64)
    if e.factors is None:
        ed.applied.append(Applied(e.text, f"{int(hit.sum()):,} ops ({how}) {e.factor:g}x faster"))
        return
    ed.applied.append(Applied(e.text, f"{int(hit.sum()):,} ops ({how}) {e.factor:.3g}x faster ({low:g}..{high:g})",
                              f"the ops' speed-up is not measured: between {low:g}x and {high:g}x, {e.factor:.3g}x "
                              "central" + (f"; {e.why}" if e.why else " (the edit's own range)")))


def _drop(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """The matching ops gone from the GPU, with the CPU time of the calls that launched them.

    On the GPU a dropped op takes no time and waits for nothing but the op before it on its stream
    (and the event that op's stream waited on, which the ops after it still wait for): the ops after
    it keep their order and their own offsets. On the CPU a call whose every op is dropped takes
    no time between its start and its end (a launch that waited on a full queue no longer waits);
    the host time around the call stays, as the framework's code around it is not known to go
    with it. A collective coupled with other ranks is not dropped (its members would still wait)."""
    hit, how = _matching_ops(g, sr, e)
    coupled = hit & (g.op_coll >= 0)
    hit &= ~coupled
    if not hit.any():
        raise EditError(f"{e.text}: the ops matching {e.pattern!r} are collectives of several ranks, not dropped")
    calls, pts = _take_away_ops(g, hit, ed)
    cpu_ns = int(g.delta_ns[pts].sum())
    gpu_ns = int(g.op_dur[hit].sum())
    n_steps = max(sr.n_steps, 1)
    step_cpu_ns = int(g.delta_ns[pts[in_steps(g, sr)[pts]]].sum())
    ed.applied.append(Applied(
        e.text, f"{int(hit.sum()):,} ops ({how}) dropped: {gpu_ns / 1e6:,.2f} ms of GPU time over the capture, the ops "
        f"after them on their streams in order; {len(calls):,} launch calls gone with them ({cpu_ns / 1e6:,.2f} ms of CPU "
        f"time inside those calls over the capture, {step_cpu_ns / n_steps / 1e6:,.3f} ms a step over the {sr.n_steps} "
        "steady steps; the "
        "host time around each call kept)"
        + (f"; {int(coupled.sum()):,} collectives of several ranks kept" if coupled.any() else "")))


def _take_away_ops(g: Graph, hit: np.ndarray, ed: Edited) -> tuple[np.ndarray, np.ndarray]:
    """The ops `hit` gone from every plan with the calls that launched only them (each such call's
    time, not the host time around it): those calls and the CPU points inside them."""
    calls = calls_launching_only(g, hit)
    pts = inside_calls(g, calls)
    for plan in ed.plans:
        plan.take_away(hit, pts, g.blocks)
    return calls, pts


@dataclass(frozen=True)
class FuseSpec:
    """`fuse:P1+P2+...[@RANGE[,N+][,<DURATION]]` read: the patterns, the range, the fewest kernels a
    chain holds (N+, default 2) and the longest kernel it may hold (<DURATION, default any)."""

    patterns: tuple[str, ...]
    range: str = ""
    min_kernels: int = 2
    max_ns: int | None = None


def fuse_spec(text: str, arg: str) -> FuseSpec:
    """EditError where `arg` is not P1+P2+...[@RANGE[,N+][,<DURATION]]: `+` splits outside a glob's
    brackets ([+] is a plus sign in a name); RANGE and its options after the last `@`."""
    pattern, at, rest = arg.rpartition("@")
    if not at:
        pattern, rest = arg, ""
    where, *options = rest.split(",")
    parts, cur, i = [], "", 0
    while i < len(pattern):
        if pattern[i] == "[":  # a glob's class, as fnmatch reads it: `[!`, a `]` first, up to the next `]`
            j = i + 1 + (pattern[i + 1: i + 2] == "!")
            j += pattern[j: j + 1] == "]"
            end = pattern.find("]", j)
            if end >= 0:
                cur, i = cur + pattern[i: end + 1], end + 1
                continue
        if pattern[i] == "+":
            parts.append(cur)
            cur = ""
        else:
            cur += pattern[i]
        i += 1
    parts.append(cur)
    spec, unread = FuseSpec(tuple(parts), where), False
    for o in options:
        limit = _duration_ns(o[1:]) if o.startswith("<") else None
        if o.endswith("+") and o[:-1].isdigit() and int(o[:-1]) >= 2:
            spec = replace(spec, min_kernels=int(o[:-1]))
        elif limit:
            spec = replace(spec, max_ns=limit)
        else:
            unread = True
    if unread or not all(parts):
        raise EditError(f"bad edit {text!r}: fuse:P1+P2+...[@RANGE[,N+][,<DURATION]] names the kernels a chain is made "
                        "of (a name glob or a family each), e.g. fuse:elementwise@forward or "
                        "fuse:elementwise+reduction@backward,3+,<20us")
    return spec


def _fuse(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """Each chain one kernel (fused.py: what goes, and the two assumptions)."""
    spec = fuse_spec(e.text, e.pattern)
    parts, where = spec.patterns, spec.range
    hits, hows = [], []
    for p in parts:
        hit, how = _matching_ops(g, sr, Edit("drop", e.text, pattern=p))
        hits.append(hit)
        hows.append(how)
    o_api, launched, pids = _op_launches(g)
    instance = _instance_of(launched, pids, range_spans(g, sr, where or STEP_RANGE))
    instance[(o_api < 0) | ~_inside(launched, pids, range_spans(g, sr, STEP_RANGE))] = -1
    hit = np.logical_or.reduce(hits)
    if spec.max_ns is not None:
        hit &= g.op_dur <= spec.max_ns
    found = fused.chains(g, hit, instance, spec.min_kernels)
    inside = f"launched inside one {where!r} range" if where else "launched inside one step"
    what = ((f"{len(parts)} patterns" if len(parts) > 2 else " or ".join(hows))
            + (f", each at most {spec.max_ns / 1e3:g} us" if spec.max_ns is not None else "")
            + f", {spec.min_kernels} or more in a row")
    if not found:
        raise EditError(f"{e.text}: no run of consecutive kernels on one stream ({what}) {inside}")
    r = fused.apply(g, ed.plans, found, in_steps(g, sr))
    n = max(sr.n_steps, 1)
    ed.applied.append(Applied(
        e.text, f"{r.chains:,} chains of {r.kernels:,} kernels ({what}, {inside}) fused into one kernel each: "
        f"{r.gpu_ns / 1e6:,.2f} ms of GPU time in them, {r.fused_ns[1] / 1e6:,.2f} ms fused "
        f"({r.fused_ns[0] / 1e6:,.2f}..{r.fused_ns[2] / 1e6:,.2f}); {r.calls:,} launch calls gone "
        f"({r.call_step_ns / n / 1e6:,.3f} ms of CPU time inside them a step over the {sr.n_steps} steady steps; the host "
        f"time around them kept, {r.host_step_ns / n / 1e6:,.3f} ms a step between each chain's launches)"
        + (f"; {r.split:,} chains launched from several threads keep their host time" if r.split else ""),
        "a fused kernel takes its chain's longest kernel's time (one pass over memory; low: its shortest, high: "
        "the chain's whole time); the host time between a chain's launches stays (low: it goes with the ops, as "
        "when a compiler or one fused op replaces them)"))


def _nosync(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    ends = np.array(sorted(g.blocks), np.int64)
    if len(ends) == 0:
        raise EditError(f"no blocking CUDA call in {g.trace.path.name}")
    calls = np.array([g.blocks[k].call for k in ends.tolist()], np.int64)
    call_names = np.array([api_display_name(g.trace.api_names[c]) for c in
                           g.trace.api["name"].to_numpy()[calls]], dtype=object)
    by_call = bool(e.range) and any(glob_match(n, e.range) for n in call_names)
    if by_call:  # nosync:CALL: those blocking calls inside the steps (cudaStreamSynchronize: `.item()`)
        keep = np.array([glob_match(n, e.range) for n in call_names], dtype=bool)
        ends, calls = ends[keep], calls[keep]
    try:
        spans = range_spans(g, sr, "" if by_call else e.range)
    except EditError as exc:  # a name of neither: say both, as the user may have meant either
        raise EditError(f"{e.text}: {e.range!r} names no blocking CUDA call ({_blocking_calls(call_names)}); "
                        f"{exc}") from None
    starts = g.trace.api["start"].to_numpy(np.int64)[calls]
    pids = pid_of(g.trace.api["gtid"].to_numpy(np.int64)[calls])
    hit = ends[_inside(starts, pids, spans)]
    if len(hit) == 0 and by_call:  # the calls block, but only in the warm-up or after the steps
        raise EditError(f"{e.text}: none of the {len(ends):,} blocking {e.range} calls is inside a steady-state step "
                        "(the replay edits only those)")
    if len(hit) == 0:
        raise EditError(f"{e.text}: no blocking CUDA call inside {e.range or STEP_RANGE!r} "
                        f"({_blocking_calls(call_names)})")
    for plan in ed.plans:
        _unblock(g, plan, hit.tolist())
    kinds: dict[str, int] = {}
    for k in hit.tolist():
        kinds[g.blocks[k].kind] = kinds.get(g.blocks[k].kind, 0) + 1
    what = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    ed.applied.append(Applied(e.text, f"{len(hit):,} blocking calls no longer wait for the GPU ({what}); "
                              "each keeps its own CPU time after the wait"))


def _unblock(g: Graph, plan: Plan, ends: list[int]) -> None:
    """The blocking calls ending at `ends` (graph.blocks) no longer wait for the GPU; each keeps its own CPU
    time after the wait."""
    for k in ends:
        plan.blocking.discard(k)
        plan.block_after_ns[k] = g.blocks[k].after_ns


def _blocking_calls(call_names: np.ndarray) -> str:
    """The capture's blocking calls by name and count, most first, for an error line."""
    names, counts = np.unique(call_names.astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return "its blocking calls: " + ", ".join(f"{names[i]} x{counts[i]:,}" for i in order[:RANGE_HINT_NAMES])


def _gpu_idle(g: Graph, times: np.ndarray, pids: np.ndarray) -> np.ndarray:
    """Per instant: no op of that process was running on the GPU (measured)."""
    out = np.ones(len(times), bool)
    o_pid = pid_of(g.trace.ops["gpid"].to_numpy(np.int64))
    for pid in np.unique(pids):
        sel = o_pid == pid
        if not sel.any():  # a process without GPU work of its own (a launcher): its GPU is idle
            continue
        s, e = g.op_start[sel], g.op_end[sel]
        order = np.argsort(s)
        s, e = s[order], np.maximum.accumulate(e[order])
        j = np.searchsorted(s, times, side="right") - 1
        busy = (j >= 0) & (times < e[np.maximum(j, 0)])
        out &= ~((pids == pid) & busy)
    return out


_UNITS = (("ms", 1e6), ("us", 1e3), ("ns", 1), ("s", 1e9))
# longer than any capture (a year): beyond it a duration is no pause's
_MAX_DURATION_NS = 365 * 86_400 * 10**9


def _number_and_scale(text: str) -> tuple[float, float] | None:
    for unit, scale in _UNITS:
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]), scale
            except ValueError:
                return None
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _looks_like_duration(text: str) -> bool:
    """A number with a time unit, whether or not a usable one (`infms`, `-0ms`): not a range name."""
    return _number_and_scale(text) is not None


def _duration_ns(text: str) -> int | None:
    """`2ms`, `500us`, `1.5s`, `20000ns` -> ns; None for anything else (a range name) and for a
    negative, non-finite or longer-than-a-year one."""
    got = _number_and_scale(text)
    if got is None:
        return None
    ns = got[0] * got[1]
    return int(ns) if np.isfinite(ns) and 0 <= ns <= _MAX_DURATION_NS else None


def _nohost(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    pids = _pt_pids(g)
    host = host_points(g)
    if _is_number(e.range.lstrip("-")):
        raise EditError(f"{e.range!r} has no unit: a duration is a number with one of "
                        f"{', '.join(u for u, _ in _UNITS)} ({e.range}ms, {e.range}us), a range an NVTX range's name")
    shorten = _duration_ns(e.range[1:]) if e.range.startswith("-") else None
    if shorten is not None:
        _nohost_shorten(g, sr, e, ed, host, pids, shorten)
        return
    at_least = _duration_ns(e.range)
    if e.range and at_least is None:
        sel = host & _inside(g.pt_time, pids, range_spans(g, sr, e.range))
        how = f"inside {e.range!r}"
    else:  # pauses during which the GPU sat idle: the CPU held the step
        sel = _idle_pauses(g, sr, pids, host)
        how = "while the GPU was idle, inside the steps"
        if at_least is not None:
            sel &= g.delta_ns >= at_least
            how += f", each at least {e.range}"
    if not sel.any():
        raise EditError(f"no host time between CUDA calls {how}")
    removed = int(g.delta_ns[sel].sum())
    assumption = ""
    keep = (0, 0, 0)
    if at_least is not None:
        # a long pause also held the host work an ordinary pause holds: the median of the shorter
        # pauses with the GPU idle is kept (the prediction)
        idle_host = host & _inside(g.pt_time, pids, range_spans(g, sr, STEP_RANGE)) & _gpu_idle(g, g.pt_time - 1, pids)
        # the same pause may hold the step's own start-up Python besides the stall (a step-start sleep
        # sits in the pause after the previous step's sync, beside the loop's bookkeeping): its
        # length is not in this capture, but a pause shorter than DURATION is by the edit's own
        # word ordinary, so each removed pause keeps between none and DURATION of it
        shorter = g.delta_ns[idle_host & ~sel & (g.delta_ns >= HANDOFF_MIN_PAUSE_NS) & (g.delta_ns < at_least)]
        central = int(np.median(shorter)) if len(shorter) else 0
        keep = (0, central, int(at_least))
        assumption = (f"each removed pause keeps the host work of an ordinary pause: {central / 1e3:,.0f} us "
                      f"(the median of the shorter pauses over 20 us with the GPU idle), between none and "
                      f"{at_least / 1e3:,.0f} us (a pause shorter than {e.range} counts as ordinary)")
    for plan, kept in zip(ed.plans, keep):
        plan.delta_ns[sel] = np.minimum(plan.delta_ns[sel], kept)
    _moved(ed, sel)
    ed.applied.append(Applied(e.text, f"{removed / 1e6:,.2f} ms of host time between CUDA calls removed "
                              f"({int(sel.sum()):,} pauses {how}, all steps)", assumption))


def _idle_pauses(g: Graph, sr: StepRanges, pids: np.ndarray, host: np.ndarray) -> np.ndarray:
    """Per CPU point: host time (`host`) inside the steps during which the GPU sat idle: the CPU held
    the step."""
    inside = _inside(g.pt_time, pids, range_spans(g, sr, STEP_RANGE))
    prev_t = np.concatenate([[0], g.pt_time[:-1]])
    mid = (prev_t + g.pt_time) // 2
    return host & inside & _gpu_idle(g, mid, pids) & _gpu_idle(g, g.pt_time - 1, pids)


# A pause of host time at least this long with the GPU idle is one piece of Python or data work
# (the findings' host_gap_min_ns: host-bound-gap's stretches; a test holds the two equal)
LOOP_PAUSE_MIN_NS = 1_000_000


def _long_pauses(g: Graph, sr: StepRanges, pids: np.ndarray) -> np.ndarray:
    """Per CPU point: at least LOOP_PAUSE_MIN_NS of host time with the GPU idle, inside the steps."""
    return _idle_pauses(g, sr, pids, host_points(g)) & (g.delta_ns >= LOOP_PAUSE_MIN_NS)


def _loop_pauses(g: Graph, sr: StepRanges, pids: np.ndarray, pauses: np.ndarray) -> tuple[np.ndarray, bool]:
    """Of the long `pauses` (_long_pauses), those of the step loop's own: outside every NVTX range nested
    in a step (the model's phases and ops); and whether the steps had such nested ranges (without them
    every long pause counts)."""
    r = g.trace.ranges
    r_pid = pid_of(r["gtid"].to_numpy(np.int64))
    r_start, r_end = r["start"].to_numpy(np.int64), r["end"].to_numpy(np.int64)
    steps = range_spans(g, sr, STEP_RANGE)
    at = _instance_of(r_start, r_pid, steps)  # the step span each range opens in (-1: none)
    step_end = np.array([e for _, _, e in steps] + [0], np.int64)
    inner = (at >= 0) & (r_end <= step_end[at]) & (r_end > r_start)
    # the iterations' own ranges are no range nested in a step
    iteration = np.isin(r_start, sr.start_ns) & np.isin(r_end, sr.end_ns)
    m = np.flatnonzero(inner & ~iteration)
    nested = list(zip(r_pid[m].tolist(), r_start[m].tolist(), r_end[m].tolist()))
    if not nested:
        return pauses, False
    prev_t = np.concatenate([[0], g.pt_time[:-1]])
    return pauses & ~_inside((prev_t + g.pt_time) // 2, pids, nested), True


def _moved(ed: Edited, sel: np.ndarray) -> None:
    ed.moved_host = sel.copy() if ed.moved_host is None else ed.moved_host | sel


def moved_host_ns(g: Graph, sr: StepRanges, ed: Edited, plan: Plan | None = None) -> int:
    """The host work the nohost edits took off the steps, ns per step, in `plan` (default: the
    central one); 0 without a nohost edit."""
    if ed.moved_host is None:
        return 0
    sel, plan = ed.moved_host, ed.mid if plan is None else plan
    steps = max(int(np.count_nonzero(sr.is_step)), 1)
    return int(np.clip(g.delta_ns[sel] - plan.delta_ns[sel], 0, None).sum()) // steps


def _workers(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """`workers:N`: the host work the nohost edits took off the steps runs in N worker processes
    beside them, as a DataLoader's workers load batches: each worker needs that work's time per batch
    and N of them deliver N batches in that time, so a longer run keeps no step shorter than the
    work per step / N (each plan's own removed work: an assumption's ends move it). The replayed
    window keeps its steps (the workers' prefetched batches); the floor is the pace once those are
    spent."""
    if ed.moved_host is None or not ed.moved_host.any():
        raise EditError(f"{e.text}: moves the host work a nohost edit removes; give one beside it (nohost, or "
                        "fix:host-bound-gap)")
    n = int(e.factor)
    sel = ed.moved_host
    per_thread = np.bincount(g.pt_thread[sel], weights=g.delta_ns[sel], minlength=len(g.thread_slices))
    thread = int(np.argmax(per_thread))
    for plan in ed.plans:
        plan.period_floor_ns, plan.floor_thread = moved_host_ns(g, sr, ed, plan) // n, thread
    work = moved_host_ns(g, sr, ed)
    ed.applied.append(Applied(e.text, f"the host work removed, {work / 1e6:,.2f} ms a step, run by {n} worker "
                              f"process{'es' if n > 1 else ''} beside the step: a batch every "
                              f"{work / n / 1e6:,.2f} ms, the shortest step a longer run keeps (each worker at "
                              "the pace the thread ran it; handing a batch over not counted)"))


def _nohost_shorten(g: Graph, sr: StepRanges, e: Edit, ed: Edited, host: np.ndarray, pids: np.ndarray,
                    by_ns: int) -> None:
    """`nohost:-DURATION`: each pause inside the steps with the GPU idle, at least DURATION long, loses
    DURATION (a sleep or stall whose length the user knows); the rest of the pause, the host work
    around the stall, stays. No assumption: the length removed is the edit's."""
    sel = _idle_pauses(g, sr, pids, host) & (g.delta_ns >= by_ns)
    if by_ns <= 0 or not sel.any():
        raise EditError(f"no pause between CUDA calls of at least {e.range[1:]} with the GPU idle inside the steps")
    for plan in ed.plans:
        plan.delta_ns[sel] = np.maximum(plan.delta_ns[sel] - by_ns, 0)
    _moved(ed, sel)
    ed.applied.append(Applied(e.text, f"{int(sel.sum()):,} pauses between CUDA calls with the GPU idle, inside the "
                              f"steps, each {e.range[1:]} shorter ({int(sel.sum()) * by_ns / 1e6:,.2f} ms in all)"))


def _graph(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    spans = range_spans(g, sr, e.range)
    pids = _pt_pids(g)
    inside = _inside(g.pt_time, pids, spans)
    inside[[a for a, _ in g.thread_slices]] = False
    keep = np.zeros(len(inside), bool)
    keep[list(g.blocks)] = True  # a sync is not captured: it stays
    sel = inside & ~keep
    if not sel.any():
        raise EditError(f"no CUDA call inside {e.range or STEP_RANGE!r}")
    o_api, launch_t, o_pid = _op_launches(g)
    ops_in = (o_api >= 0) & _inside(launch_t, o_pid, spans)
    timing = graph_timing(g.trace)
    # the span each op's graph launch stands at: the first point of its span (on the launching thread)
    span_of_op = np.full(g.n_ops, -1, np.int64)
    for si, (pid, s, t_end) in enumerate(spans):
        m = ops_in & (o_pid == pid) & (launch_t >= s) & (launch_t <= t_end)
        span_of_op[m & (span_of_op < 0)] = si
    _refuse_if_graphed(g, e, o_api, span_of_op)
    chain = device_work_ops(g.trace)
    o_stream, o_start = g.trace.ops["stream"].to_numpy(np.int64), g.trace.ops["start"].to_numpy(np.int64)
    # graphing the step graphs the model, not the loop around it: the loop's own long pauses (the next
    # batch, logging, a sleep) stay, but at the near end, where the step's code is all the model's
    long_pauses = _long_pauses(g, sr, pids)
    loop, nested = (_loop_pauses(g, sr, pids, long_pauses) if e.range in ("", STEP_RANGE)
                    else (np.zeros(len(sel), bool), True))
    loop &= sel
    before = _before_span(g, pids, spans, sel & long_pauses)
    for end, (plan, gap, per_node) in enumerate(zip(ed.plans, timing.node_gap_ns, timing.cpu_per_node_ns)):
        cut = sel & ~loop if end else sel
        plan.delta_ns[cut] = before[cut]
        for k in np.flatnonzero(sel).tolist():
            plan.handoffs.pop(k, None)
        for si in np.unique(span_of_op[span_of_op >= 0]).tolist():
            ops = np.flatnonzero(span_of_op == si)
            ops = ops[np.lexsort((o_start[ops], g.op_launch_pt[ops]))]  # the order the graph chains them
            first_pt = g.op_launch_pt[ops].min()
            plan.op_launch_pt[ops] = first_pt
            # the launch's own CPU cost, per node, on the point after the graph's first launch
            if first_pt + 1 < len(plan.delta_ns):
                plan.delta_ns[first_pt + 1] += per_node * len(ops)
            plan.op_launch_off[ops] = timing.node_offsets_ns(end, segment_ends(chain[ops], o_stream[ops]))
            plan.op_prev_off[ops] = np.minimum(plan.op_prev_off[ops], gap)
    ed.applied.append(Applied(
        e.text, f"{int(sel.sum()):,} CPU points and {int(ops_in.sum()):,} ops in {len(spans)} spans as one graph launch "
        "each: the spans' CPU time replaced by the launch's",
        f"{timing.words()}, its nodes "
        f"{timing.node_gap_ns[0]}..{timing.node_gap_ns[2]} ns apart on the GPU (mean gap) and "
        f"the launch costing {timing.cpu_per_node_ns[0]}..{timing.cpu_per_node_ns[2]} ns of CPU per node: "
        f"{timing.source}" + (_loop_words(g, sr, loop, nested) if loop.any() else "")))


def _loop_words(g: Graph, sr: StepRanges, loop: np.ndarray, nested: bool) -> str:
    where = ("outside the ranges nested in the step (the model's)" if nested
             else "the steps have no ranges nested in them to tell the model's code from the loop's")
    per_step = int(g.delta_ns[loop].sum()) // max(sr.n_steps, 1)
    return (f"; the step loop's own pauses stay ({int(loop.sum()):,} pauses of at least "
            f"{LOOP_PAUSE_MIN_NS / 1e6:g} ms of host time with the GPU idle, {where}: "
            f"{per_step / 1e6:,.2f} ms a step), taken away at the near end, where all the step's code is graphed")


def _before_span(g: Graph, pids: np.ndarray, spans, sel: np.ndarray) -> np.ndarray:
    """Per CPU point in `sel` (the loop's long pauses a range's first call ends): the part of its time
    since the thread's previous point that passed before its span opened and outside every span of its
    process: not the span's code, so a graph of the span does not take it (a loop's sleep before
    `forward` opens stays with graph:forward; the steps' spans tile the time, so the step leaves nothing
    outside them). Shorter host time before a range (a zero_grad, the step's own bookkeeping) goes with
    the graph, as the graphed program runs none of it."""
    out = np.zeros(len(g.pt_time), np.int64)
    at = _instance_of(g.pt_time, pids, spans)
    k = np.flatnonzero(sel & (at >= 0))
    if not len(k) or not len(spans):
        return out
    p, s, e = (np.array([x[i] for x in spans], np.int64) for i in range(3))
    # per span, the latest end among the spans of its process that opened before it (0: none)
    prior_end = np.zeros(len(spans), np.int64)
    for pid in np.unique(p).tolist():
        idx = np.flatnonzero(p == pid)
        idx = idx[np.argsort(s[idx], kind="stable")]
        prior_end[idx[1:]] = np.maximum.accumulate(e[idx])[:-1]
    prev_t = g.pt_time[k - 1]  # k is never a thread's first point: the same thread's previous one
    out[k] = np.clip(s[at[k]] - np.maximum(prev_t, prior_end[at[k]]), 0, g.delta_ns[k])
    return out


def _refuse_if_graphed(g: Graph, e: Edit, o_api: np.ndarray, span_of_op: np.ndarray) -> None:
    """Every span's work already one graph launch: graphing it again would only take away the host
    time around the launch, which the loop that calls the graph still spends: EditError."""
    placed = span_of_op >= 0
    is_graph = graph_launch_calls(g.trace)
    if not placed.any() or len(is_graph) == 0 or not is_graph[o_api[placed]].all():
        return
    spans = np.unique(span_of_op[placed])
    launches = np.unique(np.stack([span_of_op[placed], o_api[placed]]), axis=1).shape[1]  # (span, call) pairs
    if launches == len(spans):
        raise EditError(f"{e.text}: {e.range or STEP_RANGE!r} already launches its work as one CUDA graph "
                        f"({len(spans):,} spans, one cudaGraphLaunch each): nothing to graph")


# PyTorch's fp32 scaled_dot_product_attention (its memory-efficient kernels) does not use TF32: on an H200
# its forward and backward kernels took 2.18x the time of the six TF32 GEMMs per layer they replace (GPT-2
# small, ctx 1024, batch 8: sample_traces/async/h200_twins' manual capture and its fused twin in
# sample_traces/replay/attention; 2.25 at ctx 512), tests/core/test_attention_passes.py recomputing it in
# SQL. At fp32 without TF32 the GEMMs run on the CUDA cores too and stand for the fused kernels as they
# ran (0.90x there).
FP32_SDPA_OVER_TF32 = 2.2
# Where the scores were 16-bit (bf16 autocast) PyTorch's SDPA runs flash attention on the tensor cores,
# causal, skipping the masked half the GEMMs compute: on an H200 its kernels took 0.47x the time of the
# six bf16 GEMMs a layer they replace (GPT-2 small, ctx 1024, batch 8: the committed pair in
# sample_traces/replay/attention, tests/core/test_attention_passes.py recomputing it in SQL; 0.58 at
# ctx 512 and 0.42 at ctx 2048 in held-out pairs, docs/whatif.md "Attention, round three").
HALF_SDPA_OVER_GEMMS = 0.47


def _attention(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """`attention[:RANGE]`: each attention written out, launched inside RANGE (default: the step), as
    one fused kernel (F.scaled_dot_product_attention). Its passes over the scores (kernels.attention:
    the kernels between the score GEMM and the GEMM after it, around a softmax, forward and
    backward) and the copies its matmuls need (their operands and gradients made contiguous: the
    layout copies) are dropped with the calls that launched them; the GEMMs stay as measured,
    standing for the fused kernel's own matmuls (it does their work without writing the scores; a
    causal one skips the masked half), but where they ran as TF32 an fp32 SDPA, which does not use
    TF32, takes FP32_SDPA_OVER_TF32 times their time, and where the scores were 16-bit the flash
    kernels HALF_SDPA_OVER_GEMMS times (central and the far end; as they ran at the near end). On the
    CPU the attention becomes one op, forward and backward: on each thread, of the calls in a row
    that launched its work (a run: its copies, GEMMs and passes), the host time before the first
    stays, standing for the fused op's dispatch, and the host time before each of the others up to
    its last GEMM (the written-out ops' Python and dispatch, since the thread's previous launching
    call: _host_before, _inner_calls) goes, centrally, as the fused program never runs those ops;
    after its last GEMM the split's backward concatenating the q, k, v gradients, which the fused
    program runs too, keeps its own. The range's other end keeps all that host time."""
    from nsight_tui.parsers.kernels.attention import attention_parts, scores_in_half

    o_api, launched, pids = _op_launches(g)
    where = e.range or STEP_RANGE
    inside = (o_api >= 0) & _inside(launched, pids, range_spans(g, sr, where))
    parts = attention_parts(g.trace, inside, sr.n_steps)
    passes = parts.passes
    if len(passes) == 0:
        fused = (np.asarray(name_families(g.trace))[g.trace.ops["name"].to_numpy()[inside]] == "attention").any()
        raise EditError(f"{e.text}: no attention written out launched inside {where!r} in {g.trace.path.name} "
                        + ("(its attention runs fused already)" if fused else
                           "(a softmax kernel between two GEMMs on one stream, at least twice a step)"))
    hit = np.zeros(g.n_ops, bool)
    hit[passes] = True
    hit[parts.layout] = True
    calls, _ = _take_away_ops(g, hit, ed)
    # the attention one op: the framework's work between its launches goes; the first launch's stays,
    # standing for the fused op's own dispatch
    before = _host_before(g, _inner_calls(g, np.concatenate([passes, parts.layout, parts.gemms]), parts.gemms))
    for plan in (ed.low, ed.mid):
        plan.delta_ns[before] = 0
    n_steps = max(sr.n_steps, 1)
    steps = in_steps(g, sr)
    host_ns = int(g.delta_ns[before[steps[before]]].sum()) // n_steps
    gpu_ns = int(g.op_dur[passes].sum())
    layout_ns = int(g.op_dur[parts.layout].sum())
    names = {g.trace.op_names[c] for c in g.trace.ops["name"].to_numpy()[parts.gemms]}
    half = scores_in_half(g.trace, parts)
    tf32 = not half and any((decode_gemm(n) or {}).get("math_type") == "tf32" for n in names)
    matmul_ns = int(g.op_dur[parts.gemms].sum())
    # The fused kernels' time against the GEMMs they stand for, central and at the far end (the slower
    # fp32 SDPA at the step's high end, the faster flash at its low one); the near end keeps the GEMMs
    # as they ran
    factor, plans = ((FP32_SDPA_OVER_TF32, (ed.mid, ed.high)) if tf32 else
                     (HALF_SDPA_OVER_GEMMS, (ed.mid, ed.low)) if half else (1.0, ()))
    for plan in plans:
        plan.op_dur[parts.gemms] = np.round(plan.op_dur[parts.gemms] * factor).astype(np.int64)
    ed.applied.append(Applied(
        e.text, f"{len(passes):,} passes over the attention scores (the kernels and device copies between the "
        f"score GEMM and the GEMM after it, around a softmax, forward and backward, launched inside {where!r}) "
        f"dropped, {gpu_ns / 1e6:,.2f} ms of GPU time, and {len(parts.layout):,} copies its matmuls make of their "
        f"operands and gradients, {layout_ns / 1e6:,.2f} ms; {len(calls):,} launch calls with them; its "
        f"{len(parts.gemms):,} GEMMs ({matmul_ns / 1e6:,.2f} ms) kept, standing for the fused kernel's matmuls",
        f"the attention is one op on the CPU: the framework's work before each of its launches but the first, up to "
        f"its last GEMM (the ops the fused program does not run: {host_ns / 1e6:,.2f} ms of host time a step over the "
        f"{sr.n_steps} steady steps) goes, "
        "central; the first's stays for the fused op's dispatch; between gone and kept"
        + (f"; its GEMMs ran as TF32 on tensor cores, and PyTorch's fp32 fused attention does not use TF32: the fused "
           f"kernels take x{FP32_SDPA_OVER_TF32} the GEMMs' time (an H200's, the committed twin; docs/whatif.md "
           "\"Held out: attention\"), central; as fast as the GEMMs at the other end" if tf32 else
           f"; its scores were 16-bit, where PyTorch's fused attention is flash on tensor cores, causal ones skipping "
           f"the masked half the GEMMs compute: the fused kernels take x{HALF_SDPA_OVER_GEMMS} the GEMMs' time (an "
           "H200's at ctx 1024, the committed twin; 0.42 to 0.58 from ctx 2048 to 512; docs/whatif.md \"Attention, "
           "round three\"), central; as long as the GEMMs at the other end" if half else "")))


def _inner_calls(g: Graph, ops: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The launch calls of `ops` (one fused op's work, written out) inside each run, from its second call
    to the last that launched one of `last`: on each thread, the calls that launched an op, in order;
    a run, calls in a row that launched `ops` alone, a memset among them (cuBLAS zeroing a GEMM's
    output first) not ending it. The fused op is one op: the host time before a run's first call
    stands for its dispatch, the host time before the others up to its last matmul (the written-out
    ops' Python and dispatch) it does not spend; what follows belongs to the next node (the split's
    backward concatenating the q, k, v gradients runs in the fused program too)."""
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    launching = np.unique(o_api[o_api >= 0])
    launching = launching[g.call_start_pt[launching] >= 0]
    n_api = len(g.trace.api)
    theirs, others, memset = np.zeros(n_api, bool), np.zeros(n_api, bool), np.zeros(n_api, bool)
    theirs[o_api[ops[o_api[ops] >= 0]]] = True
    rest = (o_api >= 0) & ~np.isin(np.arange(len(o_api)), ops)
    is_memset = g.trace.ops["kind"].to_numpy() == MEMSET
    others[o_api[rest & ~is_memset]] = True
    memset[o_api[rest & is_memset]] = True
    gtid = g.trace.api["gtid"].to_numpy()[launching]
    order = np.lexsort((g.trace.api["start"].to_numpy()[launching], gtid))
    calls, gtid = launching[order], gtid[order]
    mine = theirs[calls] & ~others[calls]
    neutral = memset[calls] & ~others[calls] & ~theirs[calls]
    cand = mine | neutral
    starts = cand & np.concatenate([[True], ~cand[:-1] | (gtid[1:] != gtid[:-1])])
    seg = np.cumsum(starts) * cand  # 1, 2, ... per stretch of candidates; 0 outside
    idx = np.arange(len(calls))
    first = np.full(seg.max() + 1, len(calls))
    np.minimum.at(first, seg[mine], idx[mine])  # each stretch's first call of `ops`: the run starts there
    is_last = np.zeros(n_api, bool)
    is_last[o_api[last[o_api[last] >= 0]]] = True
    end = np.full(seg.max() + 1, -1)
    at = mine & is_last[calls]
    np.maximum.at(end, seg[at], idx[at])  # and ends at its last call of `last`
    return calls[cand & (idx > first[seg]) & (idx <= end[seg])]


def _host_before(g: Graph, calls: np.ndarray) -> np.ndarray:
    """The CPU points of the host time that made each of `calls` (launches): on its thread, every
    interval of host time since the end of the thread's previous call that launched an op or
    blocked (the calls between, such as cuKernelGetName before a launch, are the same op's
    dispatch); a hand-over or a thread's first point is no host work of its own."""
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    boundary_call = np.zeros(len(g.trace.api), bool)
    boundary_call[o_api[o_api >= 0]] = True
    n = len(g.pt_time)
    boundary = np.zeros(n, bool)
    ends = g.call_end_pt[boundary_call & (g.call_end_pt >= 0)]
    boundary[ends] = True
    boundary[list(g.blocks)] = True
    firsts = np.array([a for a, _ in g.thread_slices], np.int64)
    boundary[firsts] = True  # a thread's first point: no boundary before it on its thread
    last = np.maximum.accumulate(np.where(boundary, np.arange(n), -1))
    starts = g.call_start_pt[calls]
    mark = np.zeros(n + 1, np.int64)
    np.add.at(mark, last[starts] + 1, 1)
    np.add.at(mark, starts + 1, -1)
    sel = (np.cumsum(mark)[:-1] > 0) & (g.owner < 0)
    sel[firsts] = False
    sel[list(g.handoffs)] = False
    return np.flatnonzero(sel)


def _pin(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """`pin[:RANGE]`: the fix "copy from pinned memory with non_blocking=True" for each pageable
    host<->device copy launched inside RANGE (default: the steps; the export's copyKind and
    srcKind/dstKind tell pageable from pinned, as the pageable-memcpy finding reads them).

    - A host-to-device copy's call no longer waits: it returns after its enqueue cost (this
      capture's asynchronous copy calls, pinned.enqueue_ns), and what launches after it runs on at once;
      its copy is ordered on its stream as before, so the kernels that read it still wait for it. The
      stream synchronise that is the next CUDA call after it on its thread (PyTorch's, after a blocking
      `.to(device)`; a non_blocking copy issues none) no longer waits either.
    - Its copy on the GPU takes its bytes at a pinned copy's rate (pinned.rates: this capture's own
      pinned copies of the direction, else pinned.PINNED_GBPS, the answer's range), never longer than it
      took from pageable memory (a copy of a few bytes costs its latency, a microsecond or two, which
      a rate leaves out; the pageable-memcpy finding counts 1 MiB a step or more).
    - The host's staging goes out of the step: a pageable copy is the driver copying the bytes into
      a pinned staging buffer on the calling thread, chunk by chunk, while the DMA moves the chunks
      before it (hence a call as long as its copy). Pinned, the buffer is filled outside the step:
      pinned once and reused, or by DataLoader(pin_memory=True)'s own pin-memory thread, beside the
      step. A program that pins a fresh tensor inside the step (`x.pin_memory()` each step on the
      training thread) keeps that host copy, plus a pinned allocation: not this edit.
    - A device-to-host copy still ends its call after its copy: the CPU reads what it copied, so a
      non_blocking copy into pinned memory is followed by a synchronize before the read. Only the
      copy is faster (a call that waited for its copy waits for the shorter one; one that did not
      takes its enqueue cost and the copy's new time)."""
    c = pinned.copies(g.trace)
    o_api, launch_t, o_pid = _op_launches(g)
    launched = o_api >= 0
    host = c.pageable & np.isin(c.direction, (pinned.HTOD, pinned.DTOH)) & launched
    where = e.range or STEP_RANGE
    if not host.any():
        if c.unread:
            raise EditError(f"{e.text}: the export lacks the copies' memory kinds (CUPTI_ACTIVITY_KIND_MEMCPY's "
                            "srcKind/dstKind): pageable copies cannot be told")
        raise EditError(f"no pageable host<->device copy in {g.trace.path.name}")
    sel = host & _inside(launch_t, o_pid, range_spans(g, sr, e.range))
    if not sel.any():
        raise EditError(f"no pageable host<->device copy launched inside {where!r}")
    enqueue, enqueue_how = pinned.enqueue_ns(g, c)
    rates, says = {}, []
    for d in (pinned.HTOD, pinned.DTOH):
        if (sel & (c.direction == d)).any():
            rates[d], how = pinned.rates(c, g, d)
            says.append(how)
    ops = np.flatnonzero(sel)
    h2d = ops[c.direction[ops] == pinned.HTOD]
    d2h = ops[c.direction[ops] == pinned.DTOH]
    # a host-to-device call, and a device-to-host one that did not wait for its copy in the capture:
    # every point inside it (start, end] at no time but the end's (the enqueue; for a device-to-host
    # call the enqueue and its copy, which it still waits for)
    d_calls = o_api[d2h]
    d_free = (g.call_end_pt[d_calls] >= 0) & (g.call_start_pt[d_calls] >= 0) & ~np.isin(g.call_end_pt[d_calls], list(g.blocks))
    calls = np.concatenate([o_api[h2d], d_calls[d_free]])
    of_op = np.concatenate([h2d, d2h[d_free]])
    ok = (g.call_start_pt[calls] >= 0) & (g.call_end_pt[calls] >= 0)
    calls, of_op = calls[ok], of_op[ok]
    is_d2h = c.direction[of_op] == pinned.DTOH
    inner = inside_calls(g, calls)
    ends = g.call_end_pt[calls]
    span = g.pt_time[ends] - g.pt_time[g.call_start_pt[calls]]
    in_step = in_steps(g, sr)
    before_ns = int(g.delta_ns[inner[in_step[inner]]].sum())
    for plan, i in zip(ed.plans, (2, 1, 0)):  # the favourable end (the smaller step) at the fastest link
        new = np.array([int(np.ceil(c.nbytes[o] / rates[int(c.direction[o])][i])) for o in ops.tolist()], np.int64)
        plan.op_dur[ops] = np.minimum(plan.op_dur[ops], new)
        plan.op_launch_off[ops] = np.minimum(plan.op_launch_off[ops], g.launch_latency_ns)
        call_ns = np.minimum(span, enqueue + np.where(is_d2h, plan.op_dur[of_op], 0))
        # the time inside the call gone, a wait in it (a full queue) or at its end no longer waiting;
        # its end then its enqueue (a device-to-host one: and its copy, which it still waits for)
        plan.take_away(np.zeros(0, np.int64), inner, g.blocks)
        plan.delta_ns[ends] = call_ns
        for k, ns in zip(ends.tolist(), call_ns.tolist()):
            if k in g.blocks:
                plan.block_after_ns[k] = ns
    after_ns = int(ed.mid.delta_ns[inner[in_step[inner]]].sum())
    n_steps = max(sr.n_steps, 1)
    # PyTorch's blocking copy (`.to(device)`, non_blocking=False) synchronises its stream right after the
    # copy call; a non_blocking one does not: that synchronise no longer waits
    syncs = _syncs_after(g, calls[~is_d2h])
    for plan in ed.plans:
        _unblock(g, plan, syncs)
    loader = _pin_loader(g, sr, o_api[h2d[c.nbytes[h2d] >= pinned.PIN_MIN_BYTES]], in_step, ed)
    step_ops = ops[in_step[np.maximum(g.op_launch_pt[ops], 0)]]
    gpu_before = int(g.op_dur[step_ops].sum())
    gpu_after = int(ed.mid.op_dur[step_ops].sum())
    mib = float(c.nbytes[step_ops].sum()) / 2**20 / n_steps
    ed.applied.append(Applied(
        e.text, f"{len(ops):,} pageable copies ({len(h2d):,} host-to-device, {len(d2h):,} device-to-host; {mib:,.1f} MiB "
        f"a step) from pinned memory, non_blocking: each host-to-device call returns after its enqueue, "
        f"{enqueue_how}, its host staging out of the step ({(before_ns - after_ns) / n_steps / 1e6:,.2f} ms a step of "
        f"CPU time in those calls gone); the copies' GPU time from {gpu_before / n_steps / 1e6:,.2f} to "
        f"{gpu_after / n_steps / 1e6:,.2f} ms a step"
        + ("; device-to-host calls still end after their copy (the CPU reads it)" if len(d2h) else "")
        + (f"; the {len(syncs):,} stream synchronises right after a host-to-device copy (PyTorch's, after a blocking "
           "copy) no longer wait" if syncs else "") + loader[0],
        "; ".join(says + ([loader[1]] if loader[1] else []))))


def _syncs_after(g: Graph, calls: np.ndarray) -> list[int]:
    """The blocking stream synchronises (graph.blocks' end points) that are the next CUDA call on the
    same thread after each of `calls`, nothing between: what `tensor.to(device)` issues after its copy."""
    api_names = g.trace.api["name"].to_numpy()
    out = []
    for c in calls.tolist():
        nxt = int(g.call_end_pt[c]) + 1
        ti = int(g.pt_thread[g.call_end_pt[c]])
        if nxt >= g.thread_slices[ti][1] or g.pt_is_end[nxt]:
            continue
        call = int(g.pt_call[nxt])
        end = int(g.call_end_pt[call])
        if end in g.blocks and api_display_name(g.trace.api_names[api_names[call]]) == "cudaStreamSynchronize":
            out.append(end)
    return sorted(set(out))


def _pin_loader(g: Graph, sr: StepRanges, calls: np.ndarray, in_step: np.ndarray, ed: Edited) -> tuple[str, str]:
    """Where the batches come from DataLoader worker processes (the export names them), the fix is
    DataLoader(pin_memory=True): its pin-memory thread takes each batch from the workers, copies it
    into pinned memory and lets the worker's shared-memory copy go, so the copying thread neither
    receives the batch (its pause before the copy) nor releases it (its first pause after, where the
    loop drops the batch; the next fetch where the loop holds it). Those pauses, at least
    LOOP_PAUSE_MIN_NS each and no longer than two passes of their copy (pinned.batch_pauses; a longer
    one waits for workers that do not keep up, and stays), leave the step: at the low end whole,
    centrally down to an ordinary pause (the loop's own Python around them stays); the high end
    keeps them, were they not the batch's.
    Read off torchvision's ResNet-18 pairs, held out on ResNet-50's and, after the two-pass cap, on
    ResNet-34's (docs/whatif.md, "Held out: a DataLoader's pin_memory"). -> (what it did, the
    assumption), '' each without workers."""
    workers = pinned.loader_workers(g.trace)
    if not workers or not len(calls):
        return "", ""
    calls = calls[(g.call_start_pt[calls] >= 0) & (g.call_end_pt[calls] >= 0)]
    most = pinned.batch_pauses(g, calls, _iteration_of(sr, g.pt_time, _pt_pids(g)), LOOP_PAUSE_MIN_NS)
    pauses = np.array(sorted(p for p in most if in_step[p]), np.int64)
    if not len(pauses):
        return f"; {workers} DataLoader worker processes, no pause of 1 ms or more next to the batch copies", ""
    # a pause longer than the batch's handling can be holds a wait for workers that do not keep up: the
    # pin-memory thread waits for them as the loop did, and the handling hides inside that wait
    waits = g.delta_ns[pauses] > np.array([most[int(p)] for p in pauses], np.int64)
    n = max(sr.n_steps, 1)
    waited = (f"; {int(waits.sum()):,} pauses kept whole, each longer than two passes of its copy, "
              f"{float(g.delta_ns[pauses[waits]].sum()) / n / 1e6:,.2f} ms a step: a wait for workers that do not "
              "keep up, which pinning does not shorten") if waits.any() else ""
    pauses = pauses[~waits]
    if not len(pauses):
        return f"; {workers} DataLoader worker processes{waited}", ""
    host = host_points(g) & in_step & (g.delta_ns >= HANDOFF_MIN_PAUSE_NS) & (g.delta_ns < LOOP_PAUSE_MIN_NS)
    ordinary = int(np.median(g.delta_ns[host])) if host.any() else 0
    for plan, keep in ((ed.low, 0), (ed.mid, ordinary)):
        plan.delta_ns[pauses] = np.minimum(plan.delta_ns[pauses], keep)
    ms = float((g.delta_ns[pauses] - ed.mid.delta_ns[pauses]).sum()) / n / 1e6
    return (f"; the export names {workers} DataLoader worker processes (pt_data_worker): with pin_memory=True its "
            f"pin-memory thread receives each batch and lets the pageable one go, so the copying thread's pauses "
            f"next to the batch copies leave the step ({ms:,.2f} ms a step of {len(pauses):,} pauses of 1 ms or more, "
            f"the last before a copy and the first after it, each down to an ordinary {ordinary / 1e3:,.0f} us"
            f"{waited})",
            "the pauses of 1 ms or more next to each batch copy (1 MiB or more), none longer than two passes of the "
            "copy's own length, are the batch's receipt and release, which the pin-memory thread takes over (the low "
            "end: none of them left; the high end: all kept, were they the loop's own)")


def _work_order(trace) -> dict[int, np.ndarray]:
    """Per process: its kernels and device-to-device copies in launch order (call start, then op
    start). The copies are the ops' own work as much as kernels are (a `.contiguous()`, unfused
    attention's copy of the scores: 4.5 ms a step at ctx 1024, gone with SDPA), so a twin's program
    without them replays without their time."""
    ops = trace.ops
    kern = np.flatnonzero(device_work_ops(trace))
    o_api = ops["api"].to_numpy(np.int64)[kern]
    a_start = trace.api["start"].to_numpy(np.int64)
    t = np.where(o_api >= 0, a_start[np.maximum(o_api, 0)] if len(a_start) else 0, ops["start"].to_numpy(np.int64)[kern])
    pid = pid_of(ops["gpid"].to_numpy(np.int64)[kern])
    out = {}
    for p in np.unique(pid):
        m = pid == p
        k = kern[m]
        out[int(p)] = k[np.lexsort((ops["start"].to_numpy(np.int64)[k], t[m]))]
    return out


def _iteration_of(sr: StepRanges, times: np.ndarray, pids: np.ndarray) -> np.ndarray:
    """Per instant: the iteration of its process it falls in (sr's index; -1 before the first)."""
    out = np.full(len(times), -1, np.int64)
    s_pid = pid_of(sr.gtid)
    for pid in np.unique(pids).tolist():
        mine = np.flatnonzero(s_pid == pid)
        if len(mine) == 0:
            continue
        mine = mine[np.argsort(sr.start_ns[mine], kind="stable")]
        sel = pids == pid
        at = np.searchsorted(sr.start_ns[mine], times[sel], side="right") - 1
        out[sel] = np.where(at >= 0, mine[np.maximum(at, 0)], -1)
    return out


def _segments(trace, kernels: np.ndarray, sr: StepRanges, pid: int) -> dict[str, np.ndarray]:
    """`kernels` (in launch order) by the iteration of process `pid` their launch falls in
    ("" before the first)."""
    mine = pid_of(sr.gtid) == pid
    starts, names = sr.start_ns[mine], [n for n, m in zip(sr.names, mine) if m]
    order = np.argsort(starts, kind="stable")
    starts, names = starts[order], [names[i] for i in order]
    o_api = trace.ops["api"].to_numpy(np.int64)[kernels]
    a_start = trace.api["start"].to_numpy(np.int64)
    t = np.where(o_api >= 0, a_start[np.maximum(o_api, 0)] if len(a_start) else 0,
                 trace.ops["start"].to_numpy(np.int64)[kernels])
    at = np.searchsorted(starts, t, side="right") - 1
    out: dict[str, np.ndarray] = {}
    for i in np.unique(at).tolist():
        out["" if i < 0 else _plain(names[i])] = kernels[at == i]
    return out


def _unmatched_blocks(codes: list[tuple[str, int, int, int, int]], t_dur: np.ndarray) -> list[tuple[tuple[int, int], int]]:
    """This side's runs of kernels without a counterpart, (i1, i2), each with the twin's GPU time it
    takes: the twin's own unmatched kernels in the same gap, and those of a gap where this side has
    none (an insertion: a fused kernel the alignment placed a few same-named kernels away from the
    ones it replaces) given to the nearest run of this side's in the iteration (by the kernels between),
    so no twin time is lost. An iteration with no such run of its own keeps its insertions out."""
    runs = [(i1, i2, int(t_dur[j1:j2].sum())) for tag, i1, i2, j1, j2 in codes if tag != "equal" and i2 > i1]
    if not runs:
        return []
    extra = [0] * len(runs)
    starts = np.array([r[0] for r in runs])
    ends = np.array([r[1] for r in runs])
    for tag, i1, _i2, j1, j2 in codes:
        if tag == "insert" and j2 > j1:
            gap = np.where(ends <= i1, i1 - ends, np.where(starts >= i1, starts - i1, 0))
            extra[int(np.argmin(gap))] += int(t_dur[j1:j2].sum())
    return [((i1, i2), t + x) for (i1, i2, t), x in zip(runs, extra)]


def _kernels_from(g: Graph, sr: StepRanges, e: Edit, ed: Edited, load, twin_host: bool = False,
                  twin_iterations: Mapping[str, str] | None = None) -> None:
    path = Path(e.twin)
    try:
        twin = load(path)
    except Exception as exc:  # the loader's own error says what is wrong with the file
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EditError(said if path.name in said else f"cannot read {e.twin}: {said}") from None
    for side, t in ((path.name, twin), (g.trace.path.name, g.trace)):
        if t.info.graphs_whole:
            raise EditError(f"kernels-from: {side} traced its CUDA graphs whole (nsys's default): their kernels are not "
                            "in it to take or give durations; capture it with --cuda-graph-trace=node (`nsight-tui "
                            "capture` does), or replay a graph change with `graph`")
    mine_all, theirs_all = _work_order(g.trace), _work_order(twin)
    my_coll_name, their_coll_name = _is_collective(g.trace), _is_collective(twin)
    # collectives are not matched by sequence: a bucket change moves where they are launched (below)
    mine = {p: k[~my_coll_name[g.trace.ops["name"].to_numpy()[k]]] for p, k in mine_all.items()}
    theirs = {p: k[~their_coll_name[twin.ops["name"].to_numpy()[k]]] for p, k in theirs_all.items()}
    if len(mine) != len(theirs) or not mine:
        raise EditError(f"kernels-from: {path.name} has {len(theirs)} processes with kernels, "
                        f"{g.trace.path.name} {len(mine)}")
    t_dur = (twin.ops["end"] - twin.ops["start"]).to_numpy(np.int64)
    matched = replaced = 0
    new_dur = g.op_dur.copy()
    my_fam, their_fam = np.asarray(name_families(g.trace)), np.asarray(name_families(twin))
    shared = set(g.trace.op_names) & set(twin.op_names)
    my_key = [n if n in shared else f"family:{f}" for n, f in zip(g.trace.op_names, my_fam)]
    their_key = [n if n in shared else f"family:{f}" for n, f in zip(twin.op_names, their_fam)]
    my_names, their_names = g.trace.ops["name"].to_numpy(), twin.ops["name"].to_numpy()
    twin_sr = step_ranges(twin)
    pairs: dict[int, int] = {}  # twin kernel -> this capture's kernel it was matched with
    steady = {_plain(n) for n, is_step in zip(sr.names, sr.is_step) if is_step}
    unpaired: dict[str, int] = {}  # this capture's steady steps the twin has no iteration of: kernels
    for (pid, a_all), (tpid, b_all) in zip(sorted(mine.items()), sorted(theirs.items())):
        # iteration by iteration (same names on both sides): an alignment per step is small, and
        # never pairs one step's kernels with another's
        segs_a, segs_b = _segments(g.trace, a_all, sr, pid), _segments(twin, b_all, twin_sr, tpid)
        for key, a in segs_a.items():
            b = segs_b.get(twin_iterations.get(key, key) if twin_iterations else key)
            if b is None and key in steady:
                unpaired[key] = unpaired.get(key, 0) + len(a)
            if b is None or len(a) == 0:
                continue
            if len(a) == len(b):
                new_dur[a] = t_dur[b]
                pairs.update(zip(b.tolist(), a.tolist()))
                matched += len(a)
                continue
            # a kernel named in both captures by its name, else by its family: a change that renames
            # kernels (TF32's GEMMs) keeps them paired, and a kernel one side lacks stays unpaired
            na = [my_key[c] for c in my_names[a]]
            nb = [their_key[c] for c in their_names[b]]
            codes = opcodes(na, nb)
            for tag, i1, i2, j1, j2 in codes:
                if tag == "equal":
                    new_dur[a[i1:i2]] = t_dur[b[j1:j2]]
                    pairs.update(zip(b[j1:j2].tolist(), a[i1:i2].tolist()))
                    matched += i2 - i1
            for (i1, i2), theirs_t in _unmatched_blocks(codes, t_dur[b]):
                # ops with no counterpart: the block's GPU time as the twin's block
                mine_t = g.op_dur[a[i1:i2]].sum()
                scale = theirs_t / mine_t if mine_t > 0 else 0.0
                new_dur[a[i1:i2]] = np.round(g.op_dur[a[i1:i2]] * scale).astype(np.int64)
                replaced += i2 - i1
    _refuse_if_unpaired(g, sr, twin, twin_sr, path, unpaired)
    g2 = build(twin)
    # the host work that comes with the library's choice of kernels (stretches.py): kernels launched
    # and device copies under one name and kind in both captures are the same op; the CPU time around the
    # others is the twin's
    my_kind, their_kind = g.trace.ops["kind"].to_numpy(), twin.ops["kind"].to_numpy()
    same_name = np.array([g.trace.op_names[my_names[x]] == twin.op_names[their_names[y]] and my_kind[x] == their_kind[y]
                          for y, x in pairs.items()], dtype=bool)
    anchors = np.array([(x, y) for y, x in pairs.items()], np.int64).reshape(-1, 2)[same_name]
    inside = in_steps(g, sr)
    iteration = _iteration_of(sr, g.pt_time, _pt_pids(g))
    coll_ops = (my_coll_name[my_names], their_coll_name[their_names])
    twin_iteration = _iteration_of(twin_sr, g2.pt_time, _pt_pids(g2))
    # the ops kernels-from does not pair (memsets, host copies) count where their number differs
    counted = (~device_work_ops(g.trace), ~device_work_ops(twin))
    host = stretches.carry(g, g2, anchors, inside, iteration, twin_iteration, coll_ops, twin_pace=twin_host,
                           counted=counted)
    # the range's other end: the twin's host time as it ran, were the two captures' difference in pace
    # on the same-named work the change's own (the framework's work changed with it), not the CPU's
    as_ran = host if twin_host or not host.changed else stretches.carry(g, g2, anchors, inside, iteration,
                                                                         twin_iteration, coll_ops, twin_pace=True,
                                                                         counted=counted)
    ed.twin_pace.update(host.pace)
    n_steps = max(sr.n_steps, 1)
    for plan in ed.plans:
        plan.op_dur[:] = np.where(np.isin(np.arange(g.n_ops), np.concatenate(list(mine.values()))), new_dur, plan.op_dur)
        factor = as_ran.factor if plan is ed.high else host.factor
        plan.delta_ns[:] = np.round(plan.delta_ns * factor).astype(np.int64)
    colls = _collectives_from(g, sr, twin, twin_sr, mine_all, theirs_all, my_coll_name, their_coll_name, theirs, pairs,
                              ed, g2)
    # said, not judged: how many pairs share a name tells a twin of the same program (a TF32 pair: most)
    # from another program's capture (a few), which no threshold does (a memory format renames 2 in 3)
    note = (f"{matched:,} kernels and device copies take their twin's duration (matched by launch order and family, "
            f"step by step; {int(same_name.sum()):,} of them named alike in both)")
    if replaced:
        note += f"; {replaced:,} without a counterpart take their block's total GPU time from the twin"
    if host.changed:
        paces = ", ".join(f"x{p:.2f}" for p in host.pace.values())
        note += (f"; the CPU time between two same-named launches around each of {host.changed:,} changed kernels "
                 f"(the library's calls for them) is the twin's, at this capture's CPU pace (the twin's threads ran "
                 f"at {paces} of this one's over {host.same:,} unchanged stretches): "
                 f"{host.added_ns / n_steps / 1e6:+,.2f} ms of host time a step")
    if colls:
        note += f"; {colls}"
    if unpaired:  # said, not hidden in the median: those steps replay as captured
        note += (f"; {sum(unpaired.values()):,} kernels of {len(unpaired)} of this capture's steps "
                 f"({', '.join(sorted(unpaired))}) keep their own durations: {path.name} has no iteration of "
                 f"that name (its steps: {_step_names(twin_sr)}), and the predicted step, taken over the steps, "
                 "counts them unchanged")
    ed.applied.append(Applied(e.text, note, "the twin's kernels ran as fast as they did in its own capture"
                              + ("; the library's host work around a changed kernel costs what it cost in the twin, "
                                 "scaled by the two captures' CPU pace (one end of the range: the twin's host time as "
                                 "it ran, were that pace the change's own)" if host.changed else "")))


def _step_names(sr: StepRanges) -> str:
    names = [_plain(n) for n, is_step in zip(sr.names, sr.is_step) if is_step]
    return ", ".join(names[:RANGE_HINT_NAMES]) + (", …" if len(names) > RANGE_HINT_NAMES else "") or "none"


def _refuse_if_unpaired(g: Graph, sr: StepRanges, twin, twin_sr: StepRanges, path: Path,
                        unpaired: dict[str, int]) -> None:
    """Kernels are paired iteration by iteration, by the iterations' names: where no steady-state step
    of this capture has a namesake in the twin, nothing would change and the answer would be the
    unchanged step, said as a prediction."""
    steady = {_plain(n) for n, is_step in zip(sr.names, sr.is_step) if is_step}
    if steady and set(unpaired) >= steady:
        raise EditError(f"kernels-from: none of {g.trace.path.name}'s steps ({_step_names(sr)}) has an iteration of "
                        f"the same name in {path.name} (its steps: {_step_names(twin_sr)}): kernels are paired step "
                        "by step, by the steps' names")


def _is_collective(trace) -> np.ndarray:
    """Per op name code: an NCCL collective (the graph's test for coupling ranks)."""
    return np.array(["nccl" in n.lower() for n in trace.op_names], dtype=bool)


def _collectives_from(g: Graph, sr: StepRanges, twin, twin_sr: StepRanges, mine_all, theirs_all, my_coll_name,
                      their_coll_name, theirs, pairs: dict[int, int], ed: Edited, g2: Graph) -> str:
    """The twin's collectives, launched where the twin launched them: a bucket change (DDP's
    bucket_cap_mb, one bucket) moves each all-reduce to after its bucket's last gradient, which
    durations alone do not say. Per rank, step and collective name: the twin's collectives in order
    take this capture's one for one where both have as many; otherwise each is carried by the first
    of this capture's collectives whose stream waits for a kernel ending no earlier than the twin's
    own wait (the kernel its stream waited for, matched into this capture), or by the last one, its
    wait moved to that kernel. A collective carries the transfer time of those it took (the twin's
    time after its last member started; several, one after the other, as its stream runs them) and
    one that carries none is gone: no time, no coupling with the other ranks. Empty string when
    neither capture has a collective."""
    my_names, their_names = g.trace.ops["name"].to_numpy(), twin.ops["name"].to_numpy()
    if not my_coll_name.any() and not their_coll_name.any():
        return ""
    t_dur = (g2.op_end - g2.op_start).astype(np.int64)
    transfer = np.where(g2.op_coll >= 0, g2.coll_tail_ns, t_dur)
    carried = np.zeros(g.n_ops, np.int64)
    took = np.zeros(g.n_ops, np.int64)  # how many of the twin's collectives each carries
    new_src = g.op_src.copy()
    new_src_off = g.op_src_off.copy()
    into: dict[int, int] = {}  # a collective gone -> the one that carries its transfer
    mine_c = sum((int(my_coll_name[my_names[k]].sum()) for k in mine_all.values()), 0)
    theirs_c = sum((int(their_coll_name[their_names[k]].sum()) for k in theirs_all.values()), 0)
    for (pid, a_all), (tpid, b_all) in zip(sorted(mine_all.items()), sorted(theirs_all.items())):
        a_c, b_c = a_all[my_coll_name[my_names[a_all]]], b_all[their_coll_name[their_names[b_all]]]
        segs_a, segs_b = _segments(g.trace, a_c, sr, pid), _segments(twin, b_c, twin_sr, tpid)
        kseq = _segments(twin, theirs[tpid], twin_sr, tpid)
        for key, a in segs_a.items():
            b = segs_b.get(key, np.zeros(0, np.int64))
            seq = kseq.get(key, np.zeros(0, np.int64)).tolist()
            where = {o: i for i, o in enumerate(seq)}
            for code in np.unique(my_names[a]).tolist():
                name = g.trace.op_names[code]
                slots = a[my_names[a] == code]
                slots = slots[np.argsort(g.op_start[slots], kind="stable")]
                mine_t = [int(g.op_end[s_]) if s_ >= 0 else int(g.op_start[c]) for c, s_ in zip(slots, g.op_src[slots])]
                theirs_b = b[np.array([twin.op_names[n] == name for n in their_names[b]], dtype=bool)] if len(b) else b
                if len(theirs_b) == len(slots):
                    carried[slots] += transfer[theirs_b]
                    took[slots] += 1
                    continue
                carriers: list[tuple[int, int]] = []  # (the twin's bucket end here, the collective carrying it)
                held: dict[int, list[tuple[int, int, int]]] = {}  # slot -> (bucket end here, its kernel, transfer)
                for d in theirs_b.tolist():
                    # the kernel the twin's collective waited for, as this capture's kernel (the
                    # nearest matched one before it where it has no counterpart)
                    src, mapped = int(g2.op_src[d]), -1
                    i = where.get(src, -1)
                    while i >= 0 and mapped < 0:
                        mapped = pairs.get(seq[i], -1)
                        i -= 1
                    t = int(g.op_end[mapped]) if mapped >= 0 else int(g.op_start[slots[-1]])
                    at = next((j for j, x in enumerate(mine_t) if x >= t), len(slots) - 1)
                    c = int(slots[at])
                    held.setdefault(c, []).append((t, mapped, int(transfer[d])))
                    took[c] += 1
                    carriers.append((max(t, mine_t[at]), c))
                for c, chain in held.items():
                    # several smaller buckets in one collective: on one stream they end at the latest
                    # of each one's gradient plus its transfer and those after it; the collective stands
                    # for that chain, waiting for the bucket that sets it and carrying the rest
                    rest = np.cumsum([x for _, _, x in chain][::-1])[::-1]
                    k = int(np.argmax([t + r for (t, _, _), r in zip(chain, rest)]))
                    carried[c] += int(rest[k])
                    if chain[k][1] >= 0 and chain[k][1] != new_src[c]:
                        new_src[c], new_src_off[c] = chain[k][1], g.queue_gap_ns
                # a collective gone into a larger bucket: what waited for it (DDP copying the reduced
                # bucket back into the gradients) now waits for the collective carrying that bucket
                for c, tc in zip(slots.tolist(), mine_t):
                    if took[c] == 0 and carriers:
                        into[c] = next((k for t, k in sorted(carriers) if t >= tc), max(carriers)[1])
    coll_ops = np.flatnonzero(my_coll_name[my_names])
    gone = coll_ops[took[coll_ops] == 0]
    # a group coupled across ranks is gone only where every member is: else it still ends together
    keep_coupled = np.zeros(g.n_ops, bool)
    for grp in g.coll_members:
        if (took[grp] > 0).any():
            keep_coupled[grp] = True
    waiting = np.flatnonzero(np.isin(new_src, list(into))) if into else np.zeros(0, np.int64)
    new_src[waiting] = [into[int(x)] for x in new_src[waiting]]
    for plan in ed.plans:
        plan.op_dur[coll_ops] = carried[coll_ops]
        plan.coll_tail_ns[coll_ops] = carried[coll_ops]
        plan.op_coll[gone[~keep_coupled[gone]]] = -1
        plan.op_src[:], plan.op_src_off[:] = new_src, new_src_off
    moved = int((new_src[coll_ops] != g.op_src[coll_ops]).sum())
    return (f"collectives re-timed from the twin's ({theirs_c:,} there, {mine_c:,} here): {int((took > 0).sum()):,} "
            f"carry the twin's transfers, {len(gone):,} gone into a larger bucket ({len(waiting):,} ops that waited "
            f"for one wait for its carrier), {moved:,} wait for a later gradient (launched after their bucket's "
            "last gradient, as in the twin)")


def apply(g: Graph, sr: StepRanges, edits: list[Edit], load=None, twin_host: bool = False,
          twin_iterations: Mapping[str, str] | None = None) -> Edited:
    """The edits' plans over `g` (predict passes the typical step's graph, pace.typical_host; the
    range of the CPU's pace is predict's, pace.cpu_range). `twin_host`: a diagnostic of
    `kernels-from` (the CPU at the twin's pace, read off the stretches
    of host time between two same-named launches that no changed kernel touches, stretches.carry),
    never a prediction. `twin_iterations`: for `kernels-from`, this capture's iteration name -> the
    twin's iteration whose kernels it takes (default: the one of the same name); with the twin the
    same capture, one step takes another's kernels (a change made on every other step of one capture)."""
    check_once(edits)
    ed = Edited(Plan.of(g), Plan.of(g), Plan.of(g))
    # workers:N moves what the nohost edits remove, whichever comes first in the list
    for e in sorted(edits, key=lambda e: e.kind == "workers"):
        try:
            _apply_one(g, sr, e, ed, load, twin_host, twin_iterations)
        except EditError as err:  # said with the edit it refuses (a finding's fix: its edit and the finding)
            if str(err).startswith(e.text):
                raise
            raise type(err)(f"{e.text}: {err}") from None
    return ed


def _apply_one(g: Graph, sr: StepRanges, e: Edit, ed: Edited, load, twin_host: bool,
               twin_iterations: Mapping[str, str] | None) -> None:
    """One edit onto the plans `ed` (apply)."""
    if e.kind == "kernels-from":
        _kernels_from(g, sr, e, ed, load, twin_host, twin_iterations)
    elif e.kind == "fix":  # the findings turn fix:ID into its edits before the replay sees it
        raise EditError(f"{e.text}: a finding's fix is read through the findings (Profile.whatif)")
    else:
        _ON_THE_PLANS[e.kind](g, sr, e, ed)


def _straggler(g: Graph, sr: StepRanges, e: Edit, ed: Edited) -> None:
    """`straggler`: the rank that arrives last at the collectives without its own pauses and slower kernels,
    and at one end also at the others' pace (replay.straggler)."""
    ev = straggler.even_out(g, sr, LOOP_PAUSE_MIN_NS)
    if ev is None:
        raise OneRank()
    matched = (f"matched step by step: {ev.threads[0]} of {ev.threads[1]} thread-steps, {ev.streams[0]} of "
               f"{ev.streams[1]} stream-steps")
    host, ops = ev.delta_ns != g.delta_ns, ev.op_dur != g.op_dur
    paced = (ev.paced_delta_ns != g.delta_ns).any() or (ev.paced_op_dur != g.op_dur).any()
    if not host.any() and not ops.any() and not paced and not ev.unblocked:
        raise EditError(f"the straggler ({_rank_words(g, ev.pid)}) has no pause, no blocking call, no op and no pace longer than "
                        f"the other ranks' where they match ({matched})")
    for plan in (ed.mid, ed.high):
        plan.delta_ns[:] = np.minimum(plan.delta_ns, ev.delta_ns)
        plan.op_dur[:] = np.minimum(plan.op_dur, ev.op_dur)
    ed.low.delta_ns[:] = np.minimum(ed.low.delta_ns, ev.paced_delta_ns)
    ed.low.op_dur[:] = np.minimum(ed.low.op_dur, ev.paced_op_dur)
    for plan in ed.plans:
        _unblock(g, plan, ev.unblocked)
    per_step = ev.steps * 1e6
    slower = {k: v for k, v in ev.pace.items() if v > 1.0}
    # by the `straggler` finding's measure (its excess against a share of the step), the latest rank may not straggle
    excess, step = straggler.excess_ns_per_step(g, ev), _mean_step_ns(g, sr, ev.pid)
    floor = straggler.STRAGGLES_MIN_SHARE * step
    who = (f"the straggler, {_rank_words(g, ev.pid)}, its collectives starting {ev.lateness_ns / 1e6:,.2f} ms behind "
           "the first rank's (mean)" if excess >= floor or not step else
           f"no rank straggles by the straggler finding's measure: the latest, {_rank_words(g, ev.pid)}, arrives "
           f"{ev.lateness_ns / 1e6:,.2f} ms behind the first rank (its collectives' starts, mean) and runs "
           f"{excess / 1e6:,.2f} ms a step longer than the others at the same place, under the finding's "
           f"{straggler.STRAGGLES_MIN_SHARE:.0%} of the step ({floor / 1e6:,.2f} ms of {step / 1e6:,.2f}); evened out "
           "anyway")
    ed.applied.append(Applied(
        e.text, f"{who}, without what it runs longer than the other {len(ev.others)} rank"
        f"{'s' if len(ev.others) > 1 else ''} at the same place: {len(ev.unblocked):,} blocking calls of its own "
        f"(the others make none there) no longer wait, {int(host.sum()):,} pauses of its own "
        f"({int((g.delta_ns - ev.delta_ns)[host].sum()) / per_step:,.2f} ms a step of host time, each at least "
        f"{LOOP_PAUSE_MIN_NS / 1e6:g} ms longer than the others'), {int(ops.sum()):,} GPU ops "
        f"({int((g.op_dur - ev.op_dur)[ops].sum()) / per_step:,.2f} ms a step, each over "
        f"{straggler.OP_OUTLIER:g}x the others': another kernel in their place) at the others' length ({matched})",
        "centrally its threads and streams keep their own pace; at the low end also at the others' (their median "
        "ratio to the same work on the other ranks: " + (", ".join(f"{k} x{v:.2f}" for k, v in slower.items())
                                                           or "none slower") + "), which may be the machine's, "
        "not the program's: two ranks' CPUs on one lent machine ran x0.56..x1.70 of each other with no straggler "
        "planted (docs/whatif.md)"))


def _mean_step_ns(g: Graph, sr: StepRanges, pid: int) -> float:
    """The mean period of the process's steps (each to its next's start; the findings' step, StepContext.step_ns)."""
    periods = [b - a for p, a, b in range_spans(g, sr, STEP_RANGE) if p == pid]
    return float(np.mean(periods)) if periods else 0.0


def _rank_words(g: Graph, pid: int) -> str:
    """A process as the ranks view and the straggler finding name it (read.process_ranks: the file's rank
    suffix, the capture's config mark, else process/GPU order), its process, pid and GPU beside:
    `rank 1 (python3, pid 846, GPU 1)`; `python3 (pid 846, GPU 1)` where no rank is found for it."""
    gpid, device = next((gp, d) for gp, d, _ in g.stream_keys if pid_of(np.int64(gp)) == pid)
    rank = rank_of(g.trace, pid, device)
    name = rank.process if rank is not None and rank.process else g.trace.processes.get(int(gpid), (pid, ""))[1]
    detail = f"{name + ', ' if name else ''}pid {pid}, GPU {device}"
    return f"rank {rank.rank} ({detail})" if rank is not None and rank.rank is not None else detail


# the edits that read the capture and its steps alone
_ON_THE_PLANS = {"speed": _speed, "drop": _drop, "fuse": _fuse, "nosync": _nosync, "nohost": _nohost,
                 "workers": _workers, "graph": _graph, "attention": _attention, "pin": _pin,
                 "straggler": _straggler}
