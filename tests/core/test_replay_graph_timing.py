"""The `graph` edit's figures (parsers/replay/cudagraph.py) against SQL over the committed graphed
captures: each graph launch's nodes (kernels, memsets and copies sharing its correlation id, in
start order), the first launch left out. A graph is handed to the GPU a segment at a time (a run of
kernels and device-to-device copies on one stream; any other node a segment of its own), each once
the launch call has walked to its last node: the lead (first node after the call's return) read off
launches that are one segment, the upfront share of the call off the others, the mean gap and the
CPU per node as before, each min/median/max; and the stated fallback equal to the named captures'
own figures, so the constants cannot drift from the captures they name. The segmenting here is a
plain loop over SQL rows, written apart from the code's numpy."""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from conftest import FINDINGS, ROOT, SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.xz_samples import XZ_TRACE, plain
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits
from nsight_tui.parsers.replay.cudagraph import (DECODE_GRAPH_MEDIANS, DECODE_TWIN_LEAD_NS, GRAPH_FALLBACK,
                                                 GRAPH_TWIN_TIMING, graph_timing, segment_ends)
from nsight_tui.parsers.replay.predict import predict, saving

GRAPHED = [FINDINGS / f"small_ctx128_b1_nosync_cuda-graph{XZ_TRACE}",
           SAMPLES / "replay" / "graph" / f"small_ctx128_b1_async_cuda-graph{XZ_TRACE}"]
DECODE_GRAPHED = [SAMPLES / "thirdparty" / f"hf_generate_llama_static{XZ_TRACE}",
                  SAMPLES / "replay" / "graph_decode" / f"decode_graph{XZ_TRACE}"]

NODES_SQL = """
WITH launch AS (
  SELECT r.correlationId AS corr, r.start AS t0, r."end" AS t1
  FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
  WHERE s.value LIKE 'cudaGraphLaunch%'),
node AS (
  SELECT correlationId AS corr, start, "end", streamId, 1 AS chain FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT correlationId, start, "end", streamId, 0 FROM CUPTI_ACTIVITY_KIND_MEMSET
  UNION ALL SELECT correlationId, start, "end", streamId, copyKind = 8 FROM CUPTI_ACTIVITY_KIND_MEMCPY)
SELECT l.t0, l.t1, n.start, n."end", n.streamId, n.chain
FROM launch l JOIN node n ON n.corr = l.corr ORDER BY l.t0, n.start
"""


def _launches(path: Path) -> list[tuple[int, int, list[tuple]]]:
    """(call start, call end, nodes in start order) per launch after the first (it uploads the graph)."""
    by: dict[int, tuple[int, int, list]] = {}
    for t0, t1, *node in sql_rows(path, NODES_SQL):
        by.setdefault(t0, (t0, t1, []))[2].append(tuple(node))
    out = [by[t] for t in sorted(by)][1:]
    assert len(out) >= 3
    return out


def _segment_last(nodes: list[tuple]) -> list[int]:
    """Per node, the position of its segment's last node: a run of chain nodes on one stream."""
    last = [0] * len(nodes)
    i = 0
    while i < len(nodes):
        j = i
        if nodes[i][3]:
            while j + 1 < len(nodes) and nodes[j + 1][3] and nodes[j + 1][2] == nodes[i][2]:
                j += 1
        for k in range(i, j + 1):
            last[k] = j
        i = j + 1
    return last


def spread(xs):
    return (round(min(xs)), round(statistics.median(xs)), round(max(xs)))


