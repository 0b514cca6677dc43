"""`u`: the GPU memory view on the committed memory captures: the rows are the memory
analysis's figures, the OOM capture's failed allocation and range on screen; the view model
without Textual on an export with no memory events."""
from __future__ import annotations

import asyncio

from conftest import SAMPLES

MEMORY = SAMPLES / "memory"


def test_memory_view_shows_peak_phases_and_the_oom(tui, async_trace):
    from nsight_tui.parsers.analyses.memory import memory_analysis
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.render.numbers import bytes_

    small = async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")
    oom = async_trace(MEMORY / "xl_ctx1024_b16.oom.sqlite.xz")

    async def run(path):
        want = memory_analysis(range_model(load_trace(path)))
        async with tui(path, size=(120, 40)) as ui:
            await ui.press("u")
            await ui.until(lambda: type(ui.screen).__name__ == "MemoryScreen" and ui.screen.view is not None, "memory")
            frame = ui.screen.view.frame
            peak = frame[frame["what"] == "peak in use"]
            assert peak["bytes"].tolist() == [want.peak_bytes]
            text = ui.text()
            assert "peak in use" in text and bytes_(want.peak_bytes) in text
            return frame, text, want

    frame, text, want = asyncio.run(run(small))
    assert set(frame["section"]) >= {"nsys", "torch", "forward", "backward", "optimizer"}
    kept = frame[(frame["section"] == "forward") & (frame["what"] == "kept (end − start)")]["bytes"].tolist()
    assert kept == [want.phases[0].kept_bytes] and kept[0] > 0
    frame, text, want = asyncio.run(run(oom))
    assert "OUT OF MEMORY" in text and "computing_attention_scores" in text
    assert frame[frame["section"] == "OOM"]["bytes"].tolist() == [want.out_of_memory.in_use_bytes,
                                                                 want.out_of_memory.total_memory_bytes]


def test_memory_view_model_without_events():
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.tui.viewmodels.memory import memory

    view = memory(range_model(load_trace(SAMPLES / "small_ctx128.sqlite")))
    assert len(view.frame) == 0 and "no GPU memory events" in view.summary()


def test_timeline_has_the_memory_lane(tui, async_trace):
    path = async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")

    async def run():
        async with tui(path, size=(120, 50)) as ui:
            await ui.press("t")
            await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen" and ui.screen.frame is not None,
                           "timeline")
            await ui.press("0")  # the whole capture
            await ui.settle()
            return ui.text()

    text = asyncio.run(run())
    assert "GPU0 mem" in text and "█" in text


def test_memory_view_of_a_capture_without_nvtx_names_the_sidecar_it_read(tui, async_trace, tmp_path):
    """`u` on a `capture --no-nvtx` export: torch's figures come from STEM.steps.json beside it
    (there are no step marks), and the view says so; max reserved = the sidecar's largest
    peak_reserved_bytes over every step's phases (read here from the JSON)."""
    import json
    import shutil

    stem = "small_ctx512_b8_async_nonvtx"
    nonvtx = SAMPLES / "nonvtx"
    path = tmp_path / f"{stem}.sqlite"
    shutil.copyfile(async_trace(nonvtx / f"{stem}.sqlite.xz"), path)
    shutil.copyfile(nonvtx / f"{stem}.steps.json", tmp_path / f"{stem}.steps.json")
    record = json.loads((nonvtx / f"{stem}.steps.json").read_text())
    reserved = max(m["peak_reserved_bytes"] for s in record["steps"] for m in s["memory"].values()
                   if "peak_reserved_bytes" in m)

    async def body():
        async with tui(path, size=(120, 40)) as ui:
            await ui.press("u")
            await ui.until(lambda: type(ui.screen).__name__ == "MemoryScreen" and ui.screen.view is not None, "memory")
            return ui.screen.view.frame, ui.flat_text()

    frame, text = asyncio.run(body())
    row = frame[frame["what"] == "max reserved"]
    assert row["bytes"].tolist() == [reserved]
    assert row["where"].tolist() == ["the caching allocator's segments"]
    assert f"torch's figures from the {stem}.steps.json" in text  # said once, under the table
    assert "step marks" not in text


def test_memory_view_sizes_its_columns_to_what_they_hold_and_where_is_whole(tui, async_trace):
    """At 120 columns every Where of a GPT-2 capture is whole and Figure is as wide as its widest
    figure (not padded past it); at 80x24 the table cuts Where, and the line under the table says
    the cursor's row whole."""
    path = async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")

    async def run(size, check):
        async with tui(path, size=size) as ui:
            await ui.press("u")
            await ui.until(lambda: type(ui.screen).__name__ == "MemoryScreen" and ui.screen.view is not None, "memory")
            await check(ui, ui.screen.view.frame)

    async def wide(ui, frame):
        lines = ui.text().splitlines()
        seen = 0
        for _, row in frame.iterrows():
            line = next((line for line in lines if line.startswith(f"{row['section']} ")
                         and f" {row['what']} " in line), None)
            if line is None:  # below the fold
                continue
            seen += 1
            assert line.rstrip().endswith(row["where"]) or not row["where"], (row["where"], line)
        assert seen >= 25
        header = next(line for line in lines if "Figure" in line and "Where" in line)
        widest = max(len(w) for w in frame["what"])
        # the figure column ends where the widest figure does: one gap, then the sizes (right-aligned)
        gap = header.index("Size") - (header.index("Figure") + widest)
        assert 1 <= gap <= 1 + 24 - len("Size (GiB · GB)"), header

    async def narrow(ui, frame):
        longest = max(range(len(frame)), key=lambda i: len(frame["where"][i]))
        want = frame["where"][longest]
        assert want not in ui.flat_text()  # cut in the table at 80 columns
        for _ in range(longest):
            await ui.press("down")
        assert ui.screen.selected_position() == longest
        assert want in ui.flat_text()  # said whole under the table

    asyncio.run(run((120, 40), wide))
    asyncio.run(run((80, 24), narrow))
