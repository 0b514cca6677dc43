"""A folder of per-rank exports: found by name, summarised per file in worker processes or on Dask,
with the same figures as summarising each file on its own."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES

from nsight_tui.parsers.analyses import rank_files
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.analyses.ranks import summarise_trace
from helpers import cli_process
from helpers.xz_samples import plain

FOLDER = SAMPLES / "ranks_small_ctx128_ddp2"  # one export per rank, each compressed whole (.sqlite.xz)
FILES = sorted(FOLDER.glob("*.sqlite.xz"))


def _key(summaries):
    return [(s.rank.rank, s.rank.pid, s.kernels, s.kernel_ns, s.busy_ns, s.comm_ns, s.exposed_comm_ns, s.steps_ns)
            for s in summaries]


def test_folder_is_taken_as_ranks_of_one_run():
    group = rank_files.rank_files_in(FOLDER)
    assert group is not None and group.stem == "small_ctx128_ddp2"
    assert [p.name for p in group.files] == ["small_ctx128_ddp2_rank0.sqlite.xz", "small_ctx128_ddp2_rank1.sqlite.xz"]
    assert rank_files.rank_files_in(SAMPLES) is None  # the samples are different runs, not ranks
    groups = rank_files.group_rank_files([Path("a_rank0.sqlite"), Path("a_rank1.sqlite"), Path("b.sqlite")])
    assert [(g.stem, len(g.files)) for g in groups] == [("a", 2), ("b", 1)]


def test_worker_processes_give_the_per_file_figures():
    expected = []
    for path in FILES:
        expected += summarise_trace(load_trace(path), file_rank=int(path.name.split(".")[0][-1]))
    run = rank_files.ranks_of_files(FILES, workers=2)
    assert _key(run.ranks) == _key(expected)
    assert [s.rank.rank for s in run.ranks] == [0, 1]
    assert any("session start" in n for n in run.notes)


def test_dask_local_cluster_gives_the_same_figures():
    pytest.importorskip("dask.distributed")
    files = FILES
    local = rank_files.ranks_of_files(files, workers=1)
    on_dask = rank_files.ranks_of_files(files, scheduler="local", workers=2)
    assert _key(on_dask.ranks) == _key(local.ranks)
    assert "Dask" in on_dask.assumption


def test_ranks_command_on_a_folder_and_a_bad_path(tmp_path):
    done = cli_process.run(["ranks", str(FOLDER), "-f", "json"], text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert '"straggler"' in done.stdout and '"exposed_comm_ns"' in done.stdout
    bad = cli_process.run(["ranks", str(tmp_path / "nope")], text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr


def test_the_clock_note_says_how_arrivals_are_compared():
    """The per-rank files' note said "durations, not aligned timestamps" and the straggler then
    compared arrivals at the collectives, shifted by each file's session start: it says that now.
    The session starts from SQL; the straggler's basis is the arrival comparison."""
    import sqlite3

    files = rank_files.rank_files_in(FOLDER).files
    starts = []
    for f in files:
        con = sqlite3.connect(f"file:{plain(f)}?mode=ro", uri=True)
        starts.append(con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0])
        con.close()
    run = rank_files.ranks_of_files(files, workers=1)
    (note,) = [n for n in run.notes if "session start" in n]
    assert f"differ by up to {(max(starts) - min(starts)) / 1e6:,.3f} ms" in note
    assert "not aligned timestamps" not in note
    assert "arrivals at the collectives are compared after shifting each file by its session start" in note
    assert run.straggler is not None and run.straggler.basis.startswith("arrival at the collectives")


def test_a_clock_that_disagrees_does_not_move_the_straggler():
    """Two nodes' session starts are their wall clocks: rank 1's read 5 ms late leaves every rank's
    lateness at the collectives as it was (the collectives' ends set the clocks), and that lateness is
    SQL's: each file's NCCL kernel starts in order, moved by its session start and then by the median
    difference of its NCCL kernel ends from rank 0's."""
    import numpy as np
    from helpers.export_sql import sql_rows

    from nsight_tui.parsers.analyses.ranks import arrival_lateness

    summaries = [s for path in FILES for s in rank_files.summarise_file(str(path))]
    late = arrival_lateness(summaries)
    summaries[1].session_start_utc_ns += 5_000_000
    assert arrival_lateness(summaries) == pytest.approx(late, abs=1.0)
    kernels = [sql_rows(plain(p), """SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s
                                     ON s.id = k.demangledName WHERE s.value LIKE '%nccl%' ORDER BY k.start""")
               for p in FILES]
    origin = [sql_rows(plain(p), "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0] for p in FILES]
    ends = [np.array([e for _, e in k]) + o for k, o in zip(kernels, origin)]
    moved = [o + int(np.median(ends[0] - e)) for e, o in zip(ends, origin)]
    starts = np.array([[s for s, _ in k] for k in kernels]) + np.array(moved)[:, None]
    want = (starts - starts.min(axis=0)).mean(axis=1)
    assert [late[id(s)] for s in summaries] == pytest.approx(list(want), abs=1.0)
