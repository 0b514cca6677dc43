"""Ranks in the TUI, on the committed 2-process DDP export: the rank filter (`R`) on the range
tree and the kernel tables, and the ranks view (`5`, `e`). Expected values come from SQL over
the export (which process is which rank: its own config mark; which kernel ran where: the
kernel rows' process and device) and plain interval sweeps (tests/core/test_ranks.py's), never
from the model the app shows."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import sqlite3
import statistics
from pathlib import Path

import pytest

from helpers import step_sql
from helpers.xz_samples import plain
from conftest import SAMPLES

DDP = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
pytestmark = pytest.mark.skipif(not DDP.exists(), reason="DDP sample missing")


def run(coro):
    return asyncio.run(coro)


def _core_ranks_sql():
    """tests/core/test_ranks.py: its SQL per (process, device) and its interval sweeps."""
    path = Path(__file__).resolve().parents[1] / "core" / "test_ranks.py"
    spec = importlib.util.spec_from_file_location("core_test_ranks_sql", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


core = _core_ranks_sql()


def rank_processes(path: Path) -> dict[int, int]:
    """rank -> pid, from each process's `nsight-tui:config` mark (the capture wrote the rank)."""
    rows = core._rows(path, "SELECT (e.globalTid >> 24) & 16777215, coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                            "LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE "
                            "'nsight-tui:config %'")
    return {json.loads(text.split(" ", 1)[1])["rank"]: pid for pid, text in rows}


