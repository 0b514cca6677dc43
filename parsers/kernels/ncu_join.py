"""Which kernel of an nsys export each kernel of an Nsight Compute report is.

The two files come from two runs of one workload (ncu replays every kernel it profiles, so the
run it profiles is not the run nsys timed). What ties a profiled kernel to the export's kernel is
its place in the launch sequence and its name:

1. The window. ncu started with `--profile-from-start off` profiles the kernels launched between
   cudaProfilerStart and cudaProfilerStop (`capture --ncu` brackets one step with them). The export
   records those two calls too, so the export's kernels launched in between, by every thread, in
   launch order (the launching call's start), are the sequence ncu saw. Without the calls in the
   export (ncu run with an NVTX filter instead), the window is the time the NVTX range at the
   bottom of most of ncu's stacks (`step_1`) was open, every thread's launches in it; without
   either, the stretch of the export's whole kernel sequence that agrees with the report's names
   at the most places (a step repeats: then the first such stretch). A report whose every kernel has
   an NVTX stack was made with an NVTX filter: ncu could profile only the kernels launched by a
   thread with the range open, so the range's window keeps only that thread's launches (the
   autograd thread's backward, launched with no stack, was never profilable).
2. The pairing: the report's name sequence aligned to the window's (difflib's longest matching
   blocks, so one kernel more or less on either side shifts nothing after it), by mangled name
   (the exact symbol; nsys and ncu demangle alike, but the mangled name needs no demangler).

ncu's NVTX push/pop stack is not used to pair: it exists only for kernels launched by a thread
with ranges; PyTorch's autograd thread launches backward's kernels with none. It is kept to check
the pairing against (analyses.ncu compares it with the export's range of the joined kernel).
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.read.columns import open_tables
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.ncu_rep import NcuReport

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
PROFILER_START, PROFILER_STOP = "cudaProfilerStart", "cudaProfilerStop"
BY_WINDOW = "the kernels launched between cudaProfilerStart and cudaProfilerStop, in launch order"
BY_RANGE = "the kernels launched, by any thread, while the NVTX range {} that ncu's stacks start with was open"
BY_RANGE_THREAD = ("the kernels launched by the thread of the NVTX range {} that ncu's stacks start with, while it "
                   "was open (ncu's NVTX filter profiled no other thread's)")
BY_SEARCH = "the stretch of the export's kernel sequence whose names agree most with the report's"


@dataclass
class NcuJoin:
    report: NcuReport
    op_of: np.ndarray  # per report kernel (its index): the export's op position, -1 if not joined
    window: str  # how the export's side of the sequence was found (BY_WINDOW or BY_SEARCH)
    window_ops: np.ndarray  # the export's kernels in that window, in launch order
    key: str  # "mangled" or "demangled": the name the sequences were aligned by
    notes: list[str] = field(default_factory=list)

    @property
    def joined(self) -> int:
        return int((self.op_of >= 0).sum())

    @property
    def share_joined(self) -> float:
        return self.joined / len(self.op_of) if len(self.op_of) else 0.0

    @property
    def matched_span(self) -> int:
        """How many of the window's kernels lie from the first joined one to the last: the stretch
        of the export's launch sequence the report's kernels landed in (0: none joined)."""
        joined = self.op_of[self.op_of >= 0]
        if not len(joined):
            return 0
        at = np.flatnonzero(np.isin(self.window_ops, joined))
        return int(at[-1] - at[0] + 1)

    @property
    def agreement(self) -> float:
        """Of the report's kernels and of that stretch of the window, whichever is longer: the share
        that pairs up by name in launch order. One workload's step against itself: ~1 (a report
        bounded by `ncu -c` covers a prefix of the window and still agrees); another model's step
        joins a scattered subsequence (4 layers' kernels found among 12 layers': 0.37)."""
        longest = max(len(self.op_of), self.matched_span)
        return self.joined / longest if longest else 0.0


def launch_order(trace) -> tuple[np.ndarray, np.ndarray]:
    """The export's kernels in launch order (the start of the launching API call, every thread
    of the process together, else the kernel's own start), and those launch times."""
    ops = trace.ops
    kpos = np.flatnonzero(ops["kind"].to_numpy() == KERNEL)
    api = ops["api"].to_numpy()[kpos].astype(np.int64)
    api_start = trace.api["start"].to_numpy()
    when = np.where(api >= 0, api_start[np.clip(api, 0, max(len(api_start) - 1, 0))] if len(api_start) else 0,
                    ops["start"].to_numpy()[kpos])
    by = np.lexsort((ops["start"].to_numpy()[kpos], when))
    return kpos[by], when[by]


