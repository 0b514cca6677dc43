"""The ranks of one run, exported one file each (`nsys profile --output report_%q{RANK}`), as one trace.

Each per-rank export counts time from its own session start; here every file's times move onto one
clock by the difference of their session starts (TARGET_INFO_SESSION_START_TIME, the wall clock each
nsys read when it started), then by `clock_fixes`: so that the collectives a file shares with the first
end when the first file's do (a collective ends on every rank together, while two nodes' wall clocks
agree only to their clock sync). The ranks' collectives then line up as in one export holding every
rank, and the replay couples them the same way (a collective ends after its last member arrives).

What would collide between files is renumbered: a process id two files both use (containers on
several nodes start at the same pids), a GPU id two files both use (GPU 0 of each node), kernel and
call names (one code per distinct name, across files). Reads a member does on first use (short
kernel names, launch details, copies with their calls, sync records, memory events) go to that
member's own file and come back on the merged clock and ids.

`MergedRanks.rank_files` says how far each file moved, how much of that the collectives set, and how
far apart the ranks then end the collectives they share.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.compressed import as_plain_name, exports_in, is_compressed_export
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.gpu_memory import GpuMemoryEvents
from nsight_tui.parsers.read.gpu_metrics import GpuMetrics
from nsight_tui.parsers.read.ids import KERNEL, pid_of
from nsight_tui.parsers.read.load import RunMeta, Trace, load_trace
from nsight_tui.parsers.read.process_ranks import rank_from_name
from nsight_tui.parsers.read.source import columnar_kind
from nsight_tui.parsers.read.sync_events import SyncEvents
from nsight_tui.parsers.read.target_info import session_start_utc_ns

PID_SHIFT = 24
PID_FIELD = 0xFFFFFF << PID_SHIFT


@dataclass
class Member:
    """One per-rank export inside the merged trace: how its ids and clock were moved."""

    trace: Trace
    rank: int | None
    offset_ns: int  # added to each of its times: onto the merged clock (merge says how)
    clock_fix_ns: int  # of that, what the shared collectives' ends set beyond the session starts
    pids: dict[int, int]  # its process id -> the merged one (only those renumbered)
    devices: dict[int, int]  # its GPU id -> the merged one (only those renumbered)
    op_names: np.ndarray  # its op name code -> the merged code
    ops: slice  # its rows among the merged ops

    def gtid(self, values: np.ndarray) -> np.ndarray:
        """globalTid / globalPid values with renumbered process ids."""
        out = np.asarray(values, np.int64).copy()
        for old, new in self.pids.items():
            hit = pid_of(out) == old
            out[hit] = (out[hit] & ~PID_FIELD) | (new << PID_SHIFT)
        return out

    def device(self, values: np.ndarray) -> np.ndarray:
        out = np.asarray(values).copy()
        for old, new in self.devices.items():
            out[np.asarray(values) == old] = new
        return out


@dataclass(frozen=True)
class RankFiles:
    """What a merged trace is made of, and how well its one clock lines the ranks up."""

    files: tuple[str, ...]  # the per-rank exports' names, in rank order
    ranks: tuple[int | None, ...]
    offsets_ns: tuple[int, ...]  # each file's shift onto the merged clock (ns): session starts, then the fix below
    clock_fix_ns: tuple[int, ...]  # of that, what the collectives' ends set beyond the session starts (ns)
    collectives: int  # collectives every rank holds, matched by name and order
    median_spread_ns: int | None  # their ends' spread (last less first) on the merged clock: median, max
    max_spread_ns: int | None
    renumbered: tuple[str, ...]  # ids two files both used, renumbered (one line per file)


@dataclass
class MergedRanks(Trace):
    """Several per-rank exports as one Trace on one clock (module docstring)."""

    members: list[Member] = field(default_factory=list, repr=False)
    renumbered: list[str] = field(default_factory=list, repr=False)

    @cached_property
    def rank_files(self) -> RankFiles:
        a = self._alignment()
        return RankFiles(tuple(m.trace.given.name for m in self.members), tuple(m.rank for m in self.members),
                         tuple(m.offset_ns for m in self.members), tuple(m.clock_fix_ns for m in self.members),
                         a["collectives"], a["median_spread_ns"], a["max_spread_ns"], tuple(self.renumbered))

    def _alignment(self) -> dict:
        """The spread (last less first, ns) of the ends of each collective every rank holds, on the
        merged clock (matched by name and order, as `clock_fixes` matches them): median and max over
        collectives, and how many were matched."""
        ends = pd.concat([_collective_ends(m.trace) + m.offset_ns for m in self.members], axis=1, join="inner")
        spreads = (ends.max(axis=1) - ends.min(axis=1)).to_numpy()
        if not len(spreads):
            return {"collectives": 0, "median_spread_ns": None, "max_spread_ns": None}
        return {"collectives": len(spreads), "median_spread_ns": int(np.median(spreads)),
                "max_spread_ns": int(spreads.max())}

    @cached_property
    def op_short(self) -> list[str]:
        short = [""] * len(self.op_names)
        for m in reversed(self.members):  # the first file that holds a name gives its short name
            theirs = m.trace.op_short
            for code, merged in enumerate(m.op_names.tolist()):
                if code < len(theirs):
                    short[merged] = theirs[code]
        return short

    def _member_of(self, positions: np.ndarray) -> np.ndarray:
        starts = np.array([m.ops.start for m in self.members], np.int64)
        return np.searchsorted(starts, positions, side="right") - 1

    def op_details(self, op_positions) -> pd.DataFrame:
        pos = np.atleast_1d(np.asarray(op_positions, dtype=np.int64))
        who = self._member_of(pos)
        parts = [pd.DataFrame({"grid": pd.Series([], dtype=object), "block": pd.Series([], dtype=object),
                               "graph_node": pd.Series([], dtype=np.int64), "bytes": pd.Series([], dtype=np.int64)})]
        for i, m in enumerate(self.members):
            mine = pos[who == i]
            if len(mine):
                d = m.trace.op_details(mine - m.ops.start)
                d.index = mine
                parts.append(d)
        return pd.concat(parts).loc[pos]

    def launch_configs(self) -> pd.DataFrame:
        parts = []
        for m in self.members:
            c = m.trace.launch_configs()
            c.index = c.index + m.ops.start
            parts.append(c)
        return pd.concat(parts)

    def target_gpus(self, columns: list[str]) -> list[dict]:
        rows: dict[int, dict] = {}  # one row per GPU id on the merged trace (one host's files list every GPU)
        for m in self.members:
            for row in m.trace.target_gpus(columns):
                if row.get("id") is not None:
                    row = dict(row, id=int(m.device(np.array([row["id"]]))[0]))
                rows.setdefault(row.get("id", len(rows)), row)
        return list(rows.values())

    @cached_property
    def gpu_memory(self) -> GpuMemoryEvents:
        merged = GpuMemoryEvents()
        events, failed = [], []
        for m in self.members:
            g = m.trace.gpu_memory
            merged.present = merged.present or g.present
            e = g.events.copy()
            if len(e):
                e["start"] += m.offset_ns
                e["gpid"] = m.gtid(e["gpid"].to_numpy())
                e["device"] = m.device(e["device"].to_numpy())
            events.append(e)
            f = g.failed_calls.copy()
            if len(f):
                f["start"] += m.offset_ns
                f["end"] += m.offset_ns
                f["gtid"] = m.gtid(f["gtid"].to_numpy())
            failed.append(f)
            merged.kinds.update(g.kinds)
            merged.total_memory.update({int(m.device(np.array([d]))[0]): v for d, v in g.total_memory.items()})
        merged.events = pd.concat(events, ignore_index=True).sort_values("start", kind="stable").reset_index(drop=True)
        merged.failed_calls = pd.concat(failed, ignore_index=True)
        return merged

    def failed_calls_from(self, position: int) -> pd.DataFrame:
        return self.gpu_memory.failed_calls

    def memcpy_calls(self, device: int) -> list[tuple] | None:
        key = ("memcpy_calls", device)
        if key not in self.derived:
            rows: list[tuple] | None = None
            for m in self.members:
                own = next((k for k, v in m.devices.items() if v == device), None)
                if own is None:
                    if device in m.devices:
                        continue  # this file's own GPU of that id is another one here
                    own = device
                theirs = m.trace.memcpy_calls(own)
                if theirs is None:
                    continue
                shift = m.offset_ns
                moved = [(r[0] + shift, r[1] + shift, *r[2:6], None if r[6] is None else r[6] + shift,
                          None if r[7] is None else r[7] + shift, r[8]) for r in theirs]
                rows = (rows or []) + moved
            self.derived[key] = sorted(rows, key=lambda r: r[0]) if rows is not None else None
        return self.derived[key]

    @cached_property
    def gpu_metrics(self) -> GpuMetrics:
        return GpuMetrics()  # sampled per GPU on each file's own timeline: not merged

    @cached_property
    def sync_events(self) -> SyncEvents:
        syncs, records = [], []
        for m in self.members:
            ev = m.trace.sync_events
            s, r = ev.syncs.copy(), ev.records.copy()
            for frame in (s, r):
                if len(frame):
                    frame["gpid"] = m.gtid(frame["gpid"].to_numpy())
                    frame["device"] = m.device(frame["device"].to_numpy())
            if len(s):
                s["start"] += m.offset_ns
                s["end"] += m.offset_ns
            syncs.append(s)
            records.append(r)
        return SyncEvents(pd.concat(syncs, ignore_index=True), pd.concat(records, ignore_index=True))

    def meta(self) -> RunMeta:
        return self.members[0].trace.meta()


def _used_pids(t: Trace) -> set[int]:
    ids = [t.api["gtid"].to_numpy(), t.ops["gpid"].to_numpy(), t.ranges["gtid"].to_numpy(), t.marks["gtid"].to_numpy()]
    return {int(p) for p in np.unique(pid_of(np.concatenate([np.asarray(x, np.int64) for x in ids])))}


def _renumbered(own: set[int], taken: set[int]) -> dict[int, int]:
    """The ids of `own` another file took already, each to a new one past every id seen; `taken`
    then holds this file's ids as merged."""
    moved: dict[int, int] = {}
    for i in sorted(own & taken):
        moved[i] = max(taken | own) + 1
        taken.add(moved[i])
    taken |= own - set(moved)
    return moved