def device_of(path: Path, pid: int) -> int:
    (dev,) = core._rows(path, f"SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                              f"WHERE (globalPid >> 24) & 16777215 = {pid}")
    return dev[0]


# The process rule (parsers/model/attribution.py's docstring), written out: a `backward` range inside a
# `step_<n>` on its thread holds the calls on that thread that lie inside it, and the calls of the
# process's other threads that start while it is open; its kernels are those calls' kernels.
BACKWARD_KERNELS = """
WITH r AS (
    SELECT e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
    FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
    WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL
),
bwd AS (
    SELECT b.* FROM r b WHERE b.name = 'backward' AND ((b.tid >> 24) & 16777215) = :pid AND EXISTS (
        SELECT 1 FROM r p WHERE p.tid = b.tid AND p.name GLOB 'step_[0-9]*' AND p.start <= b.start AND p.end >= b.end)
),
hit AS (
    SELECT DISTINCT c.correlationId AS corr, c.globalTid AS tid
    FROM CUPTI_ACTIVITY_KIND_RUNTIME c JOIN bwd b ON (
        (c.globalTid = b.tid AND c.start >= b.start AND c.end <= b.end)
        OR (c.globalTid != b.tid AND (c.globalTid >> 24) = (b.tid >> 24) AND b.start <= c.start AND c.start <= b.end))
)
SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN hit h ON h.corr = k.correlationId AND (h.tid >> 24) = (k.globalPid >> 24)
WHERE k.deviceId = :dev
"""


def backward_kernels(path: Path, pid: int, dev: int) -> tuple[int, int]:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        count, total = con.execute(BACKWARD_KERNELS, {"pid": pid, "dev": dev}).fetchone()
    finally:
        con.close()
    return count, total


def table_kernels(screen) -> tuple[int, int]:
    """Kernel count and kernel time of a kernel table as the view holds it (every row)."""
    frame = screen.view.summary
    kernels = frame[frame["kind"] == "kernel"]
    return int(kernels["instances"].sum()), int(kernels["total_ns"].sum())


def test_rank_filter_counts_only_that_ranks_backward_kernels(tui):
    pids = rank_processes(DDP)
    want = {r: backward_kernels(DDP, pid, device_of(DDP, pid)) for r, pid in pids.items()}
    assert want[0][1] != want[1][1]  # the two ranks differ: showing the wrong one fails

    async def body():
        async with tui(DDP, size=(100, 30)) as ui:
            header = ui.text().splitlines()[0]
            assert header.rstrip().endswith("attr: process · Σ 2 ranks")
            await ui.press("R", "R")  # every rank -> rank 0 -> rank 1
            assert ui.app.session.rank.rank == 1
            assert ui.text().splitlines()[0].rstrip().endswith("attr: process · rank 1")
            groups = ui.screen.grid.ranges.groups
            assert groups and {g.gpid >> 24 & 0xFFFFFF for g in groups} == {pids[1]}  # its process only
            await ui.open_backward_kernels()
            screen = ui.screen
            assert type(screen).__name__ == "KernelsScreen" and screen.node.path[-2:] == ("step_N", "backward")
            assert table_kernels(screen) == want[1]
            assert screen.node.kernels == want[1][0] and screen.node.kernel_ns == want[1][1]
            assert f"{want[1][0]:,} kernels · rank 1 · GPU" in ui.flat_text()  # the crumb says whose
            await ui.press("R")  # back to every rank: the open range's kernels stay open, of that rank
            assert ui.app.session.rank is None
            assert type(ui.screen).__name__ == "KernelsScreen" and table_kernels(ui.screen) == want[1]

    run(body())


def test_all_kernels_view_of_a_rank_and_of_all_ranks(tui):
    pids = rank_processes(DDP)
    per_rank = core._kernels_by_rank(DDP)

    async def body():
        async with tui(DDP, size=(100, 30)) as ui:
            await ui.press("2")
            assert "every GPU operation in the trace · all 2 ranks, summed" in ui.screen.crumb()
            assert table_kernels(ui.screen)[0] == sum(len(ks) for ks in per_rank.values())
            await ui.press("R")  # on the all-kernels view: the view again, of rank 0
            assert type(ui.screen).__name__ == "KernelsScreen" and ui.screen.node is None
            pid = pids[0]
            ((_, dev),) = [k for k in per_rank if k[0] == pid]
            ks = per_rank[(pid, dev)]
            assert table_kernels(ui.screen) == (len(ks), sum(e - s for s, e, _ in ks))
            assert "every GPU operation in the trace · rank 0 · GPU" in ui.screen.crumb()

    run(body())


def api_calls_sql(path: Path, pid: int | None = None) -> tuple[int, int]:
    """CUDA API calls and their total time, of one process (its pid) or of every process."""
    where = f"WHERE (globalTid >> 24) & 16777215 = {pid}" if pid is not None else ""
    ((calls, total),) = core._rows(path, f'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME {where}')
    return calls, total


def test_api_summary_of_a_rank_and_of_all_ranks(tui):
    """`3` counts every process's CUDA API calls; `R` on it shows the view again, over the
    filtered rank's process's calls only (SQL by the calls' process)."""
    pids = rank_processes(DDP)
    every = api_calls_sql(DDP)
    mine = {r: api_calls_sql(DDP, pid) for r, pid in pids.items()}
    # (a process with no GPU work, the launcher, makes a call too: it is in "every", no rank's)
    assert sum(c for c, _ in mine.values()) <= every[0] and mine[0] != mine[1]

    def shown(screen) -> tuple[int, int]:
        frame = screen.table.frame
        return int(frame["calls"].sum()), int(frame["total"].sum())

    async def body():
        async with tui(DDP, size=(100, 30)) as ui:
            await ui.press("3")
            await ui.until(lambda: getattr(ui.screen, "table", None) is not None, "the API summary")
            assert shown(ui.screen) == every
            assert "cuda_api_sum) · all 2 ranks, summed" in ui.flat_text()
            for rank in (0, 1):
                await ui.press("R")
                await ui.until(lambda: type(ui.screen).__name__ == "ApiScreen" and ui.screen.table is not None
                               and ui.app.session.rank is not None and ui.app.session.rank.rank == rank,  # noqa: B023 - awaited here
                               f"the API summary of rank {rank}")
                assert shown(ui.screen) == mine[rank]
                assert f"cuda_api_sum) · process {pids[rank]} (rank {rank} · GPU" in ui.flat_text()

    run(body())


def test_rank_filter_on_a_single_rank_export_says_there_is_nothing_to_filter(tui):
    async def body():
        async with tui(SAMPLES / "small_ctx128.sqlite", size=(100, 30)) as ui:
            assert ui.text().splitlines()[0].rstrip().endswith("attr: process")  # no rank badge
            await ui.press("R")
            assert ui.app.session.rank is None
            await ui.until_text("nothing to filter")

    run(body())


def steps_by_process(path: Path) -> dict[int, list[int]]:
    """pid -> its step_<n> periods (tests/helpers/step_sql.py's definition: the step is its period)."""
    out: dict[int, list[int]] = {}
    for it in step_sql.steps(path):
        out.setdefault(it.pid, []).append(it.period)
    return out


def test_ranks_view_step_time_and_exposed_communication_match_sql(tui, md_tables, tmp_path: Path):
    pids = rank_processes(DDP)
    steps = steps_by_process(DDP)
    per_rank = core._kernels_by_rank(DDP)
    want = {}
    for rank, pid in pids.items():
        ((_, dev),) = [k for k in per_rank if k[0] == pid]
        ks = per_rank[(pid, dev)]
        comm = core._union([(s, e) for s, e, c in ks if c])
        compute = core._union([(s, e) for s, e, c in ks if not c])
        exposed = core._length(comm) - core._overlap(comm, compute)
        want[(f"rank {rank}", dev)] = (statistics.median(steps[pid]), min(steps[pid]), max(steps[pid]),
                                            core._length(comm), exposed)
    assert len(want) == 2 and all(w[4] > 0 for w in want.values())

    async def body():
        async with tui(DDP, size=(100, 30), export_dir=tmp_path) as ui:
            await ui.press("5")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the ranks view built")
            frame = ui.screen.view.rank_frame
            got = {(r.label, r.device): (r.step_med_ns, r.step_min_ns, r.step_max_ns, r.comm_ns, r.exposed_ns)
                   for r in frame.itertuples()}
            assert got == want
            text = ui.flat_text()
            assert "straggler: rank" in text and "step period over ranks: min" in text
            await ui.press("e")
            out = tmp_path / "nsight-tui_ranks.md"
            await ui.until(out.exists, "the export written")
            exported = out.read_text()
            await ui.press("enter")  # enter on rank 0: the tree of rank 0
            assert type(ui.screen).__name__ == "RangesScreen" and ui.app.session.rank.rank == 0
            return exported

    text = run(body())
    (headers, rows), (p_headers, p_rows) = md_tables(text)
    table = {(r[headers.index("Rank")], int(r[headers.index("GPU")])): r for r in rows}
    for key, (med, lo, hi, comm, exposed) in want.items():
        row = table[key]
        assert int(row[headers.index("Step period, median (ns)")]) == int(med)
        assert int(row[headers.index("Step period, min (ns)")]) == lo and int(row[headers.index("Step period, max (ns)")]) == hi
        assert int(row[headers.index("Communication (ns, whole capture)")]) == comm
        assert int(row[headers.index("Exposed communication (ns, whole capture)")]) == exposed
    assert "straggler:" in text
    assert {r[p_headers.index("Phase")] for r in p_rows} == {"forward", "backward", "optimizer"}


def test_ranks_view_per_phase_time_is_the_mean_phase_range_per_step(tui):
    """`GPU/step` of a phase = the GPU time of its ranges inside step_<n> ranges (first start to
    last end of the ops its process launched while each was open), summed, over their count;
    `CPU/step` the same of their NVTX spans (SQL, tests/helpers/step_sql.py)."""
    import sqlite3

    from helpers import step_sql

    pids = rank_processes(DDP)
    rows = core._rows(DDP, """
        WITH r AS (SELECT e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
                   FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                   WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL)
        SELECT b.tid, b.name, b.start, b.end FROM r b
        WHERE b.name IN ('forward', 'backward', 'optimizer') AND EXISTS (
            SELECT 1 FROM r p WHERE p.tid = b.tid AND p.name GLOB 'step_[0-9]*' AND p.start <= b.start
            AND p.end >= b.end)""")
    rank_of = {pid: rank for rank, pid in pids.items()}
    con = sqlite3.connect(f"file:{DDP}?mode=ro&immutable=1", uri=True)
    sums: dict = {}
    for tid, name, s, e in rows:
        g0, g1 = step_sql.gpu_span(con, tid, s, e)
        acc = sums.setdefault((name, rank_of[(tid >> 24) & 0xFFFFFF]), [0, 0, 0])
        acc[0] += g1 - g0
        acc[1] += e - s
        acc[2] += 1
    con.close()
    want = {key: (gpu / n, cpu / n) for key, (gpu, cpu, n) in sums.items()}

    async def body():
        async with tui(DDP, size=(100, 30)) as ui:
            await ui.press("5")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the ranks view built")
            frame = ui.screen.view.phase_frame
            return {(r.phase, int(r.label.split()[1])): (r.per_step_ns, r.cpu_step_ns) for r in frame.itertuples()}

    got = run(body())
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=0, abs=1e-6)


