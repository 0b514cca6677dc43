"""What a newcomer reads first, and what each figure is: a capture with steps opens per step
(its step count and median period in the tree's header line, totals one `i` away); an
unannotated capture says its tree is inferred, not that it has "0 ranges"; the kernel
summary's % says it counts memory ops too. Expected values come from SQL over the export, the
workload's own Python step clock, or a hand formula, never from the model on screen."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics

import pytest

from conftest import SAMPLES
from nsight_tui.render import numbers

SAMPLE = SAMPLES / "small_ctx128.sqlite"
BARE = SAMPLES / "nonvtx" / "bare_gpt2_small_ctx512_b8"

_RANGES = """SELECT e.start, e.end, e.globalTid, coalesce(e.text, s.value) FROM NVTX_EVENTS e
             LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL"""


def _ranges(path) -> list[tuple]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(_RANGES).fetchall()
    finally:
        con.close()


def _in_steps(ranges: list[tuple], name: str) -> tuple[int, int]:
    """(steps, summed duration of `name` ranges inside a step_<n> range on the same thread)."""
    steps = [r for r in ranges if r[3] and r[3].startswith("step_") and r[3][5:].isdigit()]
    total = sum(r[1] - r[0] for r in ranges if r[3] == name
                and any(s[2] == r[2] and s[0] <= r[0] and r[1] <= s[1] for s in steps))
    return len(steps), total


def test_capture_with_steps_opens_per_step_totals_one_key_away(tui):
    """The tree opens per step: attention (×36 calls in 3 steps) shows its time ÷ 3 (12 calls'
    time), not ÷ 36; the line above the columns says per step and how many; `i` gives the totals,
    again per instance, again per step."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    ranges = _ranges(SAMPLE)
    steps, attention = _in_steps(ranges, "scaled_dot_product_attention")
    calls = sum(1 for r in ranges if r[3] == "scaled_dot_product_attention")

    async def run():
        async with tui(SAMPLE, size=(80, 24)) as ui:
            text = ui.flat_text()
            assert f"ranges per step (÷{steps}, median " in text and "i: totals" in text
            header = ui.text().splitlines()[2]
            assert "CPU/step" in header and "GPU/step" in header and "Kern/step" in header
            tree = ui.screen.grid.ranges
            node = next(n for n in tree.all_nodes() if n.label == "scaled_dot_product_attention"
                        and n.parent is not None and n.parent.parent is not None
                        and n.parent.parent.label == "step_N")
            row = tree.reveal(node)
            assert node.instances > steps  # several calls a step: per step is not per instance
            assert tree.value(tree.rows[row], "cpu") == pytest.approx(attention / steps)
            ui.screen.grid.data_changed(row)
            await ui.settle()
            assert f"per step (÷{steps}): CPU {numbers.duration(attention / steps)}" in ui.flat_text()
            await ui.press("i")  # totals
            assert "total ×N · i: per instance" in ui.flat_text()
            assert "CPU/step" not in ui.text().splitlines()[2]
            assert ui.screen.grid.ranges.value(ui.screen.grid.ranges.rows[row], "cpu") == pytest.approx(attention)
            await ui.press("i")  # per instance
            assert "per instance · i: per step" in ui.flat_text()
            assert calls >= node.instances
            await ui.press("i")  # back to per step
            assert "CPU/step" in ui.text().splitlines()[2]

    asyncio.run(run())


def test_median_step_is_the_workloads_own_step_clock(async_trace, tui):
    """On an unannotated capture the steps are inferred: the header line's step count is the
    workload's (less a last one cut short), and its median step is the Python clock's median (`*.steps.json`) within 5%."""
    path = async_trace(BARE.with_suffix(".sqlite.xz"))
    record = json.loads(BARE.with_suffix(".steps.json").read_text())
    seconds = [s["seconds"] for s in record["steps"]]

    async def run():
        async with tui(path, size=(120, 30)) as ui:
            crumb = ui.screen.query_one("#crumb").render().plain
            # every Python step, or all but the last where the kernel sequence ends inside it (an
            # iteration cut short is left out of the inferred steps, and the basis says so)
            shown_n = int(crumb.split("per step (÷", 1)[1].split(",", 1)[0])
            assert shown_n in (len(seconds), len(seconds) - 1), crumb
            shown = crumb.split("median ", 1)[1].split(")", 1)[0]
            value, unit = shown.split()
            ns = float(value) * {"ms": 1e6, "µs": 1e3, "s": 1e9}[unit]
            assert ns == pytest.approx(statistics.median(seconds) * 1e9, rel=0.05)

    asyncio.run(run())


