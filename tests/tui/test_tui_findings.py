"""`F`: what to fix first, driven by keys on the planted twins of sample_traces/findings. The rows
shown are what parsers.findings returns (ids, ranges, savings, in its order); the host-bound saving
and its largest gap are recomputed here from their definition over the export (SQL + the plain
idle reference of tests/core); enter lands on each finding's evidence (the timeline window, the
range's kernels, the range in the tree); `e` writes exactly the view; no findings says why."""
from __future__ import annotations

import asyncio

import pytest

from conftest import FINDINGS, Ui, mutated_copy
from conftest import _md_tables as md_tables

from helpers.findings_twins import busy_union, gaps, ro, sample, steps  # plain helpers
from helpers.idle_reference import Reference
from nsight_tui.parsers.analyses.findings import THRESHOLDS
from nsight_tui.parsers.analyses.idle import BURST_GAP_NS  # what the reference calls a launch burst

if not all((FINDINGS / f"{stem}.sqlite.xz").exists() for stem in ("small_ctx128_host-sleep", "small_ctx128")):
    pytest.skip("findings twins missing", allow_module_level=True)
PLANTED, FIXED = sample("small_ctx128_host-sleep"), sample("small_ctx128")  # decompressed once, cached

HOST_GAP_MIN_NS = THRESHOLDS["host_gap_min_ns"].value  # the rule's definition: a stretch of Python/data work
SLEEP_GAP = "step_N → step_N/forward"  # where the plant sleeps: after the step starts, before its forward


def run(coro):
    return asyncio.run(coro)


def expected(path):
    from nsight_tui.parsers.analyses.findings import findings
    from nsight_tui.parsers.read.load import load_trace

    return findings(load_trace(path))


def host_bound_reference(path) -> tuple[float, tuple[int, int]]:
    """host-bound-gap from its definition: per step, every GPU idle stretch inside a step_N range
    whose host-bound part (no GPU work queued, no CUDA call, no launch burst on any thread) is at
    least 1 ms; the sum of those parts per step in ms, and the stretch with the largest part."""
    con = ro(path)
    windows = [(s, e) for s, e, _ in steps(con)]
    device = con.execute("SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    busy = busy_union(con, device)
    con.close()
    ref = Reference(path)
    kept = []
    for t0, t1 in windows:
        for a, b in gaps(busy, t0, t1):
            host = ref.split(device, [(a, b)], BURST_GAP_NS)["host"]
            if host >= HOST_GAP_MIN_NS:
                kept.append((host, a, b))
    largest = max(kept)
    return sum(h for h, _, _ in kept) / len(windows) / 1e6, (largest[1], largest[2])


async def open_findings(ui: Ui) -> None:
    await ui.press("F")
    await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                   "the findings shown")
    await ui.settle()


async def highlight(ui: Ui, rule: str) -> None:
    table = ui.screen.table
    row = next(r for r in range(len(table)) if table.value(r, "id") == rule)
    ui.screen.grid.move_to(row)
    await ui.settle()
    assert ui.screen.view.findings[ui.screen.current].id == rule


def shown_rows(screen) -> list[tuple[str, str, float]]:
    t = screen.table
    return [(t.value(r, "id"), t.value(r, "where"), t.value(r, "saving")) for r in range(len(t))]


def test_rows_are_the_rules_findings_and_the_host_bound_saving_is_its_definition(tui):
    want = {PLANTED: expected(PLANTED), FIXED: expected(FIXED)}
    reference_ms, _ = host_bound_reference(PLANTED)

    async def body(path):
        async with tui(path, size=(120, 30)) as ui:
            await open_findings(ui)
            rows = shown_rows(ui.screen)
            text = ui.flat_text()
            assert rows == [(f.id, f.range, f.saving_ms_per_step) for f in want[path]]  # same order: by saving
            for f in want[path]:
                assert f.id in text and f"{f.saving_ms_per_step:.2f}" in text
            return rows

    planted = run(body(PLANTED))
    host = next(r for r in planted if r[0] == "host-bound-gap")
    # the rule's estimate is its definition; the saving shown is the replay's (tests/core/test_findings_replay.py)
    estimate = next(f for f in want[PLANTED] if f.id == "host-bound-gap").estimate_ms_per_step
    assert estimate == pytest.approx(reference_ms, rel=1e-9)
    assert SLEEP_GAP in host[1]
    fixed = run(body(FIXED))  # the twin without the sleep: its own ~1 ms optimizer gap at most
    assert all(SLEEP_GAP not in where for rule, where, _ in fixed if rule == "host-bound-gap")


