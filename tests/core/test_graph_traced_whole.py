"""CUDA graphs traced whole (nsys's default --cuda-graph-trace=graph: one CUPTI_ACTIVITY_KIND_GRAPH_TRACE
row per launch, no row per node), on the committed graphed decode loop captured so
(sample_traces/graph_whole): each launch is one GPU op of kind `graph`, the steps' GPU time counts it,
the report says how the graphs were traced, and nsys's own reports, which leave it out, come out as
NVIDIA printed them (tests/core/test_nsys_oracle.py holds that folder's CSVs too). Every figure against
SQL over the export."""
from __future__ import annotations

import re

import pytest

from conftest import SAMPLES
from helpers.export_sql import sql_rows
from helpers.xz_samples import XZ_TRACE, plain
from nsight_tui.parsers.read.ids import GRAPH, KERNEL
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.nsys.reports import build_report, without_graphs_traced_whole

WHOLE = SAMPLES / "graph_whole" / f"decode_graph_whole{XZ_TRACE}"
NODES = SAMPLES / "replay" / "graph_decode" / f"decode_graph{XZ_TRACE}"


@pytest.fixture(scope="module")
def whole():
    return load_trace(WHOLE)


def test_each_launch_is_one_graph_op(whole):
    rows = sql_rows(plain(WHOLE), """
        SELECT g.start, g."end", g.graphId, r.start FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId ORDER BY g.start""")
    assert len(rows) >= 24
    ops = whole.ops[whole.ops["kind"] == GRAPH].sort_values("start")
    assert ops["start"].tolist() == [r[0] for r in rows] and ops["end"].tolist() == [r[1] for r in rows]
    assert [whole.op_names[n] for n in ops["name"]] == [f"[CUDA graph {r[2]}]" for r in rows]
    # each launched by its cudaGraphLaunch, as a kernel by its launch call
    calls = whole.api.iloc[ops["api"].to_numpy()]
    assert calls["start"].tolist() == [r[3] for r in rows]
    assert all(whole.api_names[n].startswith("cudaGraphLaunch") for n in calls["name"])
    # and no kernel of theirs: the kernels are the eager prefill's and the warm-up's
    (kernels,), = sql_rows(plain(WHOLE), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert int((whole.ops["kind"] == KERNEL).sum()) == kernels


def test_each_steps_gpu_time_is_its_graph(whole):
    """The report's GPU time of each step: the union of its GPU ops' spans; here each step launches
    one graph and nothing else, so its graph row's length (SQL: the row whose launch call starts
    inside the step range, on the range's thread)."""
    from nsight_tui.parsers.analyses.report import build

    want = dict(sql_rows(plain(WHOLE), """
        SELECT COALESCE(n.text, s.value), SUM(g."end" - g.start)
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.start BETWEEN n.start AND n."end" AND r.globalTid = n.globalTid
        JOIN CUPTI_ACTIVITY_KIND_GRAPH_TRACE g ON g.correlationId = r.correlationId
        WHERE COALESCE(n.text, s.value) GLOB 'step_[0-9]*' GROUP BY 1"""))
    steps = {s.step: s.gpu_ns for s in build(whole).timing.steps}
    assert len(steps) == len(want) >= 24
    assert steps == want


def test_the_report_says_how_graphs_were_traced(whole):
    (launches,), = sql_rows(plain(WHOLE), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    assert any(n.startswith(f"{launches:,} CUDA graph launches traced whole") for n in whole.info.notes)
    (nodes, calls), = sql_rows(plain(NODES), """
        SELECT COUNT(*), COUNT(DISTINCT r.correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%'""")
    (extra,), = sql_rows(plain(NODES), """
        SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY c JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                  ON r.correlationId = c.correlationId JOIN StringIds s ON s.id = r.nameId
                  WHERE s.value LIKE 'cudaGraphLaunch%')""")
    notes = load_trace(NODES).info.notes
    assert any(n.startswith(f"CUDA graphs traced node by node ({nodes + extra:,} nodes of {calls:,} launches")
               for n in notes)
    assert not any(re.match(r"[\d,]+ CUDA graph launches traced whole", n) for n in notes)


def test_nsys_reports_see_no_graph_op(whole):
    """nsys stats's view: the graph ops gone, everything else the same trace; a trace without any is
    its own view."""
    view = without_graphs_traced_whole(whole)
    assert not (view.ops["kind"] == GRAPH).any()
    assert len(view.ops) == len(whole.ops) - int((whole.ops["kind"] == GRAPH).sum())
    assert view.api is whole.api and view.ranges is whole.ranges
    rep = build_report(whole, "nvtx_gpu_proj_sum", "nsys")
    assert not any(row[0].startswith(":step_") for row in rep.rows)  # as NVIDIA's CSV
    plain_trace = load_trace(NODES)
    assert without_graphs_traced_whole(plain_trace) is plain_trace


def test_graphing_it_again_is_refused(whole):
    """Every step already one graph launch (the identity check, tests/core/test_replay.py, replays it
    with its graph ops): `graph` has nothing to graph."""
    from nsight_tui.parsers.replay.edits import EditError
    from nsight_tui.parsers.replay.predict import predict

    with pytest.raises(EditError, match="nothing to graph"):
        predict(whole, ["graph"])


def test_a_diff_of_the_two_tracings_says_they_differ(whole):
    """Whole against node by node: how many launches each traced which way (SQL), and the diff's note."""
    from nsight_tui.parsers.analyses.diff import diff_runs

    nodes = load_trace(NODES)
    (launches,), = sql_rows(plain(NODES), """
        SELECT COUNT(DISTINCT r.correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%'""")
    (whole_launches,), = sql_rows(plain(WHOLE), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    assert (nodes.info.graphs_by_node, nodes.info.graphs_whole) == (launches, 0)
    assert (whole.info.graphs_by_node, whole.info.graphs_whole) == (0, whole_launches)
    notes = diff_runs(whole, nodes).notes
    assert any(n.startswith("A traced its CUDA graphs whole and B node by node") for n in notes)
    assert not any("traced its CUDA graphs" in n for n in diff_runs(nodes, nodes).notes)


def test_a_graph_cupti_could_not_time_is_left_out_with_a_note(tmp_path):
    """CUPTI writes 0 for both timestamps of a graph it could not time: such a launch is no op at the
    clock's zero (it would stretch every span to it) but one line of the notes."""
    from conftest import mutated_copy

    path = mutated_copy(tmp_path, "untimed", """
        UPDATE CUPTI_ACTIVITY_KIND_GRAPH_TRACE SET start = 0, "end" = 0
        WHERE rowid IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start LIMIT 2)""",
                        src=plain(WHOLE))
    (left, untimed), = sql_rows(path, """SELECT SUM(start != 0 OR "end" != 0), SUM(start = 0 AND "end" = 0)
                                         FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE""")
    t = load_trace(path)
    graphs = t.ops[t.ops["kind"] == GRAPH]
    assert untimed == 2 and len(graphs) == left and int(graphs["start"].min()) > 0
    assert f"left out {untimed:,} CUDA graph launches traced whole without timestamps" in " ".join(t.info.notes)


def test_kernels_from_a_twin_without_its_graphs_kernels_is_refused():
    """`kernels-from` takes kernel durations launch by launch: a twin whose graphs were traced whole has
    none of its graphs' kernels (SQL: no kernel row shares a graph launch's correlation ID), so the
    edit refuses in one line, exit 2, rather than a saving of 0 made of unmatched kernels."""
    from helpers import cli_process
    from conftest import ROOT

    (nodes,), = sql_rows(plain(WHOLE), """
        SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_GRAPH_TRACE g
        ON g.correlationId = k.correlationId""")
    assert nodes == 0
    eager = SAMPLES / "replay" / "graph_decode" / f"decode_eager{XZ_TRACE}"
    run = cli_process.run(["whatif", str(eager), f"kernels-from:{WHOLE}"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "traced its CUDA graphs whole" in run.stderr


def test_the_roofline_says_the_graphs_gemms_are_unseen():
    """Whole: no GEMM of the steps is in any table (their kernels are not), so the math path the roofline
    names is the run's settings' and it says so; node by node: the GEMMs are read, nothing said."""
    from helpers import cli_process
    from conftest import ROOT
    import json

    for path, unseen in ((WHOLE, True), (NODES, False)):
        run = cli_process.run(["report", str(path), "-f", "json"], text=True, cwd=ROOT, timeout=300)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["roofline"]["gemms_unseen"] is unseen
        text = cli_process.run(["report", str(path)], text=True, cwd=ROOT, timeout=300).stdout
        assert ("their GEMMs are in no table" in text) is unseen
