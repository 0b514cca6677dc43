"""`a` on the files view of one run's per-rank exports: the ranks opened as one trace on one clock
(read.rank_merge), driven by keys. Checked against SQL over the two files: the header counts both
files' kernels, the ranks view lists both ranks, and `w` on a finding replays the ranks coupled,
saying how far each file moved."""
from __future__ import annotations

import asyncio

from conftest import SAMPLES
from helpers.export_sql import sql_rows
from helpers.xz_samples import plain

FOLDER = SAMPLES / "ranks_small_ctx128_ddp2"
FILES = [FOLDER / f"small_ctx128_ddp2_rank{r}.sqlite.xz" for r in (0, 1)]


def test_a_opens_the_ranks_as_one_and_w_replays_them_coupled(tui):
    from nsight_tui.parsers.read.rank_merge import MergedRanks

    kernels = sum(sql_rows(plain(f), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for f in FILES)

    async def body():
        async with tui(FILES, size=(140, 40)) as ui:
            assert type(ui.screen).__name__ == "FilesScreen"
            await ui.pilot.press("a")
            await ui.until(lambda: type(ui.screen).__name__ == "RangesScreen" and ui.app.loaded,
                           "the ranks opened as one", timeout=180)
            session = ui.app.session
            assert isinstance(session.trace, MergedRanks) and session.path == FOLDER
            await ui.settle()
            assert f"{kernels:,} kernels" in ui.flat_text()
            await ui.pilot.press("5")
            await ui.until(lambda: type(ui.screen).__name__ == "RanksScreen" and "rank 1" in ui.flat_text(),
                           "both ranks side by side", timeout=120)
            assert "rank 0" in ui.flat_text()
            await ui.pilot.press("F")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                           "the findings", timeout=180)
            await ui.settle()
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen" and ui.screen.view is not None,
                           "the fix replayed", timeout=180)
            await ui.settle()
            text = ui.flat_text()
            assert "2 per-rank exports replayed as one" in text and "by the collectives" in text

    asyncio.run(body())


def test_a_on_files_that_are_not_one_runs_ranks_says_so(tui):
    others = [SAMPLES / "small_ctx128.sqlite", FILES[0]]

    async def body():
        async with tui(others, size=(80, 24)) as ui:
            await ui.pilot.press("a")
            # a whole sentence, whole on an 80-column screen ("...: these are not" read as a line cut short)
            said = "a: these are not one run's per-rank exports (NAME_rank0, NAME_rank1, ...)"
            await ui.until(lambda: said in ui.flat_text(), "a refused, said on the status line")
            assert type(ui.screen).__name__ == "FilesScreen"

    asyncio.run(body())


def test_the_straggler_replays_from_the_ranks_and_the_findings_views(tui):
    """The committed straggler (a sleep on rank 1 alone): its ranks opened as one; `w` on the ranks
    view, which names rank 1, replays the edit that evens it out; the `straggler` finding is listed
    with its rank, and `w` on it replays the same edit."""
    files = sorted((SAMPLES / "replay" / "straggler" / "base").glob("*.sqlite.xz"))

    def replayed_straggler(text: str) -> bool:
        return "edit: straggler: the straggler, rank 1 (python3, pid" in text and "GPU 1)" in text and "pauses of its own" in text

    async def body():
        async with tui(files, size=(140, 40)) as ui:
            await ui.pilot.press("a")
            await ui.until(lambda: type(ui.screen).__name__ == "RangesScreen" and ui.app.loaded,
                           "the ranks opened as one", timeout=180)
            await ui.pilot.press("5")
            await ui.until(lambda: type(ui.screen).__name__ == "RanksScreen" and ui.screen.view is not None,
                           "the ranks side by side", timeout=120)
            await ui.settle()
            assert "straggler: rank 1" in ui.flat_text()
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen" and ui.screen.view is not None,
                           "the straggler replayed from the ranks view", timeout=180)
            await ui.settle()
            assert replayed_straggler(ui.flat_text())
            await ui.pilot.press("F")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                           "the findings", timeout=300)
            await ui.settle()
            assert "the other ranks wait for rank 1" in ui.flat_text()
            for _ in range([f.id for f in ui.screen.view.findings].index("straggler")):
                await ui.pilot.press("down")
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen" and ui.screen.view is not None,
                           "the fix replayed", timeout=180)
            await ui.settle()
            assert replayed_straggler(ui.flat_text())

    asyncio.run(body())