def _codes(names: list[str], merged: list[str], index: dict[str, int]) -> np.ndarray:
    out = np.empty(len(names), np.int32)
    for i, n in enumerate(names):
        if n not in index:
            index[n] = len(merged)
            merged.append(n)
        out[i] = index[n]
    return out


# Fewer collectives shared with the first file than this: its clock stays as the session starts set it.
CLOCK_FIX_MIN_SHARED = 3


def _collective_ends(t: Trace) -> pd.Series:
    """Each NCCL kernel's end (ns, the file's clock), indexed by its name and its order among that name's."""
    names = t.ops["name"].to_numpy()
    nccl = np.array(["nccl" in n.lower() for n in t.op_names], bool)
    sel = np.flatnonzero(nccl[names]) if len(names) else np.zeros(0, np.int64)
    frame = pd.DataFrame({"name": [t.op_names[c] for c in names[sel]], "start": t.ops["start"].to_numpy()[sel],
                          "end": t.ops["end"].to_numpy()[sel]}).sort_values("start", kind="stable")
    frame["nth"] = frame.groupby("name").cumcount()
    return frame.set_index(["name", "nth"])["end"]


def clock_fixes(traces: list[Trace], session_ns: list[int]) -> list[int]:
    """Per file, how far its clock moves beyond its session start (ns) so the collectives it shares
    with the first file end when the first file's do: the median of their differences. A collective
    ends on every rank together (the ring's last hop), while two nodes' session starts are their wall
    clocks, which agree only to the clock sync between them. 0 where fewer than CLOCK_FIX_MIN_SHARED are shared."""
    ends = [_collective_ends(t) for t in traces]
    out = [0]
    for e, at in zip(ends[1:], session_ns[1:]):
        shared = ends[0].index.intersection(e.index)
        out.append(clock_fix_ns(ends[0].loc[shared].to_numpy() + session_ns[0], e.loc[shared].to_numpy() + at))
    return out


