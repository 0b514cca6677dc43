"""`nsight-tui --diff A B`: `q` while the diff loads ends the app, and the files view beneath the
diff does not load both files a second time meanwhile. Before, the files view (pushed under the diff)
ran the whole report of A and of B in a worker of its own beside the diff's load of the same two
files: three threads on the cores and the GIL the app needs to read keys, and a `q` went unanswered
on a loaded machine. Its table is built when it is first shown (esc from the diff)."""
from __future__ import annotations

import asyncio
import threading
import time

from helpers.xz_samples import plain
from conftest import SAMPLES

from nsight_tui.tui.views import files
from nsight_tui.tui.views.diff import DiffScreen

A = SAMPLES / "small_ctx128.sqlite"
B = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")  # an unrelated export: another workload, two ranks


def counting_compare(monkeypatch) -> list:
    calls: list = []
    real = files.compare

    def spy(*args, **kwargs):
        calls.append([getattr(r, "path", r) for r in args[0]])  # the runs' files
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "compare", spy)
    return calls


def test_q_while_the_diff_loads_exits_and_nothing_else_loads(monkeypatch):
    """The window: the diff's screen is up and its worker is inside the load (held there by an
    event, so the window cannot close before the key). q, then the app is gone."""
    from nsight_tui.tui.app import NsightApp
    from nsight_tui.tui.viewmodels import diff as diff_vm

    calls = counting_compare(monkeypatch)
    inside, release = threading.Event(), threading.Event()
    real = diff_vm.load_trace

    def held(path, *args, **kwargs):
        inside.set()
        release.wait(60)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(diff_vm, "load_trace", held)

    async def body():
        app = NsightApp([str(A), str(B)], diff=True)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                t0 = time.monotonic()
                while not (isinstance(app.screen, DiffScreen) and inside.is_set()):
                    assert time.monotonic() - t0 < 60, "the diff's load never started"
                    await pilot.pause(0.02)
                assert app.screen.view is None  # still loading
                await pilot.press("q")
                t0 = time.monotonic()
                while not app._exit:
                    assert time.monotonic() - t0 < 60, "q did not end the app"
                    await pilot.pause(0.02)
                assert calls == []  # the files view beneath loaded nothing beside the diff's load
        finally:
            release.set()
        return app.return_code

    assert asyncio.run(body()) == 0


def test_the_files_view_builds_when_shown(monkeypatch, tui):
    calls = counting_compare(monkeypatch)

    async def body():
        async with tui([A, B], size=(100, 30), diff=True) as ui:
            app = ui.app
            diff = app.screen
            assert isinstance(diff, DiffScreen)
            await ui.until(lambda: diff.view is not None, "the diff built")
            assert calls == []  # the whole diff's load ran with the files view waiting
            await ui.press("escape")
            await ui.until(lambda: isinstance(app.screen, files.FilesScreen) and app.screen.view is not None,
                           "the files view built")
            assert calls == [[A, B]]
            assert "small_ctx128_ddp2" in ui.flat_text()

    asyncio.run(body())
