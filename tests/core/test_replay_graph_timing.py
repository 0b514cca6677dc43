"""The `graph` edit's figures (parsers/replay/cudagraph.py) against SQL over the committed graphed
captures: each graph launch's nodes (kernels, memsets and copies sharing its correlation id), the
first launch left out, min/median/max over the rest, the first node counted from the call's return
where most launches start it after the call returns (the decode graphs) and from its start
otherwise (the training steps'); and the stated fallback equal to the synchronised twin's own
figures with the decode graph's medians at its high end, so the constants cannot drift from the
captures they name."""
from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FINDINGS, ROOT, SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.xz_samples import XZ_TRACE, plain
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.cudagraph import GRAPH_FALLBACK, GRAPH_TWIN_TIMING, graph_timing
from nsight_tui.parsers.replay.predict import predict, saving

GRAPHED = [FINDINGS / f"small_ctx128_b1_nosync_cuda-graph{XZ_TRACE}",
           SAMPLES / "replay" / "graph" / f"small_ctx128_b1_async_cuda-graph{XZ_TRACE}"]
DECODE_GRAPHED = [SAMPLES / "thirdparty" / f"hf_generate_llama_static{XZ_TRACE}",
                  SAMPLES / "replay" / "graph_decode" / f"decode_graph{XZ_TRACE}"]

NODES_SQL = """
WITH launch AS (
  SELECT r.correlationId AS corr, r.start AS t0, r."end" AS t1, r."end" - r.start AS cpu
  FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
  WHERE s.value LIKE 'cudaGraphLaunch%'),
node AS (
  SELECT correlationId AS corr, start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT correlationId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET
  UNION ALL SELECT correlationId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY)
SELECT l.t0, l.cpu, COUNT(*), MIN(n.start) - l.t0,
       (MAX(n."end") - MIN(n.start) - SUM(n."end" - n.start)) * 1.0 / (COUNT(*) - 1), MIN(n.start) - l.t1
FROM launch l JOIN node n ON n.corr = l.corr GROUP BY l.corr ORDER BY l.t0
"""


def _sql_rows(path: Path) -> list:
    rows = sql_rows(path, NODES_SQL)[1:]  # the first launch uploads the graph
    assert len(rows) >= 3
    return rows


def _sql_figures(path: Path) -> tuple:
    """(first node, gap, CPU per node) as (min, median, max), and whether the first node counts
    from the call's return."""
    rows = _sql_rows(path)

    def spread(xs):
        return (round(min(xs)), round(statistics.median(xs)), round(max(xs)))

    after_call = statistics.median(r[5] for r in rows) >= 0
    first = spread([r[5] if after_call else r[3] for r in rows])
    return first, spread([r[4] for r in rows]), spread([r[1] / r[2] for r in rows]), after_call


@pytest.mark.parametrize("path", GRAPHED + DECODE_GRAPHED, ids=lambda p: p.name.split(".")[0])
def test_graph_figures_match_sql(path):
    first, gap, per_node, after_call = _sql_figures(plain(path))
    t = graph_timing(load_trace(path))
    assert t.launches > 0 and "this capture" in t.source
    assert (t.first_node_ns, t.node_gap_ns, t.cpu_per_node_ns, t.after_call) == (first, gap, per_node, (after_call,) * 3)


def test_training_graphs_start_early_and_decode_graphs_after_the_call():
    """The two ways a graph's GPU work starts, each on the committed captures (SQL): the training
    step's graphs before their launch call returns, the decode graphs after."""
    for path in GRAPHED:
        assert all(r[5] < 0 for r in _sql_rows(plain(path)))
    for path in DECODE_GRAPHED:
        assert statistics.median(r[5] for r in _sql_rows(plain(path))) >= 0


def test_fallback_is_the_named_captures_figures():
    """Low end and central: the synchronised twin's; high end: the larger of the twin's highest and the
    committed decode graph's median, its first node after the call returns."""
    first, gap, per_node, after_call = _sql_figures(plain(GRAPHED[0]))
    assert not after_call
    decode = _sql_rows(plain(DECODE_GRAPHED[0]))
    med = [round(statistics.median(xs)) for xs in ([r[5] for r in decode], [r[4] for r in decode],
                                                   [r[1] / r[2] for r in decode])]
    assert (GRAPH_TWIN_TIMING.first_node_ns, GRAPH_TWIN_TIMING.node_gap_ns, GRAPH_TWIN_TIMING.cpu_per_node_ns) \
        == (first, gap, per_node)
    f = GRAPH_FALLBACK
    assert f.first_node_ns == (first[0], first[1], med[0]) and f.after_call == (False, False, True)
    assert f.node_gap_ns == (gap[0], gap[1], max(gap[2], med[1]))
    assert f.cpu_per_node_ns == (per_node[0], per_node[1], max(per_node[2], med[2]))