def clock_fix_ns(first_ends: np.ndarray, ends: np.ndarray) -> int:
    """How far a file's clock moves so that the collectives it shares with the first file, matched
    pair by pair (`ends` against `first_ends`, ns on the session starts' clock), end when the first
    file's do: the median of their differences; 0 where fewer than CLOCK_FIX_MIN_SHARED are shared."""
    if len(ends) < CLOCK_FIX_MIN_SHARED or len(ends) != len(first_ends):
        return 0
    return int(np.median(np.asarray(first_ends, np.int64) - np.asarray(ends, np.int64)))


# One run's ranks are captured at once, so their captures overlap on the session starts' clock; two
# nodes' wall clocks agree far closer than this, which only forgives captures that barely touch.
CAPTURE_OVERLAP_SLACK_NS = 1_000_000_000


def _last_ns(t: Trace) -> int:
    """The latest time the file records (ns on its own clock): its analysis span or its last event."""
    last = [int(t.info.span_ns)]
    for frame, column in ((t.ops, "end"), (t.api, "end"), (t.ranges, "end"), (t.marks, "start")):
        if len(frame):
            last.append(int(frame[column].max()))
    return max(last)


def _refuse_other_runs(traces: list[Trace], session: list[int]) -> None:
    """TraceError where one file's capture began after another's had ended (session starts, ns from the
    earliest): the ranks of one run are captured together, so these are other runs' files."""
    ends = [s + _last_ns(t) for t, s in zip(traces, session)]
    late, early = int(np.argmax(session)), int(np.argmin(ends))
    gap = session[late] - ends[early]
    if gap > CAPTURE_OVERLAP_SLACK_NS:
        raise TraceError(f"{traces[late].given.name} began {gap / 1e9:,.1f} s after {traces[early].given.name} had "
                         "ended (TARGET_INFO_SESSION_START_TIME): captures that do not overlap are not one run's ranks")


