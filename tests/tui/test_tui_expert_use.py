"""What an expert user tripped on, each on a real trace: kernel labels distinct, where enter leads,
notices, totals or per instance said, the pace of every iteration.

Expected values come from SQL over the export or a hand formula, never from the code's output."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from helpers import step_sql
from conftest import FINDINGS, SAMPLES, SHARED, sample_traces, trace_stem
from helpers.xz_samples import XZ_TRACE, plain
from helpers import cli_process

COMMITTED = sample_traces() + sorted(FINDINGS.glob(f"*{XZ_TRACE}"))
EVERY = COMMITTED + (sorted(SHARED.glob("*.sqlite")) if SHARED.exists() else [])


def finding_sample(stem: str) -> Path:
    """sample_traces/findings/STEM.sqlite.xz as a plain export."""
    return plain(FINDINGS / f"{stem}{XZ_TRACE}")


def _sql(path: Path, query: str, *args) -> list[tuple]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def _kernel_names(path: Path) -> set[str]:
    try:
        return {r[0] for r in _sql(path, "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                         "JOIN StringIds s ON s.id = k.demangledName")}
    except sqlite3.OperationalError:  # no kernel table
        return set()


# -- 1. kernel short names tell kernels apart ---------------------------------------------------
@pytest.mark.parametrize("path", EVERY, ids=trace_stem)
def test_every_kernel_table_has_distinct_labels(path):
    """The whole trace's kernel table and each top range's: distinct names, distinct labels; and
    every distinct kernel name of the export (by SQL) is a row."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.tui.session import Session
    from nsight_tui.parsers.kernels.kernel_names import table_name
    from nsight_tui.tui.viewmodels.kernels import range_kernels, trace_kernels

    path = plain(path)
    session = Session(path, load_trace(path), "process", 0.0)
    model = session.model
    views = [trace_kernels(model)] + [range_kernels(model, n) for g in model.aggregated_groups for r in g.roots for n in [r, *r.children]]
    for view in views:
        frame = view.summary
        assert frame["name"].is_unique
        assert frame["label"].is_unique, frame[frame["label"].duplicated(keep=False)][["name", "label"]]
        # a label that needed a tag says how it differs
        tagged = [note for name, label, note in zip(frame["name"], frame["label"], frame["label_note"])
                  if label != table_name(name)]
        assert all("same kernel as" in note or "instantiation" in note for note in tagged)
    assert _kernel_names(path) <= set(views[0].summary["name"])


def test_labels_carry_functor_and_precision():
    """The parts that tell the issue's kernels apart, read from the names by hand."""
    from nsight_tui.parsers.kernels.kernel_names import distinct_labels, table_name

    fill = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<{}>, "
            "std::array<char *, (unsigned long)1>>(int, T2, T3)")
    assert table_name(fill.format("float")) == "FillFunctor f32 · vectorized_elementwise"
    assert table_name(fill.format("long")) == "FillFunctor i64 · vectorized_elementwise"
    mul = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::{}<float, float, float, "
           "at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long){}>>(int, T2, T3)")
    labels, notes = distinct_labels([mul.format("BUnaryFunctor", 2), mul.format("BinaryFunctor", 3)])
    assert labels == ["MulFunctor f32 BUnary · vectorized_elementwise", "MulFunctor f32 Binary · vectorized_elementwise"]
    assert "BUnaryFunctor" in notes[0] and "BinaryFunctor" in notes[1]
    # fp32 data multiplied as tf32 on tensor cores: the label says tf32
    tf32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_{}_kernel__5x_cublas"
    labels, _ = distinct_labels([tf32.format("on"), tf32.format("off")])
    assert labels == ["cuBLAS gemm nt 128x128x32 tf32 segment_k_on", "cuBLAS gemm nt 128x128x32 tf32 segment_k_off"]
    soft = "void <unnamed>::softmax_warp_forward<float, float, float, (int){}, (bool)0, (bool)0>(T2 *, const T1 *, int)"
    labels, notes = distinct_labels([soft.format(6), soft.format(7)])
    assert labels == ["softmax_warp_forward f32 #1", "softmax_warp_forward f32 #2"]
    assert "(int)6" in notes[0] and "(int)7" in notes[1]


def test_kernel_table_rows_distinct_at_80_columns(tui):
    """At 80×24 the foreach-off trace's kernel summary (three MulFunctor kernels, two copies)
    shows every row's Kernel cell differently, as cut on screen."""
    asyncio.run(_kernel_table_rows_distinct(tui))


