"""`w` on a finding (its fix replayed) and the replayed lanes on the timeline (`y`, and `l` from
the what-if), driven by keys on committed samples.

Checked against quantities the replay does not produce: the measured step is the SQL step period
(tests/helpers/step_sql.py); the unchanged replay's lanes are, op by op and call by call, the
export's own kernels, copies and runtime calls read with SQL (the replay is exact under the
identity); a fix's lanes keep the export's op count per stream in the replayed step, and under
`speed:gemm=2` each GEMM lasts half its measured duration (the export's, by hand)."""
from __future__ import annotations

import asyncio
import sqlite3
import threading

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.step_sql import steps

from nsight_tui.parsers.kernels.families import classify

TRACE = SAMPLES / "small_ctx128.sqlite"
OPS_SQL = """
SELECT start, end, deviceId, streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
UNION ALL SELECT start, end, deviceId, streamId, '' FROM CUPTI_ACTIVITY_KIND_MEMCPY
UNION ALL SELECT start, end, deviceId, streamId, '' FROM CUPTI_ACTIVITY_KIND_MEMSET
"""


def run(coro):
    return asyncio.run(coro)


def ro(path):
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def sql_ops(device: int, stream: int) -> list[tuple[int, int, str]]:
    con = ro(TRACE)
    rows = [(s, e, n) for s, e, d, st, n in con.execute(OPS_SQL) if d == device and st == stream]
    con.close()
    return sorted(rows)


def sql_calls(tid: int) -> list[tuple[int, int]]:
    con = ro(TRACE)
    rows = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid % 16777216 = ?",
                       (tid,)).fetchall()
    con.close()
    return sorted(rows)


async def open_findings(ui) -> None:
    await ui.press("F")
    await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                   "the findings shown")
    await ui.settle()


async def first_what_if_text(ui) -> str:
    """`w` on the first finding, once its replay is done: the screen's text, its spaces run together."""
    await open_findings(ui)
    await ui.pilot.press("w")
    await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen", "the what-if screen")
    await ui.until(lambda: ui.screen.view is not None, "the replay done", timeout=120)
    await ui.settle()
    return " ".join(ui.flat_text().split())


async def highlight(ui, rule: str) -> None:
    table = ui.screen.table
    row = next(r for r in range(len(table)) if table.value(r, "id") == rule)
    ui.screen.grid.move_to(row)
    await ui.settle()
    assert ui.screen.view.findings[ui.screen.current].id == rule



async def _lanes_of_the_what_if(ui) -> None:
    """Wait for the what-if's replay, press `l`, and wait for its lanes' first frame on the timeline."""
    await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen" and ui.screen.view is not None,
                   "the what-if", timeout=120)
    await ui.pilot.press("l")
    await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen" and ui.screen.replay is not None,
                   "the fix's lanes", timeout=120)
    await ui.until(lambda: ui.screen.frame_serial == ui.screen._serial, "their frame")

def test_w_shows_the_findings_fix_replayed_with_its_range_and_what_holds_the_step(tui):
    period_ms = float(np.median([it.period for it in steps(TRACE)])) / 1e6  # SQL: the measured step

    async def body():
        async with tui(TRACE, size=(120, 40)) as ui:
            await open_findings(ui)
            await highlight(ui, "launch-bound")
            finding = ui.screen.view.findings[ui.screen.current]
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen", "the what-if screen")
            await ui.until(lambda: ui.screen.view is not None, "the replay done", timeout=120)
            await ui.settle()
            screen = ui.screen
            text = ui.flat_text()
            # the stages were said, in order, while it ran
            assert screen.progress_seen[0].startswith("building the replay's dependency graph")
            assert screen.progress_seen[-1] == "replayed"
            assert f"step: {period_ms:,.2f} ms measured" in text
            p = screen.view.prediction
            # the phases graphed, each its own graph (the loop's host work between them is no graph's)
            assert p.edits and p.edits[0].edit == "graph:forward" == finding.edits[0]
            # the graph edit rests on figures measured elsewhere: a range, and what it assumes
            assert p.low_ns < p.high_ns
            assert f"predicted: {p.step_ns / 1e6:,.2f} ms per step" in text
            assert f"range {p.low_ns / 1e6:,.2f} ms .. {p.high_ns / 1e6:,.2f} ms" in text
            assert "assumes: a graph's nodes handed to the GPU a segment at a time" in text
            # the range's two sources apart, each inside the whole
            (el, eh), (cl, ch) = p.edits_range_ns, p.pace_range_ns
            assert p.low_ns == min(el, cl) and p.high_ns == max(eh, ch)
            assert (f"of the range: the edits' assumptions alone {el / 1e6:,.2f} ms .. {eh / 1e6:,.2f} ms per step"
                    in text and f"the CPU's pace alone {cl / 1e6:,.2f} ms .. {ch / 1e6:,.2f} ms per step" in text)
            assert f"saving: {p.saving_ns / 1e6:,.2f} ms per step" in text
            assert f"the rule's own estimate {finding.estimate_ms_per_step:,.2f} ms" in text
            assert "holds the step:" in text and p.holders[0].what in text
            # the saving is the finding's (the findings view ranks by the same replay)
            assert p.saving_ns / 1e6 == pytest.approx(finding.saving_ms_per_step, abs=1e-6)
            await ui.press("escape")
            assert type(ui.screen).__name__ == "FindingsScreen"

    run(body())