def test_unannotated_capture_says_what_its_tree_is(async_trace, tui):
    """No NVTX at all: the header counts the inferred ranges (not "0 ranges"), the tree's line says
    they are inferred, and `?` no longer says the range views are empty."""
    path = async_trace(BARE.with_suffix(".sqlite.xz"))
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:  # the export has no NVTX table at all
        assert not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchall()
    finally:
        con.close()

    async def run():
        async with tui(path, size=(120, 30)) as ui:
            text = ui.flat_text()
            assert "0 ranges" not in text
            inferred = sum(1 for _ in ui.screen.grid.ranges.all_nodes())  # aggregated rows: fewer than ranges
            header = ui.text().splitlines()[0]
            assert " inferred" in header
            count = int(header.split(" inferred")[0].split()[-1].replace(",", ""))
            assert count >= inferred > 0
            assert "inferred ranges (no NVTX)" in text
            await ui.press("question_mark")
            help_text = ui.flat_text()
            assert "range views are empty" not in help_text
            assert "0 NVTX ranges + " in help_text and "inferred from the kernel sequence" in help_text

    asyncio.run(run())


def test_kernel_summary_share_says_it_counts_memory_ops(tui):
    """View 2's share column is of kernel + memcpy/memset time (nsys's Time% is of kernels alone):
    its header and the line above say so, and its top row's figure is that share (SQL)."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    con = sqlite3.connect(f"{SAMPLE.resolve().as_uri()}?mode=ro", uri=True)
    try:
        kernels = con.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        copies = con.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0] or 0
        sets = con.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone()[0] or 0
        top = con.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1").fetchone()[0]
    finally:
        con.close()

    async def run():
        async with tui(SAMPLE, size=(80, 24)) as ui:
            await ui.press("2")
            await ui.until_text("%ops")
            lines = ui.text().splitlines()
            assert lines[2].rstrip().endswith("%ops")
            assert "%ops: of kernel + memcpy/memset time" in ui.flat_text()
            first = lines[3]
            assert "memcpy Host-to-Device" in first
            assert first.split()[-1] == numbers.percent(top / (kernels + copies + sets))

    asyncio.run(run())


def test_ncu_view_at_80_columns_shows_range_limiter_and_the_total_it_sorts_by(tui):
    """View 6 at 80×24: Range, Limiter and the total the rows are in order of (Σ ncu µs, marked as
    the sort) are on screen; the top row's total is NVIDIA's (ncu_report's gpu__time_duration
    summed over that kernel's instances in that range)."""
    from collections import defaultdict

    from conftest import make_app
    from helpers.ncu_pair import EXPORT_XZ, oracle_kernels, report_xz
    from helpers.xz_samples import plain

    report, export = plain(report_xz()), plain(EXPORT_XZ)
    totals: dict = defaultdict(float)
    for k in oracle_kernels():
        stack = next(iter(k["nvtx"].values()), [])
        totals[("/".join(stack), k["mangled"])] += k["metrics"]["gpu__time_duration.sum"][0]
    ranked = sorted(totals.values(), reverse=True)

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(80, 24), app=app) as ui:
            await ui.press("6")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the ncu table", timeout=120)
            await ui.settle()
            lines = ui.text().splitlines()
            header = next(line for line in lines if "Kernel" in line)
            assert header.lstrip().startswith("Range") and "Limiter" in header and "Σ ncu µs▼" in header
            shown = [ui.screen.table.record(i)["total_us"] for i in range(len(ui.screen.table))]
            assert shown == sorted(shown, reverse=True)
            assert shown[0] == pytest.approx(ranked[0] / 1e3, rel=1e-6)
            assert "sorted by Σ ncu µs" in ui.flat_text()

    asyncio.run(body())


@pytest.mark.parametrize("size", [(120, 30), (80, 24)])
def test_memory_view_labels_binary_and_decimal_units_and_keeps_where_visible(tui, async_trace, size):
    """`u`: a size says GiB (2^30) and GB (10^9, as torch figures are printed) side by side,
    here the GPU's total memory from TARGET_INFO_GPU (hand formula); "Figure" takes its own width,
    not half the screen, so "Where" keeps its words at 120 columns; the export keeps the bytes."""
    path = async_trace(SAMPLES / "memory" / "small_ctx512_b8.sqlite.xz")
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        total = con.execute("SELECT max(totalMemory) FROM TARGET_INFO_GPU").fetchone()[0]
    finally:
        con.close()
    both = f"{total / 2 ** 30:.2f} GiB · {total / 1e9:.2f} GB"

    async def run():
        async with tui(path, size=size) as ui:
            await ui.press("u")
            await ui.until(lambda: type(ui.screen).__name__ == "MemoryScreen" and ui.screen.view is not None, "memory")
            await ui.settle()
            lines = ui.text().splitlines()
            row = next(line for line in lines if "GPU total" in line)
            assert both in row and "TARGET_INFO_GPU" in row
            assert "GiB = 2^30 B, GB = 10^9 B" in ui.flat_text()
            header = next(line for line in lines if "Figure" in line)
            # "Figure" is as wide as its longest label's room (24), not the screen's spare width
            assert header.index("Where") - header.index("Figure") <= 24 + 1 + 26 + 1  # + the widest size
            if size[0] >= 120:
                peak = next(line for line in lines if line.startswith("nsys") and "peak in use" in line)
                assert "step_0/backward at " in peak and "(every kind)" in peak and "…" not in peak  # Where whole
            view = ui.screen.export_view()
            assert view is not None and f"| {total} |" in view.body  # exact bytes in the export

    asyncio.run(run())


