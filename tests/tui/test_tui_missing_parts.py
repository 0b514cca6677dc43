"""`F` on exports missing a table or column the findings read: the memcpy rules ran
SQL of their own over CUPTI_ACTIVITY_KIND_RUNTIME and the memcpy table and the findings view
showed `OperationalError: no such column`. Now the rules that cannot look are skipped, the header
counts the note that says which columns are missing, and the view shows the findings it has."""
from __future__ import annotations

import asyncio

import pytest

from conftest import SAMPLES, mutated_copy

TRAIN = SAMPLES / "small_ctx128.sqlite"
RT, MC = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY"


@pytest.mark.parametrize("mutation,words", [
    (f"ALTER TABLE {RT} RENAME COLUMN nameId TO nameId_gone", f"{RT} has no nameId column"),
    (f"ALTER TABLE {MC} RENAME COLUMN copyKind TO copyKind_gone", None),
], ids=["runtime_nameId", "memcpy_copyKind"])
def test_findings_without_a_column(tui, tmp_path, mutation, words):
    path = mutated_copy(tmp_path, "missing", mutation, src=TRAIN)

    async def body():
        async with tui(path, size=(120, 40)) as ui:
            if words:
                assert any(words in n for n in ui.app.session.trace.info.notes)
            await ui.press("F")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                           "the findings shown")
            await ui.settle()
            text = ui.flat_text()
            assert "Error" not in text and "no such column" not in text, text[:2000]
            assert not ui.app.error_message

    asyncio.run(body())
