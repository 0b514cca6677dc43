"""A folder holding a run that ran out of memory, its record (STEM.oom.json) and its export
(STEM.oom.sqlite.xz) side by side, in the files view: the run is one row, as `report DIR` counts it
(Sweep.discover), and enter on it opens its export."""
from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import SAMPLES

MEMORY = SAMPLES / "memory"
NAMES = ("small_ctx512_b8.sqlite.xz", "xl_ctx1024_b16.oom.json", "xl_ctx1024_b16.oom.sqlite.xz")


def test_a_run_that_ran_out_of_memory_is_one_row_and_opens_its_export(tui, tmp_path: Path):
    """Before: 2 exports and the record were 3 rows under '2 files', xl_ctx1024_b16 twice, one row
    'CUDA out of memory', the other 'ok', and enter on the record's row only said the message."""
    from nsight_tui.parsers import export_paths
    from nsight_tui.parsers.analyses.sweep import discover

    folder = tmp_path / "sweep"
    folder.mkdir()
    for name in NAMES:
        (folder / name).symlink_to(MEMORY / name)
    counted = sorted(r.path.name for r in discover(folder))  # the runs `report DIR` reads
    assert counted == ["small_ctx512_b8.sqlite.xz", "xl_ctx1024_b16.oom.json"]

    async def body():
        async with tui(export_paths([str(folder)]), size=(140, 30)) as ui:  # the folder, as the launch reads it
            await ui.until(lambda: type(ui.screen).__name__ == "FilesScreen" and ui.screen.view is not None,
                           "every file read", timeout=300)
            await ui.settle()
            table = ui.screen.table
            rows = [table.cell(r, table.columns[0]) for r in range(len(table))]
            assert sorted(rows) == counted
            assert "2 runs read" in ui.flat_text()
            ui.screen.grid.move_to(rows.index("xl_ctx1024_b16.oom.json"))
            await ui.settle()
            await ui.press("enter")
            await ui.until(lambda: ui.app.session is not None and ui.app.loaded, "the export opened", timeout=120)
            assert ui.app.session.path.name == "xl_ctx1024_b16.oom.sqlite.xz"

    asyncio.run(body())
