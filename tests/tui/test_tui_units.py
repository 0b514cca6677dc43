"""The TUI's non-widget parts: the table model (sort, filter, search, export), the range tree
rows (expand, collapse, reveal, search), export naming and no-clobber, the virtual grid's
column layout (numbers never cut), the header's fitting, the ratios' caption, lazy launch
details. Expected values are written out by hand."""
from __future__ import annotations

import sqlite3

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.render import numbers
from nsight_tui.tui import export
from nsight_tui.tui.viewmodels.launches import api_name
from nsight_tui.tui.table_model import Column, SortState, TableModel, ViewText
from nsight_tui.parsers.model.ranges import range_model


def small_table() -> TableModel:
    frame = pd.DataFrame({
        "name": ["gemm_a", "relu", "GEMM_b", "softmax", "copy"],
        "total": [30, 5, 50, 5, np.nan],
        "count": [3, 10, 2, 1, 4],
    })
    cols = [Column("name", "Name", None, "left", text=True), Column("total", "Total", 8, fmt=numbers.duration),
            Column("count", "Count", 6)]
    return TableModel(frame, cols)


def names(t: TableModel) -> list[str]:
    return [t.value(i, "name") for i in range(len(t))]


def test_sort_cycles_columns_numbers_largest_first_blanks_last():
    t = small_table()
    assert names(t) == ["gemm_a", "relu", "GEMM_b", "softmax", "copy"]  # frame order until sorted
    t.cycle_sort()
    assert t.sort == SortState("name", False)
    assert names(t) == ["GEMM_b", "copy", "gemm_a", "relu", "softmax"]  # code-point order, stable
    t.cycle_sort()
    assert t.sort == SortState("total", True)
    assert names(t) == ["GEMM_b", "gemm_a", "relu", "softmax", "copy"]  # ties keep frame order; NaN last
    t.reverse_sort()
    assert names(t) == ["relu", "softmax", "gemm_a", "GEMM_b", "copy"]  # NaN still last
    t.cycle_sort()
    t.cycle_sort()
    assert t.sort.key == "name"  # wraps around


def test_filter_any_case_then_search_wraps():
    t = small_table()
    t.set_filter("GeMm")
    assert names(t) == ["gemm_a", "GEMM_b"] and t.total_rows == 5
    assert "filter 'GeMm': 2 of 5 rows" in t.describe()
    t.set_filter("")
    assert len(t) == 5
    assert t.find("o", start=0) == 3  # softmax
    assert t.find("o", start=3) == 4  # copy
    assert t.find("o", start=4) == 3  # wraps
    assert t.find("o", start=3, backwards=True) == 4  # wraps backwards
    assert t.find("zzz", start=0) is None


def test_export_rows_are_exact_and_in_view_order():
    t = small_table()
    t.set_sort("count", descending=True)
    t.set_filter("m")  # gemm_a, GEMM_b, softmax; not relu or copy
    headers, rows = t.export_rows()
    assert headers == ["Name", "Total", "Count"]
    assert rows == [["gemm_a", 30.0, 3], ["GEMM_b", 50.0, 2], ["softmax", 5.0, 1]]
    assert all(type(v) in (str, float, int) for r in rows for v in r)
    assert t.position(0) == 0 and t.row_of_position(3) == 2