def test_help_leads_with_the_keys_of_the_view_in_front(tui):
    """`?` on the timeline: after the file's lines, its keys first (before the keys of every other
    view and the app's); on the range tree, the tree's."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")

    def help_text(screen) -> str:
        from rich.console import Console

        console = Console(width=100, record=True, file=open("/dev/null", "w"))
        console.print(screen._help_table())
        return console.export_text()

    def order(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if line.strip().startswith(("This view", "This file",
                                                                                        "Everywhere", "Timeline"))]

    async def run():
        async with tui(SAMPLE, size=(100, 40)) as ui:
            await ui.press("question_mark")
            text = help_text(ui.screen)
            heads = [line for line in order(text) if line != "This file"]  # the file's lines, then the keys
            assert heads[0].startswith("This view: Range tree"), heads
            await ui.press("escape", "t")
            await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen", "the timeline")
            await ui.press("question_mark")
            text = help_text(ui.screen)
            heads = [line for line in order(text) if line != "This file"]
            assert heads[0].startswith("This view: Timeline"), heads
            assert heads.index("Everywhere") > 0  # every other key after the view's
            assert "Zoom out to the whole capture" in text

    asyncio.run(run())


def test_timeline_w_shows_the_whole_capture_0_the_range(tui):
    """On a step's timeline, `w` widens the window to the capture's first to last event (SQL over
    every kernel, API call and NVTX range); `0` gives the step again."""
    if not SAMPLE.exists():
        pytest.skip("sample trace missing")
    con = sqlite3.connect(f"{SAMPLE.resolve().as_uri()}?mode=ro", uri=True)
    try:
        first, last = con.execute("""SELECT min(s), max(e) FROM (
            SELECT start AS s, end AS e FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
            SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL
            SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
            SELECT start, end FROM NVTX_EVENTS WHERE end IS NOT NULL AND eventType IN (59, 60, 70, 71))""").fetchone()
    finally:
        con.close()

    async def run():
        async with tui(SAMPLE, size=(100, 40)) as ui:
            await ui.press("t")
            await ui.until(lambda: getattr(ui.screen, "state", None) is not None, "the timeline")
            state = ui.screen.state
            opened = (state.t0, state.t1)
            assert opened[1] - opened[0] < last - first
            await ui.press("w")
            assert state.t0 <= first + 1000 and state.t1 >= last - 1000  # every event in the window
            assert (state.t1 - state.t0) <= (last - first) * 1.05
            assert "w  Whole capture" in ui.text().splitlines()[-1]
            await ui.press("0")
            assert (state.t0, state.t1) == state.fit_window

    asyncio.run(run())


def test_steps_that_alternate_show_their_mean_step(tui):
    """A DataLoader with too few workers: steps of ~20 and ~150 ms alternate, and the header's step is
    their mean period (SQL), said as such, not the median (one kind of step)."""
    from helpers.step_sql import steps as sql_steps
    from helpers.xz_samples import plain

    path = plain(SAMPLES / "loader" / "torchvision_resnet18_w2_b32.sqlite.xz")
    periods = [it.period for it in sql_steps(path)]

    async def run():
        async with tui(path, size=(120, 30)) as ui:
            def crumb() -> str:
                return ui.screen.query_one("#crumb").render().plain

            # the header's step waits for the GPU work to load (the steps' periods need it)
            await ui.until(lambda: "mean, steps unlike, " in crumb(), "the header's step")
            shown = crumb().split("mean, steps unlike, ", 1)[1].split(")", 1)[0]
            value, unit = shown.split()
            ns = float(value) * {"ms": 1e6, "µs": 1e3, "s": 1e9}[unit]
            assert ns == pytest.approx(statistics.fmean(periods), rel=0.005)
            assert statistics.fmean(periods) > 2 * statistics.median(periods)

    asyncio.run(run())
