"""In the TUI: `r` plots points on a trace whose FLOPs come from op shapes alone (an
--autograd-shapes capture without the capture's counted marks), and the timeline gains the sampled
GPU-metric lanes. Figures are checked in tests/core (test_shape_flops, test_gpu_metrics)."""
from __future__ import annotations

import asyncio
import math

from conftest import SAMPLES

HW = SAMPLES / "hw"


def test_roofline_plots_points_from_op_shapes(tui, async_trace):
    path = async_trace(HW / "small_ctx128_agshapes_nocount.sqlite.xz")

    async def body():
        async with tui(path, size=(120, 40)) as ui:
            await ui.press("r")
            await ui.settle()
            screen = ui.app.screen
            assert type(screen).__name__ == "RooflineScreen" and screen.data is not None
            frame = screen.data.frame
            both = frame[frame["gflop"].map(lambda x: not math.isnan(x)) & frame["gb"].map(lambda x: not math.isnan(x))]
            assert len(both) >= 3 and set(both["source"]) == {"shapes"}
            assert "FLOPs/bytes: shapes" in ui.text() and "no point with both" not in ui.text()

    asyncio.run(body())


def test_timeline_shows_the_sampled_metric_lanes(tui, async_trace):
    path = async_trace(HW / "small_ctx512_tf32_b8_gpumetrics.sqlite.xz")

    async def body():
        async with tui(path, size=(140, 60)) as ui:
            await ui.press("t")
            await ui.until(lambda: type(ui.app.screen).__name__ == "TimelineScreen"
                           and ui.app.screen.frame is not None, "timeline")
            text = ui.text()
            for title in ("GPU SM act", "GPU tensor", "GPU DRAM rd", "GPU DRAM wr"):
                assert title in text, title  # lane titles are 12 columns wide

    asyncio.run(body())