def profiler_windows(trace) -> list[tuple[int, int]]:
    """(start, stop) times of each cudaProfilerStart ... cudaProfilerStop pair in the export."""
    names = trace.api_names
    codes = trace.api["name"].to_numpy()
    starts_code = [i for i, n in enumerate(names) if n.startswith(PROFILER_START)]
    stops_code = [i for i, n in enumerate(names) if n.startswith(PROFILER_STOP)]
    if not starts_code:
        return []
    t = trace.api["start"].to_numpy()
    starts = np.sort(t[np.isin(codes, starts_code)])
    stops = np.sort(t[np.isin(codes, stops_code)])
    out: list[tuple[int, int]] = []
    for s in starts.tolist():
        after = stops[stops > s]
        end = int(after[0]) if len(after) else int(np.iinfo(np.int64).max)
        if out and s < out[-1][1]:
            continue  # a start inside an open window changes nothing
        out.append((int(s), end))
    return out


def stack_root_windows(trace, report: NcuReport) -> tuple[str, list[tuple[int, int]]]:
    """The range most of ncu's stacks start with (`step_1`), and when each of its instances in the
    export was open; ("", []) when ncu recorded no stacks or the export has no such range."""
    root, spans = _root_spans(trace, report)
    return root, [(s, e) for s, e, _ in spans]


def _root_spans(trace, report: NcuReport) -> tuple[str, list[tuple[int, int, int]]]:
    """stack_root_windows with each instance's thread: (start, end, gtid)."""
    roots = Counter(k.nvtx_stack[0] for k in report.kernels if k.nvtx_stack)
    if not roots or not len(trace.ranges):
        return "", []
    root = roots.most_common(1)[0][0]
    r = trace.ranges
    sel = (trace.range_texts.objects == root) & (r["end"].to_numpy() > r["start"].to_numpy())
    spans = sorted(zip(r["start"].to_numpy()[sel].tolist(), r["end"].to_numpy()[sel].tolist(),
                       r["gtid"].to_numpy()[sel].tolist()))
    return root, [(int(s), int(e), int(g)) for s, e, g in spans]


def nvtx_filtered(report: NcuReport) -> bool:
    """Every profiled kernel has an NVTX stack: ncu profiled only kernels launched under ranges (an
    `--nvtx-include` filter), so a thread without the range open (PyTorch's autograd thread, which
    launches backward with no stack) had none of its kernels profiled."""
    return bool(report.kernels) and all(k.nvtx_stack for k in report.kernels)


def _launch_threads(trace, order: np.ndarray) -> np.ndarray:
    """The launching call's thread of each kernel (-1 where the export has no launching call)."""
    api = trace.ops["api"].to_numpy()[order].astype(np.int64)
    gtid = trace.api["gtid"].to_numpy()
    return np.where(api >= 0, gtid[np.clip(api, 0, max(len(gtid) - 1, 0))] if len(gtid) else -1, -1)


def _mangled_names(trace, positions: np.ndarray) -> list[str] | None:
    """The export's mangled name of these kernels (None when the export has none)."""
    if not trace.schema.has(KERNEL_TABLE, "mangledName"):
        return None
    with open_tables(trace.path, probe=False) as tables:
        f = tables.read(KERNEL_TABLE, ["rowid", "mangledName"], integer=("rowid", "mangledName"),
                        rows=np.unique(trace.ops["rowid"].to_numpy()[positions]))
        ids = dict(zip(f.int("rowid", -1).tolist(), f.int("mangledName", -1).tolist()))
        wanted = sorted(set(ids.values()))
        s = tables.read("StringIds", ["id", "value"], integer=("id",))
    text = dict(zip(s.int("id", -1).tolist(), s.text("value").tolist()))
    if not all(w in text for w in wanted):
        return None
    return [str(text[ids[int(r)]]) for r in trace.ops["rowid"].to_numpy()[positions]]