def test_enter_lands_on_each_findings_evidence(tui):
    want = {f.id: f for f in expected(PLANTED)}
    _, largest_gap = host_bound_reference(PLANTED)

    async def body():
        async with tui(PLANTED, size=(100, 30)) as ui:
            await open_findings(ui)
            # idle time: the timeline over the largest host-bound gap (0 fits it exactly)
            await highlight(ui, "host-bound-gap")
            assert "enter: the timeline at" in ui.flat_text()
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen" and ui.screen.state is not None,
                           "the timeline")
            state = ui.screen.state
            assert state.fit_window == largest_gap == (want["host-bound-gap"].start_ns, want["host-bound-gap"].end_ns)
            assert state.t0 < largest_gap[0] and state.t1 > largest_gap[1]  # with the work around it
            await ui.press("escape")
            assert type(ui.screen).__name__ == "FindingsScreen"
            # kernels: the range's kernel table, the costliest fp32 GEMM under the cursor
            await highlight(ui, "fp32-gemm-without-tensor-cores")
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.table is not None,
                           "the kernels of step_N")
            kernels = ui.screen
            assert kernels.node.path == ("step_N",)
            assert kernels.table.record(kernels.grid.cursor)["name"] == want["fp32-gemm-without-tensor-cores"].rows[0][
                "kernel"]
            await ui.press("escape")
            await highlight(ui, "unfused-attention")
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "KernelsScreen" and ui.screen.table is not None,
                           "the attention's kernels")
            assert "/".join(ui.screen.node.path) == want["unfused-attention"].range
            await ui.press("escape")
            # `t` on any finding: its window
            await highlight(ui, "sync-stall")
            await ui.press("t")
            await ui.until(lambda: type(ui.screen).__name__ == "TimelineScreen" and ui.screen.state is not None,
                           "the timeline")
            assert ui.screen.state.fit_window == (want["sync-stall"].start_ns, want["sync-stall"].end_ns)

    run(body())


def test_a_rule_naming_one_range_without_a_view_of_its_own_lands_on_the_range_in_the_tree(tui, monkeypatch):
    from nsight_tui.tui.viewmodels import findings as vm

    monkeypatch.delitem(vm.EVIDENCE_VIEW, "unfused-attention")  # as a rule the view does not know
    path = next(f.range for f in expected(PLANTED) if f.id == "unfused-attention")

    async def body():
        async with tui(PLANTED, size=(100, 30)) as ui:
            await open_findings(ui)
            await highlight(ui, "unfused-attention")
            assert f"enter: {path} in the range tree" in ui.flat_text()
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "RangesScreen", "the range tree")
            await ui.settle()
            tree = ui.screen.grid
            assert "/".join(tree.ranges.node_at(tree.cursor).path) == path

    run(body())


def test_export_is_the_view_as_shown(tui, tmp_path):
    want = expected(PLANTED)

    async def body():
        async with tui(PLANTED, size=(100, 30), export_dir=tmp_path) as ui:
            await open_findings(ui)
            await highlight(ui, "host-bound-gap")
            await ui.press("e")
            await ui.until(lambda: any(tmp_path.glob("nsight-tui_findings*.md")), "the export written")
            text = (tmp_path / "nsight-tui_findings.md").read_text()
            (headers, rows), (eh, erows) = md_tables(text)
            assert [r[headers.index("id")] for r in rows] == [f.id for f in want]
            assert [float(r[headers.index("saving ms/step")]) for r in rows] == \
                [round(f.saving_ms_per_step, 3) for f in want]
            host = next(f for f in want if f.id == "host-bound-gap")
            assert "### Highlighted: `host-bound-gap`" in text and "fix: move the work off the step" in text
            assert [int(r[eh.index("host_bound_ns")]) for r in erows] == [r["host_bound_ns"] for r in host.rows]
            # filtered: only what is on screen
            await ui.press("f")
            await ui.type("gap")
            await ui.press("enter")
            assert len(ui.screen.table) == 1
            (tmp_path / "nsight-tui_findings.md").unlink()
            await ui.press("e")
            await ui.until(lambda: (tmp_path / "nsight-tui_findings.md").exists(), "the second export")
            (headers, rows), _ = md_tables((tmp_path / "nsight-tui_findings.md").read_text())
            assert [r[headers.index("id")] for r in rows] == ["host-bound-gap"]

    run(body())


