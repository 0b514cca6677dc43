"""The `6` view's warning that the report and the export look like different workloads, at 80x24:
whole, in at most three lines (it was four and cut mid-sentence by its box). The real crossed pair:
the bf16 pair's report (H200, 40 kernels) over the fp32 export (H100)."""
from __future__ import annotations

import asyncio

from conftest import make_app
from helpers.ncu_pair import BF16_STEM, EXPORT_XZ, report_xz
from helpers.xz_samples import plain


def test_the_mismatch_warning_is_whole_at_80x24(tui):
    export, report = plain(EXPORT_XZ), plain(report_xz(BF16_STEM))

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(80, 24), app=app) as ui:
            await ui.press("6")
            await ui.until(lambda: getattr(ui.app.screen, "view", None) is not None, "the ncu view built")
            await ui.settle()
            box = ui.app.screen.query_one("#ncu-warning")
            text = ui.app.screen.view.warning
            assert text.startswith("warning: profiled on NVIDIA H200, the export ran on NVIDIA H100")
            assert "of the profiled kernels follow the export's launch order" in text
            lines = ui.text().splitlines()
            shown = " ".join(lines[box.region.y: box.region.y + box.region.height])
            assert box.region.height <= 3
            assert " ".join(shown.split()) == " ".join(text.split())  # whole: not cut by the box

    asyncio.run(body())
