"""The first screen comes in two steps: the NVTX tree with CPU times as soon as
the ranges are read, GPU columns blank and the header saying what is still loading and how
far; then the GPU columns fill in, in place, with the cursor where the user left it. The
staged load lives in tui.session.StagedLoad (no Textual); the app posts its stages."""
from __future__ import annotations

import asyncio
import threading

import pandas as pd
import pytest

from conftest import SAMPLE, Ui, make_app
from nsight_tui.parsers.read import load
from nsight_tui.render import numbers
from nsight_tui.tui.session import StagedLoad
from nsight_tui.tui.views.kernels import KernelsScreen
from nsight_tui.tui.views.ranges import RangesScreen


@pytest.fixture()
def held_gpu(monkeypatch):
    """The load's second stage waits until the test sets the event it returns."""
    release = threading.Event()
    real_finish = load.TraceLoader.finish

    def held_finish(self):
        release.wait(timeout=60)  # the test looks at the tree while the GPU work "loads"
        return real_finish(self)

    monkeypatch.setattr(load.TraceLoader, "finish", held_finish)
    yield release
    release.set()


def test_staged_load_without_textual(sql):
    """The session layer alone: the first stage's session holds the ranges and no GPU work; the
    second stage's trace, once handed to it, holds both, over the same ranges frame."""
    said: list[tuple[float, str]] = []
    staged = StagedLoad(SAMPLE, "process", progress=lambda f, text: said.append((f, text)))
    first = staged.tree()
    assert first is not None and first.pending and first.trace.ops.empty
    assert first.trace.info.ranges == sql.scalar(SAMPLE, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")
    header = first.header()
    assert header.loaded_text.startswith("tree in ") and "loaded in" not in " ".join(header.full_lines())
    trace, seconds = staged.finish()
    assert trace.ranges is first.trace.ranges  # positions in the tree do not move
    first.gpu_loaded(trace, seconds)
    assert not first.pending and first.header().loaded_text == f"loaded in {seconds:.2f}s"
    assert first.trace.info.kernels == sql.scalar(SAMPLE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    fractions = [f for f, _ in said]
    assert fractions == sorted(fractions) and fractions[-1] < 1  # progress only moves forward


def test_tree_first_then_gpu_columns(held_gpu, sql):
    asyncio.run(_tree_first_then_gpu_columns(held_gpu, sql))


async def _tree_first_then_gpu_columns(held_gpu, sql):
    # CPU time of the first step_0 range, by SQL: what the tree must show before any GPU work.
    step0 = sql.scalar(SAMPLE, """SELECT e.end - e.start FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId
                                  WHERE s.value = 'step_0' AND e.eventType = 59""")
    app = make_app(SAMPLE)
    async with app.run_test(size=(120, 30)) as pilot:
        ui = Ui(app, pilot)
        await ui.until(lambda: isinstance(app.screen, RangesScreen) and app.session is not None, "the tree is up")
        assert app.session.pending and not app.loaded
        text = await ui.until_text("tree in ")
        assert "loaded in" not in text and "% attr: process" in text  # how far, beside the mode badge
        source = app.screen.grid.ranges
        cols = {c.key: c for c in source.columns}
        step = next(i for i in range(len(source)) if source.node_at(i) is not None
                    and source.node_at(i).label == "step_N")
        app.screen.grid.data_changed(step)
        node = source.node_at(step)
        assert node.instances == 3 and int(node.model.cpu_ns[node.ids[0]]) == step0
        assert source.cell(step, cols["cpu"]) == numbers.duration(node.cpu_ns) != ""
        assert source.cell(step, cols["gpu"]) == "" and source.cell(step, cols["kernels"]) == ""
        await pilot.press("enter")  # kernels of the range: not before the GPU work is in
        await pilot.pause()
        assert isinstance(app.screen, RangesScreen)
        assert not app.screen.check_action("backward_parts", ())  # b needs the GPU work too
        keep = app.screen.current_key()

        held_gpu.set()
        await ui.loaded()
        assert not app.session.pending
        text = ui.flat_text()
        assert "loaded in " in text and "tree in " not in text
        source = app.screen.grid.ranges
        assert app.screen.current_key() == keep  # the cursor stayed on step_N
        row = app.screen.grid.cursor
        node = source.node_at(row)
        kernels = sql.scalar(SAMPLE, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            JOIN NVTX_EVENTS e ON r.globalTid = e.globalTid AND r.start >= e.start AND r.end <= e.end
            JOIN StringIds s ON s.id = e.textId WHERE s.value GLOB 'step_[0-9]*' AND e.eventType = 59""")
        steps = sql.scalar(SAMPLE, """SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId
            WHERE s.value GLOB 'step_[0-9]*' AND e.eventType = 59""")
        assert node.kernels >= kernels > 0  # process-wide: at least nsys's launching-thread count
        # the tree opens per step: the step row's totals over its steps
        assert source.cell(row, cols["kernels"]) == cols["kernels"].fmt(node.kernels / steps)
        assert source.cell(row, cols["gpu"]) == numbers.duration(node.busy_ns / steps) != ""
        assert app.screen.check_action("backward_parts", ())


def test_biggest_ranges_tables_are_ready_after_load(tui):
    """After loading, the session computes the kernel tables of the top-level ranges holding
    the most GPU work; opening one shows that table, equal to computing it afresh."""
    from nsight_tui.tui.viewmodels import roofline as roofline_vm
    from nsight_tui.tui.viewmodels import kernels

    async def body():
        async with tui(SAMPLE, size=(120, 30)) as ui:
            session = ui.app.session
            model = session.model
            biggest = max((n for g in model.aggregated_groups for n in g.roots), key=lambda n: n.kernels)
            kept = session.kept(f"range_kernels:{id(biggest)}")
            assert kept is not None and kept[0] is biggest  # computed in the background
            view = session.range_kernels(biggest)
            assert view is kept[1]  # opening it computes nothing
            fresh = kernels.range_kernels(model, biggest, extra_ratios=roofline_vm.ratios(session, biggest))
            pd.testing.assert_frame_equal(view.summary, fresh.summary)
            ui.app.open_kernels(biggest)
            await ui.settle()
            assert isinstance(ui.screen, KernelsScreen) and ui.screen.grid.row_count == len(fresh.summary) > 0

    asyncio.run(body())


def test_file_opened_before_the_app_is_the_one_loaded(monkeypatch, sql):
    """`nsight-tui FILE` opens the export and starts reading its GPU tables before Textual
    is imported (tui.launch.open_early); the app's load takes that loader and opens nothing
    more."""
    from nsight_tui.tui.launch import open_early

    opened_paths: list = []
    real_init = load.TraceLoader.__init__

    def counting_init(self, path, *args, **kwargs):
        opened_paths.append(path)
        real_init(self, path, *args, **kwargs)

    monkeypatch.setattr(load.TraceLoader, "__init__", counting_init)

    async def body():
        app = make_app(SAMPLE)
        app.opened = open_early(SAMPLE)
        async with app.run_test(size=(100, 30)) as pilot:
            ui = Ui(app, pilot)
            await ui.loaded()
            assert app.opened is None and opened_paths == [SAMPLE]
            kernels = sql.scalar(SAMPLE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
            assert app.session.trace.info.kernels == kernels > 0

    asyncio.run(body())


def test_file_opened_early_fails_in_the_load(tmp_path):
    """What opening raised (here: not an export) is raised where the load opens the file."""
    from nsight_tui.parsers.read.errors import TraceError
    from nsight_tui.tui.launch import open_early

    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database\n" * 100)
    opened = open_early(bad)
    with pytest.raises(TraceError, match="notes.sqlite"):
        StagedLoad(bad, "process", opened=opened)


def test_header_slow_parts_are_computed_in_the_load_worker(tui, monkeypatch):
    """The header's nesting note and clocks line (passes over every range: seconds at 3M
    ranges) are computed in the load's worker, not on the UI thread, and the header they give
    is the one a session computing them itself shows."""
    from nsight_tui.parsers.model import steps
    from nsight_tui.tui.session import Session

    threads: dict[str, list[str]] = {"nesting": [], "clocks": []}
    real_note, real_clocks = steps.nesting_note, Session._clocks_text

    def note(model):
        threads["nesting"].append(threading.current_thread().name)
        return real_note(model)

    def clocks(self):
        threads["clocks"].append(threading.current_thread().name)
        return real_clocks(self)

    monkeypatch.setattr(steps, "nesting_note", note)
    monkeypatch.setattr(Session, "_clocks_text", clocks)

    async def body():
        async with tui(SAMPLE, size=(120, 30)) as ui:
            session = ui.app.session
            shown = session.header()
            main = threading.main_thread().name
            assert threads["nesting"] and threads["clocks"]
            assert main not in threads["nesting"] + threads["clocks"], threads
            fresh = Session(session.path, session.trace, session.attribution, session.load_seconds)
            fresh._once("ranks", session.ranks, per_mode=False, per_rank=False)
            assert fresh.header() == shown  # computed here, on this thread: the same header

    asyncio.run(body())


def test_biggest_ranges_parts_tables_are_ready_after_load(tui, sql):
    """After loading, the kernel tables of the ranges below the biggest top-level ranges that
    hold a big share of the kernels (`step_N/backward`, at any depth) are computed too; each
    equals computing it afresh. Which they are: the tree walked here (its roots' kernels against SQL)."""
    from nsight_tui.tui.viewmodels import roofline as roofline_vm
    from nsight_tui.tui.session import BIG_SHARE
    from nsight_tui.tui.viewmodels import kernels

    async def body():
        async with tui(SAMPLE, size=(120, 30)) as ui:
            session = ui.app.session
            model = session.model
            roots = sorted((n for g in model.aggregated_groups for n in g.roots), key=lambda n: -n.kernels)[:3]
            total = sum(n.kernels for n in roots)
            # the roots hold the kernels (one may run outside every range)
            assert 0.99 * sql.scalar(SAMPLE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") <= total
            stack, parts = [c for n in roots for c in n.children], []
            while stack:  # every range below the roots, at any depth
                n = stack.pop()
                stack.extend(n.children)
                if not n.is_ops and n.kernels >= BIG_SHARE * total:
                    parts.append(n)
            names = {p.name for p in parts}
            assert any(p.name.endswith("backward") for p in parts) and len(names) >= 3, names
            for part in parts:
                kept = session.kept(f"range_kernels:{id(part)}")
                assert kept is not None and kept[0] is part, part.name  # computed in the background
                fresh = kernels.range_kernels(model, part, extra_ratios=roofline_vm.ratios(session, part))
                pd.testing.assert_frame_equal(kept[1].summary, fresh.summary)

    asyncio.run(body())


def test_node_figures_kept_follow_the_model_that_takes_the_node_over(sql):
    """A tree node keeps its sums over its instances (every redraw asks), per metric array:
    read in the first stage (no GPU work: 0 kernels), the same node, taken over by the full
    model, gives the full model's figures, which are the ranges' kernels counted by SQL."""
    staged = StagedLoad(SAMPLE, "process")
    first = staged.tree()
    assert first is not None
    roots = [n for g in first.model.aggregated_groups for n in g.roots]
    node = max(roots, key=lambda n: n.instances)
    assert node.kernels == 0 and node.cpu_ns > 0  # kept on the node now
    trace, seconds = staged.finish()
    first.gpu_loaded(trace, seconds)
    full = first.model
    assert node.model is full  # the rows on screen are the same objects
    assert node.kernels == int(full.kernel_count[node.ids].sum()) > 0
    assert node.busy_ns == int(full.busy_ns[node.ids].sum()) > 0
    # and the model's figure, by SQL: the kernels whose launch (runtime call, same process) lies
    # inside the node's first instance
    i = int(node.ids[0])
    r = trace.ranges.iloc[i]
    launched = sql.scalar(SAMPLE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                                  "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) "
                                  "WHERE r.start >= ? AND r.start <= ?", int(r["start"]), int(r["end"]))
    assert int(full.kernel_count[i]) == launched