def test_the_screen_answers_keys_while_the_replay_runs(tui, monkeypatch):
    """The replay runs in a worker: held at its first stage, the screen shows that stage and
    escape still goes back."""
    from nsight_tui.tui import session as session_mod

    release, waiting = threading.Event(), threading.Event()
    real = session_mod.Session.whatif

    def held(self, ask, progress=lambda f, t: None):
        progress(0.05, "held by the test")
        waiting.set()
        release.wait(60)
        return real(self, ask, progress)

    monkeypatch.setattr(session_mod.Session, "whatif", held)

    async def body():
        async with tui(TRACE, size=(100, 30)) as ui:
            await open_findings(ui)
            await highlight(ui, "launch-bound")
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen"
                           and ui.screen.progress_seen == ["held by the test"], "the first stage on screen")
            assert waiting.is_set() and ui.screen.view is None
            assert "held by the test" in ui.flat_text()
            await ui.pilot.press("escape")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen", "back while the replay runs")
            release.set()
            await ui.settle()

    try:
        run(body())
    finally:
        release.set()


def test_the_unchanged_replays_lanes_are_the_exports_ops_and_calls(tui):
    async def body():
        async with tui(TRACE, size=(120, 40)) as ui:
            await ui.press("t")
            await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen" and ui.screen.frame is not None,
                           "the timeline")
            before = len(ui.screen.state.timeline.lanes)
            await ui.pilot.press("y")
            await ui.until(lambda: ui.screen.replay is not None, "the replayed lanes", timeout=120)
            await ui.until(lambda: ui.screen.frame_serial == ui.screen._serial, "their frame")
            lanes = ui.screen.state.timeline.lanes
            text = ui.flat_text()
            assert "measured + ≈ replayed (model: unchanged)" in text
            replayed = [lane for lane in lanes if lane.key.startswith("replay:")]
            assert len(lanes) == before + len(replayed) and replayed
            for lane in replayed:  # each right under its measured lane
                assert lanes[lanes.index(lane) - 1].key == lane.key.removeprefix("replay:")
            gpu = [lane for lane in replayed if lane.kind == "gpu"]
            api = [lane for lane in replayed if lane.kind == "api"]
            assert gpu and api
            for lane in gpu:
                want = sql_ops(lane.device, lane.stream)
                assert len(lane) == len(want)
                assert sorted(zip(lane.start.tolist(), lane.end.tolist())) == [(s, e) for s, e, _ in want]
            for lane in api:
                want = sql_calls(lane.gtid & 0xFFFFFF)
                assert sorted(zip(lane.start.tolist(), lane.end.tolist())) == want
            await ui.pilot.press("y")
            await ui.until(lambda: ui.screen.replay is None, "measured only again")
            assert len(ui.screen.state.timeline.lanes) == before

    run(body())