def _refuse_without_kernels(traces: list[Trace]) -> None:
    """TraceError where a file holds no kernel: its rank's GPU work and collectives are not there to
    couple with the others'."""
    empty = [t.given.name for t in traces if not (t.ops["kind"].to_numpy() == KERNEL).any()]
    if empty:
        raise TraceError(f"{', '.join(empty)}: no CUDA kernels (captured without --trace=cuda?), so its rank cannot "
                         "be replayed with the others")


def merge(traces: list[Trace], starts_ns: list[int | None], ranks: list[int | None], path: Path) -> MergedRanks:
    """`traces` (one per rank, in rank order) on one clock: each moved by its session start
    (`starts_ns`, UTC ns) less the earliest, then by `clock_fixes` (the collectives' ends).
    TraceError where a file has no session start, holds no kernel, or was captured apart from the others."""
    if any(s is None for s in starts_ns):
        missing = [t.given.name for t, s in zip(traces, starts_ns) if s is None]
        raise TraceError(f"{', '.join(missing)}: no session start time (TARGET_INFO_SESSION_START_TIME), "
                         "so the per-rank exports cannot be put on one clock")
    session = [int(s) for s in starts_ns]  # type: ignore[arg-type]
    session = [s - min(session) for s in session]
    _refuse_other_runs(traces, session)
    _refuse_without_kernels(traces)
    fixes = clock_fixes(traces, session)
    offsets = [s + f for s, f in zip(session, fixes)]
    offsets = [o - min(offsets) for o in offsets]  # every time on the merged clock >= 0
    op_names: list[str] = []
    op_index: dict[str, int] = {}
    api_names: list[str] = []
    api_index: dict[str, int] = {}
    taken_pids: set[int] = set()
    taken_devices: set[int] = set()
    members: list[Member] = []
    ops_parts, api_parts, range_parts, mark_parts = [], [], [], []
    threads: dict[int, str] = {}
    processes: dict[int, tuple[int, str]] = {}
    notes: list[str] = []
    n_ops = n_api = 0
    range_rowid = 0
    for t, offset, fix, rank in zip(traces, offsets, fixes, ranks):
        used = _used_pids(t)
        pids = _renumbered(used, taken_pids)
        devices = _renumbered({int(d) for d in np.unique(t.ops["device"].to_numpy())}, taken_devices)
        if pids or devices:
            what = [f"process {a} as {b}" for a, b in pids.items()] + [f"GPU {a} as {b}" for a, b in devices.items()]
            notes.append(f"{t.given.name}: {', '.join(what)} (another rank's file uses the same id)")
        m = Member(t, rank, offset, fix, pids, devices, _codes(t.op_names, op_names, op_index),
                   slice(n_ops, n_ops + len(t.ops)))
        api_codes = _codes(t.api_names, api_names, api_index)

        ops = t.ops.copy()
        ops["start"] += offset
        ops["end"] += offset
        ops["gpid"] = m.gtid(ops["gpid"].to_numpy())
        ops["device"] = m.device(ops["device"].to_numpy())
        ops["name"] = m.op_names[ops["name"].to_numpy()] if len(ops) else ops["name"]
        a = ops["api"].to_numpy()
        ops["api"] = np.where(a >= 0, a + n_api, a).astype(np.int64)
        api = t.api.copy()
        api["start"] += offset
        api["end"] += offset
        api["gtid"] = m.gtid(api["gtid"].to_numpy())
        api["name"] = api_codes[api["name"].to_numpy()] if len(api) else api["name"]
        ranges = t.ranges.copy()
        for c in ("start", "end", "end_sum"):
            ranges[c] = np.where(ranges[c].to_numpy() >= 0, ranges[c].to_numpy() + offset, ranges[c].to_numpy())
        ranges["gtid"] = m.gtid(ranges["gtid"].to_numpy())
        ranges["rowid"] = ranges["rowid"].to_numpy() + range_rowid
        range_rowid = int(ranges["rowid"].max()) + 1 if len(ranges) else range_rowid
        marks = t.marks.copy()
        marks["start"] += offset
        marks["gtid"] = m.gtid(marks["gtid"].to_numpy())
        # a node's export names every process on it, another rank's too, as it was when that capture
        # looked (`nsys-launcher` before it ran the rank's python): the file whose work a process is names it
        for g, name in t.threads.items():
            key = int(m.gtid(np.array([g]))[0])
            if int(pid_of(np.int64(g))) in used or key not in threads:
                threads[key] = name
        for g, (pid, name) in t.processes.items():
            key = int(m.gtid(np.array([g]))[0])
            if pid in used or key not in processes:
                processes[key] = (pids.get(pid, pid), name)
        ops_parts.append(ops)
        api_parts.append(api)
        range_parts.append(ranges)
        mark_parts.append(marks)
        members.append(m)
        n_ops += len(ops)
        n_api += len(api)

    ops = pd.concat(ops_parts, ignore_index=True)
    ops["api"] = ops["api"].astype(np.int64 if n_api >= 2**31 else np.int32)
    api = pd.concat(api_parts, ignore_index=True)
    ranges = pd.concat(range_parts, ignore_index=True)
    marks = pd.concat(mark_parts, ignore_index=True)
    first = traces[0]
    gpus: list[str] = []
    for t in traces:
        gpus = gpus if len(gpus) >= len(t.info.gpus) else list(t.info.gpus)
    span = max((int(t.info.span_ns) + m.offset_ns for t, m in zip(traces, members)), default=0)
    info = replace(first.info, path=path, gpus=gpus, span_ns=span, kernels=sum(t.info.kernels for t in traces),
                   memcpys=sum(t.info.memcpys for t in traces), memsets=sum(t.info.memsets for t in traces),
                   api_calls=len(api), ranges=len(ranges), processes=sum(t.info.processes for t in traces),
                   has_nvtx=any(t.info.has_nvtx for t in traces), has_cuda=any(t.info.has_cuda for t in traces),
                   notes=[f"{t.given.name}: {n}" for t in traces for n in t.info.notes] + notes,
                   graphs_whole=sum(t.info.graphs_whole for t in traces),
                   graphs_by_node=sum(t.info.graphs_by_node for t in traces))
    facts = dict(first.facts, threads=threads, processes=processes, gpus=gpus, span=span)
    return MergedRanks(path=path, schema=first.schema, info=info, op_names=op_names, api_names=api_names, ops=ops,
                       api=api, ranges=ranges, marks=marks, threads=threads, processes=processes,
                       memcpy_labels_from_export=all(t.memcpy_labels_from_export for t in traces), facts=facts,
                       checks=first.checks, members=members, renumbered=notes)