async def _kernel_table_rows_distinct(tui):
    path = finding_sample("small_ctx128_foreach-off")
    async with tui(path, size=(80, 24)) as ui:
        await ui.press("2")
        await ui.until(lambda: ui.screen.table is not None and len(ui.screen.table) > 0, "kernel rows")
        from nsight_tui.tui.widgets.grid import fit

        grid, table = ui.screen.grid, ui.screen.table
        width = dict((c.key, w) for c, w in grid._columns_for(grid.line_width))["label"]
        assert width < 40  # the narrow screen's cut
        cells = [fit(str(table.value(row, "label")), width, "left") for row in range(len(table))]
        assert len(cells) == len(set(cells)), sorted(c for c in cells if cells.count(c) > 1)
        assert len(_kernel_names(path)) <= len(table)
        # what the screen shows, row by row, is one of those cells
        first = ui.text().splitlines()[4]
        assert first.startswith(cells[0].rstrip()) or cells[0].rstrip() in first


# -- 2. `b`: enter on a part opens its backward kernels; totals say they are totals ------------
AGNVTX = plain(SAMPLES / "small_ctx128_agnvtx.sqlite.xz")

# Kernels launched (by the correlation's API call) inside a `backward` range of a steady-state
# step, on any thread of the process: the names a backward part's table may hold.
_BACKWARD_KERNEL_NAMES = """
WITH r AS (SELECT e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name
           FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL),
b AS (SELECT * FROM r WHERE name = 'backward' AND EXISTS (
        SELECT 1 FROM r p WHERE p.tid = r.tid AND p.name GLOB 'step_[0-9]*' AND p.start <= r.start AND p.end >= r.end))
SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = k.correlationId AND (c.globalTid >> 24) = (k.globalPid >> 24)
JOIN b ON (c.globalTid >> 24) = (b.tid >> 24) AND c.start >= b.start AND c.start <= b.end
JOIN StringIds s ON s.id = k.demangledName
"""


def test_backward_part_enter_opens_its_kernels(tui):
    asyncio.run(_backward_part_enter(tui))


async def _backward_part_enter(tui):
    steps = _sql(AGNVTX, "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                         "WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.eventType IN (59, 60, 70, 71)")[0][0]
    async with tui(AGNVTX, size=(80, 24)) as ui:
        await ui.press("b")
        await ui.until(lambda: ui.screen.table is not None and len(ui.screen.table) > 2, "the parts table")
        # every figure says what it is: totals over the steps, and a per-iteration column
        assert f"total ×{steps} iterations" in ui.flat_text()
        assert "Fwd tot" in ui.text() and "Bwd/it" in ui.text()
        table = ui.screen.table
        row = next(r for r in range(len(table)) if str(table.value(r, "path")).endswith("computing_attention_scores"))
        bwd_total, bwd_per = int(table.value(row, "bwd")), float(table.value(row, "bwd_per"))
        assert bwd_per == pytest.approx(bwd_total / steps)
        for _ in range(row):
            await ui.press("down")
        await ui.press("enter")
        await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.table is not None
                       and len(ui.screen.table) > 0, "the part's kernel table")
        text = ui.flat_text()
        assert "kernels of backward of computing_attention_scores" in text
        frame = ui.screen.view.summary
        assert int(frame["total_ns"].sum()) == bwd_total  # the row's figure, kernel by kernel
        names = {r[0] for r in _sql(AGNVTX, _BACKWARD_KERNEL_NAMES)}
        assert set(frame["name"]) <= names and len(frame) >= 2
        await ui.press("escape")
        assert type(ui.screen).__name__ == "BackwardPartsScreen"