def test_a_fixs_lanes_from_its_what_if_keep_the_ops_and_halve_the_gemms(tui):
    """`l` on a what-if opens the timeline on the edited replay's lanes. Under speed:gemm=2 every
    op is still there (the step window's count per stream is the export's) and each GEMM lasts
    half its measured time."""
    from nsight_tui.tui.viewmodels.whatif import WhatIf

    async def body():
        async with tui(TRACE, size=(120, 40)) as ui:
            await open_findings(ui)
            ui.screen.post_message(ui.screen.WhatIfChosen(WhatIf("", ("speed:gemm=2",))))
            await _lanes_of_the_what_if(ui)
            screen = ui.screen
            assert "replayed (model: speed:gemm=2)" in ui.flat_text()
            assert screen.replay.label == "speed:gemm=2"
            a, b = screen.replay.step_window
            assert screen.state.t0 < a < b < screen.state.t1  # opened on the replay's first step
            assert screen.state.fit_window == (screen.state.t0, screen.state.t1)  # `0` fits it
            assert "what if · speed:gemm=2 · the replay's first step" in ui.flat_text()
            lane = next(lane for lane in screen.state.timeline.lanes if lane.key.startswith("replay:gpu:"))
            want = sql_ops(lane.device, lane.stream)
            assert len(lane) == len(want)
            by_start = dict(zip(lane.ref.tolist(), zip(lane.start.tolist(), lane.end.tolist())))
            measured = sorted(want)
            # the lane's ops, in the measured order, against the export's: GEMMs at half their time
            ops = screen.session.trace.ops
            order = sorted(by_start, key=lambda op: int(ops["start"].iat[op]))
            assert len(order) == len(measured)
            gemms = 0
            for op, (s, e, name) in zip(order, measured):
                r0, r1 = by_start[op]
                if name and classify(name) == "gemm":
                    gemms += 1
                    assert r1 - r0 == round((e - s) / 2)
                else:
                    assert r1 - r0 == e - s
            assert gemms > 100
            # the edited step is shorter: the replayed lanes' ops in the replay's first step are
            # the export's ops launched in the measured first step
            it = sorted(steps(TRACE), key=lambda x: x.start)[0]
            con = ro(TRACE)
            n_sql = con.execute(
                "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) "
                "WHERE r.start >= ? AND r.start < ? AND k.streamId = ?", (it.start, it.start + it.period,
                                                                          lane.stream)).fetchone()[0]
            con.close()
            kern = np.array([int(ops["kind"].iat[op]) == 0 for op in lane.ref.tolist()])
            api = screen.session.trace.api["start"].to_numpy()
            launched = np.array([api[int(ops["api"].iat[op])] for op in lane.ref.tolist()])
            in_step = kern & (launched >= it.start) & (launched < it.start + it.period)
            assert int(in_step.sum()) == n_sql
            assert (lane.end[in_step].max() - lane.start[in_step].min()) < it.period

    run(body())


def test_the_what_if_says_the_step_run_alone_where_the_capture_kept_one(tui):
    """A capture with its bare run beside it (`capture --bare-run`, opened as committed, .sqlite.xz):
    the what-if of a finding says the step without the profiler, the record's median, beside the
    captured one."""
    import json
    import statistics

    path = SAMPLES / "bare" / "small_ctx128_nosync.sqlite.xz"
    record = json.loads((SAMPLES / "bare" / "small_ctx128_nosync.bare.json").read_text())
    alone_ms = statistics.median(s["seconds"] for s in record["steps"] if s["name"].startswith("step_")) * 1e3

    async def body():
        async with tui(path, size=(140, 50)) as ui:
            text = await first_what_if_text(ui)
            assert "alone: Without the profiler (the workload run alone just before this capture" in text
            assert f"{alone_ms:,.2f} ms per step" in text and "the profiler made the step" in text

    run(body())


def test_w_on_a_finding_whose_fix_was_not_replayed_says_why_and_stays(tui):
    """host-bound-gap on the bf16 capture without NVTX names `nohost:1ms`, which has no pause of 1 ms
    to act on there: the findings ranked it by the rule's estimate, and `w` opened an empty what-if
    screen whose only words were a toast 'whatif: could not build the view: EditError: ...'. Now `w`
    stays on the findings and says, in the status line, the reason `whatif fix:host-bound-gap` gives."""
    from nsight_tui.parsers import NsightError, Profile

    path = SAMPLES / "nonvtx" / "small_ctx512_bf16_b8_async_nonvtx.sqlite.xz"
    with pytest.raises(NsightError) as refused:
        Profile.open(path).whatif(["fix:host-bound-gap"])
    why = str(refused.value).replace(" (fix:host-bound-gap)", "")  # the edit refused, said without the fix it came from
    assert why.startswith("nohost:1ms: no host time between CUDA calls")

    async def body():
        async with tui(path, size=(200, 30)) as ui:
            await open_findings(ui)
            await highlight(ui, "host-bound-gap")
            finding = ui.screen.view.findings[ui.screen.current]
            assert not finding.replayed and finding.edits
            await ui.press("w")
            await ui.settle()
            assert type(ui.screen).__name__ == "FindingsScreen"
            text = ui.flat_text()
            assert f"host-bound-gap: not replayed ({why}); its saving is the rule's estimate" in text, text
            assert "EditError" not in text

    run(body())


