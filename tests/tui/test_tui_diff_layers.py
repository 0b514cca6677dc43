"""The diff view says a per-layer match by role: an annotated run's `block_N`
(written where each layer's module range would sit, tests/helpers/layer_ranges.py) against the same program
run without NVTX, whose layers are inferred (`layer_N`): one row, the other side's name beside it."""
from __future__ import annotations

import asyncio
import shutil

from conftest import SAMPLES
from helpers.layer_ranges import with_layer_ranges

NONVTX = SAMPLES / "nonvtx"
TWIN, INFERRED = "small_ctx512_b8_async_twin", "small_ctx512_b8_async_nonvtx"


def test_the_diff_tree_names_the_layers_matched_by_role(async_trace, tui, tmp_path):
    inferred = tmp_path / f"{INFERRED}.sqlite"
    shutil.copyfile(async_trace(NONVTX / f"{INFERRED}.sqlite.xz"), inferred)
    shutil.copyfile(NONVTX / f"{INFERRED}.steps.json", tmp_path / f"{INFERRED}.steps.json")
    annotated = with_layer_ranges(async_trace(NONVTX / f"{TWIN}.sqlite.xz"), tmp_path / "twin_block.sqlite")

    async def body():
        async with tui([annotated, inferred], size=(160, 50), diff=True) as ui:
            rows = [line for line in ui.text().splitlines() if "block_N" in line or "layer_N" in line]
            # warmup_N's and step_N's forward: one row each, both sides' figures, B's name said
            assert len([r for r in rows if "block_N (= B's layer_N)" in r]) == 2, rows
            assert not any("removed" in r or "added" in r for r in rows if "block_N" in r), rows
            # the backward's inferred layers have no annotated counterpart: B's own
            assert any("layer_N" in r and "added" in r and "block_N" not in r for r in rows), rows

    asyncio.run(body())
