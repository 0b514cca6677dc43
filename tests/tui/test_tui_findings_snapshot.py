"""Snapshot of the findings view (`F`) at the 80x24 minimum on the planted host-sleep twin, the
host-bound gap highlighted (its evidence and fix under the table). The file is opened under a
short name (`host-sleep.sqlite`) so the header keeps to one row at 80 columns. Update deliberately with
`pytest tests/tui/test_tui_findings_snapshot.py --snapshot-update` and look at the SVG."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FINDINGS
from helpers.xz_samples import plain

TRACE = FINDINGS / "small_ctx128_host-sleep.sqlite.xz"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="findings twin missing")


async def open_findings(ui) -> None:
    await ui.press("F")
    await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the findings shown")
    await ui.press("j")  # launch-bound first; then the planted host-bound gap


def test_snapshot_findings_80x24(snap_compare, fixed_app, steps, tmp_path: Path):
    short = Path(shutil.copyfile(plain(TRACE), tmp_path / "host-sleep.sqlite"))
    assert snap_compare(fixed_app([short]), terminal_size=(80, 24), run_before=steps(open_findings))
