"""Hostile shapes in the TUI: ranges nested 3,000 deep (the aggregated tree
used to raise RecursionError) and a 10 MB range name (never finished loading). Both copies
are made here from the committed sample with SQL."""
from __future__ import annotations

import asyncio
import sqlite3

from conftest import mutated_copy

from nsight_tui.tui.tree_source import LABEL_LIMIT, MAX_INDENT_LEVELS

DEPTH = 3000


def _main_thread_span():
    return ("(SELECT globalTid g, min(start) s, max(end) e FROM NVTX_EVENTS WHERE eventType = 59 "
            "GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1)")


def test_ranges_nested_3000_deep_open_and_expand(tmp_path, tui):
    path = mutated_copy(tmp_path, "deep", f"""INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text)
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < {DEPTH - 1})
        SELECT t.s - {DEPTH} + i, t.e + {DEPTH} - i, 59, t.g, 'level_' || i FROM k, {_main_thread_span()} t""")

    async def body():
        async with tui(path) as ui:
            model = ui.screen.grid.ranges
            deepest = model.all_nodes()
            node = max(deepest, key=lambda n: n.depth)
            assert node.depth >= DEPTH - 1 and node.label.startswith("level_") or node.depth > DEPTH
            row = model.reveal(node)  # expands 3,000 ancestors
            assert row is not None
            label = model.label(model.rows[row])
            assert label.startswith(" " * (2 * MAX_INDENT_LEVELS) + f"[{model.rows[row].depth}] ")
            await ui.press("a")  # the aggregated tree: built without recursion
            assert "RecursionError" not in ui.text()

    asyncio.run(body())


def test_a_10mb_range_name_loads_and_is_shortened_on_screen(tmp_path, tui):
    n = 10_000_000
    path = mutated_copy(tmp_path, "long", f"""UPDATE StringIds SET value = value || substr(replace(hex(zeroblob({n // 2})),
        '0', 'b'), 1, {n}) WHERE id = (SELECT textId FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY start DESC
        LIMIT 1)""")
    con = sqlite3.connect(path)
    # the latest range's text id first, its text joined after: sorting the joined rows copies the
    # 10 MB text into SQLite's sorter once per range that names it (5 s)
    name = con.execute("SELECT value FROM StringIds WHERE id = (SELECT e.textId FROM NVTX_EVENTS e JOIN StringIds s "
                       "ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start DESC LIMIT 1)").fetchone()[0]
    con.close()

    async def body():
        async with tui(path) as ui:
            model = ui.screen.grid.ranges
            node = next(n for n in model.all_nodes() if n.label == name)
            row = model.reveal(node)
            label = model.label(model.rows[row])
            assert len(label) < LABEL_LIMIT + 100 and f"(+{len(name) - LABEL_LIMIT:,} characters)" in label
            assert node.label == name  # the model keeps it whole

    asyncio.run(body())
