"""The header names the main thread and why; `M` makes another thread main and back; the
choice given on the command line is kept. Expected threads come from SQL (tests/helpers/process_sql.py)."""
from __future__ import annotations


import asyncio

from helpers import process_sql
import pytest
from conftest import running, press, SHARED, Ui




def main_thread_text(app) -> str:
    """What `?` says about the main thread (the header keeps to one row; `?` says it in full)."""
    return app.session.header().main_thread


def screen_text(app) -> str:
    return Ui(app, None).text()

THREADS = SHARED / "small_ctx128_threads.sqlite"
pytestmark = pytest.mark.skipif(not THREADS.exists(), reason="shared two-thread trace missing")


def sql_main_and_other():
    con = process_sql.connect(THREADS)
    (main,) = process_sql.main_threads(con).values()
    (other,) = [g for (g,) in con.execute("SELECT DISTINCT gtid FROM rng") if g != main]
    con.close()
    return main, other


def test_header_names_the_main_thread_and_t_picks_another():
    main, other = sql_main_and_other()

    async def scenario():
        async with running(THREADS, size=(100, 30)) as (app, pilot):
            assert f"main thread python3 ({main & 0xFFFFFF}) frames" in main_thread_text(app)
            tree = app.screen.grid.ranges
            row = next(i for i, r in enumerate(tree.rows) if r.is_group and r.obj.gtid == other)
            app.screen.grid.move_to(row)
            await press(app, pilot, "M")
            assert app.session.main_thread == str(other & 0xFFFFFF)
            assert list(app.session.model.main_threads.values()) == [other]
            assert f"main thread python3 ({other & 0xFFFFFF}) (picked: {other & 0xFFFFFF})" in main_thread_text(app)
            # The picked thread's group is listed first and marked main.
            first = app.screen.grid.ranges.rows[0].obj
            assert first.gtid == other and first.is_main
            # `M` on the thread picked by hand: back to the automatic choice.
            await press(app, pilot, "g", "M")
            assert app.session.main_thread is None
            assert list(app.session.model.main_threads.values()) == [main]

    asyncio.run(scenario())


def test_main_thread_from_the_command_line():
    _, other = sql_main_and_other()

    async def scenario():
        async with running(THREADS, size=(100, 30), main_thread=str(other & 0xFFFFFF)) as (app, _pilot):
            assert list(app.session.model.main_threads.values()) == [other]
            assert "(picked:" in main_thread_text(app)

    asyncio.run(scenario())