def test_no_steady_state_steps_says_so_and_what_was_checked(tui, tmp_path):
    from nsight_tui.parsers.analyses.findings import RULE_IDS

    path = mutated_copy(tmp_path, "no_steps", "UPDATE NVTX_EVENTS SET text = replace(text, 'step_', 'iter_')",
                        "UPDATE StringIds SET value = replace(value, 'step_', 'iter_')")

    async def body():
        async with tui(path, size=(100, 30), export_dir=tmp_path) as ui:
            await open_findings(ui)
            text = ui.flat_text()
            assert "no findings" in text and "No findings: no steady-state step_N ranges" in text
            assert all(rule in text for rule in RULE_IDS)
            await ui.press("enter", "e")  # nothing to jump to; the export says the same
            await ui.until(lambda: (tmp_path / "nsight-tui_findings.md").exists(), "the export written")
            assert "No findings: no steady-state step_N ranges" in (tmp_path / "nsight-tui_findings.md").read_text()

    run(body())


def test_no_rule_fired_lists_the_rules_checked():
    from nsight_tui.parsers.analyses.findings import RULE_IDS
    from nsight_tui.tui.viewmodels.findings import FindingsView

    view = FindingsView([], [], 4, 36_000_000.0, None)
    assert view.none_text().startswith("No rule fired on the 4 steady-state steps (step period 36.00 ms, measured (CPU clock, mean of 4)")
    assert all(rule in view.none_text() for rule in RULE_IDS)


def test_f_from_a_main_view_and_the_palette(tui):
    async def body():
        async with tui(PLANTED, size=(100, 30)) as ui:
            await ui.press("2")  # all kernels
            await open_findings(ui)
            await ui.press("escape")
            assert type(ui.screen).__name__ == "RangesScreen"
            await ui.press("ctrl+p")
            await ui.type("what to fix")
            await ui.until_text("View: what to fix first")
            await ui.press("enter")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen", "the findings from the palette")

    run(body())


def test_help_lists_the_key_and_the_views_section():
    from nsight_tui.tui.app import help_sections

    sections = dict(help_sections())
    assert any(key == "F" and "what to fix first" in what for key, what in sections["Everywhere"])
    assert [key for key, _ in sections["What to fix first (F)"]] == ["enter", "w"]


@pytest.mark.parametrize("stem", ["small_ctx128", "small_ctx128_host-sleep"])
def test_every_findings_detail_is_whole_at_80x24(tui, stem):
    """At 80x24 the highlighted finding's detail ends with where enter goes; its panel was capped
    at 12 rows and cut the fix and that line off without a mark (launch-bound on small_ctx128
    needs 14). Each finding in turn, its last line on screen."""
    path = sample(stem)

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            await ui.press("F")
            await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the findings shown")
            view = ui.screen.view
            assert view.findings
            for i in range(len(view.findings)):
                await ui.until(lambda i=i: ui.screen.current == i, f"finding {i} highlighted")
                label, last = view.detail(i)[-1]
                head = " ".join(f"{label}: {last}".split()[:6])
                await ui.until(lambda head=head: head in ui.flat_text(), f"{head!r} on screen")
                await ui.press("j")

    run(body())


def test_with_no_finding_the_footer_dims_the_keys_that_need_one(tui, tmp_path):
    """No finding (no steady-state steps here; an out-of-memory run alike): the footer offered
    `enter Open` and `w What if` as working keys, and both did nothing. They show dimmed, and
    come back where a filter that hid every finding is undone."""
    path = mutated_copy(tmp_path, "no_steps", "UPDATE NVTX_EVENTS SET text = replace(text, 'step_', 'iter_')",
                        "UPDATE StringIds SET value = replace(value, 'step_', 'iter_')")

    def enabled(ui) -> dict[str, bool]:
        return {b.action: on for _ns, b, on, _tip in ui.screen.active_bindings.values()
                if b.action in ("select", "whatif")}

    async def body():
        async with tui(path, size=(100, 30), export_dir=tmp_path) as ui:
            await open_findings(ui)
            assert enabled(ui) == {"select": False, "whatif": False}
            await ui.press("w", "enter")
            assert type(ui.screen).__name__ == "FindingsScreen"

    run(body())

    async def with_findings():
        async with tui(PLANTED, size=(100, 30)) as ui:
            await open_findings(ui)
            assert enabled(ui) == {"select": True, "whatif": True}
            await ui.press("f")
            await ui.type("no-such-finding")
            await ui.press("enter")
            await ui.until(lambda: ui.screen.current is None, "every finding filtered out")
            assert enabled(ui) == {"select": False, "whatif": False}

    run(with_findings())