def _best_stretch(report_keys: list[str], export_keys: list[str]) -> int:
    """The offset into `export_keys` where the report's sequence agrees at the most places."""
    vocab = {k: i for i, k in enumerate(dict.fromkeys(export_keys + report_keys))}
    e = np.array([vocab[k] for k in export_keys], dtype=np.int64)
    r = np.array([vocab[k] for k in report_keys], dtype=np.int64)
    n = len(r)
    if len(e) <= n:
        return 0
    best, best_at = -1, 0
    for at in np.flatnonzero(e[: len(e) - n + 1] == r[0]).tolist() or [0]:
        agree = int((e[at: at + n] == r).sum())
        if agree > best:
            best, best_at = agree, at
    return best_at


def join(trace, report: NcuReport) -> NcuJoin:
    order, when = launch_order(trace)
    notes = []
    windows, how = profiler_windows(trace), BY_WINDOW
    threads: list[int | None] = [None] * len(windows)  # None: every thread's launches
    filtered = False
    if not windows:
        root, windows = stack_root_windows(trace, report)
        how = BY_RANGE.format(root)
        # An NVTX-filtered report: only the range's own thread could have its kernels profiled.
        filtered = bool(windows) and nvtx_filtered(report)
        threads = [g for _, _, g in _root_spans(trace, report)[1]] if filtered else [None] * len(windows)
        if filtered:
            how = BY_RANGE_THREAD.format(root)
    if windows:
        inside = np.zeros(len(order), dtype=bool)
        launcher = _launch_threads(trace, order) if filtered else None
        for (s, e), thread in zip(windows, threads):
            lo, hi = np.searchsorted(when, [s, e])  # `when` is in launch order: sorted
            if thread is None or launcher is None:
                inside[lo:hi] = True
            else:
                inside[lo:hi] |= launcher[lo:hi] == thread
        if filtered:
            every = sum(int(np.searchsorted(when, e) - np.searchsorted(when, s)) for s, e in windows)
            left = every - int(inside.sum())
            if left:
                notes.append(f"ncu profiled only kernels launched under NVTX ranges (an NVTX filter: every profiled "
                             f"kernel has a stack); the {left} kernels other threads launched in the window (no "
                             f"{root} on their stack: PyTorch's autograd thread runs backward) are left out of the "
                             "pairing and the agreement")
        window_ops = order[inside]
    else:
        window_ops, how = order, BY_SEARCH
    mangled = _mangled_names(trace, window_ops) if len(window_ops) else None
    report_mangled = [k.mangled for k in report.kernels]
    if mangled is not None and all(report_mangled):
        key, export_keys, report_keys = "mangled", mangled, report_mangled
    else:
        key = "demangled"
        export_keys = [trace.op_names[int(c)] for c in trace.ops["name"].to_numpy()[window_ops]]
        report_keys = [k.name for k in report.kernels]
    if how == BY_SEARCH:
        at = _best_stretch(report_keys, export_keys)
        span = len(report_keys) + max(8, len(report_keys) // 10)  # room for a few kernels more
        window_ops, export_keys = window_ops[at: at + span], export_keys[at: at + span]
    op_of = np.full(len(report.kernels), -1, dtype=np.int64)
    matcher = difflib.SequenceMatcher(None, report_keys, export_keys, autojunk=False)
    for block in matcher.get_matching_blocks():
        op_of[block.a: block.a + block.size] = window_ops[block.b: block.b + block.size]
    if how != BY_SEARCH and len(window_ops) != len(report_keys):
        notes.append(f"the export launched {len(window_ops)} kernels in the window, the report profiled "
                     f"{len(report_keys)} (ncu -c bounds it, the range repeats, or the runs differ)")
    return NcuJoin(report, op_of, how, window_ops, key, notes)
