"""The timeline view (`t`) driven by keys on the committed sample and the shared two-thread
trace: where it opens (SQL picks the median instance and the launch), what each key does to
the window, the item under the cursor with its CPU lead, enter into the correlation detail,
and `e` (its GPU ops and idle split checked against SQL and the independent idle reference)."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from conftest import running, press, Sql, Ui, trace_params
from conftest import _md_tables as md_tables

ro = Sql.connect




async def settle(app, pilot) -> None:
    await Ui(app, pilot).settle()


async def type_text(app, pilot, text: str) -> None:
    await Ui(app, pilot).type(text)


def screen_text(app) -> str:
    return Ui(app, None).text()


async def open_backward_kernels(app, pilot) -> None:
    await Ui(app, pilot).open_backward_kernels()


from helpers.idle_reference import Reference  # noqa: E402 - the independent computation

TRACES = trace_params()
STEPS = """SELECT e.start, e.end, coalesce(e.text, s.value),
                  (SELECT d.text FROM NVTX_EVENTS d WHERE d.eventType = 75 AND d.domainId = e.domainId
                   AND (d.globalTid >> 24) = (e.globalTid >> 24))
           FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE e.eventType IN (59, 60, 70, 71) AND coalesce(e.text, s.value) GLOB 'step_[0-9]*'"""


def run(coro):
    return asyncio.run(coro)


def median_steps(path: Path) -> dict[str, tuple[int, int, str]]:
    """Per NVTX domain ("" = default), the step_N instance with the median duration (the
    lower middle; ties by start), named as the tree names it (`domain:step_3`)."""
    con = ro(path)
    try:
        rows = con.execute(STEPS).fetchall()
    finally:
        con.close()
    out = {}
    for domain in {r[3] or "" for r in rows}:
        mine = sorted((r for r in rows if (r[3] or "") == domain), key=lambda r: (r[1] - r[0], r[0]))
        start, end, text, _ = mine[(len(mine) - 1) // 2]
        out[domain] = (start, end, f"{domain}:{text}" if domain else text)
    return out


async def open_step_timeline(app, pilot) -> None:
    await press(app, pilot, "slash")
    await type_text(app, pilot, "step_N")
    await press(app, pilot, "enter", "t")
    await wait_frame(app, pilot)


async def wait_frame(app, pilot, after: int = 0, timeout: float = 30.0, summary: bool = False) -> None:
    """Until the timeline has drawn a frame newer than `after` for its latest state, nothing
    is pending, and (`summary`) the lead/queue line of that frame is shown too."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        await settle(app, pilot)
        screen = app.screen
        if type(screen).__name__ == "TimelineScreen" and screen.frames_drawn > after \
                and screen.frame is not None and screen._serial == screen.frame_serial \
                and (not summary or screen.summary_serial == screen.frame_serial):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no timeline frame")


async def key(app, pilot, *keys: str) -> None:
    for k in keys:
        before = app.screen.frames_drawn
        await press(app, pilot, k)
        await wait_frame(app, pilot, before)