def _sql_figures(path: Path, lead_central: int | None = None) -> dict:
    """lead, upfront shares (raw), gap, CPU per node, from SQL and plain loops; the upfront shares use
    `lead_central`, else this capture's own lead's median."""
    one_segment, walked, gaps, per_node = [], [], [], []
    for t0, t1, nodes in _launches(plain(path)):
        n, per = len(nodes), (t1 - t0) / len(nodes)
        busy = sum(e - s for s, e, _, _ in nodes)
        gaps.append(max(0.0, (max(e for _, e, _, _ in nodes) - nodes[0][0] - busy) / (n - 1)))
        per_node.append(per)
        first_last = _segment_last(nodes)[0]
        if first_last == n - 1:
            one_segment.append(nodes[0][0] - t1)
        else:
            walked.append((nodes[0][0] - t0 - per * (first_last + 1), per * (n - first_last - 1)))
    lead = spread(one_segment) if one_segment else None
    central = lead_central if lead_central is not None else (lead[1] if lead else None)
    shares = [(w - central) / rest for w, rest in walked] if walked and central is not None else []
    return {"lead": lead, "shares": shares, "gap": spread(gaps), "per_node": spread(per_node)}


def test_segment_ends_by_hand():
    """Kernels and device copies chain on one stream; a memset, another copy or a new stream cuts."""
    chain = np.array([1, 1, 0, 1, 1, 1, 1, 0, 0], bool)
    stream = np.array([7, 7, 7, 7, 7, 9, 9, 9, 9])
    assert segment_ends(chain, stream).tolist() == [1, 1, 2, 4, 4, 6, 6, 7, 8]
    assert segment_ends(np.ones(3, bool), np.zeros(3, int)).tolist() == [2, 2, 2]


@pytest.mark.parametrize("path", GRAPHED + DECODE_GRAPHED, ids=lambda p: p.name.split(".")[0])
def test_graph_figures_match_sql(path):
    t = graph_timing(load_trace(path))
    f = _sql_figures(path, None if path in DECODE_GRAPHED else DECODE_TWIN_LEAD_NS[1])
    assert t.launches > 0 and "this capture" in t.source
    assert (t.node_gap_ns, t.cpu_per_node_ns) == (f["gap"], f["per_node"])
    if path in DECODE_GRAPHED:  # one segment: the lead is theirs, the upfront share the stated one
        assert t.lead_ns == f["lead"] and not f["shares"] and t.upfront == GRAPH_FALLBACK.upfront
    else:  # cut by memsets: the stated lead, the upfront share theirs
        assert f["lead"] is None and t.lead_ns == DECODE_TWIN_LEAD_NS
        assert t.upfront == pytest.approx((min(f["shares"]), statistics.median(f["shares"]), max(f["shares"])))


@pytest.mark.parametrize("path", GRAPHED + DECODE_GRAPHED, ids=lambda p: p.name.split(".")[0])
def test_no_node_starts_before_its_segment_is_walked(path):
    """The rule, on every segment of every launch (SQL): a segment's first node starts after the launch
    call has spent its time per node up to the segment's last node; so the decode graphs (one segment)
    start after the call returns and the training steps' (cut by memsets) before."""
    after_return = []
    for t0, t1, nodes in _launches(plain(path)):
        per, last = (t1 - t0) / len(nodes), _segment_last(nodes)
        heads = [i for i in range(len(nodes)) if i == 0 or last[i - 1] == i - 1]
        assert all(nodes[i][0] >= t0 + per * (last[i] + 1) for i in heads)
        after_return.append(nodes[0][0] >= t1)
    assert all(after_return) if path in DECODE_GRAPHED else not any(after_return)


def test_fallback_is_the_named_captures_figures():
    """The lead: the decode twin's (one segment); the upfront share, gap and CPU per node: the
    synchronised cuda-graph twin's, its share with that lead; at the high end the larger of the twin's
    and the compiled decode's medians of gap and CPU per node."""
    decode = _sql_figures(DECODE_GRAPHED[1])
    assert DECODE_TWIN_LEAD_NS == decode["lead"]
    twin = _sql_figures(GRAPHED[0], decode["lead"][1])
    shares = twin["shares"]
    assert GRAPH_TWIN_TIMING.upfront == pytest.approx(
        (min(shares), statistics.median(shares), max(shares)), abs=5e-5)
    assert (GRAPH_TWIN_TIMING.node_gap_ns, GRAPH_TWIN_TIMING.cpu_per_node_ns) == (twin["gap"], twin["per_node"])
    compiled = _launches(plain(DECODE_GRAPHED[0]))
    gaps = [(max(e for _, e, _, _ in nodes) - nodes[0][0] - sum(e - s for s, e, _, _ in nodes)) / (len(nodes) - 1)
            for _, _, nodes in compiled]
    med = (round(statistics.median(gaps)), round(statistics.median((t1 - t0) / len(nodes) for t0, t1, nodes in compiled)))
    assert DECODE_GRAPH_MEDIANS == med
    f = GRAPH_FALLBACK
    assert (f.lead_ns, f.upfront) == (DECODE_TWIN_LEAD_NS, GRAPH_TWIN_TIMING.upfront)
    assert f.node_gap_ns == (twin["gap"][0], twin["gap"][1], max(twin["gap"][2], med[0]))
    assert f.cpu_per_node_ns == (twin["per_node"][0], twin["per_node"][1], max(twin["per_node"][2], med[1]))


