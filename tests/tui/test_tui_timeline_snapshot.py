"""Snapshot of the timeline at the 80x24 minimum, opened with `t` on step_N in the range
tree (its median instance), on the committed sample. Update deliberately with
`pytest tests/tui/test_tui_timeline_snapshot.py --snapshot-update` and look at the SVG."""
from __future__ import annotations

import pytest

from test_tui_snapshots import fixed_app, steps
from test_tui_support import SAMPLES, press, type_text
from test_tui_timeline import wait_frame

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing")


async def open_step_timeline(app, pilot) -> None:
    await press(app, pilot, "slash")
    await type_text(app, pilot, "step_N")
    await press(app, pilot, "enter", "t")
    await wait_frame(app, pilot, summary=True)


def test_snapshot_timeline_80x24(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(80, 24), run_before=steps(open_step_timeline))
