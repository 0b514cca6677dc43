"""Which rank each process is, read off the export: one `Rank` per process and GPU that ran GPU work,
its rank number from the file name's rank suffix (a per-rank export, `--output report_%q{RANK}`), else
the capture's `nsight-tui:config` mark, else numbered in process/GPU order after the known ones.

Read here, under the analyses (analyses.ranks, the findings) and the replay (the `straggler` edit names
the rank it evens out), so that every layer names a process's rank alike (one implementation)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.cache import PAIRS_BUNDLE
from nsight_tui.parsers.read.compressed import as_plain_name
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.parsers.read.load import Trace, pairs_bundle


@dataclass(frozen=True)
class Rank:
    gpid: int  # nsys globalPid of the process
    pid: int
    process: str
    device: int  # the GPU (CUDA device id) within that process
    rank: int | None = None  # the training rank, where the capture or the file name says it
    file: str = ""  # the export it came from
    rank_source: str = "process/GPU order"
    # the rank the capture's config mark gives, where the file name's rank suffix (which wins) says another
    config_mark_rank: int | None = None

    @property
    def label(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        return f"{who} · GPU {self.device}"


def _config_ranks(trace: Trace) -> dict[int, int]:
    """process pid -> rank, from `nsight-tui:config` marks that carry one (our DDP captures)."""
    out: dict[int, int] = {}
    for gtid, text in zip(trace.marks["gtid"].to_numpy(), trace.marks["text"].to_numpy()):
        mark = conventions.parse_mark(text)
        if mark and mark[0] == conventions.CONFIG and isinstance(mark[1], dict):
            rank = mark[1].get("rank")
            if isinstance(rank, int) and not isinstance(rank, bool):
                out[int(pid_of(int(gtid)))] = rank
    return out


def _first_of_each_pair(trace: Trace, gpid: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Position of the first op of each distinct (process, GPU), in order; kept in the user's
    cache with the trace (a pass over every op: 0.6 s at 24M ops, on every open)."""
    saved = trace.stash.read(PAIRS_BUNDLE) if trace.stash is not None else None
    if saved is not None and "first" in saved.arrays and (saved.arrays["first"] < len(gpid)).all():
        return saved.arrays["first"]
    bundle = pairs_bundle(trace.ops)
    if trace.stash is not None:
        trace.stash.write(PAIRS_BUNDLE, bundle)
    return bundle.arrays["first"]


def find_ranks(trace: Trace, file_rank: int | None = None) -> list[Rank]:
    """One Rank per (process, GPU) that ran GPU work, in rank order."""
    ops = trace.ops
    if len(ops) == 0:
        return []
    # Distinct (process, GPU) pairs, in order (np.unique(axis=0) took ~1 s for 600k ops, and
    # this runs on every load: the header's rank badge).
    gpid, device = ops["gpid"].to_numpy(np.int64), ops["device"].to_numpy(np.int64)
    first = _first_of_each_pair(trace, gpid, device)
    pairs = list(zip(gpid[first].tolist(), device[first].tolist()))
    by_config = _config_ranks(trace)
    found = []
    for gpid, device in pairs:
        pid, name = trace.processes.get(int(gpid), (int(pid_of(int(gpid))), ""))
        rank, source, marked = by_config.get(pid), "the capture's config mark", None
        # a per-rank export's name is what the user (or --output report_%q{RANK}) chose it to be: it wins
        # over a mark the workload wrote, which a copied or renamed export keeps
        if file_rank is not None and len(pairs) == 1:
            marked = rank if rank is not None and rank != file_rank else None
            rank, source = file_rank, "the file name"
            if marked is not None:
                source += f" (its capture's config mark says rank {marked})"
        if rank is None:
            source = "process/GPU order"
        found.append(Rank(int(gpid), int(pid), name, int(device), rank, str(trace.given), source, marked))
    if any(r.rank is None for r in found):  # number the rest in process/GPU order, after the known
        taken = {r.rank for r in found if r.rank is not None}
        free = (i for i in range(len(found) + len(taken)) if i not in taken)
        found = [r if r.rank is not None else Rank(r.gpid, r.pid, r.process, r.device, next(free), r.file,
                                                     r.rank_source) for r in found]
    return sorted(found, key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.pid, r.device))


def rank_of(trace: Trace, pid: int, device: int | None = None) -> Rank | None:
    """The process's Rank (on that GPU where given, else its first), None where it ran no GPU work."""
    ranks = [r for r in find_ranks(trace) if r.pid == pid]
    return next((r for r in ranks if r.device == device), ranks[0] if ranks else None)


def rank_from_name(path: str | Path) -> int | None:
    return conventions.split_rank(as_plain_name(Path(path)).stem)[1]