def one_run(files: list[Path]) -> list[Path] | None:
    """`files` in rank order, if they are the ranks of one run: at least two, each name the same but
    for its rank suffix (`_rank0`, `_rank1`, ...); else None."""
    stems = {conventions.split_rank(as_plain_name(p).stem)[0] for p in files}
    if len(files) < 2 or len(stems) != 1 or any(rank_from_name(p) is None for p in files):
        return None
    return sorted(files, key=lambda p: (rank_from_name(p), p.name))


def rank_files(folder: Path) -> list[Path] | None:
    """The folder's exports in rank order, if they are the ranks of one run (`one_run`); else None."""
    return one_run(exports_in(folder))


def _not_one_run(folder: Path, found: list[Path]) -> TraceError:
    """What keeps `found` (two or more) from being one run's ranks, said of the files that do not fit."""
    no_rank = [p.name for p in found if rank_from_name(p) is None]
    stems = sorted({conventions.split_rank(as_plain_name(p).stem)[0] for p in found if rank_from_name(p) is not None})
    why = (f"{', '.join(no_rank)}: no rank suffix" if no_rank
           else f"more than one run's name: {', '.join(s + '_rankN' for s in stems)}")
    return TraceError(f"{folder}: {len(found)} exports that are not the ranks of one run ({why}; one name but a rank "
                      "suffix each, e.g. report_rank0.sqlite and report_rank1.sqlite)")