def test_the_unchanged_replays_step_says_the_clock_it_is_on(tui):
    """small_ctx512_b8_async runs without a per-step sync: its GPU's period (a step's first op to the
    next one's) is the longer, so the unchanged replay's step, the slower clock's, is the GPU's while
    the measured step is the CPU's. Both figures from the export by SQL (helpers/step_sql): the
    step's start to the next one's, and its first op's start to the next one's (the last step to its
    range's end, or to its work's end); the replay meets the capture op by op."""
    from helpers.xz_samples import plain

    trace = plain(SAMPLES / "async" / "small_ctx512_b8_async.sqlite.xz")
    st = steps(trace)
    cpu = [b.start - a.start for a, b in zip(st, st[1:])] + [st[-1].end - st[-1].start]
    gpu = [b.gpu_start - a.gpu_start for a, b in zip(st, st[1:])] + [st[-1].gpu_end - st[-1].gpu_start]
    cpu_ms, gpu_ms = float(np.median(cpu)) / 1e6, float(np.median(gpu)) / 1e6
    assert gpu_ms - cpu_ms > 0.05  # the GPU's clock is the slower, by more than the figures' rounding

    async def body():
        async with tui(trace, size=(160, 50)) as ui:
            await open_findings(ui)
            table = ui.screen.table
            row = next(r for r in range(len(table)) if ui.screen.view.findings[r].edits)
            ui.screen.grid.move_to(row)
            await ui.settle()
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen", "the what-if screen")
            await ui.until(lambda: ui.screen.view is not None, "the replay done", timeout=120)
            await ui.settle()
            text = ui.flat_text()
            assert (f"{gpu_ms:,.2f} ms replayed unchanged (GPU clock, a step's first op to the next one's, the "
                    f"slower: the CPU's period {gpu_ms - cpu_ms:,.2f} ms shorter" in text)
            assert "replayed unchanged (CPU clock" not in text
            assert f"step: {cpu_ms:,.2f} ms measured (CPU clock, period of the main thread's step" in text

    run(body())


def test_the_keys_every_table_moves_with_scroll_the_what_if_at_80x24(tui):
    """At 80x24 the what-if page is taller than the screen (the GPU's idle split after the fix is its
    last line): j/k, ctrl+d/ctrl+u and g/G scroll it as they move every table (they did nothing)."""

    async def body():
        async with tui(TRACE, size=(80, 24)) as ui:
            await open_findings(ui)
            await highlight(ui, "launch-bound")
            await ui.pilot.press("w")
            await ui.until(lambda: type(ui.screen).__name__ == "WhatIfScreen", "the what-if screen")
            await ui.until(lambda: ui.screen.view is not None, "the replay done", timeout=120)
            await ui.settle()
            scroll = ui.screen.query_one("#wi-scroll")
            assert scroll.max_scroll_y > 0 and scroll.scroll_y == 0  # taller than the screen, at its top
            assert "GPU idle: " not in ui.text()
            await ui.press("j", "j")
            assert scroll.scroll_y == 2
            await ui.press("k")
            assert scroll.scroll_y == 1
            await ui.press("G")
            assert scroll.scroll_y == scroll.max_scroll_y
            assert "GPU idle: " in ui.text()
            await ui.press("g")
            assert scroll.scroll_y == 0
            await ui.press("ctrl+d")
            assert scroll.scroll_y > 2
            await ui.press("ctrl+u")
            assert scroll.scroll_y == 0
            assert "j/k scroll" in ui.text()

    run(body())


def test_the_what_ifs_lanes_are_timed_from_the_replayed_steps_start(tui):
    """`l` opens the timeline on the replay's first step: its axis and cursor read from that
    step's start (`0ms`, as a range's timeline does), not from the capture's first event (the axis
    read 6455ms, the cursor +6.46 s, on a 15 ms window)."""
    async def body():
        async with tui(TRACE, size=(80, 24)) as ui:
            await open_findings(ui)
            await highlight(ui, "launch-bound")
            await ui.pilot.press("w")
            await _lanes_of_the_what_if(ui)
            await ui.settle()
            a, b = ui.screen.replay.step_window
            assert ui.screen.frame.origin == a
            text = ui.text()
            assert "╷0ms" in text
            cursor = ui.screen.frame.cursor_ns - a
            assert 0 <= cursor <= b - a  # the cursor inside the step, read from its start
            assert "▼ +" in text and " s " not in text.split("▼ +", 1)[1].split("·", 1)[0]

    run(body())


def test_the_what_if_of_a_ddp_capture_says_what_it_assumes_of_the_contention(tui):
    """On the committed two-GPU DDP capture (its backward's kernels run beside the all-reduces), a
    finding's what-if says the factor per GPU the replay re-times those kernels by, as the core read it."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.replay.contention import of_trace

    path = SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz"
    c = of_trace(load_trace(path))

    async def body():
        async with tui(path, size=(160, 50)) as ui:
            text = await first_what_if_text(ui)
            assert "contention: a kernel beside a collective runs slower" in text
            for dev, k in c.factor.items():
                assert f"GPU {dev} x{k:.2f} (read off {c.kernels[dev]:,} kernels run both ways)" in text

    run(body())