# -- 8. the cursor opens on the iteration; notices hide nothing ----------------------------------
@pytest.mark.parametrize("name", ["small_ctx128_agnvtx", "small_ctx128_emitnvtx"])
def test_op_range_capture_opens_on_the_iteration(tui, name):
    """Autograd-nvtx / emit_nvtx captures: the autograd thread has the most ranges (taken for the
    main one before the GPU work is read); the cursor still opens on step_N once loaded."""
    path = plain(SAMPLES / f"{name}.sqlite.xz")
    steps = _sql(path, "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                       "WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.eventType IN (59, 60, 70, 71)")[0][0]

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            node = ui.screen.grid.ranges.node_at(ui.screen.grid.cursor)
            assert node is not None and node.name.rsplit(":", 1)[-1] == "step_N" and node.instances == steps
            assert f"step_N ×{steps}" in ui.flat_text()

    asyncio.run(run())


def test_notices_cover_no_rows(tui):
    """After `m` the attribution notice is on the status line; no toast lies over the tree."""
    async def run():
        async with tui(SAMPLES / "small_ctx128.sqlite", size=(80, 24)) as ui:
            rows_before = ui.text().splitlines()[3:15]
            await ui.press("m")
            await ui.until(lambda: "attribution: nsys" in ui.flat_text(), "the notice")
            assert not list(ui.app.screen.query("Toast"))
            status = ui.text().splitlines()[-2]
            assert "attribution: nsys" in status
            # the tree rows are whole (the row labels where they were; numbers may change by mode)
            rows_after = ui.text().splitlines()[3:15]
            assert [r[:30] for r in rows_after] == [r[:30] for r in rows_before]

    asyncio.run(run())


# -- 4. ratio rows: nothing unknown shown as "–"; verdicts as words; counts as integers -----------
def test_ratios_leave_out_the_unknown_and_say_why_once(tui):
    """A trace with no FLOP/byte counts (edge_deep: no config mark, no --flops): the ratios under
    step_N's kernels show no "–" and one row saying what the roofline figures need."""
    path = plain(SAMPLES / "edge_deep.sqlite.xz")

    async def run():
        async with tui(path, size=(120, 40)) as ui:
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.view is not None,
                           "step_N's kernels")
            panel = [r for r in ui.screen.view.ratios.all]
            assert all(r.value is not None for r in panel), [r.label for r in panel if r.value is None]
            text = ui.flat_text()
            assert text.count("needs FLOP/byte counts") == 1 and "--flops" in text
            assert "achieved FLOP/s" not in text and "unknown" not in text
            right = [line.split("│", 1)[1] for line in ui.text().splitlines() if "│" in line]
            assert not any(" –" in line for line in right), right

    asyncio.run(run())


