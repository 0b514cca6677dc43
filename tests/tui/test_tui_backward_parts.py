"""`b` in the range tree: backward by forward part, as parsers.backward_parts computes it
(itself checked against an independent mapping in tests/core/test_backward_parts.py), with
what was not mapped underneath; `e` exports exactly that table."""
from __future__ import annotations


import asyncio

import pytest
from helpers.xz_samples import plain
from conftest import running, press, screen_text, SAMPLES
from conftest import _md_tables as md_tables



AGNVTX = plain(SAMPLES / "small_ctx128_agnvtx.sqlite.xz")
pytestmark = pytest.mark.skipif(not AGNVTX.exists(), reason="autograd-nvtx sample missing")


def test_backward_parts_view_and_export(tmp_path):
    from nsight_tui.parsers.analyses.backward_parts import backward_parts
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.model.ranges import range_model

    (expected,) = backward_parts(range_model(load_trace(AGNVTX), "process"))

    async def scenario():
        async with running(AGNVTX, size=(100, 30), export_dir=tmp_path) as (app, pilot):
            await press(app, pilot, "b")
            screen = app.screen
            assert type(screen).__name__ == "BackwardPartsScreen"
            frame = screen.table.frame
            assert frame["path"].tolist() == ["/".join(p.path) for p in expected.parts]
            assert frame["bwd"].tolist() == [p.backward_kernel_ns for p in expected.parts]
            text = screen_text(app)
            assert "by seq" in text and "mapped: " in text and "99.99%" in text
            await press(app, pilot, "v")
            assert "one mapping only" in screen_text(app)
            await press(app, pilot, "e")
            (written,) = tmp_path.glob("nsight-tui_backward_parts*.md")
            (headers, rows), = md_tables(written.read_text())
            # the figures are totals over the iterations, and the header says so
            header = f"Backward kernel time (ns, total ×{expected.iterations})"
            assert [int(r[headers.index(header)]) for r in rows] == \
                [p.backward_kernel_ns for p in expected.parts]
            await press(app, pilot, "escape")
            assert type(app.screen).__name__ == "RangesScreen"

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
def test_backward_parts_view_says_when_there_is_no_mapping(size):
    """Whole, at 80 columns too: the capture flags that would make a mapping are the point of it
    (cut to one row it ended `--emit-nvtx or -…`)."""
    async def scenario():
        async with running(SAMPLES / "small_ctx128.sqlite", size=size) as (app, pilot):
            await press(app, pilot, "b")
            words = " ".join(screen_text(app).split())
            assert ("no backward-to-forward mapping: capture with --autograd-nvtx / --emit-nvtx or --backward-ranges, "
                    "with forward and backward ranges") in words

    asyncio.run(scenario())
