"""The roofline view (`r`) and the roofline ratios, driven by keys on the committed sample with
counts. Expected figures come from SQL on the file and hand formulas, not from the view's model."""
from __future__ import annotations

import asyncio

from conftest import SAMPLES
from helpers.xz_samples import plain

COUNTED = plain(SAMPLES / "small_ctx128_counts.sqlite.xz")
B, H, T, L = 4, 12, 128, 12
SOFTMAX_NS_SQL = """
    WITH r AS (SELECT e.start, e.end, COALESCE(e.text, s.value) AS name FROM NVTX_EVENTS e
               LEFT JOIN StringIds s ON e.textId = s.id WHERE e.eventType = 59)
    SELECT SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = k.correlationId
    JOIN r ON r.name = 'computing_softmax' AND a.start BETWEEN r.start AND r.end"""


def run(coro):
    return asyncio.run(coro)


async def open_roofline(ui):
    await ui.press("r")
    await ui.settle()
    assert type(ui.app.screen).__name__ == "RooflineScreen" and ui.app.screen.data is not None


def test_roofline_view_plots_and_exports_the_ranges(tmp_path, tui, md_tables, sql):
    all_ns = sql.scalar(COUNTED, SOFTMAX_NS_SQL)  # warmup and steps: the aggregated tree has both

    async def body():
        async with tui(COUNTED, size=(120, 40), export_dir=tmp_path) as ui:
            app = ui.app
            await open_roofline(ui)
            text = ui.text()
            assert "FP32 on CUDA cores roof" in text and "arithmetic intensity" in text
            assert "FLOPs/bytes: measured" in text
            grid = app.screen.grid
            labels = [app.screen.table.record(i)["label"] for i in range(len(app.screen.table))]
            assert "step_N/forward/scaled_dot_product_attention/computing_softmax" in labels
            # j moves the marked point
            await ui.press("j")
            assert grid.cursor == 1
            assert app.screen.table.record(1)["label"][:20] in ui.text()
            await ui.press("e")
            export = next(tmp_path.glob("nsight-tui_roofline_ranges*.md")).read_text()
            (headers, rows), = [t for t in md_tables(export) if "verdict" in t[0]]
            softmax = "step_N/forward/scaled_dot_product_attention/computing_softmax"
            row = dict(zip(headers, next(r for r in rows if r[0].endswith(softmax))))
            nbytes = 3 * L * 8 * B * H * T * T  # 3 steps x 12 layers, fp32 scores in and out
            assert float(row["GB"]) == round(nbytes / 1e9, 3)
            assert float(row["GB/s"]) == round(nbytes / (sql.scalar(COUNTED, SOFTMAX_NS_SQL.replace(
                "r.name = 'computing_softmax'", "r.name = 'computing_softmax' AND EXISTS (SELECT 1 FROM r s2 WHERE "
                "s2.name GLOB 'step_[0-9]*' AND r.start >= s2.start AND r.end <= s2.end)")) / 1e9) / 1e9, 1)
            assert row["verdict"] == "memory-bound" and float(row["AI (FLOP/B)"]) == 0.625
            assert all_ns > 0

    run(body())


def test_families_of_a_range_and_toggle(tui):
    async def body():
        async with tui(COUNTED, size=(120, 40)) as ui:
            app = ui.app
            await open_roofline(ui)
            table = app.screen.table
            row = next(i for i in range(len(table)) if table.record(i)["label"] == "step_N")
            app.screen.grid.move_to(row)
            await ui.press("enter")
            assert app.screen.data.mode == "families" and "step_N" in app.screen.data.scope
            families = {app.screen.table.record(i)["label"]: app.screen.table.record(i)["verdict"]
                        for i in range(len(app.screen.table))}
            assert families["gemm"] == "compute-bound" and families["softmax"] == "memory-bound"
            await ui.press("t")
            assert app.screen.data.mode == "ranges"
            await ui.press("escape")
            assert app.screen.data.mode == "ranges"

    run(body())


def test_kernel_view_ratios_gain_throughput_and_verdict(tui, sql):
    async def body():
        async with tui(COUNTED, size=(130, 40)) as ui:
            app = ui.app
            await ui.press("slash")
            await ui.type("step_N/forward/scaled_dot_product_attention/computing_softmax")
            await ui.press("enter", "enter")
            ratios = {r.label: r for r in app.screen.view.ratios.all}
            bound = ratios["memory-bound (share of its roof)"]
            assert "AI 0.62" in bound.basis and 0 < bound.value < 1
            assert ratios["arithmetic intensity"].value == 0.625
            nbytes = 3 * L * 8 * B * H * T * T
            durations = sql.scalar(COUNTED, SOFTMAX_NS_SQL.replace(
                "r.name = 'computing_softmax'", "r.name = 'computing_softmax' AND EXISTS (SELECT 1 FROM r s2 WHERE "
                "s2.name GLOB 'step_[0-9]*' AND r.start >= s2.start AND r.end <= s2.end)"))
            assert ratios["achieved bytes/s"].value == nbytes / (durations / 1e9)
            assert bound.value == ratios["achieved bytes/s"].value / 4.8e12
            text = ui.text()
            assert "memory-bound" in text and "FLOP/B" in text

    run(body())


def test_roofline_at_80x24_and_from_the_palette(tui):
    async def body():
        async with tui(COUNTED, size=(80, 24)) as ui:
            app = ui.app
            await open_roofline(ui)
            assert "roofline" in ui.text()
            await ui.press("escape")
            assert type(app.screen).__name__ == "RangesScreen"

    run(body())
