"""The TUI on a trace without NVTX: the range tree holds the iterations, phases and layers
inferred from the kernel sequence, each labelled with the `inferred:` domain, not "no NVTX ranges".
Counts come from the capture's own records (its config and the Python step times beside the export),
not from the model the TUI shows."""
from __future__ import annotations

import asyncio
import json
import re

from conftest import SAMPLES

NONVTX = SAMPLES / "nonvtx"
STEM = "small_ctx512_b8_async_nonvtx"


def test_the_tree_shows_inferred_ranges_marked_inferred(async_trace, tui):
    path = async_trace(NONVTX / f"{STEM}.sqlite.xz")
    record = json.loads((NONVTX / f"{STEM}.steps.json").read_text())
    iterations, layers = len(record["steps"]), record["config"]["n_layers"]

    async def body():
        async with tui(path) as ui:
            text = ui.text()
            assert "no NVTX ranges" not in text and "inferred:step_N" in text
            # the detail line says whose span the CPU column is: the launches, not an NVTX push/pop
            assert "(launch span, inferred from the kernel sequence)" in ui.flat_text()
            tree = ui.screen.grid
            labels = [n.label for n in tree.ranges.all_nodes()]
            # every range the inference made carries the tag; the export's own (CCCL's) keep theirs
            assert "inferred:forward" in labels and "inferred:layer_N" in labels
            assert all(label.startswith(("inferred:", "CCCL:", "ops")) for label in labels), labels
            layer = next(n for n in tree.ranges.all_nodes() if n.label == "inferred:layer_N"
                         and n.parent is not None and n.parent.label == "inferred:forward")
            assert len(layer.ids) % layers == 0  # each steady step's forward holds the model's layers
            await ui.press("a")  # one row per instance: every iteration the capture ran
            assert ui.app.session.aggregated is False
            rows = [n.label for n in ui.screen.grid.ranges.all_nodes()
                    if re.fullmatch(r"inferred:(step|warmup)_\d+", n.label)]
            assert len(rows) == iterations

    asyncio.run(body())


def test_the_cpu_column_says_inferred_ranges_show_their_launch_span(async_trace, tui):
    # An inferred range's CPU figure is its kernels' launch span, not an NVTX span: the column's header
    # is marked where inferred ranges are in the tree, the crumb says what the mark means, and the
    # export's header says both; an annotated trace's tree keeps the plain header.
    path = async_trace(NONVTX / f"{STEM}.sqlite.xz")

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            text = ui.text()
            header = next(line for line in text.splitlines() if "Range" in line and "GPU" in line)
            assert ("CPU*" in header or "CPU/step*" in header) and len(header.rstrip()) <= 80
            assert "CPU*: launch span if inferred" in ui.flat_text()
            columns = ui.screen.grid.ranges.columns
            assert next(c for c in columns if c.key == "cpu").export_header.startswith(
                "CPU: NVTX span; launch span for inferred: ranges")
            # the header's clocks line (the GPU runs behind: no syncs in this step) names the same span
            clocks = ui.app.session.header().clocks
            assert "(launch span, inferred)" in clocks and "CPU* = NVTX span, launch span for inferred" in clocks

    asyncio.run(body())


def test_an_annotated_trace_keeps_the_plain_cpu_header(async_trace, tui):
    path = async_trace(NONVTX / "small_ctx512_b8_async_twin.sqlite.xz")

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            header = next(line for line in ui.text().splitlines() if "Range" in line and "GPU" in line)
            assert "CPU*" not in header and "CPU" in header
            assert "launch span" not in ui.flat_text()
            clocks = ui.app.session.header().clocks
            assert "(NVTX span)" in clocks and "CPU = NVTX span" in clocks

    asyncio.run(body())


def test_the_pace_view_names_inferred_iterations_as_the_tree_does(async_trace, tui):
    """`p` on a capture without NVTX: each iteration as the tree's per-instance row names it
    (`inferred:step_0`, not a bare `step_0` that reads like the export's NVTX); as many as the run
    recorded (its Python step times beside the export)."""
    path = async_trace(NONVTX / f"{STEM}.sqlite.xz")
    iterations = len(json.loads((NONVTX / f"{STEM}.steps.json").read_text())["steps"])

    async def body():
        async with tui(path, size=(120, 34)) as ui:
            await ui.press("a")  # the tree, one row per instance
            tree = sorted(n.label for n in ui.screen.grid.ranges.all_nodes()
                          if re.fullmatch(r"inferred:(step|warmup)_\d+", n.label))
            await ui.press("p")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the pace view built")
            names = list(ui.screen.view.frame["name"])
            return tree, names, ui.text()

    tree, names, text = asyncio.run(body())
    assert len(names) == iterations and sorted(names) == tree
    assert "inferred:step_0" in text
