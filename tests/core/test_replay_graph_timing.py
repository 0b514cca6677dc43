"""The `graph` edit's figures (parsers/replay/cudagraph.py) against SQL over the committed graphed
captures: each graph launch's nodes (kernels, memsets and copies sharing its correlation id), the
first launch left out, min/median/max over the rest; and the stated fallback equal to the synchronised
twin's own figures, so the constant cannot drift from the capture it names."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from conftest import FINDINGS, SAMPLES
from helpers.export_sql import sql_rows
from helpers.xz_samples import XZ_TRACE, plain
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.cudagraph import GRAPH_TWIN_TIMING, graph_timing
from nsight_tui.parsers.replay.predict import predict

GRAPHED = [FINDINGS / f"small_ctx128_b1_nosync_cuda-graph{XZ_TRACE}",
           SAMPLES / "replay" / "graph" / f"small_ctx128_b1_async_cuda-graph{XZ_TRACE}"]

NODES_SQL = """
WITH launch AS (
  SELECT r.correlationId AS corr, r.start AS t0, r."end" - r.start AS cpu
  FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
  WHERE s.value LIKE 'cudaGraphLaunch%'),
node AS (
  SELECT correlationId AS corr, start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT correlationId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET
  UNION ALL SELECT correlationId, start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY)
SELECT l.t0, l.cpu, COUNT(*), MIN(n.start) - l.t0,
       (MAX(n."end") - MIN(n.start) - SUM(n."end" - n.start)) * 1.0 / (COUNT(*) - 1)
FROM launch l JOIN node n ON n.corr = l.corr GROUP BY l.corr ORDER BY l.t0
"""


def _sql_figures(path: Path) -> tuple[tuple[int, int, int], ...]:
    rows = sql_rows(path, NODES_SQL)[1:]  # the first launch uploads the graph
    assert len(rows) >= 3

    def spread(xs):
        return (round(min(xs)), round(statistics.median(xs)), round(max(xs)))

    return (spread([r[3] for r in rows]), spread([r[4] for r in rows]), spread([r[1] / r[2] for r in rows]))


@pytest.mark.parametrize("path", GRAPHED, ids=lambda p: p.name.split(".")[0])
def test_graph_figures_match_sql(path):
    first, gap, per_node = _sql_figures(plain(path))
    t = graph_timing(load_trace(path))
    assert t.launches > 0 and "this capture" in t.source
    assert (t.first_node_ns, t.node_gap_ns, t.cpu_per_node_ns) == (first, gap, per_node)


def test_fallback_is_the_named_twins_figures():
    first, gap, per_node = _sql_figures(plain(GRAPHED[0]))
    assert (GRAPH_TWIN_TIMING.first_node_ns, GRAPH_TWIN_TIMING.node_gap_ns, GRAPH_TWIN_TIMING.cpu_per_node_ns) \
        == (first, gap, per_node)


def test_eager_capture_uses_the_twins_figures_and_says_so():
    """A capture without graph launches: the twin's figures, named in the edit's assumption, and its
    first node waits the graph's first-node time, not a kernel's launch latency."""
    eager = FINDINGS / f"small_ctx128_b1_nosync_capturable{XZ_TRACE}"
    trace = load_trace(eager)
    assert graph_timing(trace) == GRAPH_TWIN_TIMING
    p = predict(trace, ["graph"])
    assert GRAPH_TWIN_TIMING.source in p.edits[0].assumption
    assert p.low_ns <= p.step_ns <= p.high_ns
