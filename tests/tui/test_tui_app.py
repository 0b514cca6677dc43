"""The TUI driven by keys (Textual's Pilot) on real exports: navigate, aggregate, search,
drill down to kernels, launches and correlation, sort, filter, switch attribution, export,
quit. Expected values come from SQL on the file (tests/test_tui_support.py), not from the
model the app shows."""
from __future__ import annotations

import asyncio
import csv
import subprocess
import sys
from pathlib import Path

import pytest

from test_tui_support import (
    ROOT, SAMPLES, SHARED, backward_kernels, first_launch_of, md_tables, open_backward_kernels, press,
    ro, running, scalar, screen_text, settle, tui_traces, type_text,
)

TRACES = tui_traces()


def run(coro):
    return asyncio.run(coro)


def kernel_rows(table):
    """(headers, rows) of an exported kernel table -> list of dicts."""
    headers, rows = table
    return [dict(zip(headers, r)) for r in rows]


# -- what the file is -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_info_bar_says_what_the_file_is(path: Path):
    gpu = scalar(path, "SELECT name FROM TARGET_INFO_GPU ORDER BY id LIMIT 1")
    version = scalar(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'")
    kernels = scalar(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    calls = scalar(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")

    async def body():
        async with running(path) as (app, pilot):
            text = " ".join(screen_text(app).split())
            assert path.name in text
            assert gpu in text
            assert f"nsys {version}" in text
            assert f"{kernels:,} kernels" in text
            assert f"{calls:,} API calls" in text
            assert "loaded in " in text
            assert "attribution: process" in text and "main thread" in text

    run(body())


# -- the range tree -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_navigate_expand_collapse_and_aggregate(path: Path):
    steps = scalar(path, """SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                             WHERE e.eventType IN (59,60,70,71) AND coalesce(e.text, s.value) GLOB 'step_[0-9]*'
                             AND e.globalTid = (SELECT globalTid FROM NVTX_EVENTS WHERE eventType IN (59,70)
                                                GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1)""")

    async def body():
        async with running(path) as (app, pilot):
            tree = app.screen.grid
            # the cursor starts on the steady-state iterations, the first row named step_N
            home = tree.cursor
            assert tree.tree.node_at(home).label.endswith("step_N")
            assert not any(tree.tree.node_at(i) and tree.tree.node_at(i).label.endswith("step_N")
                           for i in range(home))
            first = tree.tree.node_at(1)
            await press(app, pilot, "j")
            assert tree.cursor == home + 1
            await press(app, pilot, "k", "G")
            assert tree.cursor == tree.row_count - 1
            await press(app, pilot, "g", "j")
            rows = tree.row_count
            await press(app, pilot, "h")  # collapse the first range
            assert tree.row_count < rows and tree.tree.node_at(1) is first
            await press(app, pilot, "l")
            assert tree.row_count == rows

            # Aggregated: step_N is one row ×N; instances: one row per step.
            agg = [n for n in tree.tree.all_nodes() if n.label.endswith("step_N")]
            assert agg and max(n.instances for n in agg) == steps // len(agg)
            await press(app, pilot, "a")
            assert app.session.aggregated is False
            inst = [n for n in app.screen.grid.tree.all_nodes()
                    if n.label.split(":")[-1].startswith("step_") and n.label.split("_")[-1].isdigit()]
            assert len(inst) == steps
            assert "individual instances" in screen_text(app)
            await press(app, pilot, "a")
            assert app.session.aggregated is True

    run(body())


@pytest.mark.parametrize("path", TRACES)
def test_search_jumps_to_ranges_with_next_and_previous(path: Path):
    async def body():
        async with running(path) as (app, pilot):
            await press(app, pilot, "g", "slash")  # from the top (the cursor starts on step_N)
            await type_text(app, pilot, "backward")
            await press(app, pilot, "enter")
            tree = app.screen.grid
            here = lambda: tree.tree.node_at(tree.cursor)  # noqa: E731
            assert here().label == "backward" and here().parent.label == "warmup_N"
            await press(app, pilot, "n")
            assert here().label == "backward" and here().parent.label.endswith("step_N")
            await press(app, pilot, "N")
            assert here().parent.label == "warmup_N"
            await press(app, pilot, "N")  # wraps to the last match
            assert here().parent.label.endswith("step_N")
            await press(app, pilot, "slash")
            await type_text(app, pilot, "no_such_range")
            await press(app, pilot, "enter")
            assert "no range matches" in screen_text(app)

    run(body())


# -- kernels of a range, export ---------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_backward_kernels_exported_match_sql(path: Path, tmp_path: Path):
    want = backward_kernels(path, "process")
    assert want["count"] > 100  # process-wide: the GEMMs of backward, not one fill kernel

    async def body():
        async with running(path, export_dir=tmp_path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            screen = app.screen
            assert type(screen).__name__ == "KernelsScreen"
            assert screen.node.path[-2:] == ("step_N", "backward") or screen.node.path[-1] == "backward"
            assert f"{want['count']:,} kernels" in screen_text(app)
            await press(app, pilot, "e")
            out = tmp_path / "nsight-tui_backward_kernels.md"
            assert out.exists()
            assert f"exported {out.name}" in " ".join(screen_text(app).split())
            assert app.clipboard == out.read_text()
            return out.read_text()

    text = run(body())
    head = text.split("###")[0]
    assert path.name in head and "step_N/backward" in head and "attribution `process`" in head
    tables = md_tables(text)
    rows = kernel_rows(tables[0])
    kernels = [r for r in rows if r["Kind"] == "kernel"]
    assert sum(int(r["Instances"]) for r in kernels) == want["count"]
    assert {r["Kernel (demangled)"] for r in kernels} == set(want["names"])
    top = rows[0]  # sorted by total time, as on screen
    assert top["Kernel (demangled)"] == want["top_name"]
    assert int(top["Total (ns)"]) == want["top_total"]
    assert int(top["Instances"]) == want["top_count"]
    assert tables[1][0] == ["Ratio", "Value", "Basis"]  # the ratios panel travels with it


@pytest.mark.parametrize("path", TRACES)
def test_sort_and_filter_the_kernel_table(path: Path, tmp_path: Path):
    want = backward_kernels(path, "process")
    gemm_names = {n for n in want["names"] if "gemm" in n.lower()}
    assert gemm_names

    async def body():
        async with running(path, export_dir=tmp_path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            screen = app.screen
            table = screen.table
            headers = [c.key for c in table.sortable()]
            await press(app, pilot, "s")  # the first column: kernel name, A-Z
            assert table.sort.key == headers[0] and not table.sort.descending
            names = [table.value(i, headers[0]) for i in range(len(table))]
            assert names == sorted(names, key=str.lower) or names == sorted(names)
            for _ in range(headers.index("total_ns")):
                await press(app, pilot, "s")
            assert table.sort.key == "total_ns" and table.sort.descending
            totals = [table.value(i, "total_ns") for i in range(len(table))]
            assert totals == sorted(totals, reverse=True)
            await press(app, pilot, "S")
            totals = [table.value(i, "total_ns") for i in range(len(table))]
            assert totals == sorted(totals)
            assert "Total▲" in screen_text(app)
            top = table.record(screen.grid.cursor)  # sorting keeps the selected row selected
            assert top["label"][:20] in screen_text(app)
            await press(app, pilot, "d")  # full demangled names
            assert screen.table.columns[0].key == "name"
            assert screen.table.record(screen.grid.cursor)["name"] == top["name"]
            assert top["name"][:20] in screen_text(app)
            await press(app, pilot, "d")
            table = screen.table

            await press(app, pilot, "f")
            await type_text(app, pilot, "gemm")
            await press(app, pilot, "enter")
            shown = {table.record(i)["name"] for i in range(len(table))}
            assert gemm_names <= shown
            for i in range(len(table)):
                rec = table.record(i)
                assert any("gemm" in str(rec[k]).lower() for k in ("name", "label", "short", "family"))
            assert f"filter 'gemm': {len(table)} of" in screen_text(app)
            await press(app, pilot, "e")  # the export is the filtered, sorted view
            return (tmp_path / "nsight-tui_backward_kernels.md").read_text(), len(table)

    text, n = run(body())
    rows = kernel_rows(md_tables(text)[0])
    assert len(rows) == n
    totals = [int(r["Total (ns)"]) for r in rows]
    assert totals == sorted(totals)
    assert "filter 'gemm'" in text and "sorted by Total asc" in text


# -- launches and correlation ----------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_drill_from_kernel_to_launches_to_correlation(path: Path, tmp_path: Path):
    want = backward_kernels(path, "process")
    corr, api_name = first_launch_of(path, want["top_name"])

    async def body():
        async with running(path, export_dir=tmp_path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            await press(app, pilot, "enter")  # the top kernel -> its launches
            screen = app.screen
            assert type(screen).__name__ == "LaunchesScreen"
            table = screen.table
            assert len(table) == want["top_count"]
            first = table.record(0)
            assert int(first["corr"]) == corr and first["api_name"] == api_name
            assert first["latency"] == first["start"] - first["api_start"] > 0
            text = screen_text(app)
            assert str(corr) in text and "cudaLaunchKernel" in text
            assert table.value(0, "grid") and "x" in table.value(0, "grid")  # read from the file on demand
            await press(app, pilot, "enter")  # -> correlation detail
            assert type(app.screen).__name__ == "CorrelationScreen"
            text = " ".join(screen_text(app).split())
            assert f"correlation ID {corr}" in text
            assert f"API call: {api_name}" in text
            assert "backward" in text  # the NVTX stack open when it was launched
            await press(app, pilot, "e")
            out = tmp_path / f"nsight-tui_corr_{corr}.md"
            assert api_name in out.read_text()
            await press(app, pilot, "escape", "escape")
            assert type(app.screen).__name__ == "KernelsScreen"

    run(body())


@pytest.mark.parametrize("path", TRACES)
def test_jump_to_a_correlation_id(path: Path):
    con = ro(path)
    try:  # a memcpy: the jump is not only for kernels
        corr, name = con.execute("""SELECT m.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_MEMCPY m
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
                 AND (r.globalTid >> 24) = (m.globalPid >> 24)
            JOIN StringIds s ON s.id = r.nameId ORDER BY m.start LIMIT 1""").fetchone()
        missing = con.execute("SELECT max(correlationId) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    finally:
        con.close()
    name = name[:-6] if name[-6:-4] == "_v" else name  # shown as nsys's reports name it

    async def body():
        async with running(path) as (app, pilot):
            await press(app, pilot, "c")
            await type_text(app, pilot, str(corr))
            await press(app, pilot, "enter")
            text = " ".join(screen_text(app).split())
            assert f"API call: {name}" in text and "memcpy" in text
            await press(app, pilot, "c")
            await type_text(app, pilot, str(missing))
            await press(app, pilot, "enter")
            assert f"no CUDA API call with correlation ID {missing}" in screen_text(app)

    run(body())


# -- attribution mode ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_switching_attribution_rebuilds_the_view(path: Path):
    process, nsys = backward_kernels(path, "process"), backward_kernels(path, "nsys")
    assert nsys["count"] < process["count"]

    async def body():
        async with running(path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            assert f"{process['count']:,} kernels" in screen_text(app)
            await press(app, pilot, "m")
            await settle(app, pilot)
            assert app.session.attribution == "nsys"
            assert type(app.screen).__name__ == "KernelsScreen"  # the same range, reopened
            text = " ".join(screen_text(app).split())
            assert "attribution: nsys" in text and "launched them" in text
            assert "backward ×" in text and f"· {nsys['count']:,} kernels" in text
            assert sum(app.screen.table.frame.query("kind == 'kernel'")["instances"]) == nsys["count"]
            await press(app, pilot, "m")
            await settle(app, pilot)
            assert app.session.attribution == "process"
            assert f"{process['count']:,} kernels" in screen_text(app)

    run(body())


# -- exports never clobber ------------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES[:1])
def test_export_asks_before_replacing_a_file(path: Path, tmp_path: Path):
    async def body():
        async with running(path, export_dir=tmp_path) as (app, pilot):
            await press(app, pilot, "e")
            first = tmp_path / "nsight-tui_ranges.md"
            original = first.read_text()
            assert "| Thread | Range path |" in original
            first.write_text("mine\n")
            await press(app, pilot, "e")
            assert type(app.screen).__name__ == "ExportConflict"
            await press(app, pilot, "c")  # cancel: nothing written
            assert first.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [first]
            await press(app, pilot, "e", "n")  # new name
            assert (tmp_path / "nsight-tui_ranges-2.md").read_text() == original
            assert first.read_text() == "mine\n"
            await press(app, pilot, "e", "o")  # overwrite, when asked for
            assert first.read_text() == original
            assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp" or p.name.startswith(".")]

    run(body())


# -- global views ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", TRACES)
def test_global_kernel_and_api_summaries(path: Path, tmp_path: Path):
    ops = sum(scalar(path, f"SELECT count(*) FROM {t}") for t in
              ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    top_api = scalar(path, """SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                              GROUP BY r.nameId ORDER BY sum(r.end - r.start) DESC LIMIT 1""")
    top_api_total = scalar(path, """SELECT sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                                    GROUP BY r.nameId ORDER BY sum(r.end - r.start) DESC LIMIT 1""")

    async def body():
        async with running(path, export_dir=tmp_path) as (app, pilot):
            await press(app, pilot, "2")
            assert type(app.screen).__name__ == "KernelsScreen" and app.screen.node is None
            assert int(app.screen.table.frame["instances"].sum()) == ops
            await press(app, pilot, "3")
            assert type(app.screen).__name__ == "ApiScreen"
            await press(app, pilot, "e")
            await press(app, pilot, "1")
            assert type(app.screen).__name__ == "RangesScreen"
            return (tmp_path / "nsight-tui_api.md").read_text()

    text = run(body())
    headers, rows = md_tables(text)[0]
    assert headers[0] == "Name" and "Total Time (ns)" in headers  # in screen order
    first = dict(zip(headers, rows[0]))
    assert top_api.startswith(first["Name"]) and int(first["Total Time (ns)"]) == top_api_total
    oracle = path.parent / "oracle" / f"{path.stem}_cuda_api_sum.csv"
    if oracle.exists():  # NVIDIA's own numbers for this file
        with oracle.open() as fh:
            nv = list(csv.DictReader(fh))
        assert [r["Name"] for r in nv] == [dict(zip(headers, r))["Name"] for r in rows]
        assert [int(r["Total Time (ns)"]) for r in nv] == [int(dict(zip(headers, r))["Total Time (ns)"]) for r in rows]


# -- keys, help, palette, quit -------------------------------------------------------------------
def test_help_lists_every_key(tmp_path: Path):
    from textual.binding import Binding

    from nsight_tui.tui.app import NsightApp, help_sections
    from nsight_tui.tui.views.base import TableScreen, ViewScreen
    from nsight_tui.tui.views.kernels import KernelsScreen
    from nsight_tui.tui.views.modals import CorrelationPrompt, ExportConflict
    from nsight_tui.tui.views.ranges import RangesScreen, RangeTree
    from nsight_tui.tui.widgets.grid import DataGrid
    from nsight_tui.tui.widgets.prompt_bar import PromptBar

    classes = [NsightApp, ViewScreen, TableScreen, KernelsScreen, RangesScreen, RangeTree, DataGrid, PromptBar,
               ExportConflict, CorrelationPrompt]
    listed = {keys for _, rows in help_sections() for keys, _ in rows}
    for cls in classes:
        for b in cls.BINDINGS:
            assert isinstance(b, Binding) and b.description, f"{cls.__name__}: {b} lacks a description"
            if cls is not CorrelationPrompt:
                from nsight_tui.tui.views.help import key_text

                assert key_text(b.key) in listed, f"{b.key} of {cls.__name__} missing from help"
    for key in ("j", "k", "g", "G", "/", "n", "N", "e", "q", "a", "m", "c", "s", "S", "f", "?", "enter", "esc"):
        assert any(key in keys.split() for keys in listed), key

    path = SAMPLES / "small_ctx128.sqlite"
    if not path.exists():
        pytest.skip("no sample trace")

    async def body():
        async with running(path, size=(100, 60)) as (app, pilot):
            await press(app, pilot, "question_mark")
            text = screen_text(app)
            assert "nsight-tui keys" in text and "Search" in text and "Export the view" in text
            await press(app, pilot, "escape")
            assert type(app.screen).__name__ == "RangesScreen"

    run(body())


@pytest.mark.parametrize("path", TRACES[:1])
def test_command_palette_jumps_to_a_range(path: Path):
    async def body():
        async with running(path) as (app, pilot):
            await press(app, pilot, "ctrl+p")
            await type_text(app, pilot, "Range: step_N/backward")
            await asyncio.sleep(0.3)
            await press(app, pilot, "enter")
            tree = app.screen.grid
            node = tree.tree.node_at(tree.cursor)
            assert node.label == "backward" and node.parent.label.endswith("step_N")

    run(body())


@pytest.mark.parametrize("path", TRACES[:1])
def test_q_quits_with_exit_code_zero(path: Path):
    async def body():
        async with running(path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            await pilot.press("q")
            await pilot.pause()
            return app

    app = run(body())
    assert app.return_code == 0 and not app.is_running


# -- several files ----------------------------------------------------------------------------------
def test_several_files_side_by_side_and_open_one():
    paths = sorted(SAMPLES.glob("small_ctx128*.sqlite"))[:2]
    if len(paths) < 2:
        pytest.skip("needs two sample traces")

    async def body():
        async with running(paths) as (app, pilot):
            screen = app.screen
            assert type(screen).__name__ == "FilesScreen"
            assert len(screen.table) == 2
            text = screen_text(app)
            assert paths[0].name in text and paths[1].name in text and "bwd ms/step" in text
            await press(app, pilot, "j", "enter")
            for _ in range(600):
                if app.loaded:
                    break
                await pilot.pause(0.05)
            await settle(app, pilot)
            assert type(app.screen).__name__ == "RangesScreen" and app.session.path == paths[1]
            await press(app, pilot, "escape")
            assert type(app.screen).__name__ == "FilesScreen" and app.session is None
            await press(app, pilot, "k", "enter")  # the other file
            for _ in range(600):
                if app.loaded and app.session is not None:
                    break
                await pilot.pause(0.05)
            await settle(app, pilot)
            assert app.session.path == paths[0]
            await press(app, pilot, "escape", "j", "enter")  # back to the first one: no reload
            assert type(app.screen).__name__ == "RangesScreen" and app.session.path == paths[1]

    run(body())


def test_no_nvtx_trace_still_opens():
    path = SHARED / "mock.sqlite"
    if not path.exists():
        pytest.skip("mock.sqlite is in ../shared only")

    async def body():
        async with running(path) as (app, pilot):
            assert "no NVTX ranges" in screen_text(app)
            await press(app, pilot, "2")
            names = scalar(path, "SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL")
            copies = scalar(path, "SELECT count(DISTINCT copyKind) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
            assert len(app.screen.table) == names + copies  # one row per kernel name and per copy kind

    run(body())


# -- the command line ------------------------------------------------------------------------------
def _bad_input(folder: Path, kind: str) -> Path:
    if kind == "missing":
        return folder / "missing.sqlite"
    if kind == "directory":
        return folder
    path = folder / f"{kind}.sqlite"
    path.write_bytes(b"" if kind == "empty" else b"hello, not a database")
    return path


@pytest.mark.parametrize("kind, message", [
    ("missing", "no such file"),
    ("empty", "empty file"),
    ("text", "not an SQLite file"),
    ("directory", "no .sqlite exports"),
])
def test_unreadable_input_is_one_line_and_nonzero_before_any_screen(tmp_path: Path, kind, message):
    bad = _bad_input(tmp_path, kind)
    proc = subprocess.run([sys.executable, "-m", "nsight_tui", str(bad)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsight-tui: ") and message in lines[0]
    assert "\x1b[" not in proc.stdout  # the app never started drawing


def test_sweep_question_tables_in_the_files_view(tmp_path):
    """Several files: `t` shows the sweep report's tables (rows model, columns ctx, OOM marked)."""
    import json
    import shutil

    src = SAMPLES / "small_ctx128.sqlite"
    shutil.copy(src, tmp_path / "small_ctx128.sqlite")
    shutil.copy(src, tmp_path / "small_ctx256.sqlite")  # a second column (same trace, other name)
    (tmp_path / "medium_ctx128.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    paths = sorted(tmp_path.glob("*.sqlite"))
    from nsight_tui.tui.app import NsightApp

    async def body():
        app = NsightApp(paths, attribution="process", export_dir=tmp_path)
        async with app.run_test(size=(120, 36)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if "runs" in screen_text(app):
                    break
            text = screen_text(app)
            assert "medium_ctx128.oom.json" in text  # the OOM run is listed with the files
            await press(app, pilot, "t")
            for _ in range(100):
                await pilot.pause(0.02)
                if "ctx 256" in screen_text(app):
                    break
            text = " ".join(screen_text(app).split())
            assert "question 1/" in text and "ctx 128" in text and "ctx 256" in text
            for _ in range(40):  # 30 tables; bounded so a renamed title fails instead of hanging
                if "Step time, NVTX / Python" in screen_text(app):
                    break
                await press(app, pilot, "right_square_bracket")
            text = screen_text(app)
            assert "OOM" in text
            await press(app, pilot, "e")
            for _ in range(100):
                await pilot.pause(0.05)
                exported = list(tmp_path.glob("nsight-tui_question_*.md"))
                if exported:
                    break
            assert exported, "the question table was not exported"
            body_md = exported[0].read_text()
            assert "| medium |" in body_md and "OOM" in body_md

    asyncio.run(body())


@pytest.mark.parametrize("path", TRACES)
def test_kernel_detail_decodes_the_highlighted_gemm(path: Path):
    """The top backward kernel's decoded name and description show under the table."""
    name = backward_kernels(path, "process")["top_name"]
    # read off the real name by hand: sm80 cuBLAS xmma FP32-FMA GEMMs, tile after "tilesize"
    assert "gemm" in name and "ffma" in name
    tile = name.split("tilesize")[1].split("_")[0]

    async def body():
        async with running(path) as (app, pilot):
            await open_backward_kernels(app, pilot)
            await settle(app, pilot)
            text = " ".join(screen_text(app).split())
            assert f"tile {tile}" in text and "no tensor cores" in text and "sm80" in text

    run(body())


@pytest.mark.parametrize("path", TRACES[:1])
def test_mode_switch_reopens_the_same_instance(path: Path):
    """Instances view: after `m`, the kernels shown are still those of the instance that was
    open (here the last `backward`), not the first one with that name."""
    last_start = scalar(path, """SELECT max(e.start) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                                 WHERE e.eventType IN (59, 60) AND coalesce(e.text, s.value) = 'backward'""")

    async def body():
        async with running(path) as (app, pilot):
            await press(app, pilot, "a")  # individual instances
            await press(app, pilot, "g", "slash")  # from the top (the cursor starts on step_0)
            await type_text(app, pilot, "backward")
            await press(app, pilot, "enter", "N", "enter")  # last match, its kernels
            assert type(app.screen).__name__ == "KernelsScreen" and app.screen.node.start == last_start
            await press(app, pilot, "m")
            await settle(app, pilot)
            assert app.session.attribution == "nsys"
            assert type(app.screen).__name__ == "KernelsScreen" and app.screen.node.start == last_start

    run(body())
