"""A run's ranks from a folder of per-rank exports (`nsys profile --output report_%q{RANK}`).

Each file is summarised on its own (load, find its ranks, per-rank figures) and only those small
summaries come back, so a folder of hundreds of GB-sized files is a map over files and a small
reduce. The map runs in local worker processes by default; past one machine it runs on Dask
(`dask.distributed`, the engine NVIDIA's own multi-report recipes use), on a local cluster or on
an existing scheduler.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nsight_tui.parsers.read import conventions, rank_merge
from nsight_tui.parsers.read.compressed import as_plain_name
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.analyses.ranks import RankSummary, RunRanks, file_clocks, rank_from_name, run_ranks

@dataclass
class RankGroup:
    """Files whose names differ only by a rank suffix: taken as the ranks of one run."""

    stem: str  # the name without its rank suffix
    files: list[Path]


def group_rank_files(paths: Sequence[Path]) -> list[RankGroup]:
    groups: dict[str, list[Path]] = {}
    for path in sorted(paths):
        base = conventions.split_rank(as_plain_name(path).stem)[0]
        groups.setdefault(base, []).append(path)
    return [RankGroup(stem, files) for stem, files in groups.items()]


def rank_files_in(folder: Path) -> RankGroup | None:
    """The folder's exports, if they are the ranks of one run (>= 2 files, one name but the rank)."""
    files = rank_merge.rank_files(folder)
    return RankGroup(conventions.split_rank(as_plain_name(files[0]).stem)[0], files) if files else None


