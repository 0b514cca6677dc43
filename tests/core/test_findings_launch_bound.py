"""launch-bound (parsers/analyses/findings.py) against its twins (the eager step vs the same kernels
replayed as one CUDA graph) and against its definition computed here: launch-bound GPU idle
outside CUDA graph replays (cudaGraphLaunch's start to the end of its last kernel) plus
host-bound idle outside the stretches with >= 1 ms of it (framework dispatch), over the steps,
per step, firing at >= 10% of the step. The split by cause is tests/helpers/idle_reference.py's."""
from __future__ import annotations

import pytest

from conftest import FINDINGS, shared_trace
from helpers.findings_twins import assert_pair, busy_union, gaps, intersect, length, merge, ro, steps
from helpers.idle_reference import Reference
from nsight_tui.parsers.analyses.findings import RULES, THRESHOLDS, context, findings
from nsight_tui.parsers.analyses.idle import BURST_GAP_NS
from nsight_tui.parsers.read.load import load_trace
from helpers.xz_samples import plain

RULE = "launch-bound"


def _raw(path):
    """The rule's own estimate, before findings() takes out what findings naming a cause of their
    own claimed of the same idle (tests/core/test_findings_partition.py)."""
    return RULES[RULE](context(load_trace(path)))


def _ids(path):
    return {f.id: f for f in findings(load_trace(path))}


def test_fires_on_the_eager_step_silent_on_its_cuda_graph_and_estimates_the_saving():
    # Same work: batch 1, ctx 128, AdamW(capturable) in both; the twin replays the step's kernels
    # with one launch, so the step time it saves is the launch overhead.
    assert_pair(RULE, "small_ctx128_b1_nosync_capturable", "small_ctx128_b1_nosync_cuda-graph")


def _reference(path) -> tuple[float, float]:
    """(launch-bound outside graph replays + dispatch idle per step, mean step), from the definitions."""
    con = ro(path)
    windows = [(s, e) for s, e, _ in steps(con)]
    device = con.execute("SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    busy = busy_union(con, device)
    replays = merge(con.execute("""SELECT r.start, max(k.end) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN StringIds s ON s.id = r.nameId JOIN CUPTI_ACTIVITY_KIND_KERNEL k
        ON k.correlationId = r.correlationId AND (k.globalPid >> 24) = (r.globalTid >> 24)
        WHERE s.value LIKE 'cudaGraphLaunch%' AND k.deviceId = ? GROUP BY r.rowid""", (device,)).fetchall())
    con.close()
    ref = Reference(path)
    pieces = ref.pieces(device, windows, BURST_GAP_NS)
    launch = merge((p, q) for p, q, label in pieces if label == "launch")
    host = sum(q - p for p, q, label in pieces if label == "host")
    host_min = THRESHOLDS["host_gap_min_ns"].value
    long_host = 0
    for t0, t1 in windows:
        for a, b in gaps(busy, t0, t1):
            if b - a >= host_min:
                h = ref.split(device, [(a, b)], BURST_GAP_NS)["host"]
                long_host += h if h >= host_min else 0
    n = len(windows)
    outside = length(launch) - length(intersect(launch, replays))
    return (outside + host - long_host) / n, sum(e - s for s, e in windows) / n


@pytest.mark.parametrize("path", [FINDINGS / "small_ctx128_nosync.sqlite.xz", FINDINGS / "small_ctx512.sqlite.xz"])
def test_estimate_and_firing_follow_the_definition_computed_independently(path):
    path = plain(path)
    per_step, step = _reference(path)
    raw = _raw(path)
    fires = per_step >= THRESHOLDS["launch_min_share"].value * step
    assert (raw is not None) == fires and (RULE in _ids(path)) == fires
    if fires:
        assert raw.saving_ms_per_step * 1e6 == pytest.approx(per_step, rel=1e-9)
    # one of the two: the ctx 128 step is launch-bound, the ctx 512 fp32 one GPU-bound
    assert fires == path.name.startswith("small_ctx128")


def test_idle_inside_graph_replays_is_not_counted():
    """torch.compile(mode="reduce-overhead"): the GPU's gaps between a replayed graph's kernels
    are what a graph leaves, not launch overhead; the rest of the step is still launched eagerly."""
    path = shared_trace("small_ctx128_graphs")
    per_step, _ = _reference(path)
    f = _raw(path)
    assert f.evidence["launch_bound_in_graph_replays_ns_per_step"] > 0
    assert f.saving_ms_per_step * 1e6 == pytest.approx(per_step, rel=1e-9)


def test_a_graph_takes_the_launches_not_the_loops_wait_on_its_data_loader(async_trace):
    """A ResNet-18 fed by a DataLoader with too few workers (sample_traces/loader: every other step waits on the
    next batch). Graphing is the fix of the launches inside the model's phases; the loop's own time in each step
    outside its forward, backward and optimizer ranges (SQL over the export's NVTX: the batch's fetch) is no
    graph's, so launch-bound saves at most the step less that, and the data loader's gap leads the findings."""
    from conftest import SAMPLES

    path = async_trace(SAMPLES / "loader" / "torchvision_resnet18_w2_b32.sqlite.xz")
    con = ro(path)
    named = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59""").fetchall()
    con.close()
    outside = []
    periods = []
    step_ranges = sorted((b, e) for name, b, e in named if name.startswith("step_"))
    for i, (b, e) in enumerate(step_ranges):
        inner = sum(pe - pb for name, pb, pe in named if name in ("forward", "backward", "optimizer") and b <= pb < e)
        outside.append(e - b - inner)
        if i + 1 < len(step_ranges):
            periods.append(step_ranges[i + 1][0] - b)
    loop_ms = sum(outside) / len(outside) / 1e6
    step_ms = sum(periods) / len(periods) / 1e6
    assert loop_ms > 0.5 * step_ms  # the loader's wait: most of the step
    found = findings(load_trace(path))
    launch = next(f for f in found if f.id == RULE)
    assert launch.edits == ["graph:forward", "graph:backward", "graph:optimizer"]
    assert 0 < launch.saving_ms_per_step <= step_ms - loop_ms
    assert found[0].id == "host-bound-gap"
