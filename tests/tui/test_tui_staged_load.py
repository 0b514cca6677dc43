"""The first screen comes in two steps (issue 11): the NVTX tree with CPU times as soon as
the ranges are read, GPU columns blank and the info bar saying what is still loading; then
the GPU columns fill in, in place, with the cursor where the user left it."""
from __future__ import annotations

import asyncio
import threading
import time

from test_tui_support import SAMPLES, make_app, scalar, screen_text, settle, wait_loaded

from nsight_tui.parsers import load
from nsight_tui.tui import fmt
from nsight_tui.tui.views.ranges import RangesScreen

PATH = SAMPLES / "small_ctx128.sqlite"


def test_tree_first_then_gpu_columns(monkeypatch):
    release = threading.Event()
    real_finish = load.TraceLoader.finish

    def held_finish(self):
        release.wait(timeout=60)  # the test looks at the tree while the GPU work "loads"
        return real_finish(self)

    monkeypatch.setattr(load.TraceLoader, "finish", held_finish)
    # CPU time of the first step_0 range, by SQL: what the tree must show before any GPU work.
    step0 = scalar(PATH, """SELECT e.end - e.start FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId
                            WHERE s.value = 'step_0' AND e.eventType = 59""")

    async def body():
        app = make_app(PATH)
        async with app.run_test(size=(120, 30)) as pilot:
            t0 = time.monotonic()
            while not (isinstance(app.screen, RangesScreen) and app.session is not None):
                assert time.monotonic() - t0 < 60, "the tree did not come up"
                await pilot.pause(0.02)
            assert app.session.pending and not app.loaded
            while "tree in " not in (text := " ".join(screen_text(app).split())):
                assert time.monotonic() - t0 < 60, "the info bar never said the tree is in"
                await pilot.pause(0.02)
            assert "loaded in" not in text
            source = app.screen.grid.tree
            cols = {c.key: c for c in source.columns}
            step = next(i for i in range(len(source)) if source.node_at(i) is not None
                        and source.node_at(i).label == "step_N")
            app.screen.grid.data_changed(step)
            node = source.node_at(step)
            assert node.instances == 3 and int(node.model.cpu_ns[node.ids[0]]) == step0
            assert source.cell(step, cols["cpu"]) == fmt.duration(node.cpu_ns) != ""
            assert source.cell(step, cols["gpu"]) == "" and source.cell(step, cols["kernels"]) == ""
            await pilot.press("enter")  # kernels of the range: not before the GPU work is in
            await pilot.pause()
            assert isinstance(app.screen, RangesScreen)
            keep = app.screen.current_key()

            release.set()
            await wait_loaded(app, pilot)
            await settle(app, pilot)
            assert not app.session.pending
            text = " ".join(screen_text(app).split())
            assert "loaded in " in text and "tree in " not in text
            source = app.screen.grid.tree
            assert app.screen.current_key() == keep  # the cursor stayed on step_N
            row = app.screen.grid.cursor
            node = source.node_at(row)
            kernels = scalar(PATH, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                JOIN NVTX_EVENTS e ON r.globalTid = e.globalTid AND r.start >= e.start AND r.end <= e.end
                JOIN StringIds s ON s.id = e.textId WHERE s.value GLOB 'step_[0-9]*' AND e.eventType = 59""")
            assert node.kernels >= kernels > 0  # process-wide: at least nsys's launching-thread count
            assert source.cell(row, cols["kernels"]) == fmt.count(node.kernels)
            assert source.cell(row, cols["gpu"]) == fmt.duration(node.busy_ns) != ""

    try:
        asyncio.run(body())
    finally:
        release.set()


def test_biggest_ranges_tables_are_ready_after_load():
    """After loading, the app computes the kernel tables of the top-level ranges holding the
    most GPU work; opening one shows that table, equal to computing it afresh."""
    import pandas as pd

    from test_tui_support import running

    from nsight_tui.tui.views.kernels import KernelsScreen, add_labels

    async def body():
        async with running(PATH, size=(120, 30)) as (app, pilot):
            await settle(app, pilot)
            model = app.session.model
            biggest = max((n for g in model.aggregated_groups for n in g.roots), key=lambda n: n.kernels)
            cached = app.session.cache.get("node_kernels", {}).get(id(biggest))
            assert cached is not None and cached[0] is biggest  # computed in the background
            fresh = add_labels(model.kernel_summary(model.ops_of(biggest.ids)))
            pd.testing.assert_frame_equal(cached[3], fresh)
            app.open_kernels(biggest)
            await settle(app, pilot)
            assert isinstance(app.screen, KernelsScreen) and app.screen.grid.row_count == len(fresh)

    asyncio.run(body())
