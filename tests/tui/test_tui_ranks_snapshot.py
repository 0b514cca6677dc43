"""Snapshot of the ranks view (`5`) at the 80x24 minimum, on the committed 2-process DDP
export: a one-row header with the rank badge, every number whole. Update deliberately with
`pytest tests/tui/test_tui_ranks_snapshot.py --snapshot-update` and look at the SVG."""
from __future__ import annotations

import pytest

from helpers.xz_samples import plain
from conftest import SAMPLES

DDP = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
pytestmark = pytest.mark.skipif(not DDP.exists(), reason="DDP sample missing")


async def open_ranks(ui) -> None:
    await ui.press("5")
    await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the ranks view built")


def test_snapshot_ranks_80x24(snap_compare, fixed_app, steps):
    assert snap_compare(fixed_app([DDP]), terminal_size=(80, 24), run_before=steps(open_ranks))