def test_eager_capture_uses_the_fallback_and_says_so():
    """A capture without graph launches: the fallback's figures, named in the edit's assumption."""
    eager = FINDINGS / f"small_ctx128_b1_nosync_capturable{XZ_TRACE}"
    trace = load_trace(eager)
    assert graph_timing(trace) == GRAPH_FALLBACK
    p = predict(trace, ["graph"])
    assert "the committed twins'" in p.edits[0].assumption and "compiled decode's" in p.edits[0].assumption
    assert p.low_ns <= p.step_ns <= p.high_ns


def test_a_graph_of_one_segment_waits_for_its_call(monkeypatch):
    """The eager decode loop's spans hold kernels only (SQL: no memset, no copy other than device to
    device inside a step), so each graph is one segment and its first node waits for the whole launch
    call: the edit's central step lies above the same edit with every node a segment of its own (the
    GPU free to start at the first node) by about the call's walk, 326 nodes x the CPU per node x
    (1 - the upfront share), less what the GPU's own work hides (at most the first node's walk)."""
    path = SAMPLES / "replay" / "graph_decode" / f"decode_eager{XZ_TRACE}"
    (steps, kernels, memsets, copies), = sql_rows(plain(path), """
        WITH step AS (SELECT n.start, n."end", n.globalTid FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId
                      WHERE COALESCE(n.text, t.value) GLOB 'step_[0-9]*'),
        call AS (SELECT r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                 JOIN step ON r.start BETWEEN step.start AND step."end" AND r.globalTid = step.globalTid)
        SELECT (SELECT COUNT(*) FROM step),
               (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (SELECT * FROM call)),
               (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE correlationId IN (SELECT * FROM call)),
               (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind != 8 AND correlationId IN (SELECT * FROM call))""")
    assert steps >= 24 and kernels >= 325 * steps and (memsets, copies) == (0, 0)
    trace = load_trace(path)
    whole = saving(trace, ["graph"])
    monkeypatch.setattr(edits, "segment_ends", lambda chain, stream: np.arange(len(chain)))
    trace = load_trace(path)
    cut = saving(trace, ["graph"])
    f = GRAPH_FALLBACK
    walk = 326 * f.cpu_per_node_ns[1] * (1 - f.upfront[1])  # the edit's own sentence: 7,824 ops in 24 spans
    assert 0.8 * walk <= whole.step_ns - cut.step_ns <= 1.05 * walk


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
    twins' H200 (the training step's and the decode loop's alike), the compiled decode's H100."""
    def short(path: Path) -> str:
        (name,), = sql_rows(plain(path), "SELECT name FROM TARGET_INFO_GPU")
        return next(w for w in name.split() if w[0] in "ABHLV" and w[1:].isdigit())

    assert short(GRAPHED[0]) == short(DECODE_GRAPHED[1])
    assert f"({short(GRAPHED[0])}, 4 launches" in GRAPH_TWIN_TIMING.source
    assert f"twins' ({short(GRAPHED[0])}:" in GRAPH_FALLBACK.source
    assert f"compiled decode's ({short(DECODE_GRAPHED[0])}," in GRAPH_FALLBACK.source
