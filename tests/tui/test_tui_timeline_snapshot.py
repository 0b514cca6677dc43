"""Snapshot of the timeline at the 80x24 minimum, opened with `t` on step_N in the range
tree (its median instance), on the committed sample. Update deliberately with
`pytest tests/tui/test_tui_timeline_snapshot.py --snapshot-update` and look at the SVG."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
from test_tui_timeline import wait_frame

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing")


async def open_step_timeline(ui) -> None:
    await ui.press("slash")
    await ui.type("step_N")
    await ui.press("enter", "t")
    await wait_frame(ui.app, ui.pilot, summary=True)


def test_snapshot_timeline_80x24(snap_compare, fixed_app, steps):
    assert snap_compare(fixed_app([TRACE]), terminal_size=(80, 24), run_before=steps(open_step_timeline))