@pytest.mark.parametrize("path", TRACES)
def test_opens_on_the_median_instance_and_keys_move_the_window(path: Path):
    medians = median_steps(path)

    async def body():
        async with running(path, size=(100, 30)) as (app, pilot):
            await open_step_timeline(app, pilot)
            screen = app.screen
            st = screen.state
            shown = st.target.title.split(" (median of")[0]
            domain = shown.split(":")[0] if ":" in shown else ""
            start, end, name = medians[domain]
            assert shown == name and f"timeline · {name} (median of" in screen_text(app)
            assert st.fit_window == (start, end) and st.origin == start  # exactly the range
            # the idle line at fit is that instance's split, by the independent reference
            split = next(s for s in screen.frame.splits if s.device == 0)
            want = Reference(path).split(0, [(start, end)], 100_000)
            assert (split.busy_ns, split.launch_bound_ns, split.sync_bound_ns, split.host_bound_ns) == \
                (want["busy"], want["launch"], want["sync"], want["host"])
            share = f"busy {want['busy'] / (end - start):.0%}"
            assert share in screen_text(app)
            span = st.span
            await key(app, pilot, "plus")
            assert abs(st.span - span // 2) <= 1
            await key(app, pilot, "minus", "minus")
            assert abs(st.span - 2 * span) <= 4
            await key(app, pilot, "0")
            assert (st.t0, st.t1) == st.fit_window
            t0 = st.t0
            await key(app, pilot, "l")
            assert st.t0 - t0 == round(st.span / st.n)
            await key(app, pilot, "h", "L")
            assert st.t0 - t0 == round(st.span * st.n / st.n)
            await key(app, pilot, "H", "0", "j")
            first = st.selected
            await key(app, pilot, "k")
            assert st.selected == first - 1
            # `]`: the next GPU gap of at least the threshold, by hand over the export's ops
            await key(app, pilot, "0")
            threshold, cursor = st.gap_threshold(), st.cursor_ns
            con = ro(path)
            try:
                ops = sorted(con.execute("""SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
                    SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
                    SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"""))
            finally:
                con.close()
            reach, gap = None, None
            for s, e in ops:
                if reach is not None and s > reach and s - reach >= threshold and reach > cursor:
                    gap = (reach, s)
                    break
                reach = e if reach is None else max(reach, e)
            await key(app, pilot, "right_square_bracket")
            assert gap is not None and st.t0 <= gap[0] and gap[1] <= st.t1
            assert abs(st.cursor_ns - (gap[0] + gap[1]) // 2) <= st.span // st.n
            assert "gap" in screen_text(app)

    run(body())


@pytest.mark.parametrize("path", TRACES)
def test_from_a_launch_centred_on_it_with_its_lead_then_enter(path: Path):
    async def body():
        async with running(path, size=(100, 30)) as (app, pilot):
            await open_backward_kernels(app, pilot)
            await press(app, pilot, "enter", "j", "j")  # the top kernel's launches, the third one
            rec = app.screen.table.record(app.screen.grid.cursor)
            corr = int(rec["corr"])
            await press(app, pilot, "t")
            await wait_frame(app, pilot)
            con = ro(path)
            try:
                k_start, k_end, lead = con.execute("""SELECT k.start, k.end, k.start - r.start
                    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                    ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
                    WHERE k.correlationId = ?""", (corr,)).fetchone()
            finally:
                con.close()
            frame = app.screen.frame
            assert frame.item is not None and frame.item.corr == corr
            assert (frame.item.start_ns, frame.item.end_ns, frame.item.lead_ns) == (k_start, k_end, lead)
            assert frame.t0 <= k_start < k_end <= frame.t1
            from nsight_tui.render import numbers

            text = " ".join(screen_text(app).split())
            assert f"corr {corr}" in text and f"CPU lead {numbers.duration(lead)}" in text
            await press(app, pilot, "enter")
            assert type(app.screen).__name__ == "CorrelationScreen" and app.screen.corr == corr
            await press(app, pilot, "escape")
            assert type(app.screen).__name__ == "TimelineScreen"

    run(body())


def export_step_window(path: Path, tmp_path: Path, *zoom: str) -> tuple[str, int, int]:
    """The median step's timeline (then `zoom` keys) exported with `e`: the export's text and the
    window it covers (ns)."""
    async def body():
        async with running(path, size=(100, 30), export_dir=tmp_path) as (app, pilot):
            await open_step_timeline(app, pilot)
            if zoom:
                await key(app, pilot, *zoom)
            st = app.screen.state
            t0, t1 = st.t0, st.t1
            await press(app, pilot, "e")
            out = tmp_path / "nsight-tui_timeline.md"
            deadline = time.monotonic() + 20
            while not out.exists() and time.monotonic() < deadline:
                await settle(app, pilot)
            return out.read_text(), t0, t1

    return run(body())


@pytest.mark.parametrize("path", TRACES[:1])
def test_export_lists_the_windows_ops_and_its_idle_split(path: Path, tmp_path: Path):
    ref = Reference(path)
    text, t0, t1 = export_step_window(path, tmp_path, "plus")
    tables = {tuple(h): rows for h, rows in md_tables(text)}
    split = next(rows for h, rows in tables.items() if "launch-bound ms" in h)
    items = next(rows for h, rows in tables.items() if "correlation ID" in h)
    gpu_rows = [r for r in items if r[1] in ("kernel", "memcpy", "memset")]
    want_ops = sum(1 for o in ref.ops if o[0] < t1 and o[1] > t0)
    assert len(gpu_rows) == want_ops
    assert {int(r[3]) for r in gpu_rows} == {o[0] for o in ref.ops if o[0] < t1 and o[1] > t0}
    want = ref.split(0, [(t0, t1)], 100_000)
    row = split[0]
    assert row[2] == f"{(t1 - t0) / 1e6:,.3f}"
    for cell, part in zip(row[3:], ("busy", "launch", "sync", "host")):
        assert cell.startswith(f"{want[part] / 1e6:,.3f} ("), (part, cell, want)
    assert f"window {t0} ns to {t1} ns" in text


def test_palette_opens_the_timeline():
    path = TRACES[0].values[0]

    async def body():
        async with running(path) as (app, pilot):
            await press(app, pilot, "ctrl+p")
            await type_text(app, pilot, "timeline")
            deadline = time.monotonic() + 10
            while "View: timeline" not in screen_text(app) and time.monotonic() < deadline:
                await pilot.pause(0.02)
            await press(app, pilot, "enter")
            await wait_frame(app, pilot)
            assert "timeline" in screen_text(app)

    run(body())


def test_a_graph_traced_whole_is_a_gpu_op_on_the_timeline(tmp_path: Path):
    """nsys's default graph tracing (sample_traces/graph_whole): the step's window holds its graph launch
    as one GPU op of kind graph, named by its graph, as many and where SQL over
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE says."""
    from conftest import SAMPLES
    from helpers.xz_samples import plain

    path = plain(SAMPLES / "graph_whole" / "decode_graph_whole.sqlite.xz")
    text, t0, t1 = export_step_window(path, tmp_path)
    items = next(rows for h, rows in md_tables(text) if "correlation ID" in h)
    graphs = [r for r in items if r[1] == "graph"]
    con = ro(path)
    try:
        want = con.execute("SELECT start, graphId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE start < ? AND \"end\" > ?",
                           (t1, t0)).fetchall()
    finally:
        con.close()
    assert want and sorted(int(r[3]) for r in graphs) == sorted(s for s, _ in want)
    assert {r[2] for r in graphs} == {f"[CUDA graph {g}]" for _, g in want}
