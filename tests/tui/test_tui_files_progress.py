"""A folder of exports: a row per file at once, each filled in as its file is read, with how many
of how many are read; the reading in a worker, so keys work meanwhile."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from conftest import SAMPLE, Ui, make_app

NAMES = ("run_a.sqlite", "run_b.sqlite", "run_c.sqlite", "run_d.sqlite")


@pytest.fixture()
def folder(tmp_path: Path) -> list[Path]:
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    paths = []
    for name in NAMES:
        (tmp_path / name).symlink_to(SAMPLE)
        paths.append(tmp_path / name)
    return paths


def cells(ui: Ui) -> list[list[str]]:
    table = ui.screen.table
    return [[table.cell(row, col) for col in table.columns] for row in range(len(table))]


def test_rows_show_as_each_file_is_read(folder: list[Path], monkeypatch):
    """The second file's read is held until the test lets it go: the first file's row is filled
    in, the others wait with their names on screen, and a key is answered meanwhile."""
    from nsight_tui.parsers.analyses import report

    gate = threading.Event()
    build = report.build
    calls: list[str] = []

    def held_build(trace, options=None):
        calls.append(str(trace.path))
        if len(calls) == 2:
            assert gate.wait(120), "the test never let the second file go"
        return build(trace, options)

    monkeypatch.setattr(report, "build", held_build)

    async def body():
        app = make_app(folder)
        async with app.run_test(size=(120, 30)) as pilot:
            ui = Ui(app, pilot)
            try:
                await ui.until(lambda: len(calls) == 2 and getattr(ui.screen, "read", 0) == 1,
                               "the first file read, the second held", timeout=120)
                await ui.until(lambda: "read 1 of 4" in ui.flat_text(), "the progress on the status line")
                rows = cells(ui)
                assert [r[0] for r in rows] == list(NAMES)  # every file a row before it is read
                assert rows[0][-1] == "ok" and rows[0][1] not in ("", "—")  # its figures are in
                assert rows[1][-1] == "reading…" and rows[2][-1] == rows[3][-1] == "queued"
                assert "reading run_b.sqlite" in ui.flat_text()
                cursor = ui.screen.grid.cursor
                await pilot.press("j")  # answered while the worker holds the second file
                await ui.until(lambda: ui.screen.grid.cursor == cursor + 1, "the cursor moved")
                await pilot.press("enter")  # a file not read yet: said so, nothing opened
                await ui.until(lambda: "not read yet" in ui.flat_text(), "enter on a file not read yet says so")
                assert type(ui.screen).__name__ == "FilesScreen"
            finally:
                gate.set()
            await ui.until(lambda: ui.screen.view is not None, "every file read", timeout=120)
            rows = cells(ui)
            assert [r[-1] for r in rows] == ["ok"] * 4
            assert "4 runs read" in ui.flat_text() and "reading" not in ui.flat_text()
            assert rows[1][1:] == rows[0][1:]  # the same export four times: the same figures
            assert ui.screen.grid.cursor == cursor + 1  # the cursor stayed where the user put it

    asyncio.run(body())
