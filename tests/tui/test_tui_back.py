"""`esc` back to the range tree from the heavy views: the tree is shown as it was left, never rebuilt
or recomputed (its rows, its cursor), and no worker is started for it."""
from __future__ import annotations

import asyncio

import pytest

from conftest import SAMPLE, Ui, make_app


@pytest.mark.parametrize("keys", [["enter"], ["2"], ["t"], ["u"], ["F"]], ids=["kernels", "all-kernels", "timeline",
                                                                            "memory", "findings"])
def test_esc_shows_the_tree_as_left_without_rebuilding_it(keys, monkeypatch):
    from nsight_tui.tui.views.ranges import RangesScreen

    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    rebuilt = []
    original = RangesScreen.rebuild
    monkeypatch.setattr(RangesScreen, "rebuild", lambda self, *a, **k: (rebuilt.append(a), original(self, *a, **k)))

    async def body():
        app = make_app([SAMPLE])
        async with app.run_test(size=(120, 40)) as pilot:
            ui = Ui(app, pilot)
            await ui.loaded()
            tree = ui.screen
            await ui.press("j", "j")
            cursor, rows = tree.grid.cursor, len(tree.grid.source)
            rebuilt.clear()
            await ui.press(*keys)
            await ui.until(lambda: ui.screen is not tree, "the view")
            await ui.settle()
            workers = {id(w) for w in app.workers}
            await ui.press("escape")
            assert ui.screen is tree
            assert rebuilt == []
            assert (tree.grid.cursor, len(tree.grid.source)) == (cursor, rows)
            started = [w for w in app.workers if id(w) not in workers]
            assert not [w for w in started if w.node is tree], [w.name for w in started]

    asyncio.run(body())
