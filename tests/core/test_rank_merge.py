"""One run's per-rank exports replayed as one trace (parsers/read/rank_merge.py): every file's work on
one clock, moved by the session starts the exports record and then by the ends of the collectives
they share; the ranks' collectives coupled as in one export holding every rank; ids two files share
renumbered. Each figure against SQL over the files themselves."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.step_sql import steps
from helpers.xz_samples import plain

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.ids import KERNEL, pid_of
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.read.rank_merge import load_export, merge, rank_files
from nsight_tui.parsers.replay.predict import graph_of, predict, replay
from nsight_tui.parsers.replay.simulate import Plan

FOLDER = SAMPLES / "ranks_small_ctx128_ddp2"
FILES = [FOLDER / f"small_ctx128_ddp2_rank{r}.sqlite.xz" for r in (0, 1)]
NCCL = "%nccl%"


def _start(path) -> int:
    return sql_rows(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]


def _offsets() -> list[int]:
    """Each file's shift onto the merged clock, from SQL: its session start less the earliest, then the
    median difference of the ends of the NCCL kernels it shares with the first file (name and order)."""
    starts = [_start(plain(f)) for f in FILES]
    session = [s - min(starts) for s in starts]
    first = _nccl_ends(plain(FILES[0]), session[0])
    shifted = [session[0]]
    for f, at in zip(FILES[1:], session[1:]):
        mine = _nccl_ends(plain(f), at)
        shared = set(first) & set(mine)
        shifted.append(at + int(np.median([first[k] - mine[k] for k in shared])))
    return [o - min(shifted) for o in shifted]


def _kernels(path) -> list[tuple[int, int, int]]:
    """(start, end, pid) of every kernel, by start (SQL)."""
    return sql_rows(path, "SELECT start, end, (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL "
                          "ORDER BY start, end")


def _nccl_ends(path, offset: int) -> dict[tuple[str, int], int]:
    """Each NCCL kernel's end on the merged clock, keyed by its name and its order among that name's."""
    rows = sql_rows(path, """SELECT s.value, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s
                             ON s.id = k.demangledName WHERE s.value LIKE ? ORDER BY k.start""", NCCL)
    seen: dict[str, int] = {}
    out = {}
    for name, end in rows:
        out[(name, seen.get(name, 0))] = end + offset
        seen[name] = seen.get(name, 0) + 1
    return out


@pytest.fixture(scope="module")
def merged():
    return load_export(FOLDER)


def test_the_folder_is_read_as_its_ranks_in_order():
    assert rank_files(FOLDER) == FILES
    assert rank_files(SAMPLES / "findings") is None  # exports of other runs, no rank suffix


def test_each_files_kernels_land_on_the_earliest_files_clock(merged):
    """Per file, its kernels (SQL) moved onto the merged clock (`_offsets`: session starts, then the
    shared collectives' ends, in SQL) are the merged trace's kernels of that file's process, start
    and end alike."""
    ops = merged.ops[merged.ops["kind"] == KERNEL]
    pids = pid_of(ops["gpid"].to_numpy())
    for f, offset in zip(FILES, _offsets()):
        want = _kernels(plain(f))
        pid = {p for _, _, p in want}
        assert len(pid) == 1
        mine = ops[pids == pid.pop()]
        got = sorted(zip(mine["start"].tolist(), mine["end"].tolist()))
        assert got == [(a + offset, b + offset) for a, b, _ in want]
    assert max(_offsets()) > 0  # the two sessions did start apart: the shift is exercised


def test_the_clocks_agreement_is_the_spread_of_the_shared_collectives_ends(merged):
    """`rank_files`: how far apart the ranks end the collectives they share, on the merged clock,
    from SQL over both files (matched by kernel name and order)."""
    ends = [_nccl_ends(plain(f), o) for f, o in zip(FILES, _offsets())]
    shared = set(ends[0]) & set(ends[1])
    spreads = [abs(ends[0][k] - ends[1][k]) for k in shared]
    r = merged.rank_files
    assert r.files == tuple(f.name for f in FILES) and r.ranks == (0, 1) and r.offsets_ns == tuple(_offsets())
    starts = [_start(plain(f)) for f in FILES]
    assert r.clock_fix_ns[1] == r.offsets_ns[1] - (starts[1] - starts[0]) != 0
    assert r.collectives == len(shared) > 0
    assert r.median_spread_ns == int(np.median(spreads)) and r.max_spread_ns == max(spreads)
    assert r.median_spread_ns < 100_000  # one host, one clock: the ranks end together


def test_the_replay_couples_every_shared_collective_and_keeps_each_ranks_steps(merged):
    """Each NCCL kernel both files hold (SQL, by name and order) is one coupled group of one member per
    rank; the unchanged replay gives every step of both ranks its period (SQL's step ranges, moved
    onto the merged clock) within 3%."""
    g, sr = graph_of(merged)
    shared = set(_nccl_ends(plain(FILES[0]), 0)) & set(_nccl_ends(plain(FILES[1]), 0))
    assert len(g.coll_members) == len(shared)
    pid = pid_of(merged.ops["gpid"].to_numpy())
    assert all(len({int(pid[o]) for o in group}) == 2 == len(group) for group in g.coll_members)
    want = sorted((it.start + o, it.period) for f, o in zip(FILES, _offsets()) for it in steps(plain(f)))
    r = replay(g, sr, Plan.of(g))
    got = r.periods_ns[np.argsort(r.starts_ns)]
    assert len(got) == len(want)
    assert float(np.median(np.abs(got - np.array([p for _, p in want])) / got)) <= 0.03


def test_a_clock_that_disagrees_is_set_by_the_collectives(merged):
    """Two nodes' session starts are their wall clocks: rank 1's start read 5 ms late puts every one of
    its kernels where it was with the true starts (the collectives' ends set its clock), and the
    report says the 5 ms came from them."""
    traces = [m.trace for m in merged.members]
    starts = [_start(plain(f)) for f in FILES]
    skewed = merge(traces, [starts[0], starts[1] + 5_000_000], [0, 1], FOLDER)
    assert (skewed.ops["start"].to_numpy() == merged.ops["start"].to_numpy()).all()
    assert skewed.rank_files.clock_fix_ns[1] == merged.rank_files.clock_fix_ns[1] - 5_000_000


def test_ids_two_files_share_are_renumbered():
    """The same export twice, as two ranks whose session starts read a millisecond apart: its process
    and GPU ids come back renumbered for the second, the shared collectives' ends take the millisecond
    out again, its copies (read on first use) are on the renumbered GPU at the file's own times (SQL),
    and every collective couples with its own copy."""
    t = load_trace(FILES[0])
    m = merge([t, t], [0, 1_000_000], [0, 1], FOLDER)
    pids = {int(p) for p in np.unique(pid_of(m.ops["gpid"].to_numpy()))}
    devices = set(m.ops["device"].unique().tolist())
    assert len(pids) == 2 and len(devices) == 2
    assert len(m.rank_files.renumbered) == 1 and "GPU 0 as 1" in m.rank_files.renumbered[0]
    rows = sql_rows(plain(FILES[0]), "SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = 0 ORDER BY start")
    copies = m.memcpy_calls(1)
    assert [c[0] for c in copies] == [s for (s,) in rows]  # on the merged clock: the shift taken out again
    assert m.rank_files.clock_fix_ns[1] == -1_000_000  # its collectives end 1 ms after their twins: taken out
    assert m.rank_files.median_spread_ns == 0
    g, _ = graph_of(m)
    n = sql_rows(plain(FILES[0]), """SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s
                                     ON s.id = k.demangledName WHERE s.value LIKE ?""", NCCL)[0][0]
    assert len(g.coll_members) == n
    assert len(m.sync_events.syncs) == 2 * len(t.sync_events.syncs)


def test_a_folder_of_other_runs_or_files_without_a_start_is_one_line():
    with pytest.raises(TraceError, match="not the ranks of one run"):
        load_export(SAMPLES / "findings")
    t = load_trace(FILES[0])
    with pytest.raises(TraceError, match="no session start time"):
        merge([t, t], [0, None], [0, 1], FOLDER)


def test_whatif_on_the_folder_from_the_command_line(merged):
    """`whatif FOLDER`: the ranks as one replay, said in JSON and Markdown; a folder that is not one
    run's ranks: one line, exit 2."""
    run = cli_process.run(["whatif", str(FOLDER), "speed:gemm=2", "-f", "json"], cwd=ROOT, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["rank_files"]["files"] == [f.name for f in FILES]
    assert doc["steps"] == sum(len(steps(plain(f))) for f in FILES)  # every rank's steps (SQL)
    p = predict(merged, ["speed:gemm=2"])
    assert doc["predicted"]["step_ns"] == p.step_ns
    md = cli_process.run(["whatif", str(FOLDER)], cwd=ROOT, text=True, timeout=300)
    assert md.returncode == 0 and "Ranks: 2 per-rank exports replayed as one" in md.stdout
    bad = cli_process.run(["whatif", str(SAMPLES / "findings")], cwd=ROOT, text=True, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_the_report_reads_each_files_launch_configurations(merged):
    """What the report reads from the file on first use, beyond the replay's reads: every kernel's
    launch configuration (occupancy), from its own file, one row per distinct configuration across
    the files (SQL: the distinct (GPU, name, registers, shared memory, threads, carve-out) over both),
    and the GPUs' description (TARGET_INFO_GPU)."""
    from nsight_tui.parsers.kernels.occupancy import trace_occupancy

    occ = trace_occupancy(merged)
    texts = set()
    for f in FILES:
        texts |= set(sql_rows(plain(f), """SELECT k.deviceId, s.value, k.registersPerThread, k.staticSharedMemory,
            k.dynamicSharedMemory, k.blockX * k.blockY * k.blockZ, coalesce(k.sharedMemoryExecuted, 0)
            FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"""))
    assert len(occ.configs) == len(texts)
    kernels = (merged.ops["kind"] == KERNEL).to_numpy()
    assert (occ.op_config[kernels] >= 0).all() and (occ.op_config[~kernels] < 0).all()
    got = {(int(r.device), merged.op_names[int(r.name)], int(r.regs), int(r.smem_static), int(r.smem_dynamic),
            int(r.threads), int(r.smem_config)) for r in occ.configs.itertuples()}
    assert got == texts
    # the GPUs' description too (the roofline's memory roof hint): each file's, by GPU id
    from nsight_tui.parsers.read.target_info import gpu_memory_bandwidth

    gpus = sql_rows(plain(FILES[0]), "SELECT memoryBandwidth FROM TARGET_INFO_GPU ORDER BY id LIMIT 1")
    assert gpu_memory_bandwidth(merged) == float(gpus[0][0]) > 0


def test_the_straggler_is_judged_on_the_merged_clock():
    """`ranks` of the merged trace: the rank arriving last at the collectives, by its mean lateness
    behind the first rank (SQL: each file's NCCL kernel starts in order, moved onto the merged clock)."""
    from nsight_tui.parsers import Profile

    run = Profile.open_ranks(FOLDER).ranks()
    assert "2 per-rank exports on one clock" in run.assumption
    starts = []
    for f, o in zip(FILES, _offsets()):
        rows = sql_rows(plain(f), """SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s
                                     ON s.id = k.demangledName WHERE s.value LIKE ? ORDER BY k.start""", NCCL)
        starts.append([s + o for (s,) in rows])
    assert len(starts[0]) == len(starts[1])
    late = (np.array(starts) - np.array(starts).min(axis=0)).mean(axis=1)
    top = int(np.argmax(late))
    assert run.straggler is not None and run.straggler.rank.rank == top
    assert run.straggler.value_ns == pytest.approx(late[top], abs=1.0)


def test_one_exports_ranks_split_and_merged_back_predict_its_ddp_twin_alike():
    """The committed DDP pair (25 MB buckets -> one bucket, both ranks in one export each, its twins-table
    row within tolerance): each export split into its two processes and merged back as per-rank files
    replays the pair as the one export does. Both ranks share one clock there, so what the collectives'
    ends move rank 1 by is the method's own error (their ends stand a few µs apart across GPUs on one
    clock), and the prediction moves by no more than that, and the replay's settling of the kernels beside
    the all-reduces (replay.contention: it stops once the step moves by under SETTLED_NS)."""
    from helpers.split_ranks import processes

    base = plain(SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz")
    twin = plain(SAMPLES / "async" / "small_ctx512_b8_ddp2_async_ddp-one-bucket.sqlite.xz")
    one_base, one_twin = load_trace(base), load_trace(twin)
    split = [merge(ranks, [0, 0], [0, 1], FOLDER) for ranks in (processes(one_base), processes(one_twin))]
    assert all(len(m.members) == 2 for m in split)
    fix = abs(split[0].rank_files.clock_fix_ns[1])
    assert 0 < fix < 20_000
    one = predict(one_base, [f"kernels-from:{twin}"], load=lambda _: one_twin)
    two = predict(split[0], [f"kernels-from:{twin}"], load=lambda _: split[1])
    assert two.replayed_step_ns == one.replayed_step_ns and two.steps == one.steps
    from nsight_tui.parsers.replay.contention import SETTLED_NS

    for a, b in ((one.step_ns, two.step_ns), (one.low_ns, two.low_ns), (one.high_ns, two.high_ns)):
        assert abs(a - b) <= fix + SETTLED_NS


def test_a_rank_file_that_cannot_be_read_is_one_line(tmp_path):
    """One run's folder whose rank 1 is not an export: the merge stops on that file's own one line,
    from the command line too (exit 2, no traceback)."""
    (tmp_path / FILES[0].name).symlink_to(FILES[0])
    (tmp_path / "small_ctx128_ddp2_rank1.sqlite").write_bytes(b"not an export" * 100)
    with pytest.raises(TraceError, match="small_ctx128_ddp2_rank1.sqlite"):
        load_export(tmp_path)
    run = cli_process.run(["whatif", str(tmp_path)], cwd=ROOT, text=True, timeout=300)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert "small_ctx128_ddp2_rank1.sqlite" in run.stderr


@pytest.mark.parametrize("name", ["h100_2gpu_1s", "mfu_2gpu_before"])
def test_third_party_two_gpu_exports_split_and_merged_back_replay_alike(name):
    """Two-GPU exports nobody here wrote, their iterations inferred from the kernel sequence (no
    step_N ranges; ../shared, skipped where absent): split into their processes and merged back, the
    same iterations (their count by the one export's model), the same unchanged replay, and an edit
    predicted as on the one export, within what the collectives moved rank 1 by (none shared: nothing)."""
    from conftest import shared_trace
    from helpers.split_ranks import processes

    one = load_trace(shared_trace(name))
    split = merge(processes(one), [0, 0], [0, 1], FOLDER)
    assert len(split.members) == 2
    fix = abs(split.rank_files.clock_fix_ns[1])
    a, b = predict(one, ["speed:gemm=2"]), predict(split, ["speed:gemm=2"])
    assert b.steps == a.steps and b.replayed_step_ns == a.replayed_step_ns
    assert abs(b.step_ns - a.step_ns) <= fix


# -- hostile folders: each a real copy of the committed ranks, changed with SQL ----------------------
def _copy(folder, names: dict[int, str]) -> list:
    """The committed rank files, decompressed, copied into `folder` under `names` (source rank -> name)."""
    folder.mkdir(exist_ok=True)
    out = []
    for rank, name in names.items():
        out.append(folder / name)
        shutil.copyfile(plain(FILES[rank]), out[-1])
    return out


def _change(path, sql: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql)


def _one_line(args: list[str], *names: str) -> str:
    """`nsight-tui ARGS` fails with exit 2 and one line on stderr naming each of `names`: that line."""
    run = cli_process.run(args, cwd=ROOT, text=True, timeout=300)
    line = run.stderr.strip()
    assert run.returncode == 2 and len(line.splitlines()) == 1 and "Traceback" not in line, run.stderr
    assert all(n in line for n in names), line
    return line


def _last_event_ns(path) -> int:
    """The latest time an export records on its own clock (SQL): its analysis span, or its last event's end."""
    return max(sql_rows(path, q)[0][0] or 0 for q in (
        "SELECT max(duration) FROM ANALYSIS_DETAILS", "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_MEMCPY", "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME", "SELECT max(max(start, coalesce(end, 0))) FROM NVTX_EVENTS"))


def test_files_of_runs_captured_apart_are_one_line(tmp_path):
    """Rank 1's file from a run a day later (its session start moved by a day): the two captures do not
    overlap, so they are not one run's ranks. Merged before, replayed as if the two ran together (the
    collectives matched by name across runs); now one line saying how far apart (SQL: the day less
    rank 0's capture), from the API and the command line."""
    day = 86_400 * 10**9
    files = _copy(tmp_path, {0: FILES[0].name[:-3], 1: FILES[1].name[:-3]})
    _change(files[1], f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + {day}")
    gap = _start(files[1]) - _start(files[0]) - _last_event_ns(files[0])
    said = f"{files[1].name} began {gap / 1e9:,.1f} s after {files[0].name} had ended"
    with pytest.raises(TraceError, match=said):
        load_export(tmp_path)
    _one_line(["whatif", str(tmp_path)], said, "not one run's ranks")


def test_a_rank_file_without_kernels_is_one_line(tmp_path):
    """Rank 1's export holds no kernel (SQL deletes them): replayed before as rank 0 alone with rank 1's
    CPU-only steps among the steps measured; now one line naming the file."""
    files = _copy(tmp_path, {0: FILES[0].name[:-3], 1: FILES[1].name[:-3]})
    _change(files[1], "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert sql_rows(files[1], "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] == 0
    with pytest.raises(TraceError, match=f"{files[1].name}: no CUDA kernels"):
        load_export(tmp_path)
    _one_line(["whatif", str(tmp_path)], files[1].name, "no CUDA kernels")


@pytest.mark.parametrize("names, said", [
    ({0: "run_rank0.sqlite", 1: "run_rank2.sqlite"}, "no export of rank 1 among ranks 0..2"),
    ({0: "run_rank0.sqlite", 1: "run_rank1.sqlite"}, "run_rank01.sqlite and run_rank1.sqlite are both rank 1"),
])
def test_a_rank_left_out_or_given_twice_is_one_line(tmp_path, names, said):
    """Rank numbers with a gap (0 and 2), or one rank in two files (rank1 and rank01): merged before as
    the ranks there were (rank 1 missing from the coupling; rank 1 coupled twice); now one line, from
    the API and the command line. `ranks` on the same folder lists the same files, each a rank."""
    files = _copy(tmp_path, names)
    if "both" in said:
        shutil.copyfile(files[1], tmp_path / "run_rank01.sqlite")
    with pytest.raises(TraceError, match=said):
        load_export(tmp_path)
    _one_line(["whatif", str(tmp_path)], said)
    ranks = cli_process.run(["ranks", str(tmp_path), "-f", "json"], cwd=ROOT, text=True, timeout=300)
    assert ranks.returncode == 0, ranks.stderr
    listed = {Path(r["rank"]["file"]).name for r in json.loads(ranks.stdout)["ranks"]}
    assert listed == {p.name for p in tmp_path.iterdir()}


def test_a_link_named_as_a_rank_that_leads_nowhere_is_one_line(tmp_path):
    """run_rank2.sqlite a link to a file that is gone: both commands left it out before and took the
    run as ranks 0 and 1; now both say so in one line."""
    _copy(tmp_path, {0: "run_rank0.sqlite", 1: "run_rank1.sqlite"})
    (tmp_path / "run_rank2.sqlite").symlink_to(tmp_path / "gone.sqlite")
    for command in ("whatif", "ranks"):
        _one_line([command, str(tmp_path)], "run_rank2.sqlite", "gone.sqlite", "does not exist")


def test_a_folder_of_one_export_is_that_export(tmp_path):
    """A folder holding rank 0's export alone: `whatif` refused it before ("1 export(s) that are not the
    ranks of one run") while `ranks` read it as its one export; now both read the export, every kernel
    of it (SQL)."""
    from nsight_tui.parsers import Profile

    (one,) = _copy(tmp_path, {0: "run_rank0.sqlite"})
    kernels = sql_rows(one, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    trace = Profile.open_ranks(tmp_path).trace
    assert trace.path == one and int((trace.ops["kind"] == KERNEL).sum()) == kernels
    run = cli_process.run(["whatif", str(tmp_path), "-f", "json"], cwd=ROOT, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["rank_files"] is None and doc["steps"] == len(steps(one))


def test_ranks_and_whatif_take_the_same_files(tmp_path):
    """One run's ranks beside an export without a rank suffix: `whatif` refused the folder while `ranks`
    summarised all three files as one run's ranks; now both refuse it in the same line, naming the
    file that does not fit. On the committed folder both take its two files."""
    _copy(tmp_path, {0: "run_rank0.sqlite", 1: "run_rank1.sqlite"})
    shutil.copyfile(plain(FILES[1]), tmp_path / "other.sqlite")
    lines = {_one_line([command, str(tmp_path)], "other.sqlite: no rank suffix") for command in ("whatif", "ranks")}
    assert len(lines) == 1
    ranks = cli_process.run(["ranks", str(FOLDER), "-f", "json"], cwd=ROOT, text=True, timeout=300)
    assert [Path(r["rank"]["file"]).name for r in json.loads(ranks.stdout)["ranks"]] == [f.name for f in FILES]


def test_whatif_on_a_folder_says_on_a_terminal_how_many_rank_files_are_in(tmp_path):
    """`whatif FOLDER` read its rank files without a word while `ranks` counted its own; on a terminal's
    stderr it now counts them in one line (the folder's two files: 1 of 2, 2 of 2), wiped before the
    command's own note, and its answer is the same as without a terminal."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    out = tmp_path / "w.json"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "nsight_tui", "whatif", str(FOLDER), "-f", "json", "-o", str(out)],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    said, deadline = b"", time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # to the end of what it writes: the terminal closes as it exits
            if select.select([leader], [], [], 1)[0]:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the far end closed
                    break
                if not chunk:
                    break
                said += chunk
        assert proc.wait(timeout=60) == 0, said
    finally:
        proc.kill()
        os.close(leader)
    text = said.decode()
    counts = [part.strip() for part in text.split("\r") if "rank files read" in part]
    assert counts == [f"{i} of {len(FILES)} rank files read" for i in range(1, len(FILES) + 1)]
    assert text.rstrip().endswith(f"wrote {out}") and "\r" + " " * len(counts[-1]) in text
    plain_run = cli_process.run(["whatif", str(FOLDER), "-f", "json"], cwd=ROOT, text=True, timeout=300)
    assert json.loads(out.read_text()) == json.loads(plain_run.stdout)


def test_ranks_that_share_no_collective_are_not_said_to_be_coupled(tmp_path):
    """Rank 1's NCCL kernels renamed (SQL): the two files share no collective. whatif's Markdown said
    both "nothing couples them" and "the ranks coupled as in one export"; now the one, and the replay
    agrees: no collective group (graph.coll_members) spans the two ranks."""
    files = _copy(tmp_path, {0: FILES[0].name[:-3], 1: FILES[1].name[:-3]})
    _change(files[1], "UPDATE StringIds SET value = 'renamed_' || id WHERE lower(value) LIKE '%nccl%'")
    assert sql_rows(files[0], "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                              "ON s.id = k.demangledName WHERE s.value LIKE ?", NCCL)[0][0] > 0
    assert sql_rows(files[1], "SELECT count(*) FROM StringIds WHERE lower(value) LIKE ?", NCCL)[0][0] == 0
    run = cli_process.run(["whatif", str(tmp_path)], cwd=ROOT, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("Ranks: ")]
    assert "no collective found on every rank" in line and "they are not coupled as the ranks of one export are" in line
    assert "coupled as in one export" not in line and "coupled through those collectives" not in line
    g, _ = graph_of(load_export(tmp_path))
    assert g.coll_members == []


def test_an_nsight_compute_report_beside_a_folder_of_ranks_is_one_line():
    """`whatif DIR --ncu FILE`: the report joins one process's launches, not every rank's merged; one line
    naming the flag, exit 2 (the MCP tool refuses its `ncu` the same way)."""
    from helpers import cli_process

    ncu = SAMPLES / "ncu" / "small4_ctx128_bf16.ncu-rep.xz"
    done = cli_process.run(["whatif", str(FOLDER), "nohost", "--ncu", str(ncu)], text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"nsight-tui: --ncu is not joined to a folder of per-rank exports ({FOLDER}): an Nsight Compute report "
        "profiles one process, joined to one export's kernel launches; give one rank's export, or leave the report out"]


def test_each_process_is_named_by_the_file_whose_work_it_is():
    """A node's export names every process on it, another rank's too, as that capture saw it: rank 0's
    export of straggler_uneven names rank 1's process `nsys-launcher` (the launcher before it ran the
    rank's python), rank 1's own `python3` (SQL). The merged trace took the first file's name, so the
    straggler edit and the holders named rank 1 `nsys-launcher (853)`; each rank's own file names it now."""
    folder = SAMPLES / "replay" / "straggler_uneven" / "base"
    files = sorted(folder.glob("*_rank*.sqlite.xz"))
    t = load_export(folder)
    for f in files:
        mine = {p for (p,) in sql_rows(plain(f), "SELECT DISTINCT globalTid >> 24 & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
        named = dict(sql_rows(plain(f), "SELECT pid, name FROM PROCESSES"))
        merged = {pid: name for pid, name in t.processes.values()}
        assert mine and all(merged[p] == named[p] for p in mine), (f.name, {p: (merged[p], named[p]) for p in mine})
    assert {pid: name for pid, name in t.processes.values()}[853] == "python3"