def test_formats():
    assert numbers.duration(850) == "850 ns" and numbers.duration(12_345) == "12.3 µs"
    assert numbers.duration(3_180_000) == "3.18 ms" and numbers.duration(9_800_000_000) == "9.80 s"
    assert numbers.percent(0.2371) == "23.7%" and numbers.count(2170) == "2,170"
    assert numbers.duration(None) == "–"  # missing: one way everywhere
    assert api_name("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync"
    assert api_name("cudaLaunchKernelExC_v11060") == "cudaLaunchKernelExC_v11060"  # as nsys shows it


def test_export_names_and_never_clobbers(tmp_path: Path):
    view = ViewText("trainer:step_N/backward kernels", ["title", "file x"], "| a |\n|---|\n| 1 |\n")
    path = export.target(tmp_path, view)
    assert path.name == "nsight-tui_trainer_step_N_backward_kernels.md"
    text = export.render(view)
    assert text.startswith("# title\n\n- file x\n\n| a |")
    export.write(path, text)
    with pytest.raises(TraceError):
        export.write(path, "other")
    assert path.read_text() == text
    assert export.free_name(path).name == "nsight-tui_trainer_step_N_backward_kernels-2.md"


# -- the range tree rows ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model(sample_once):
    from nsight_tui.parsers.read.load import load_trace

    return range_model(load_trace(sample_once), "process")


def test_tree_expand_collapse_remembers_open_children(model):
    from nsight_tui.tui.tree_source import RangeTreeSource

    src = RangeTreeSource(model.aggregated_groups, True)
    assert len(src) == len(model.aggregated_groups) and src.spans(0)
    src.expand(0)
    roots = len(model.aggregated_groups[0].roots)
    assert len(src) == len(model.aggregated_groups) + roots
    first = src.node_at(1)
    src.expand(1)
    opened = len(src)
    assert opened == len(model.aggregated_groups) + roots + len(first.children)
    src.collapse(0)
    assert len(src) == len(model.aggregated_groups)
    src.expand(0)
    assert len(src) == opened  # the child opened before opens again
    assert src.parent_row(2) == 1 and src.parent_row(1) == 0
    assert src.label(src.rows[1]).startswith("  ▾ ")


def test_tree_reveal_and_search_by_path(model):
    from nsight_tui.tui.tree_source import RangeTreeSource, node_key

    src = RangeTreeSource(model.aggregated_groups, True)
    hits = src.matches("step_N/backward")
    assert len(hits) == 1 and node_key(hits[0])[-2:] == ("step_N", "backward")
    row = src.reveal(hits[0])
    assert src.node_at(row) is hits[0]
    assert [n.label for n in src.matches("BACKWARD")] == ["backward", "backward"]  # warmup, then step
    gtid = src.group_at(row).gtid
    assert src.find_key(gtid, node_key(hits[0])) is hits[0]
    # The same range in the instance tree: the first step's backward.
    inst = RangeTreeSource(model.thread_groups, False)
    node = inst.find_key(gtid, node_key(hits[0]))
    assert node.label == "backward" and node.parent.label == "step_0"


def test_tree_export_lists_the_visible_ranges(model):
    from nsight_tui.tui.tree_source import RangeTreeSource

    src = RangeTreeSource(model.aggregated_groups, True)
    src.expand_default()
    headers, rows = src.export_rows()
    assert headers[:2] == ["Thread", "Range path"]
    visible = [r for r in src.rows if not r.is_group]
    assert len(rows) == len(visible)
    assert len(rows) == len(visible)
    # the first range row, against SQL on the export: both warmup iterations, their summed time
    con = sqlite3.connect(f"file:{model.trace.path}?mode=ro", uri=True)
    n, total = con.execute(
        "SELECT count(*), sum(e.end - e.start) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType IN (59, 60) AND coalesce(e.text, s.value) GLOB 'warmup_[0-9]*'").fetchone()
    con.close()
    assert rows[0][1].endswith("warmup_N") and rows[0][2:4] == [n, total]


# -- the grid's layout -----------------------------------------------------------------------------
def test_grid_drops_least_important_columns_when_narrow():
    from nsight_tui.tui.widgets.grid import DataGrid

    t = small_table()
    t.columns = [Column("name", "Name", None, "left", min_width=10), Column("total", "Total", 8, priority=9),
                 Column("count", "Count", 6, priority=1)]
    grid = DataGrid(t)
    wide = grid._columns_for(40)
    assert [c.key for c, _ in wide] == ["name", "total", "count"] and wide[0][1] == 40 - 8 - 6 - 2
    grid._layout_width = -1
    narrow = grid._columns_for(20)
    assert [c.key for c, _ in narrow] == ["name", "total"] and narrow[0][1] == 20 - 8 - 1


def test_grid_widens_a_number_column_or_drops_it_never_cuts():
    from nsight_tui.tui.widgets.grid import DataGrid

    frame = pd.DataFrame({"name": ["a_kernel_name"], "total": [123_456_789_012_345]})
    t = TableModel(frame, [Column("name", "Name", None, "left", min_width=10),
                           Column("total", "Total", 6, fmt=numbers.count, priority=9)])
    grid = DataGrid(t)
    assert grid._measure(0, 1)  # "123,456,789,012,345" (19 characters) is wider than 6
    layout = dict((c.key, w) for c, w in grid._columns_for(40))
    assert layout["total"] == 19 and layout["name"] == 40 - 19 - 1
    grid._layout_width = -1
    squeezed = dict((c.key, w) for c, w in grid._columns_for(26))  # the name shrinks first...
    assert squeezed["total"] == 19 and squeezed["name"] == 26 - 19 - 1
    grid._layout_width = -1
    assert [c.key for c, _ in grid._columns_for(20)] == ["name"]  # ...then the number goes, whole


def header_info(name: str, **kw):
    from nsight_tui.tui.viewmodels.header import HeaderInfo

    base = dict(file_name=name, gpus=("NVIDIA H200",), nsys_version="2025.3.2.0", span_ns=11_030_000_000,
                kernels=3899, api_calls=8605, ranges=260, load_seconds=0.27, attribution="process",
                mode_help="process-wide: ...")
    return HeaderInfo(**{**base, **kw})


def test_header_fits_one_row_at_80_columns_two_for_long_names():
    from nsight_tui.tui.viewmodels.header import fit

    rows = fit(header_info("small_ctx128.sqlite"), 78)  # 80 columns less the padding
    assert len(rows) == 1 and rows[0].badge == "attr: process"
    assert rows[0].text == "small_ctx128  H200  3,899 kernels  8,605 API  260 ranges  0.27s"
    assert len(rows[0].text) + 2 + len(rows[0].badge) <= 78
    wide = fit(header_info("small_ctx128.sqlite"), 198)
    assert wide[0].text == ("small_ctx128.sqlite · NVIDIA H200 · nsys 2025.3.2.0 · span 11.03 s · 3,899 kernels · "
                            "8,605 API calls · 260 ranges · loaded in 0.27s")
    long = fit(header_info("gpt2-2.7B_ctx1024_bf16_flash_attention_run3.sqlite"), 78)
    assert [r.text for r in long] == ["gpt2-2.7B_ctx1024_bf16_flash_attention_run3.sqlite",
                                      "H200  3,899 kernels  8,605 API  260 ranges  0.27s"]
    assert long[1].badge == "attr: process"
    noted = fit(header_info("small_ctx128.sqlite", notes=("no NVTX data",)), 120)
    assert noted[0].badge == "attr: process · 1 note (?)"


def test_ratios_state_the_shared_basis_once():
    from nsight_tui.parsers.analyses.ratios import Ratio
    from nsight_tui.tui.viewmodels.ratios import panel, short_label

    basis = "kernel + memory op time in range"
    v = panel([Ratio("GEMM (matmul) share", 0.8, "80.0%", basis), Ratio("Softmax share", 0.1, "10.0%", basis),
               Ratio("GPU busy / CPU time", 0.5, "50.0%", "CPU (NVTX) range time")])
    assert v.caption == f"shares of {basis}"
    assert [r.label for r in v.shared] == ["GEMM (matmul) share", "Softmax share"]
    assert [r.label for r in v.own] == ["GPU busy / CPU time"]
    assert short_label("GEMM (matmul) share") == "GEMM" and short_label("launch overhead (median)") == "launch overhead"
    alone = panel([Ratio("kernels", 3.0, "3", "count")])
    assert alone.caption == "" and len(alone.own) == 1


def test_launch_details_are_never_read_while_drawing():
    """`value` (what the grid draws) never reads the file; `read_details` (a worker) does, and a
    failed read turns the unread cells to `?` instead of raising while drawing."""
    from nsight_tui.tui.viewmodels.launches import PENDING, UNREADABLE, LaunchTable, launch_columns

    class Trace:
        reads = 0
        fail = False

        def op_details(self, ops):
            Trace.reads += 1
            if Trace.fail:
                raise sqlite3.DatabaseError("database disk image is malformed")
            return pd.DataFrame({"grid": [f"{o}x1x1" for o in ops], "block": ["128x1x1"] * len(ops)}, index=ops)

    frame = pd.DataFrame({"op": [10, 11, 12], "start": [1, 2, 3]})
    table = LaunchTable(frame, launch_columns(), Trace())
    assert [table.value(r, "grid") for r in range(3)] == [PENDING] * 3 and Trace.reads == 0
    assert table.missing(0, 2).tolist() == [10, 11]
    table.read_details(table.missing(0, 2))
    assert [table.value(r, "grid") for r in range(3)] == ["10x1x1", "11x1x1", PENDING] and Trace.reads == 1
    Trace.fail = True
    with pytest.raises(sqlite3.DatabaseError):
        table.read_details(table.missing(0, 3))
    assert table.value(2, "block") == UNREADABLE and table.value(0, "block") == "128x1x1"
    assert "malformed" in table.failed and len(table.missing(0, 3)) == 0  # no retry loop
