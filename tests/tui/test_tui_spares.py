"""Spare screens: the app composes the next kernel table, launches table and API summary off
screen (NsightApp.prepare_spares) so that opening one only fills it in. A view opened from a
spare must show exactly what the same view made on demand shows, and be that spare."""
from __future__ import annotations

import asyncio
from pathlib import Path


def test_views_from_spares_match_views_made_on_demand(sample: Path, tui):
    from nsight_tui.tui.views.api import ApiScreen
    from nsight_tui.tui.views.kernels import KernelsScreen
    from nsight_tui.tui.views.launches import LaunchesScreen

    async def body():
        async with tui(sample, size=(120, 40)) as ui:
            app = ui.app

            async def spare(cls):
                await ui.until(lambda: cls in app.spares(), f"a spare {cls.__name__} composed")
                return app.spares()[cls]

            async def same_as_fresh(made) -> None:
                """The screen on top (from a spare) against the same view made now, over it."""
                shown = ui.screen
                text = ui.text()
                app.push_screen(made(shown))
                await ui.settle()
                assert ui.screen is not shown and type(ui.screen) is type(shown)
                assert ui.text() == text
                await ui.press("escape")
                assert ui.screen is shown

            # A range's kernels (backward, found by search), then a kernel's launches.
            kernels = await spare(KernelsScreen)
            await ui.open_backward_kernels()
            assert ui.screen is kernels and kernels.node is not None and kernels.table is not None
            assert "backward" in ui.text()
            await same_as_fresh(lambda s: KernelsScreen(app.session, s.node))

            launches = await spare(LaunchesScreen)
            await ui.press("enter")
            assert ui.screen is launches and launches.kernel == kernels.table.record(kernels.grid.cursor)["name"]
            await same_as_fresh(lambda s: LaunchesScreen(app.session, s.node, s.kernel, s.short, s.positions))

            # The global views: every kernel (a second kernels spare), the API summary.
            await ui.press("escape", "escape")
            kernels2 = await spare(KernelsScreen)
            assert kernels2 is not kernels
            await ui.press("2")
            assert ui.screen is kernels2 and kernels2.node is None
            await same_as_fresh(lambda s: KernelsScreen(app.session, None))

            api = await spare(ApiScreen)
            await ui.press("3")
            assert ui.screen is api and api.table is not None and len(api.table)
            await same_as_fresh(lambda s: ApiScreen(app.session))

    asyncio.run(body())