def summarise_file(path: str) -> list[RankSummary]:
    """One export -> its ranks' summaries (runs in a worker process: top-level and picklable)."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.analyses.ranks import summarise_trace

    return summarise_trace(load_trace(Path(path)), file_rank=rank_from_name(path))


# The signals that end a command: the parent alone handles them. Its workers ignore them (a
# ctrl+c or a hang-up reaches the whole process group), so an interruption never lands inside
# a worker's start-up or the pool's own bookkeeping (that hung, or exited 0 having written the
# output anyway); the parent then stops the pool and kills its workers.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _worker_start() -> None:
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # blocked by the parent while it forked


def _map_local(names: list[str], n: int, progress) -> list[list[RankSummary]]:
    """summarise_file over `names` in `n` worker processes; any exception or signal in the
    parent (KeyboardInterrupt, the SystemExit of exit_on_signals) stops every worker now."""
    pool = ProcessPoolExecutor(max_workers=n, initializer=_worker_start)
    try:
        # The workers start here (fork): with the signals blocked, so none lands half-way
        # through a start (the children begin with them blocked and ignore them, then unblock).
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            results = pool.map(summarise_file, names)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a signal that came meanwhile: now
        out = [_report(progress, i, len(names), r) for i, r in enumerate(results)]
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return out


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and kill the workers (a summary cannot be interrupted)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        try:
            proc.kill()
        except (OSError, ValueError, AttributeError):
            pass
    for proc in workers:
        try:
            proc.join()
        except (OSError, ValueError, AttributeError, AssertionError):
            pass
    # Wait for the pool's manager thread to see its workers gone and close its wake-up pipe. Left
    # running, it could close that pipe while the interpreter's exit hook for process pools writes
    # to it (CPython 3.11 checks `closed` then writes, unlocked): "Exception ignored ... OSError:
    # Bad file descriptor" and a traceback on stderr after a clean 128 + signal exit (1 run in ~5
    # of tests/cli/test_interrupted_commands.py on a busy machine).
    if manager is not None:
        manager.join(timeout=10)


def map_files(paths: Sequence[Path], scheduler: str | None = None, workers: int | None = None,
              progress=None) -> list[list[RankSummary]]:
    """summarise_file over `paths`, in file order.

    scheduler None: local worker processes (`workers`, default one per core, at most one per file);
    "local": a Dask LocalCluster of `workers` processes; anything else: a Dask scheduler address.
    """
    names = [str(p) for p in paths]
    if scheduler is None:
        n = max(1, min(len(names), workers or os.cpu_count() or 1))
        if n == 1:
            return [_report(progress, i, len(names), summarise_file(p)) for i, p in enumerate(names)]
        return _map_local(names, n, progress)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise TraceError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
    cluster = None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=workers or min(len(names), os.cpu_count() or 1), threads_per_worker=1,
                                   processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout="30s")
        with client:
            futures = client.map(summarise_file, names, pure=False)
            return [_report(progress, i, len(names), f.result()) for i, f in enumerate(futures)]
    except OSError as exc:
        raise TraceError(f"Dask scheduler {scheduler}: {exc}") from None
    finally:
        if cluster is not None:
            cluster.close()


def _report(progress, index: int, total: int, result):
    if progress:
        progress(index + 1, total)
    return result


def _names(paths: Sequence[Path], most: int = 3) -> str:
    shown = ", ".join(p.name for p in paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def not_one_run(paths: Sequence[Path], per_file: list[list[RankSummary]]) -> str:
    """Why files whose names do not make one run's ranks (`rank_merge.one_run`: one name, a rank suffix
    each) are not the ranks of one run either, in words; '' where they are.

    Such files (one export per node, `--output report_%h`, or files named by hand) are one run's ranks
    where each holds collectives (NCCL kernels: the ranks of a distributed run communicate, and a
    rank's export holds its half of every collective) and those collectives ran at the same time on
    the session starts' clock (TARGET_INFO_SESSION_START_TIME): a collective ends on every rank
    together, so one run's files' collectives overlap; files captured one after another, or without
    any collective, are separate runs, whose "straggler" would compare unrelated programs."""
    silent = [p for p, ranks in zip(paths, per_file) if not any(s.comm_kernels for s in ranks)]
    if silent:
        return (f"{_names(silent)} hold{'s' if len(silent) == 1 else ''} no collective (NCCL kernel), which the "
                "ranks of one run each hold")
    unplaced = [p for p, ranks in zip(paths, per_file) if any(s.session_start_utc_ns is None for s in ranks)]
    if unplaced:
        return (f"{_names(unplaced)} record{'s' if len(unplaced) == 1 else ''} no session start "
                "(TARGET_INFO_SESSION_START_TIME), so nothing shows that its capture ran with the others'")
    windows = []  # per file: its collectives' first start and last end, ns on the session starts' clock (UTC)
    for ranks in per_file:
        comm = [s for s in ranks if s.comm_kernels]
        windows.append((min(int(s.session_start_utc_ns or 0) + min(s.collective_starts_ns) for s in comm),
                        max(int(s.session_start_utc_ns or 0) + max(s.collective_ends_ns) for s in comm)))
    late = max(range(len(windows)), key=lambda i: windows[i][0])
    early = min(range(len(windows)), key=lambda i: windows[i][1])
    gap = windows[late][0] - windows[early][1]
    if gap > rank_merge.CAPTURE_OVERLAP_SLACK_NS:
        return (f"{paths[late].name}'s collectives began {gap / 1e9:,.1f} s after {paths[early].name}'s had ended "
                "(each file's times from its session start, TARGET_INFO_SESSION_START_TIME): one run's ranks meet "
                "in the same collectives at the same time")
    return ""


def ranks_of_files(paths: Sequence[Path], scheduler: str | None = None, workers: int | None = None,
                   progress=None) -> RunRanks:
    per_file = map_files(paths, scheduler, workers, progress)
    summaries = [s for file_ranks in per_file for s in file_ranks]
    engine = "Dask" if scheduler else "local worker processes"
    by_name = rank_merge.one_run(list(paths)) is not None
    apart = "" if by_name or len(paths) < 2 else not_one_run(list(paths), per_file)
    if apart:
        summaries.sort(key=lambda s: (s.rank.file, s.rank.rank if s.rank.rank is not None else 1 << 30))
        return RunRanks(summaries, f"{len(paths)} files of separate runs, not the ranks of one run: {apart}; each "
                                   f"file's ranks listed side by side, no straggler named; summarised per file by "
                                   f"{engine}", None, _mark_notes(summaries))
    numbers = [s.rank.rank for s in summaries]
    notes = []
    if len(set(numbers)) != len(numbers):
        notes.append("rank numbers repeat across files; ranks are listed in file order")
    origins = [s.session_start_utc_ns for s in summaries if s.session_start_utc_ns is not None]
    if len(origins) > 1:
        spread = (max(origins) - min(origins)) / 1e6
        clock = (f"each file counts time from its own session start (TARGET_INFO_SESSION_START_TIME); the starts "
                 f"differ by up to {spread:,.3f} ms: per-rank figures are durations on each file's clock")
        if len(origins) == len(summaries):  # ranks.arrival_lateness shifts each file by its start
            fixed = [c - o for c, o in zip(file_clocks(summaries), origins)]
            clock += ("; arrivals at the collectives are compared after shifting each file by its session start "
                      "(UTC), then so that the collectives end together on every rank (the hosts' clocks agree only "
                      f"to their clock sync: here the collectives moved them by up to {max(map(abs, fixed)) / 1e3:,.1f} us)")
        else:
            clock += "; arrivals at the collectives are not compared (a file has no session start)"
        notes.append(clock)
    why = ("names differ only by a rank suffix" if by_name else
           "their names are not one name and a rank suffix each, but each holds collectives (NCCL kernels) and "
           "those ran at the same time on the session starts' clock")
    assumption = f"{len(paths)} files taken as the ranks of one run ({why}); summarised per file by {engine}"
    summaries.sort(key=lambda s: (s.rank.rank if s.rank.rank is not None else 1 << 30, s.rank.file))
    return run_ranks(summaries, assumption, notes + _mark_notes(summaries))


def _mark_notes(summaries: list[RankSummary]) -> list[str]:
    """Where a file's name and its capture's config mark give its rank different numbers (the name's is
    taken: ranks.find_ranks), one note each."""
    return [f"{Path(s.rank.file).name}: rank {s.rank.rank} from its file name, where its capture's config mark says "
            f"rank {s.rank.config_mark_rank}" for s in summaries if s.rank.config_mark_rank is not None]
