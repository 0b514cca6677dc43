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


def test_the_files_view_opened_first_offers_no_esc_and_offers_it_above_a_file():
    """A folder opened (`open DIR`): the files view is the first view and esc goes nowhere from it;
    its footer offered `esc Back`. Above it (a file opened from it) esc is offered and goes back."""
    from conftest import SAMPLES

    from nsight_tui.parsers import export_paths

    folder = SAMPLES / "ranks_small_ctx128_ddp2"

    def offered(ui) -> bool:
        return any(b.action == "back" and b.show for _ns, b, _on, _tip in ui.screen.active_bindings.values())

    async def body():
        app = make_app(export_paths([str(folder)]))
        async with app.run_test(size=(100, 30)) as pilot:
            ui = Ui(app, pilot)
            await ui.until(lambda: type(ui.screen).__name__ == "FilesScreen" and ui.screen.view is not None,
                           "every file read", timeout=300)
            files = ui.screen
            assert not offered(ui)
            assert "esc" not in ui.text().splitlines()[-1]
            await ui.press("escape")
            assert ui.screen is files
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "RangesScreen" and app.loaded, "a file opened",
                           timeout=120)
            await ui.settle()
            assert offered(ui)
            await ui.press("escape")
            assert ui.screen is files

    asyncio.run(body())