def test_header_keeps_the_rank_badge_whole_in_one_row_at_80_columns():
    from nsight_tui.tui.viewmodels.header import HeaderInfo, fit

    base = dict(file_name="small_ctx128_ddp2.sqlite", gpus=("NVIDIA H200", "NVIDIA H200"), nsys_version="2025.3.2",
                span_ns=12_000_000_000, kernels=9454, api_calls=33439, ranges=676, load_seconds=1.02,
                attribution="process", mode_help="")
    for badge in ("Σ 2 ranks", "rank 1", "rank 63"):
        (row,) = fit(HeaderInfo(**base, rank=badge), 78)  # 80 columns less the padding
        assert row.badge == f"attr: process · {badge}" and len(row.text) + 2 + len(row.badge) <= 78
        assert row.text.startswith("small_ctx128_ddp2") and "9,454 kernels" in row.text
    rows = fit(HeaderInfo(**base), 78)  # one rank: as before, the API count stays (two rows if need be)
    assert any("33,439 API" in r.text for r in rows) and rows[-1].badge == "attr: process"


def test_api_summary_of_a_process_driving_two_gpus_says_so(tmp_path: Path):
    """A process driving two GPUs is two ranks, but its CUDA API calls are the process's: the
    summary under either rank says which process it counts and that it drives the other too.
    The export: the DDP sample with rank 1's GPU work moved to rank 0's process."""
    from conftest import mutated_copy
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.tui.session import Session

    pids = rank_processes(DDP)
    one = mutated_copy(tmp_path, "one_process_two_gpus",
                       *(f"UPDATE {t} SET globalPid = (SELECT min(globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                         f"WHERE (globalPid >> 24) & 16777215 = {pids[0]}) "
                         f"WHERE (globalPid >> 24) & 16777215 = {pids[1]}"
                         for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                   "CUPTI_ACTIVITY_KIND_MEMSET")), src=DDP)
    session = Session(one, load_trace(one), "process", 0.0)
    ranks = session.ranks()
    assert [(r.pid, r.device) for r in ranks] == [(pids[0], 0), (pids[0], 1)]
    session.rank = ranks[1]
    assert session.api_scope_text() == f"process {pids[0]} ({ranks[1].label}; also {ranks[0].label})"
    calls = int(session.api_summary().frame["calls"].sum())
    assert calls == api_calls_sql(one, pids[0])[0]