def _named_as_export(p: Path) -> bool:
    return p.suffix == ".sqlite" or is_compressed_export(p)


def run_in(folder: Path, per_host: bool = False) -> list[Path]:
    """`run_of` the folder's exports; TraceError (one line) too for a link named like an export that
    leads nowhere (left out, its rank would go missing)."""
    broken = sorted((p for p in folder.iterdir() if p.is_symlink() and not p.exists() and _named_as_export(p)),
                    key=lambda p: p.name)
    if broken:
        raise TraceError(f"{broken[0]}: a link to {os.readlink(broken[0])}, which does not exist")
    return run_of(folder, exports_in(folder), per_host)


def run_of(folder: Path, found: list[Path], per_host: bool = False) -> list[Path]:
    """The exports that make up the run in `folder` (`found`, its exports): its one export, or one run's
    per-rank exports in rank order (`one_run`); `per_host`: or several exports none of which has a rank
    suffix (one per node, `--output report_%h`, each holding its node's ranks), in name order.
    TraceError (one line) for no exports, or exports of several runs."""
    if not found:
        raise TraceError(f"{folder}: no .sqlite exports in this folder")
    if len(found) == 1:
        return list(found)
    files = one_run(found)
    if files is None:
        if per_host and all(rank_from_name(p) is None for p in found):
            return list(found)
        raise _not_one_run(folder, found)
    return files


def check_ranks(files: list[Path]) -> None:
    """TraceError where `files` (one run's, `one_run`) hold a rank twice or leave one out between their
    first and last: a replay of the ranks as one needs each rank's work once."""
    names: dict[int, list[str]] = {}
    for p in files:
        names.setdefault(rank_from_name(p) or 0, []).append(p.name)
    twice = next(((r, n) for r, n in sorted(names.items()) if len(n) > 1), None)
    if twice is not None:
        raise TraceError(f"{' and '.join(twice[1])} are both rank {twice[0]}: keep one of them")
    missing = sorted(set(range(min(names), max(names) + 1)) - set(names))
    if missing:
        raise TraceError(f"no export of rank {', '.join(map(str, missing))} among ranks {min(names)}..{max(names)} "
                         f"({', '.join(p.name for p in files)}): each rank's export is needed to replay them as one")


# Files read at once: the readers spend their time in native code outside the GIL (SQLite, ADBC,
# the decompression of an .xz), so a few threads overlap them; more only add memory in flight.
LOAD_THREADS = 4


def load_rank_files(files: list[Path], folder: Path, progress=None) -> MergedRanks:
    """Load each per-rank export (`files`, in rank order; a few at once) and merge them on one clock.
    `progress(fraction, text)` as each file is in. TraceError (one line): from `check_ranks` before
    any file is read, from a file's read, from `merge`."""
    check_ranks(files)
    with ThreadPoolExecutor(max_workers=max(1, min(LOAD_THREADS, len(files), os.cpu_count() or 1))) as pool:
        pending = {pool.submit(load_trace, f): i for i, f in enumerate(files)}
        loaded: dict[int, Trace] = {}
        try:
            for done in as_completed(pending):
                loaded[pending[done]] = done.result()
                if progress:
                    progress(len(loaded) / len(files), f"{len(loaded)} of {len(files)} rank files read")
        except BaseException:  # a file that cannot be read (its TraceError, one line): the others not started stay so
            for future in pending:
                future.cancel()
            raise
    traces = [loaded[i] for i in range(len(files))]
    return merge(traces, [session_start_utc_ns(t.path) for t in traces], [rank_from_name(f) for f in files], folder)


def load_export(path: str | Path, progress=None, files: list[Path] | None = None) -> Trace:
    """An export (`read.load.load_trace`), or a folder (`run_in`; `files`: only these of its exports, for
    a caller that reads no others, `run_of`): its one export, or its per-rank exports of one run as
    one trace (`load_rank_files`). TraceError (one line) for a folder that is neither."""
    folder = Path(path)
    if folder.is_dir() and columnar_kind(folder) is None:
        run = run_in(folder) if files is None else run_of(folder, files)
        if len(run) == 1:
            return load_trace(run[0], progress)
        return load_rank_files(run, folder, progress)
    return load_trace(folder, progress)
