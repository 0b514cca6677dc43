"""Snapshots (pytest-textual-snapshot) of the main screens at 100x30, and the home screen at
the 80x24 minimum, on the committed sample trace. Update deliberately with
`pytest tests/test_tui_snapshots.py --snapshot-update` and look at the SVGs."""
from __future__ import annotations


import pytest

from test_tui_support import SAMPLES, open_backward_kernels, press, settle, wait_loaded

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing")


def fixed_app(paths=None):
    from nsight_tui.tui.app import NsightApp

    class FixedClock(NsightApp):
        """The load time is the one thing that changes from run to run."""

        def clock(self) -> float:
            return 0.0

    return FixedClock([str(p) for p in (paths or [TRACE])])


def steps(*actions):
    async def run_before(pilot):
        app = pilot.app
        if len(app.paths) == 1:
            await wait_loaded(app, pilot)
        else:
            await settle(app, pilot)
        for action in actions:
            if callable(action):
                await action(app, pilot)
            else:
                await press(app, pilot, action)
        await settle(app, pilot)

    return run_before


def test_snapshot_ranges(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30), run_before=steps())


def test_snapshot_ranges_80x24(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(80, 24), run_before=steps())


def test_snapshot_backward_kernels(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30), run_before=steps(open_backward_kernels))


def test_snapshot_launches(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30), run_before=steps(open_backward_kernels, "enter"))


def test_snapshot_correlation(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30),
                        run_before=steps(open_backward_kernels, "enter", "enter"))


def test_snapshot_api_summary(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30), run_before=steps("3"))


def test_snapshot_help(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(100, 30), run_before=steps("question_mark"))


def test_snapshot_files(snap_compare):
    paths = [SAMPLES / f"small_ctx128{s}.sqlite" for s in ("", "_fused", "_fwd")]  # a fixed set: new samples do not move it
    assert snap_compare(fixed_app(paths), terminal_size=(100, 30), run_before=steps())


AGNVTX = SAMPLES / "small_ctx128_agnvtx.sqlite"


@pytest.mark.skipif(not AGNVTX.exists(), reason="autograd-nvtx sample missing")
def test_snapshot_autograd_nvtx_80x24(snap_compare):
    """An --autograd-nvtx capture opens on step_N -> forward / backward / optimizer; PyTorch's op
    ranges wait under collapsed `ops` rows, the autograd thread's under the range they ran in."""
    assert snap_compare(fixed_app([AGNVTX]), terminal_size=(80, 24), run_before=steps())


@pytest.mark.skipif(not AGNVTX.exists(), reason="autograd-nvtx sample missing")
def test_snapshot_backward_parts(snap_compare):
    assert snap_compare(fixed_app([AGNVTX]), terminal_size=(100, 30), run_before=steps("b"))