def test_verdict_without_a_roof_is_a_word():
    """The DDP sample's first range (NCCL init, no FLOPs): its verdict reads as text, not a label
    with "–"."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.render.numbers import quantity
    from nsight_tui.tui.viewmodels import roofline as roofline_vm
    from nsight_tui.tui.session import Session

    path = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
    session = Session(path, load_trace(path), "process", 0.0)
    node = next(g for g in session.model.aggregated_groups if g.is_main).roots[0]
    shown = {r.label: quantity(r.value, r.unit) for r in roofline_vm.ratios(session, node)}
    assert "–" not in shown.values()
    assert shown.get("bound") in ("latency/launch-bound", "memory-bound", "compute-bound")


def test_counts_in_findings_are_integers():
    """kernels_per_step is a mean count (kernels / steps): shown as a whole number with
    separators, never `1.87e+03` (the findings view and the report use this text)."""
    from nsight_tui.render.findings import evidence_text

    assert evidence_text({"evidence": {"kernels_per_step": 1866.67, "gpu_busy_share": 0.306}}) == \
        "kernels_per_step 1,867; gpu_busy_share 0.306"
    assert evidence_text({"evidence": {"calls_per_step": 2.0}}) == "calls_per_step 2"


# -- 3. per-instance figures in the tree; every figure says which it is --------------------------
_STEP_DURATIONS = ("SELECT e.end - e.start FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                   "WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.eventType IN (59, 60, 70, 71) "
                   "AND e.end IS NOT NULL")


def test_tree_per_instance_toggle(tui):
    """`i`: step_N's CPU figure becomes the mean step range (SQL), the headers say per instance;
    the totals view says total ×N, and the detail gives both."""
    path = SAMPLES / "small_ctx128.sqlite"
    durations = [r[0] for r in _sql(path, _STEP_DURATIONS)]
    n = len(durations)

    async def run():
        from nsight_tui.render import numbers

        async with tui(path, size=(80, 24)) as ui:
            assert "per step" in ui.flat_text()  # a capture with steps opens per step
            await ui.press("i")  # then the totals
            text = ui.flat_text()
            assert "total ×N · i: per instance" in text
            assert f"total ×{n}: CPU {numbers.duration(sum(durations))}" in text  # the detail, step_N
            assert f"per instance: CPU {numbers.duration(sum(durations) / n)}" in text
            await ui.press("i")
            tree = ui.screen.grid.ranges
            row = ui.screen.grid.cursor
            node = tree.node_at(row)
            assert node.name.endswith("step_N")
            assert tree.value(tree.rows[row], "cpu") == pytest.approx(sum(durations) / n)
            header = ui.text().splitlines()[2]
            assert "CPU/inst" in header and "GPU/inst" in header and "Kern/inst" in header
            assert "per instance · i: per step" in ui.flat_text()
            line = next(row for row in ui.text().splitlines() if "step_N" in row and "×" in row)
            assert numbers.duration(sum(durations) / n) in line
            await ui.press("i")
            assert "CPU/inst" not in ui.text().splitlines()[2]

    asyncio.run(run())


def test_roofline_and_phase_tables_say_total_or_per_instance():
    from nsight_tui.tui.viewmodels.ranks import PHASE_COLUMNS
    from nsight_tui.tui.views.roofline import COLUMNS

    shown = {c.key: c.header for c in COLUMNS if c.show}
    assert shown["gpu_ms_per"] == "GPU ms/it"
    phase = {c.key: (c.header, c.md_header) for c in PHASE_COLUMNS}
    assert phase["per_step_ns"][0] == "GPU/step" and phase["cpu_step_ns"][0] == "CPU/step"
    for key in ("comm_ns", "exposed_ns", "busy_ns"):
        assert "tot" in phase[key][0] and "total over the steady-state steps" in phase[key][1]


# -- 6. the timeline at 80×24 ---------------------------------------------------------------------
DDP = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
_OPS_BY_STREAM = """SELECT deviceId, streamId FROM (
    SELECT start, end, deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
    SELECT start, end, deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
    SELECT start, end, deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET)
    WHERE start < ? AND end > ? GROUP BY deviceId, streamId"""


def _nvtx_names(path: Path) -> set[str]:
    return {r[0] for r in _sql(path, "SELECT DISTINCT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                                     "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60, 70, 71)")
            if r[0]}


def test_timeline_80x24_on_the_ddp_trace(tui):
    """The DDP sample at 80×24: no stream lane without an op in the window (SQL), range names
    whole or cut with `…` and never touching, the axis' labels clear of ▼, the legend whole."""
    import re

    async def run():
        async with tui(DDP, size=(80, 24)) as ui:
            await ui.press("t")
            await ui.until(lambda: getattr(ui.screen, "frame", None) is not None, "the first frame")
            screen, frame = ui.screen, ui.screen.frame
            state = screen.state
            lanes = state.timeline.lanes
            shown = state.shown_lanes()
            streams = {(d, s) for d, s in _sql(DDP, _OPS_BY_STREAM, frame.t1, frame.t0)}
            shown_streams = set()
            for i in shown:
                m = re.fullmatch(r"gpu:(\d+):(\d+)", lanes[i].key)
                if m:
                    shown_streams.add((int(m.group(1)), int(m.group(2))))
            every_stream = {tuple(int(x) for x in lane.key.split(":")[1:]) for lane in lanes
                            if re.fullmatch(r"gpu:\d+:\d+", lane.key)}
            assert shown_streams == streams & every_stream
            assert frame.hidden == len(lanes) - len(shown) and frame.hidden > 0
            assert f"{frame.hidden} empty lane" in ui.flat_text()
            # every drawn lane has something on it
            for row in frame.rows:
                assert (row.cells.dominant >= 0).any() or row.index == state.selected, row.lane.title
            text = ui.text().splitlines()
            canvas = [line[13:] for line in text[3:3 + len(frame.rows) + 8]]
            names = _nvtx_names(DDP)
            for row in frame.rows:
                for c0, c1, label in row.labels:
                    assert len(label) <= c1 - c0 - 2
                    assert label in names or (label.endswith("…") and any(n.startswith(label[:-1]) for n in names))
            for line in canvas:  # no two names run together: each name has a non-letter on both sides
                for name in ("forward", "backward", "optimizer"):
                    for m in re.finditer(name, line):
                        assert m.start() == 0 or not line[m.start() - 1].isalpha(), line
            axis = text[2]
            assert "▼" in axis and not re.search(r"\S▼|▼\S", axis), axis
            legend = next(line for line in text if "■" in line)
            words = re.findall(r"■(\S+)", legend)
            from nsight_tui.tui.widgets.timeline_canvas import FAMILY_LABEL
            known = set(FAMILY_LABEL.values()) | {"launch", "sync", "other", "host", "memcpy", "memset"}
            assert all(w in known for w in words), words
            assert len(legend.rstrip()) <= 80

    asyncio.run(run())


