"""The TUI driven by keys (Textual's Pilot) on real exports: navigate, aggregate, search,
drill down to kernels, launches and correlation, sort, filter, switch attribution, export,
quit. Expected values come from SQL on the file (the `sql` fixture, tests/tui/conftest.py),
not from the model the app shows."""
from __future__ import annotations

import asyncio
import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.xz_samples import plain


def run(coro):
    return asyncio.run(coro)


def kernel_rows(table):
    """(headers, rows) of an exported kernel table -> list of dicts."""
    headers, rows = table
    return [dict(zip(headers, r)) for r in rows]


def fmt_us(ns: float) -> str:
    """A median in µs as the ratios panel writes it (written out here, not imported)."""
    return f"{ns / 1000:,.1f} µs"


# -- what the file is -----------------------------------------------------------------------------
def test_header_is_one_row_and_help_says_it_in_full(trace: Path, sample: Path, sql, tui):
    gpu = sql.scalar(trace, "SELECT name FROM TARGET_INFO_GPU ORDER BY id LIMIT 1")
    version = sql.scalar(trace, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'")
    kernels = sql.scalar(trace, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    calls = sql.scalar(trace, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    ranges = sql.scalar(trace, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)")

    async def body():
        async with tui(trace, size=(80, 24)) as ui:
            lines = ui.text().splitlines()
            rows = next(i for i, line in enumerate(lines) if line.strip().startswith("ranges "))  # the crumb
            assert rows == 1 if trace == sample else rows <= 2  # two only for a long file name
            header = " ".join(lines[:rows])
            assert trace.stem in header and gpu.removeprefix("NVIDIA ") in header
            assert f"{kernels:,} kernels" in header and f"{calls:,} API" in header and f"{ranges:,} ranges" in header
            assert header.rstrip().endswith("attr: process")
            await ui.pilot.resize_terminal(140, 60)  # room for the whole of `?`
            await ui.press("question_mark")
            text = ui.flat_text()
            assert f"file: {trace.name}" in text and f"nsys {version}" in text and gpu in text
            assert f"{kernels:,} kernels · {calls:,} CUDA API calls · {ranges:,} NVTX ranges" in text
            assert "attribution: process — main-thread ranges hold the kernels any thread launched" in text
            assert "main thread" in text and "frames" in text  # which thread frames the iterations

    run(body())


# -- the range tree -------------------------------------------------------------------------------
def test_navigate_expand_collapse_and_aggregate(trace: Path, sql, tui):
    steps = sql.scalar(trace, """SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                             WHERE e.eventType IN (59,60,70,71) AND coalesce(e.text, s.value) GLOB 'step_[0-9]*'
                             AND e.globalTid = (SELECT globalTid FROM NVTX_EVENTS WHERE eventType IN (59,70)
                                                GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1)""")

    async def body():
        async with tui(trace) as ui:
            tree = ui.screen.grid
            # the cursor starts on the steady-state iterations, the first row named step_N
            home = tree.cursor
            assert tree.ranges.node_at(home).label.endswith("step_N")
            assert not any(tree.ranges.node_at(i) and tree.ranges.node_at(i).label.endswith("step_N")
                           for i in range(home))
            first = tree.ranges.node_at(1)
            await ui.press("j")
            assert tree.cursor == home + 1
            await ui.press("k", "G")
            assert tree.cursor == tree.row_count - 1
            await ui.press("g", "j")
            rows = tree.row_count
            await ui.press("h")  # collapse the first range
            assert tree.row_count < rows and tree.ranges.node_at(1) is first
            await ui.press("l")
            assert tree.row_count == rows

            # Aggregated: step_N is one row ×N; instances: one row per step.
            agg = [n for n in tree.ranges.all_nodes() if n.label.endswith("step_N")]
            assert agg and max(n.instances for n in agg) == steps // len(agg)
            await ui.press("a")
            assert ui.screen.aggregated is False and ui.app.session.aggregated is False
            inst = [n for n in ui.screen.grid.ranges.all_nodes()
                    if n.label.split(":")[-1].startswith("step_") and n.label.split("_")[-1].isdigit()]
            assert len(inst) == steps
            assert "individual instances" in ui.text()
            await ui.press("a")
            assert ui.app.session.aggregated is True

    run(body())


def test_search_jumps_to_ranges_with_next_and_previous(trace: Path, tui):
    async def body():
        async with tui(trace) as ui:
            await ui.press("g", "slash")  # from the top (the cursor starts on step_N)
            await ui.type("backward")
            await ui.press("enter")
            tree = ui.screen.grid
            here = lambda: tree.ranges.node_at(tree.cursor)  # noqa: E731
            assert here().label == "backward" and here().parent.label == "warmup_N"
            await ui.press("n")
            assert here().label == "backward" and here().parent.label.endswith("step_N")
            await ui.press("N")
            assert here().parent.label == "warmup_N"
            await ui.press("N")  # wraps to the last match
            assert here().parent.label.endswith("step_N")
            await ui.press("slash")
            await ui.type("no_such_range")
            await ui.press("enter")
            assert "no range matches" in ui.text()

    run(body())


def test_a_key_typed_as_the_search_prompt_closes_is_the_grids(trace: Path, tui):
    """The prompt's enter hands the focus back to the grid at once, not after a refresh: in a real
    terminal an enter typed as soon as "match 1 of 1" shows went to the closed prompt and was lost."""
    from nsight_tui.tui.widgets.prompt_bar import PromptBar

    async def body():
        async with tui(trace) as ui:
            await ui.press("slash")
            await ui.type("backward")
            screen = ui.screen
            assert screen.focused is not screen.grid  # the prompt's input has it
            screen.on_prompt_bar_submitted(PromptBar.Submitted("search", "backward"))  # no await between
            assert screen.focused is screen.grid
            assert "for 'backward'" in str(screen.query_one("#status").render())

    run(body())


def test_typed_text_is_literal_never_markup(sample: Path, tui):
    """Brackets in a search or filter (`[/]`, `[bold]`) are characters: the app used to crash on them."""
    async def body():
        async with tui(sample) as ui:
            await ui.press("slash")
            await ui.type("[/]x")
            await ui.press("enter")
            assert "no range matches '[/]x'" in ui.text()
            await ui.press("2")
            await ui.until(lambda: ui.screen.table is not None, "the kernel table")
            await ui.press("slash")
            await ui.type("[bold]")
            await ui.press("enter")
            assert "no match for '[bold]'" in ui.text()
            await ui.press("f")
            await ui.type("[/]")
            await ui.press("enter")
            assert "filter '[/]': 0 of" in ui.text()
            assert ui.app.is_running

    run(body())


# -- kernels of a range, export ---------------------------------------------------------------------
def test_backward_kernels_exported_match_sql(trace: Path, sql, tui, md_tables, tmp_path: Path):
    want = sql.backward_kernels(trace, "process")
    assert want["count"] > 100  # process-wide: the GEMMs of backward, not one fill kernel

    async def body():
        async with tui(trace, export_dir=tmp_path) as ui:
            await ui.open_backward_kernels()
            screen = ui.screen
            assert type(screen).__name__ == "KernelsScreen"
            assert screen.node.path[-2:] == ("step_N", "backward") or screen.node.path[-1] == "backward"
            assert f"{want['count']:,} kernels" in ui.text()
            await ui.press("e")
            out = tmp_path / "nsight-tui_backward_kernels.md"
            await ui.until(out.exists, "the export written")
            assert f"exported {out.name}" in ui.flat_text()
            assert ui.app.clipboard == out.read_text()
            return out.read_text()

    text = run(body())
    head = text.split("###")[0]
    assert trace.name in head and "step_N/backward" in head and "attribution `process`" in head
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
    ratios = {r[0]: r for r in tables[1][1]}
    # launch overhead (the call's duration) and queue delay (kernel start - call start), apart
    assert ratios["launch overhead (median)"][1] == fmt_us(statistics.median(want["call_ns"]))
    assert ratios["queue delay / CPU lead (median)"][1] == fmt_us(statistics.median(want["queue_ns"]))


def test_ratios_panel_states_the_shares_basis_once(sample: Path, tui):
    async def body():
        for size in ((80, 24), (130, 40)):  # compact flow, and the column beside the table
            async with tui(sample, size=size) as ui:
                await ui.open_backward_kernels()
                panel = " ".join(str(ui.screen.query_one("#ratios").render()).split())
                assert panel.lower().count("kernel + memory op time in range") == 1, panel
                assert "GEMM" in panel and "launch overhead" in panel and "queue delay / CPU lead" in panel
                assert "launch latency" not in panel

    run(body())


def test_sort_and_filter_the_kernel_table(trace: Path, sql, tui, md_tables, tmp_path: Path):
    want = sql.backward_kernels(trace, "process")
    gemm_names = {n for n in want["names"] if "gemm" in n.lower()}
    assert gemm_names

    async def body():
        async with tui(trace, export_dir=tmp_path) as ui:
            await ui.open_backward_kernels()
            screen = ui.screen
            table = screen.table
            headers = [c.key for c in table.sortable()]
            await ui.press("s")  # the first column: kernel name, A-Z
            assert table.sort.key == headers[0] and not table.sort.descending
            assert screen.sort == table.sort  # the view state and the table agree
            names = [table.value(i, headers[0]) for i in range(len(table))]
            assert names == sorted(names, key=str.lower) or names == sorted(names)
            for _ in range(headers.index("total_ns")):
                await ui.press("s")
            assert table.sort.key == "total_ns" and table.sort.descending
            totals = [table.value(i, "total_ns") for i in range(len(table))]
            assert totals == sorted(totals, reverse=True)
            await ui.press("S")
            totals = [table.value(i, "total_ns") for i in range(len(table))]
            assert totals == sorted(totals)
            assert "Total▲" in ui.text()
            top = table.record(screen.grid.cursor)  # sorting keeps the selected row selected
            assert top["label"][:20] in ui.text()
            await ui.press("d")  # full demangled names
            assert screen.table.columns[0].key == "name"
            assert screen.table.record(screen.grid.cursor)["name"] == top["name"]
            assert top["name"][:20] in ui.text()
            await ui.press("d")
            table = screen.table

            await ui.press("f")
            await ui.type("gemm")
            await ui.press("enter")
            shown = {table.record(i)["name"] for i in range(len(table))}
            assert gemm_names <= shown
            for i in range(len(table)):
                rec = table.record(i)
                assert any("gemm" in str(rec[k]).lower() for k in ("name", "label", "short", "family"))
            assert f"filter 'gemm': {len(table)} of" in ui.text()
            await ui.press("e")
            out = tmp_path / "nsight-tui_backward_kernels.md"
            await ui.until(out.exists, "the export written")
            return out.read_text(), len(table)

    text, n = run(body())
    rows = kernel_rows(md_tables(text)[0])
    assert len(rows) == n
    totals = [int(r["Total (ns)"]) for r in rows]
    assert totals == sorted(totals)
    assert "filter 'gemm'" in text and "sorted by Total asc" in text


# -- launches and correlation ----------------------------------------------------------------------
def test_drill_from_kernel_to_launches_to_correlation(trace: Path, sql, tui, tmp_path: Path):
    want = sql.backward_kernels(trace, "process")
    first_launch = sql.first_launch_of(trace, want["top_name"])
    corr, api_name = first_launch["corr"], first_launch["api_name"]

    async def body():
        async with tui(trace, export_dir=tmp_path) as ui:
            await ui.open_backward_kernels()
            await ui.press("enter")  # the top kernel -> its launches
            screen = ui.screen
            assert type(screen).__name__ == "LaunchesScreen"
            table = screen.table
            assert len(table) == want["top_count"]
            first = table.record(0)
            assert int(first["corr"]) == corr and first["api_name"] == api_name
            assert int(first["overhead_ns"]) == first_launch["call_ns"]  # launch overhead: the call's duration
            assert int(first["queue_ns"]) == first_launch["queue_ns"] > 0  # queue delay: kernel start - call start
            text = ui.text()
            assert str(corr) in text and "cudaLaunchKernel" in text and "Overhead" in text and "Queue" in text
            await ui.until(lambda: "x" in table.value(0, "grid"), "grid/block read from the file")
            await ui.press("enter")  # -> correlation detail
            assert type(ui.screen).__name__ == "CorrelationScreen"
            text = await ui.until_text(f"API call: {api_name}")
            assert f"correlation ID {corr}" in text
            assert "backward" in text  # the NVTX stack open when it was launched
            assert "launch overhead (call duration)" in text and "queue delay / CPU lead" in text
            await ui.press("e")
            out = tmp_path / f"nsight-tui_corr_{corr}.md"
            await ui.until(out.exists, "the export written")
            assert api_name in out.read_text()
            await ui.press("escape", "escape")
            assert type(ui.screen).__name__ == "KernelsScreen"

    run(body())


def test_jump_to_a_correlation_id(trace: Path, sql, tui):
    con = sql.connect(trace)
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
        async with tui(trace) as ui:
            await ui.press("c")
            await ui.type(str(corr))
            await ui.press("enter")
            text = await ui.until_text(f"API call: {name}")
            assert "memcpy" in text
            await ui.press("c")
            await ui.type(str(missing))
            await ui.press("enter")
            await ui.until_text(f"no CUDA API call with correlation ID {missing}")

    run(body())


# -- attribution mode ------------------------------------------------------------------------------
def test_switching_attribution_rebuilds_the_view(trace: Path, sql, tui):
    process, nsys = sql.backward_kernels(trace, "process"), sql.backward_kernels(trace, "nsys")
    assert nsys["count"] < process["count"]

    async def body():
        async with tui(trace) as ui:
            await ui.open_backward_kernels()
            assert f"{process['count']:,} kernels" in ui.text()
            await ui.press("m")
            await ui.until(lambda: ui.app.session.attribution == "nsys", "the nsys model")
            await ui.settle()
            assert type(ui.screen).__name__ == "KernelsScreen"  # the same range, reopened
            text = ui.flat_text()
            assert "attr: nsys" in text  # the badge
            assert "backward ×" in text and f"· {nsys['count']:,} kernels" in text
            assert sum(ui.screen.table.frame.query("kind == 'kernel'")["instances"]) == nsys["count"]
            await ui.press("question_mark")  # the mode in full
            assert "attribution: nsys — nsys rule: kernels count only for ranges on the thread that launched" \
                in ui.flat_text()
            await ui.press("escape")
            await ui.press("m")
            await ui.until(lambda: ui.app.session.attribution == "process", "the process model")
            await ui.settle()
            assert f"{process['count']:,} kernels" in ui.text()

    run(body())


# -- exports never clobber ------------------------------------------------------------------------
def test_export_asks_before_replacing_a_file(sample: Path, tui, tmp_path: Path):
    async def body():
        async with tui(sample, export_dir=tmp_path) as ui:
            first = tmp_path / "nsight-tui_ranges.md"
            await ui.press("e")
            await ui.until(first.exists, "the export written")
            original = first.read_text()
            assert "| Thread | Range path |" in original
            first.write_text("mine\n")
            await ui.press("e")
            await ui.until(lambda: type(ui.screen).__name__ == "ExportConflict", "the overwrite question")
            await ui.press("c")  # cancel: nothing written
            assert first.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [first]
            await ui.press("e")
            await ui.until(lambda: type(ui.screen).__name__ == "ExportConflict", "the overwrite question")
            await ui.press("n")  # new name
            assert (tmp_path / "nsight-tui_ranges-2.md").read_text() == original
            assert first.read_text() == "mine\n"
            await ui.press("e")
            await ui.until(lambda: type(ui.screen).__name__ == "ExportConflict", "the overwrite question")
            await ui.press("o")  # overwrite, when asked for
            assert first.read_text() == original
            assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp" or p.name.startswith(".")]

    run(body())


# -- global views ---------------------------------------------------------------------------------
def test_global_kernel_and_api_summaries(trace: Path, sql, tui, md_tables, tmp_path: Path):
    ops = sum(sql.scalar(trace, f"SELECT count(*) FROM {t}") for t in
              ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    top_api = sql.scalar(trace, """SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                              GROUP BY r.nameId ORDER BY sum(r.end - r.start) DESC LIMIT 1""")
    top_api_total = sql.scalar(trace, """SELECT sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                                    GROUP BY r.nameId ORDER BY sum(r.end - r.start) DESC LIMIT 1""")

    async def body():
        async with tui(trace, export_dir=tmp_path) as ui:
            await ui.press("2")
            assert type(ui.screen).__name__ == "KernelsScreen" and ui.screen.node is None
            assert int(ui.screen.table.frame["instances"].sum()) == ops
            await ui.press("3")
            assert type(ui.screen).__name__ == "ApiScreen"
            out = tmp_path / "nsight-tui_api.md"
            await ui.press("e")
            await ui.until(out.exists, "the export written")
            await ui.press("1")
            assert type(ui.screen).__name__ == "RangesScreen"
            return out.read_text()

    text = run(body())
    headers, rows = md_tables(text)[0]
    assert headers[0] == "Name" and "Total Time (ns)" in headers  # in screen order
    first = dict(zip(headers, rows[0]))
    assert top_api.startswith(first["Name"]) and int(first["Total Time (ns)"]) == top_api_total
    oracle = trace.parent / "oracle" / f"{trace.stem}_cuda_api_sum.csv"
    if oracle.exists():  # NVIDIA's own numbers for this file
        with oracle.open() as fh:
            nv = list(csv.DictReader(fh))
        assert [r["Name"] for r in nv] == [dict(zip(headers, r))["Name"] for r in rows]
        assert [int(r["Total Time (ns)"]) for r in nv] == [int(dict(zip(headers, r))["Total Time (ns)"]) for r in rows]


# -- keys, help, palette, quit -------------------------------------------------------------------
def test_help_lists_every_key(sample: Path, tui):
    from textual.binding import Binding

    from nsight_tui.tui.app import help_classes, help_sections
    from nsight_tui.tui.views.help import HelpScreen
    from nsight_tui.tui.widgets.key_bar import key_text
    from nsight_tui.tui.views.launches import LaunchesScreen
    from nsight_tui.tui.views.modals import CorrelationPrompt

    listed = {keys for _, rows in help_sections() for keys, _ in rows}
    titles = [title for title, _ in help_sections()]
    assert len(titles) == len(set(titles)) and "Kernel tables" in titles and "Range tree (main view)" in titles
    sectioned = help_classes()
    for cls in (*sectioned, HelpScreen, CorrelationPrompt, LaunchesScreen):
        for b in cls.BINDINGS:
            assert isinstance(b, Binding) and b.description and b.id, f"{cls.__name__}: {b} lacks a description or id"
            if cls in sectioned:
                assert key_text(b.key) in listed, f"{b.key} of {cls.__name__} missing from help"
    for key in ("j", "k", "g", "G", "/", "n", "N", "e", "q", "a", "m", "c", "s", "S", "f", "?", "enter", "esc", "[",
                "]", "t", "d"):
        assert any(key in keys.split() for keys in listed), key

    async def body():
        async with tui(sample, size=(100, 60)) as ui:
            await ui.press("question_mark")
            text = ui.text()
            assert "nsight-tui keys" in text and "Search" in text and "Export the view" in text
            assert "Everywhere" in text and "Every view" in text  # the binding groups' titles
            await ui.press("escape")
            assert type(ui.screen).__name__ == "RangesScreen"

    run(body())


def test_command_palette_jumps_to_a_range(sample: Path, tui):
    async def body():
        async with tui(sample) as ui:
            await ui.press("ctrl+p")
            await ui.type("Range: step_N/backward")
            await ui.until_text("Range: step_N/backward ")  # the hit listed, not only the typed text
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "RangesScreen", "back on the tree")
            tree = ui.screen.grid
            node = tree.ranges.node_at(tree.cursor)
            assert node.label == "backward" and node.parent.label.endswith("step_N")

    run(body())


def test_q_quits_with_exit_code_zero(sample: Path, tui):
    async def body():
        async with tui(sample) as ui:
            await ui.open_backward_kernels()
            await ui.pilot.press("q")
            await ui.pilot.pause()
            return ui.app

    app = run(body())
    assert app.return_code == 0 and not app.is_running


@pytest.mark.parametrize("keys", [
    (),  # the range tree
    ("slash",),  # the search prompt open (an Input would take ctrl+c as copy)
    ("2",), ("3",), ("question_mark",), ("c",),  # kernels, API, help, the correlation prompt
    ("slash", "s", "t", "e", "p", "_", "N", "slash", "b", "a", "c", "k", "w", "a", "r", "d", "enter", "enter",
     "enter"),  # launches
])
def test_ctrl_c_quits_on_every_screen(sample: Path, tui, keys):
    async def body():
        async with tui(sample) as ui:
            for key in keys:
                await ui.press(key)
            screen = type(ui.screen).__name__
            await ui.pilot.press("ctrl+c")
            await ui.until(lambda: not ui.app.is_running, f"ctrl+c leaving {screen}", timeout=10)
            return ui.app

    app = run(body())
    assert app.return_code == 0


# -- several files ----------------------------------------------------------------------------------
def test_several_files_side_by_side_and_open_one(samples_dir: Path, tui):
    paths = [samples_dir / "small_ctx128.sqlite", plain(samples_dir / "small_ctx128_bwdranges.sqlite.xz")]

    async def body():
        async with tui(paths) as ui:
            screen = ui.screen
            assert type(screen).__name__ == "FilesScreen"
            assert len(screen.table) == 2
            text = ui.text()
            assert paths[0].name in text and paths[1].name in text and "bwd kern ms" in text
            await ui.press("j", "enter")
            await ui.until(lambda: ui.app.loaded, "the second file loaded")
            await ui.settle()
            assert type(ui.screen).__name__ == "RangesScreen" and ui.app.session.path == paths[1]
            await ui.press("escape")
            assert type(ui.screen).__name__ == "FilesScreen" and ui.app.session is None
            await ui.press("k", "enter")  # the other file
            await ui.until(lambda: ui.app.loaded and ui.app.session is not None, "the first file loaded")
            await ui.settle()
            assert ui.app.session.path == paths[0]
            await ui.press("escape", "j", "enter")  # back to the first one: no reload
            assert type(ui.screen).__name__ == "RangesScreen" and ui.app.session.path == paths[1]

    run(body())


def test_no_nvtx_trace_still_opens(shared_dir: Path, sql, tui):
    path = shared_dir / "mock.sqlite"
    if not path.exists():
        pytest.skip("mock.sqlite is in ../shared only")

    async def body():
        async with tui(path) as ui:
            assert "no NVTX ranges" in ui.text()
            assert "1 note (?)" in ui.text()  # the header's badge; `?` says what it is
            await ui.press("2")
            names = sql.scalar(path, "SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL")
            copies = sql.scalar(path, "SELECT count(DISTINCT copyKind) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
            assert len(ui.screen.table) == names + copies  # one row per kernel name and per copy kind
            await ui.press("question_mark")
            assert "note: no NVTX data" in ui.flat_text()

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
def test_unreadable_input_is_one_line_and_nonzero_before_any_screen(tmp_path: Path, repo_root: Path, kind, message):
    bad = _bad_input(tmp_path, kind)
    proc = subprocess.run([sys.executable, "-m", "nsight_tui", str(bad)], cwd=repo_root, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsight-tui: ") and message in lines[0]
    assert "\x1b[" not in proc.stdout  # the app never started drawing


def test_no_terminal_is_one_line_and_exit_2(sample: Path, tmp_path: Path, repo_root: Path):
    """`nsight-tui FILE </dev/null >out`: no escape codes in the file, no wait, one line."""
    out = tmp_path / "out"
    with out.open("w") as fh:
        proc = subprocess.run([sys.executable, "-m", "nsight_tui", str(sample)], cwd=repo_root, stdout=fh,
                              stderr=subprocess.PIPE, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no terminal" in lines[0] and "nsight-tui stats" in lines[0] and "report" in lines[0]
    assert out.read_bytes() == b""


def _without_config_mark(src: Path, dst: Path) -> Path:
    """A copy of `src` as a capture without the `nsight-tui:config` mark (an unusual name then
    leaves its model and ctx unknown)."""
    import shutil
    import sqlite3

    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    try:
        con.execute("""DELETE FROM NVTX_EVENTS WHERE coalesce(text, (SELECT value FROM StringIds WHERE id = textId))
                       LIKE 'nsight-tui:config %'""")
        con.commit()
    finally:
        con.close()
    return dst


def test_question_tables_show_every_file(sample: Path, sql, tui, tmp_path: Path):
    """Two files whose model and ctx cannot be told (no config mark, unusual names) next to
    two that can, one of another variant, and an OOM record: every file has a row in every
    question table, and the table says why the unplaced ones are where they are."""
    import json
    import shutil

    from nsight_tui.render import sweep

    shutil.copy(sample, tmp_path / "small_ctx128.sqlite")
    shutil.copy(sample, tmp_path / "2.7B_ctx128_bf16.sqlite")  # another variant: its own row, same tables
    for name in ("run A.sqlite", "gpt-final.sqlite"):
        copy = _without_config_mark(sample, tmp_path / name)
        assert sql.scalar(copy, "SELECT count(*) FROM StringIds s JOIN NVTX_EVENTS e ON e.textId = s.id "
                                "WHERE s.value LIKE 'nsight-tui:config %'") == 0
    (tmp_path / "medium_ctx128.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    paths = sorted(tmp_path.glob("*.sqlite"))

    async def body():
        async with tui(paths, size=(120, 36), export_dir=tmp_path) as ui:
            await ui.until(lambda: ui.screen.view is not None, "the files read")
            await ui.press("t")
            n = len(ui.screen.tables)
            assert n == len(sweep.QUESTIONS)  # one table per question: variants are rows, not tables
            for i in range(n):
                table = ui.screen.table
                labels = [table.value(r, "c0") for r in range(len(table))]
                assert labels == ["small", "medium", "2.7B [bf16]", "gpt-final.sqlite", "run A.sqlite"], (i, labels)
                text = ui.flat_text()
                assert "gpt-final.sqlite: model and context length unknown" in text
                assert "run A.sqlite: model and context length unknown" in text
                assert "ctx ?" in text and "OOM" in text
                await ui.press("right_square_bracket")
            await ui.press("e")
            await ui.until(lambda: list(tmp_path.glob("nsight-tui_question_*.md")), "the question table exported")
            body_md = next(tmp_path.glob("nsight-tui_question_*.md")).read_text()
            assert "| run A.sqlite |" in body_md and "model and context length unknown" in body_md

    run(body())


def test_sweep_question_tables_in_the_files_view(sample: Path, tui, tmp_path):
    """Several files: `t` shows the sweep report's tables (rows model, columns ctx, OOM marked)."""
    import json
    import shutil

    shutil.copy(sample, tmp_path / "small_ctx128.sqlite")
    shutil.copy(sample, tmp_path / "small_ctx256.sqlite")  # a second column (same trace, other name)
    (tmp_path / "medium_ctx128.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    paths = sorted(tmp_path.glob("*.sqlite"))

    async def body():
        async with tui(paths, size=(120, 36), export_dir=tmp_path) as ui:
            await ui.until_text("runs")
            assert "medium_ctx128.oom.json" in ui.text()  # the OOM run is listed with the files
            await ui.press("t")
            text = await ui.until_text("ctx 256")
            assert "question 1/" in text and "ctx 128" in text
            for _ in range(40):  # bounded so a renamed title fails instead of hanging
                if "Step time, NVTX / Python" in ui.text():
                    break
                await ui.press("right_square_bracket")
            assert "OOM" in ui.text()
            await ui.press("e")
            await ui.until(lambda: list(tmp_path.glob("nsight-tui_question_*.md")), "the question table exported")
            body_md = next(tmp_path.glob("nsight-tui_question_*.md")).read_text()
            assert "| medium |" in body_md and "OOM" in body_md

    run(body())


def test_kernel_detail_decodes_the_highlighted_gemm(trace: Path, sql, tui):
    """The top backward kernel's decoded name and description show under the table."""
    name = sql.backward_kernels(trace, "process")["top_name"]
    # read off the real name by hand: sm80 cuBLAS xmma FP32-FMA GEMMs, tile after "tilesize"
    assert "gemm" in name and "ffma" in name
    tile = name.split("tilesize")[1].split("_")[0]

    async def body():
        async with tui(trace) as ui:
            await ui.open_backward_kernels()
            text = await ui.until_text(f"tile {tile}")
            assert "no tensor cores" in text and "sm80" in text

    run(body())


def test_mode_switch_reopens_the_same_instance(sample: Path, sql, tui):
    """Instances view: after `m`, the kernels shown are still those of the instance that was
    open (here the last `backward`), not the first one with that name."""
    last_start = sql.scalar(sample, """SELECT max(e.start) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                                 WHERE e.eventType IN (59, 60) AND coalesce(e.text, s.value) = 'backward'""")

    async def body():
        async with tui(sample) as ui:
            await ui.press("a")  # individual instances
            await ui.press("g", "slash")  # from the top (the cursor starts on step_0)
            await ui.type("backward")
            await ui.press("enter", "N", "enter")  # last match, its kernels
            assert type(ui.screen).__name__ == "KernelsScreen" and ui.screen.node.start == last_start
            await ui.press("m")
            await ui.until(lambda: ui.app.session.attribution == "nsys", "the nsys model")
            await ui.settle()
            assert type(ui.screen).__name__ == "KernelsScreen" and ui.screen.node.start == last_start

    run(body())


# -- 80x24: one-row header, no number cut -----------------------------------------------------------
def numbers_on_screen_are_whole(ui) -> int:
    """Every right-aligned (number) cell of the grid on screen is drawn whole, in its row's line.
    Returns how many cells were checked."""
    from nsight_tui.tui.widgets.grid import DataGrid

    grid = ui.screen.query_one(DataGrid)
    lines = ui.text().splitlines()
    header = grid.content_region.y  # the grid's header line on screen
    first = int(grid.scroll_offset.y)
    checked = 0
    for row in range(first, min(first + grid.page_rows, len(grid.source))):
        line = lines[header + 1 + row - first]
        spans = getattr(grid.source, "spans", None)
        if spans is not None and spans(row):
            continue
        for col, width in grid._layout:
            if col.align == "right":
                value = grid.source.cell(row, col)
                assert len(value) <= width and "…" not in value, (col.header, value, width)
                assert value in line, (col.header, value, line)
                checked += 1
    return checked


VIEWS_80x24 = {
    "ranges": (), "kernels": ("backward",), "launches": ("backward", "enter"),
    "correlation": ("backward", "enter", "enter"), "api": ("3",), "all kernels": ("2",),
}


@pytest.mark.parametrize("view", list(VIEWS_80x24))
def test_80x24_one_row_header_and_no_number_cut(sample: Path, tui, view):
    async def body():
        async with tui(sample, size=(80, 24)) as ui:
            for key in VIEWS_80x24[view]:
                if key == "backward":
                    await ui.open_backward_kernels()
                else:
                    await ui.press(key)
            await ui.until(lambda: getattr(ui.screen, "table", True) is not None, "the table")
            await ui.settle()
            lines = ui.text().splitlines()
            assert lines[0].rstrip().endswith("attr: process") and sample.stem in lines[0]
            assert "kernels" not in lines[1] or "kernels of" in lines[1]  # line 2 is the view's title
            assert numbers_on_screen_are_whole(ui) > 0

    run(body())


def test_files_and_questions_at_80x24_keep_every_number(samples_dir: Path, tui, tmp_path: Path):
    import shutil

    for name in ("small_ctx128.sqlite", "small_ctx128_fwd.sqlite.xz"):
        shutil.copyfile(plain(samples_dir / name), tmp_path / name.removesuffix(".xz"))

    async def body():
        async with tui(sorted(tmp_path.glob("*.sqlite")), size=(80, 24)) as ui:
            await ui.until(lambda: ui.screen.view is not None, "the files read")
            assert numbers_on_screen_are_whole(ui) > 0
            await ui.press("t")
            for _ in range(len(ui.screen.tables)):
                numbers_on_screen_are_whole(ui)
                await ui.press("right_square_bracket")

    run(body())


# -- the file changing underneath ----------------------------------------------------------------------
def test_truncated_profile_fails_a_lazy_read_in_one_line(sample: Path, tui, tmp_path: Path):
    """Truncate the profile while it is open, then open a launch list: grid/block cannot be read;
    the status line says so in one line and the app keeps going (it used to die in render_line)."""
    import shutil
    import threading

    from nsight_tui.parsers.read.load import Trace

    path = Path(shutil.copy(sample, tmp_path / "shrinking.sqlite"))
    drawing_reads: list[str] = []
    real = Trace.op_details

    def op_details(self, ops):  # who reads the file: never the UI thread (where rows are drawn)
        drawing_reads.append(threading.current_thread().name)
        return real(self, ops)

    async def body():
        async with tui(path) as ui:
            with path.open("r+b") as fh:
                fh.truncate(path.stat().st_size // 3)
            await ui.open_backward_kernels()
            await ui.press("enter")  # a launch list: its grid/block are read from the file
            await ui.until_text("could not read grid/block from the file")
            status = [line for line in ui.text().splitlines() if "could not read" in line]
            assert len(status) == 1
            assert ui.screen.table.value(0, "grid") == "?"
            await ui.press("j", "j", "escape")  # still answering keys
            assert type(ui.screen).__name__ == "KernelsScreen" and ui.app.is_running

    mp = pytest.MonkeyPatch()
    mp.setattr(Trace, "op_details", op_details)
    try:
        run(body())
    finally:
        mp.undo()
    assert drawing_reads and threading.main_thread().name not in drawing_reads


def test_several_files_view_says_its_figures_are_kernel_time_per_step(tui, sql):
    """The side-by-side table's backward figure is the kernel time (sum of kernel durations) of
    step_N/backward per step, and the screen says so (it read `bwd ms/step`, which could be the
    CPU span, the GPU time or the kernel sum). Truth: SQL over the export."""
    from conftest import _BACKWARD_CALLS, _KERNELS_OF_HITS, SAMPLES

    paths = [SAMPLES / "small_ctx128.sqlite", plain(SAMPLES / "small_ctx128_fused.sqlite.xz")]
    want = {}
    for path in paths:
        con = sql.connect(path)
        try:
            total = con.execute(_BACKWARD_CALLS + f"SELECT sum(k.end - k.start) {_KERNELS_OF_HITS}",
                                {"process": 1}).fetchone()[0]
            steps = con.execute(_BACKWARD_CALLS + "SELECT count(*) FROM bwd", {"process": 1}).fetchone()[0]
        finally:
            con.close()
        want[path.name] = total / steps / 1e6

    async def body():
        async with tui(paths, size=(120, 30)) as ui:
            screen = ui.screen
            headers = screen.view.headers
            col = f"c{headers.index('bwd kern ms')}"
            got = {row.c0: getattr(row, col) for row in screen.view.frame.itertuples()}
            words = " ".join(ui.text().split())
            assert "bwd kern ms" in words and "kern ms: kernel time per step (sum of durations)" in words
            return got

    got = run(body())
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=0.0005)  # shown to the µs


def test_launches_view_shows_the_api_call_whole_at_120_columns(sample: Path, sql, tui):
    """`cudaLaunchKernelExC_v11060` (SQL: the call that launched a backward kernel; nsys keeps its
    5-digit version tag) whole at 120 columns: the Thread column kept 20 and cut it."""
    trace = sample
    ex_names = set(sql.column(trace, """SELECT DISTINCT d.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds s ON s.id = r.nameId JOIN StringIds d ON d.id = k.demangledName
        WHERE s.value = 'cudaLaunchKernelExC_v11060'"""))
    assert ex_names

    async def body():
        async with tui(trace, size=(120, 34)) as ui:
            await ui.open_backward_kernels()
            table = ui.screen.table
            row = next(i for i in range(len(table)) if table.record(i)["name"] in ex_names)
            for _ in range(row):
                await ui.press("j")
            await ui.press("enter")
            assert type(ui.screen).__name__ == "LaunchesScreen"
            text = ui.text()
            assert "cudaLaunchKernelExC_v11060 " in text and "cudaLaunchKernelEx" + "C_…" not in text

    run(body())