def test_eager_capture_uses_the_fallback_and_says_so():
    """A capture without graph launches: the fallback's figures, named in the edit's assumption, and its
    first node waits the graph's first-node time, not a kernel's launch latency."""
    eager = FINDINGS / f"small_ctx128_b1_nosync_capturable{XZ_TRACE}"
    trace = load_trace(eager)
    assert graph_timing(trace) == GRAPH_FALLBACK
    p = predict(trace, ["graph"])
    assert "the committed decode graph's" in p.edits[0].assumption
    assert p.low_ns <= p.step_ns <= p.high_ns


def test_a_graph_that_starts_after_its_call_waits_for_it():
    """The high end's first node counted from the call's return: on the eager decode loop (24 spans of
    326 ops, launch-bound: the GPU waits on each graph's launch), the edit's high end (its assumptions
    alone, the CPU's pace left out) lies above the same figures counted from the call's start by about
    the launch call's CPU time (326 nodes x its CPU per node), as a hand sum over one span says."""
    trace = load_trace(SAMPLES / "replay" / "graph_decode" / f"decode_eager{XZ_TRACE}")
    after = saving(trace, ["graph"])
    f = GRAPH_FALLBACK
    trace.derived["replay.graph_timing"] = replace(f, after_call=(False, False, False))
    before = saving(trace, ["graph"])
    assert (after.step_ns, after.low_ns) == (before.step_ns, before.low_ns)
    call_ns = 326 * f.cpu_per_node_ns[2]  # the edit's own sentence on this capture: 7,824 ops in 24 spans
    assert 0.8 * call_ns <= after.high_ns - before.high_ns <= 1.2 * call_ns


@pytest.mark.parametrize("path", [GRAPHED[0], DECODE_GRAPHED[1]], ids=lambda p: p.name.split(".")[0])
def test_graphing_a_graphed_step_is_refused_in_one_line(path):
    """Every step already one graph launch (SQL: each step range holds exactly one cudaGraphLaunch on
    its thread): `whatif graph` says there is nothing to graph, in one line, exit 2, rather than a
    saving made of the loop's own Python around the launch."""
    per_step = sql_rows(plain(path), """
        SELECT COUNT(*) FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.start BETWEEN n.start AND n."end" AND r.globalTid = n.globalTid
        JOIN StringIds s ON s.id = r.nameId
        LEFT JOIN StringIds t ON t.id = n.textId
        WHERE COALESCE(n.text, t.value) GLOB 'step_[0-9]*' AND s.value LIKE 'cudaGraphLaunch%'
        GROUP BY n.start""")
    assert per_step and all(c == 1 for (c,) in per_step)
    run = cli_process.run(["whatif", str(plain(path)), "graph"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "nothing to graph" in run.stderr


def test_a_step_partly_graphed_is_still_replayed():
    """transformers' compiled decode: each generate() call's prefill runs eagerly beside its decode
    graphs, so graphing the whole call still has launches to take: an answer, no refusal."""
    p = predict(load_trace(DECODE_GRAPHED[0]), ["graph"])
    assert p.low_ns <= p.step_ns <= p.high_ns and p.step_ns < p.replayed_step_ns


def test_the_stated_sources_name_their_captures_gpus():
    """The fallback's words name the GPU each stated capture ran on (its TARGET_INFO_GPU row): the
    twin's H200, the decode graph's H100."""
    def short(path: Path) -> str:
        (name,), = sql_rows(plain(path), "SELECT name FROM TARGET_INFO_GPU")
        return next(w for w in name.split() if w[0] in "ABHLV" and w[1:].isdigit())

    assert f"({short(GRAPHED[0])}, 4 launches" in GRAPH_TWIN_TIMING.source
    assert f"twin's ({short(GRAPHED[0])}," in GRAPH_FALLBACK.source
    assert f"decode graph's ({short(DECODE_GRAPHED[0])}," in GRAPH_FALLBACK.source
