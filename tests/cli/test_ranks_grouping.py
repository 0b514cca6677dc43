"""`nsight-tui ranks DIR`: which files it takes as one run's ranks, and which number each rank has.

A folder of unrelated exports with no rank suffix was said to be "14 files taken as the ranks of one
run", with a straggler among programs that never ran together; files without a rank suffix are one
run's ranks only where each holds collectives and those ran at the same time. A per-rank export
named r_rank2 was labelled rank 1, the number its capture's config mark carries; the file name wins.
Every expected figure from the exports by SQL: NCCL kernels, their times on each file's session
start (TARGET_INFO_SESSION_START_TIME), the config mark's rank."""
from __future__ import annotations

import json
import shutil

from conftest import SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.xz_samples import plain

DDP = SAMPLES / "ranks_small_ctx128_ddp2"
RANK0, RANK1 = DDP / "small_ctx128_ddp2_rank0.sqlite.xz", DDP / "small_ctx128_ddp2_rank1.sqlite.xz"
OTHER_RUN = SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz"  # two ranks in one export, another day


def _sql(path, query):
    return sql_rows(plain(path), query)[0]


def nccl_window(path) -> tuple[int, int, int]:
    """(NCCL kernels, first start, last end), the times on the session starts' clock (UTC ns)."""
    n, first, last = _sql(path, "SELECT count(*), min(k.start), max(k.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                "JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nccl%'")
    (origin,) = _sql(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    return n, (origin + first if n else 0), (origin + last if n else 0)


def ranks_json(folder) -> dict:
    done = cli_process.run(["ranks", str(folder), "-f", "json"], text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_unrelated_exports_without_a_rank_suffix_are_separate_runs():
    folder = SAMPLES / "findings"
    files = sorted(folder.glob("*.sqlite.xz"))
    assert len(files) == 14 and all(nccl_window(f)[0] == 0 for f in files)  # not one collective among them
    run = ranks_json(folder)
    assert run["assumption"].startswith("14 files of separate runs, not the ranks of one run: ")
    assert "hold no collective (NCCL kernel)" in run["assumption"] and "and 11 more" in run["assumption"]
    assert "taken as the ranks of one run" not in run["assumption"]
    assert run["straggler"] is None and len(run["ranks"]) == 14


def test_per_node_exports_whose_collectives_ran_together_are_one_run(tmp_path):
    shutil.copy(RANK0, tmp_path / "nodeA.sqlite.xz")
    shutil.copy(RANK1, tmp_path / "nodeB.sqlite.xz")
    (na, a0, a1), (nb, b0, b1) = nccl_window(RANK0), nccl_window(RANK1)
    assert na and nb and max(a0, b0) < min(a1, b1)  # each holds collectives, and they overlap in time
    run = ranks_json(tmp_path)
    assert run["assumption"].startswith("2 files taken as the ranks of one run (their names are not one name and a "
                                        "rank suffix each, but each holds collectives")
    assert run["straggler"] is not None


def test_exports_whose_collectives_ran_apart_are_separate_runs(tmp_path):
    shutil.copy(RANK0, tmp_path / "nodeA.sqlite.xz")
    shutil.copy(OTHER_RUN, tmp_path / "nodeB.sqlite.xz")
    (_, _, a1), (_, b0, _) = nccl_window(RANK0), nccl_window(OTHER_RUN)
    run = ranks_json(tmp_path)
    assert run["assumption"].startswith(
        f"2 files of separate runs, not the ranks of one run: nodeB.sqlite.xz's collectives began "
        f"{(b0 - a1) / 1e9:,.1f} s after nodeA.sqlite.xz's had ended")
    assert run["straggler"] is None


def test_the_file_names_rank_wins_over_the_config_mark(tmp_path):
    shutil.copy(RANK0, tmp_path / "r_rank0.sqlite.xz")
    shutil.copy(RANK1, tmp_path / "r_rank2.sqlite.xz")
    (config,) = _sql(RANK1, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                            "ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:config %'")
    marked = json.loads(config.split(" ", 1)[1])["rank"]
    (device,) = _sql(RANK1, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert marked == 1
    run = ranks_json(tmp_path)
    labels = {r["rank"]["file"].rsplit("/", 1)[-1]: r["label"] for r in run["ranks"]}
    assert labels["r_rank2.sqlite.xz"] == f"rank 2 · GPU {device}"
    assert f"r_rank2.sqlite.xz: rank 2 from its file name, where its capture's config mark says rank {marked}" \
        in run["notes"]