def test_idle_lane_enter_shows_the_whole_gap(tui):
    """The host-sleep twin: `]` to the next gap, down to the idle lane, enter: a panel with the
    gap whole (its length = the stretch with no GPU op around the cursor, by SQL) and every
    thread's calls; the line under the lanes gives the same figure, and no doubled word."""
    import bisect

    from nsight_tui.render import numbers

    path = finding_sample("small_ctx128_host-sleep")
    ops = sorted(_sql(path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"))
    merged: list[list[int]] = []
    for s, e in ops:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            await ui.press("t")
            await ui.until(lambda: getattr(ui.screen, "frame", None) is not None, "the first frame")
            await ui.press("right_square_bracket")
            idle = next(i for i, lane in enumerate(ui.screen.state.timeline.lanes) if lane.kind == "idle")
            while ui.screen.state.selected != idle:
                await ui.press("j")
            await ui.until(lambda: ui.screen.frame.gap is not None, "the gap under the cursor")
            t = ui.screen.frame.cursor_ns
            k = bisect.bisect_right([m[1] for m in merged], t)
            gs, ge = merged[k - 1][1], merged[k][0]
            assert gs <= t < ge
            figure = numbers.duration(ge - gs)
            line = ui.flat_text()
            assert f"gap {figure}" in line and "host-bound host-bound" not in line
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "TextPanel", "the gap's panel")
            panel = ui.flat_text()
            assert f"idle {figure}" in panel and f": {figure} with no kernel or copy" in panel
            assert "python3" in panel and "of the gap inside the call" in panel
            await ui.press("escape")
            assert type(ui.screen).__name__ == "TimelineScreen"

    asyncio.run(run())


# -- 9. an fp32 → tf32 diff says what its GEMMs run on ---------------------------------------------
def test_tf32_diff_says_tensor_cores(tmp_path):
    """small_ctx512 (fp32) → small_ctx512_tf32: every added cuBLAS kernel whose name carries the
    `tf32` math token (SQL) is labelled `tf32, tensor cores`, every removed `…f32, CUDA cores`
    one that says `ffma`; no two rows share a label."""

    a, b = finding_sample("small_ctx512"), finding_sample("small_ctx512_tf32")
    out = cli_process.run(["diff", str(a), str(b)], text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and (" added |" in line or " removed |" in line)]
    added = [r.split(" | ")[0][2:] for r in rows if " added |" in r]
    removed = [r.split(" | ")[0][2:] for r in rows if " removed |" in r]
    tf32_names = {r[0] for r in _sql(b, "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                        "ON s.id = k.demangledName WHERE s.value LIKE '%gemm%tf32%'")}
    assert tf32_names
    gemm_added = [x for x in added if x.startswith(("cuBLAS", "CUTLASS"))]
    assert gemm_added and all("tf32, tensor cores" in x for x in gemm_added), gemm_added
    gemm_removed = [x for x in removed if x.startswith(("cuBLAS", "CUTLASS"))]
    assert gemm_removed and all("f32, CUDA cores" in x for x in gemm_removed), gemm_removed
    section = out.split("\n\n")
    assert all(len(set(t)) == len(t) for t in [[x for x in s.splitlines() if x.startswith("| cuBLAS")] for s in section])


# -- 5. `r` without FLOP counts; `t` in `r` opens the range under the cursor ------------------------
_STEP_OPS_NS = """
WITH s AS (SELECT e.start, e.end, e.globalTid >> 24 AS pid FROM NVTX_EVENTS e LEFT JOIN StringIds n ON n.id = e.textId
           WHERE coalesce(e.text, n.value) GLOB 'step_[0-9]*' AND e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL),
o AS (SELECT start, end, correlationId AS corr, globalPid >> 24 AS pid FROM CUPTI_ACTIVITY_KIND_KERNEL)
SELECT sum(o.end - o.start) FROM o JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = o.corr AND c.globalTid >> 24 = o.pid
WHERE EXISTS (SELECT 1 FROM s WHERE s.pid = o.pid AND c.start >= s.start AND c.start <= s.end)
"""


def test_roofline_without_counts_says_what_it_needs(tui):
    """edge_deep (no config mark, no --flops): no empty plot; one text says what the roofline
    needs; `t` gives step_N's kernel families with their kernel time per instance, which add up
    to the kernel time launched inside step ranges over the steps (SQL)."""
    path = plain(SAMPLES / "edge_deep.sqlite.xz")
    steps = len(_sql(path, _STEP_DURATIONS))
    total_ns = _sql(path, _STEP_OPS_NS)[0][0]

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            await ui.press("r")
            await ui.until(lambda: getattr(ui.screen, "data", None) is not None, "the roofline")
            text = ui.flat_text()
            assert "no point with both FLOPs and bytes" not in text
            assert "--flops FILE.json" in text and "nsight-tui capture" in text
            assert not ui.screen.query_one("#roof-plot").display
            assert "unknown" not in text
            await ui.press("t")  # the cursor is on step_N
            await ui.until(lambda: ui.screen.data is not None and ui.screen.data.mode == "families", "families")
            assert "kernel families of step_N" in ui.flat_text()
            frame = ui.screen.data.frame
            fams = frame[frame["level"] == "family"]
            assert fams["gpu_ms_per"].sum() * 1e6 == pytest.approx(total_ns / steps, rel=1e-9)

    asyncio.run(run())


def test_roofline_t_opens_the_range_under_the_cursor(tui):
    """small_ctx128: the first range is warmup_N; with the cursor on step_N/forward, `t` gives
    the families of step_N/forward, not of a range nobody opened."""
    async def run():
        async with tui(SAMPLES / "small_ctx128.sqlite", size=(100, 30)) as ui:
            await ui.press("r")
            await ui.until(lambda: getattr(ui.screen, "data", None) is not None, "the roofline")
            table = ui.screen.table
            row = next(r for r in range(len(table)) if table.record(r)["path"] == "step_N/forward")
            for _ in range(row):
                await ui.press("down")
            await ui.press("t")
            await ui.until(lambda: ui.screen.data is not None and ui.screen.data.mode == "families", "families")
            assert ui.screen.data.scope == "kernel families of step_N/forward"

    asyncio.run(run())


# -- 10. unbalanced NVTX: iterations nested in iterations --------------------------------------------
def _nested_copy(tmp_path: Path) -> Path:
    """small_ctx128 with warmup_0 and its forward left open to the end (a push without its pop,
    as torch.compile did): nsys then nests warmup_1 and step_0..2 under warmup_0/forward."""
    from conftest import mutated_copy

    ids = [r[0] for r in _sql(SAMPLES / "small_ctx128.sqlite",
                              "SELECT e.rowid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                              "WHERE e.start >= (SELECT start FROM NVTX_EVENTS e2 LEFT JOIN StringIds s2 ON s2.id = e2.textId "
                              "WHERE coalesce(e2.text, s2.value) = 'warmup_0') "
                              "AND coalesce(e.text, s.value) IN ('warmup_0', 'forward') ORDER BY e.start LIMIT 2")]
    return mutated_copy(tmp_path, "nested_iterations",
                        f"UPDATE NVTX_EVENTS SET end = (SELECT max(end) + 1000 FROM NVTX_EVENTS) "
                        f"WHERE rowid IN ({', '.join(map(str, ids))})", src=SAMPLES / "small_ctx128.sqlite")


def test_unbalanced_nvtx_is_detected_and_iterations_kept(tmp_path, tui):
    from nsight_tui.parsers.model.iterations import STEP, WARMUP, iteration_ranges, nested_iterations, phase_ranges
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.read.load import load_trace

    path = _nested_copy(tmp_path)
    names = lambda glob: _sql(path, "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "  # noqa: E731
                                    "WHERE coalesce(e.text, s.value) GLOB ? AND e.eventType IN (59, 60, 70, 71)", glob)[0][0]
    steps, warmups = names("step_[0-9]*"), names("warmup_[0-9]*")
    model = range_model(load_trace(path), "process")
    assert len(iteration_ranges(model, STEP)) == steps and len(iteration_ranges(model, WARMUP)) == warmups
    assert len(nested_iterations(model)) == steps + warmups - 1  # all but warmup_0 sit inside it
    # each warmup's own forward only (not the nested steps')
    assert len(phase_ranges(model, iteration_ranges(model, WARMUP), "forward")) == warmups
    assert len(phase_ranges(model, iteration_ranges(model, STEP), "forward")) == steps
    clean = range_model(load_trace(SAMPLES / "small_ctx128.sqlite"), "process")
    assert nested_iterations(clean) == []

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            header = " ".join(ui.text().splitlines()[:2])  # a long file name takes a row of its own
            assert "⚠ nested steps" in header
            node = ui.screen.grid.ranges.node_at(ui.screen.grid.cursor)
            assert node.name.rsplit(":", 1)[-1] == "step_N" and node.instances == steps
            await ui.press("question_mark")
            text = ui.flat_text()
            assert "unbalanced NVTX" in text and "warmup_0/forward" in text

    asyncio.run(run())


# -- 11. the pace view ---------------------------------------------------------------------------------
_ITERATIONS = """SELECT coalesce(e.text, s.value) AS name, e.start, e.end FROM NVTX_EVENTS e
                 LEFT JOIN StringIds s ON s.id = e.textId
                 WHERE (coalesce(e.text, s.value) GLOB 'step_[0-9]*' OR coalesce(e.text, s.value) GLOB 'warmup_[0-9]*')
                 AND e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL ORDER BY e.start"""
_PROJECTION = """SELECT max(o.end) - min(o.start) FROM (
        SELECT start, end, correlationId AS corr, globalPid >> 24 AS pid FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
        SELECT start, end, correlationId, globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
        SELECT start, end, correlationId, globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMSET) o
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = o.corr AND c.globalTid >> 24 = o.pid
    WHERE c.start >= ? AND c.start <= ?"""


def test_pace_view_lists_every_iteration_with_both_times(tui, tmp_path):
    """`p` on small_ctx128: one row per warmup/step range in time order (SQL), CPU span = the
    range's end − start, GPU time = first op start to last op end of the work launched in it
    (SQL); then a copy whose last step runs 30 ms long: that step, and only it, is marked slow."""
    from conftest import mutated_copy

    from nsight_tui.render import numbers

    path = SAMPLES / "small_ctx128.sqlite"
    iters = _sql(path, _ITERATIONS)

    async def run(p, expect_slow=None):
        async with tui(p, size=(80, 24)) as ui:
            await ui.press("p")
            await ui.until(lambda: type(ui.screen).__name__ == "PaceScreen" and ui.screen.view is not None, "pace")
            frame = ui.screen.view.frame
            rows = _sql(p, _ITERATIONS)
            assert frame["name"].tolist() == [r[0] for r in rows]
            assert frame["cpu_ns"].tolist() == [r[2] - r[1] for r in rows]
            for r, gpu in zip(rows, frame["gpu_ns"].tolist()):
                assert gpu == _sql(p, _PROJECTION, r[1], r[2])[0][0]
            text = ui.text()
            assert "CPU span" in text and "GPU time" in text
            first_step = next(r for r in rows if r[0].startswith("step_"))
            assert numbers.duration(first_step[2] - first_step[1]) in text
            marked = frame[frame["mark"] != ""]["name"].tolist()
            assert marked == ([expect_slow] if expect_slow else []), marked
            if expect_slow:
                assert "▲ slow" in text
            assert "Iteration" in text

    asyncio.run(run(path))
    last = max((r for r in iters if r[0].startswith("step_")), key=lambda r: r[1])
    slow = mutated_copy(tmp_path, "slow_last_step",
                        f"UPDATE NVTX_EVENTS SET end = end + 30000000 WHERE start = {last[1]} AND end = {last[2]}",
                        src=path)
    asyncio.run(run(slow, last[0]))


def test_kernel_detail_gives_the_duration_distribution(tui, sql):
    """backward's top kernel: p50/p90/p99 of its launches' durations by nearest rank, from SQL
    (the same kernels the SQL of tests/tui/conftest.py attributes to step_N/backward)."""
    import math

    from nsight_tui.render import numbers

    path = SAMPLES / "small_ctx128.sqlite"
    want = sql.backward_kernels(path, "process")
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        from conftest import _BACKWARD_CALLS, _KERNELS_OF_HITS
        rows = con.execute(_BACKWARD_CALLS + f"SELECT k.end - k.start {_KERNELS_OF_HITS} "
                           "JOIN StringIds s ON s.id = k.demangledName WHERE s.value = :name",
                           {"process": 1, "name": want["top_name"]}).fetchall()
    finally:
        con.close()
    d = sorted(r[0] for r in rows)
    rank = lambda p: d[max(0, math.ceil(p / 100 * len(d)) - 1)]  # noqa: E731

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            await ui.open_backward_kernels()
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.view is not None, "kernels")
            text = ui.flat_text()
            assert (f"{len(d):,} launches: p50 {numbers.duration(rank(50))} · p90 {numbers.duration(rank(90))} · "
                    f"p99 {numbers.duration(rank(99))} · {numbers.duration(d[0])}") in text
            assert numbers.duration(d[-1]) in text

    asyncio.run(run())


# -- 7. one definition, one rounding: a kernel's share in the TUI and in `report` ---------------------
def test_kernel_share_same_in_tui_and_report(tui, sql):
    """backward's top kernel: its share of backward's GPU op time (kernels + memcpy/memset, by
    SQL) reads the same in the kernel table and in `report` (it was 36.4% against 37.0%: the
    report divided by kernel time alone)."""

    from conftest import _BACKWARD_CALLS

    from nsight_tui.render import numbers

    path = SAMPLES / "small_ctx128.sqlite"
    want = sql.backward_kernels(path, "process")
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        op_ns = sum(con.execute(_BACKWARD_CALLS + f"SELECT coalesce(sum(o.end - o.start), 0) FROM {t} o JOIN hit h "
                                "ON h.corr = o.correlationId AND (h.tid >> 24) = (o.globalPid >> 24)",
                                {"process": 1}).fetchone()[0]
                    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    finally:
        con.close()
    share = numbers.percent(want["top_total"] / op_ns)

    async def run():
        async with tui(path, size=(80, 24)) as ui:
            await ui.open_backward_kernels()
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.view is not None, "kernels")
            first_row = ui.text().splitlines()[3]
            assert first_row.rstrip().endswith(share), (first_row, share)

    asyncio.run(run())
    report = cli_process.run(["report", str(path)], text=True, check=True).stdout
    backward = report.split("### backward", 1)[1]
    row = next(line for line in backward.splitlines() if line.startswith("| ") and "gemm" in line)
    assert row.rstrip(" |").endswith(share), (row, share)


# -- 9. the optimizer's kernels say their family by range too -----------------------------------------
def test_optimizer_kernels_family_by_range(tui):
    """foreach=False AdamW: by name every optimizer kernel is Elementwise; the shares give the
    optimizer's 100% by range first, each kernel's detail says both. With foreach (the twin
    without the change) the kernels are Optimizer by name and nothing is added."""
    async def shares(path: Path):
        async with tui(path, size=(80, 24)) as ui:
            await ui.press("slash")
            await ui.type("step_N/optimizer")
            await ui.press("enter", "enter")
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.view is not None, "kernels")
            view = ui.screen.view
            labels = [r.label for r in view.ratios.shared]
            families = set(view.summary["family"])
            notes = view.summary["label_note"].tolist()
            plain = next((i for i, n in enumerate(notes) if not n.startswith("same kernel")), 0)
            for _ in range(plain):
                await ui.press("down")
            return labels, families, ui.flat_text(), notes

    labels, families, text, notes = asyncio.run(shares(finding_sample("small_ctx128_foreach-off")))
    assert families == {"Elementwise"}
    assert labels[0] == "Optimizer by range share" and "Optimizer by range 100.0%" in text
    assert all("family Optimizer by range (Elementwise by name)" in n for n in notes)
    assert "family Optimizer by range (Elementwise by name)" in text
    labels, families, text, notes = asyncio.run(shares(finding_sample("small_ctx128")))
    assert "Optimizer by range share" not in labels


def test_pace_on_two_ranks_each_against_its_own_median():
    """The DDP sample: every step's `vs med` is its CPU span minus the median of its own
    process's steps (SQL per process), and each row says whose it is."""
    import statistics

    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.tui.session import Session

    # the step is its period (tests/helpers/step_sql.py): start to the next iteration's start
    rows = [(it.pid, it.name, it.period) for it in step_sql.steps(DDP)]
    medians = {pid: statistics.median([d for p, _, d in rows if p == pid]) for pid in {r[0] for r in rows}}
    assert len(medians) == 2
    view = Session(DDP, load_trace(DDP), "process", 0.0).pace()
    frame = view.frame[view.frame["kind"] == "step"]
    assert len(frame) == len(rows)
    for r in frame.itertuples():
        assert r.vs_median_ns == pytest.approx(r.period_ns - medians[int(r.process)])
        assert r.name.split()[-1] in ("r0", "r1")
