"""Snapshots of the diff views at the 80x24 minimum, on the committed manual-vs-fused pair.
Update deliberately (`pytest tests/tui/test_tui_diff_snapshots.py --snapshot-update`) and
look at the SVGs."""
from __future__ import annotations

import pytest
from conftest import SAMPLES
from helpers.xz_samples import plain

MANUAL = SAMPLES / "small_ctx128.sqlite"
FUSED = plain(SAMPLES / "small_ctx128_fused.sqlite.xz")  # the title shows the file name: plain keeps it
pytestmark = pytest.mark.skipif(not (MANUAL.exists() and FUSED.exists()), reason="sample pair missing")


def diff_app():
    from nsight_tui.tui.app import NsightApp

    return NsightApp([str(MANUAL), str(FUSED)], diff=True)


@pytest.fixture()
def steps(drive):
    def make(*keys):
        async def run_before(pilot):
            ui = drive(pilot)
            await ui.settle()
            await ui.press(*keys)
            await ui.settle()

        return run_before

    return make


def test_snapshot_diff_80x24(snap_compare, steps):
    assert snap_compare(diff_app(), terminal_size=(80, 24), run_before=steps())


def test_snapshot_diff_why_80x24(snap_compare, steps):
    assert snap_compare(diff_app(), terminal_size=(80, 24), run_before=steps("w"))


def test_snapshot_diff_step_kernels_80x24(snap_compare, steps):
    assert snap_compare(diff_app(), terminal_size=(80, 24), run_before=steps("K"))