def test_ranks_view_of_an_unannotated_capture_shows_its_inferred_steps(tui, async_trace, tmp_path: Path):
    """`5` on a capture without NVTX: the rank's steps are the inferred iterations the tree shows
    (`inferred:step_N`), said so on screen, with the phases under their inferred names; truth: the
    run's own Python step times (STEM.steps.json beside the export). It said 0 steps before."""
    import shutil

    stem = "small_ctx512_b8_async_nonvtx"
    nonvtx = SAMPLES / "nonvtx"
    path = tmp_path / f"{stem}.sqlite"
    shutil.copyfile(async_trace(nonvtx / f"{stem}.sqlite.xz"), path)
    shutil.copyfile(nonvtx / f"{stem}.steps.json", tmp_path / f"{stem}.steps.json")
    python = [m["seconds"] * 1e9 for m in json.loads((nonvtx / f"{stem}.steps.json").read_text())["steps"]
              if m["name"].startswith("step_")]

    async def body():
        async with tui(path, size=(120, 34)) as ui:
            await ui.press("5")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the ranks view built")
            view = ui.screen.view
            # one rank: no straggler to replay, `w` shown dimmed and a press does nothing
            assert view.run.straggler is None and ui.screen.check_action("whatif", ()) is None
            await ui.press("w")
            assert type(ui.screen).__name__ == "RanksScreen"
            return view.rank_frame, view.phase_frame, ui.flat_text()

    ranks_frame, phases, text = run(body())
    (row,) = ranks_frame.itertuples()
    assert row.steps == len(python) == 4
    assert row.step_med_ns == pytest.approx(statistics.median(python), rel=0.02)
    assert list(phases["phase"]) == ["inferred:forward", "inferred:backward", "inferred:optimizer"]
    assert "inferred:backward" in text and "steps (inferred:step_N)" in text
