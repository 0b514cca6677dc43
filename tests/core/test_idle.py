"""GPU idle time by cause, the CPU's lead and the queue depth (parsers/analyses/idle.py) against an
independent plain-Python computation over the SQLite export (tests/helpers/idle_reference.py),
on the committed sample and the shared traces: 1 and 2 GPUs, CUDA graphs, threads."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES, shared_trace
from helpers.idle_reference import Reference, is_sync, ro, union
from helpers.idle_reference import gaps as idle_gaps
from nsight_tui.parsers.analyses.idle import API_SYNC, BURST_GAP_NS, idle_analysis, is_sync_name
from nsight_tui.parsers.read.load import load_trace

STEP_WINDOWS = """
SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
WHERE e.eventType IN (59, 60, 70, 71) AND coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.end IS NOT NULL
ORDER BY e.start"""
PHASE_WINDOWS = """
WITH r AS (SELECT e.start, e.end, e.globalTid AS g, coalesce(e.text, s.value) AS name
           FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL)
SELECT p.start, p.end FROM r p JOIN r st ON st.g = p.g AND st.start <= p.start AND st.end >= p.end
WHERE p.name = :name AND st.name GLOB 'step_[0-9]*' ORDER BY p.start"""

_REFS: dict = {}
_TRACES: dict = {}


def _path(name):
    return SAMPLES / "small_ctx128.sqlite" if name == "sample" else shared_trace(name)


def _load(name):
    path = _path(name)
    if name not in _TRACES:
        _TRACES[name] = load_trace(path)
        _REFS[name] = Reference(path)
    return _TRACES[name], _REFS[name]


def _windows(path, sql, **params):
    con = ro(path)
    try:
        return [(int(a), int(b)) for a, b in con.execute(sql, params)]
    finally:
        con.close()


def _span_windows(path):
    """The whole capture's GPU and API span, and its thirds (windows that cut through ops)."""
    con = ro(path)
    try:
        lo, hi = con.execute("""SELECT min(s), max(e) FROM (
            SELECT min(start) s, max(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL
            UNION ALL SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME)""").fetchone()
    finally:
        con.close()
    third = (hi - lo) // 3
    return [[(lo, hi)], [(lo + 7, lo + third)], [(lo + third, lo + 2 * third + 13)], [(lo + third, hi - 5)]]


def _cases():
    out = []
    for name in ("sample", "small_ctx128_graphs", "small_ctx128_threads"):
        out += [pytest.param(name, "steps", id=f"{name}-each-step"),
                pytest.param(name, "phases", id=f"{name}-phases")]
    for name in ("h100_2gpu_1s", "mfu_2gpu_before", "sample"):
        out.append(pytest.param(name, "spans", id=f"{name}-spans"))
    return out


def _window_sets(name, how):
    path = _path(name)
    if how == "steps":
        steps = _windows(path, STEP_WINDOWS)
        return [[w] for w in steps] + [steps]
    if how == "phases":
        return [_windows(path, PHASE_WINDOWS, name=p) for p in ("forward", "backward", "optimizer")]
    return _span_windows(path)


@pytest.mark.parametrize("name, how", _cases())
def test_split_lead_queue_match_the_reference(name, how):
    trace, ref = _load(name)
    ia = idle_analysis(trace)
    sets = [w for w in _window_sets(name, how) if w]
    assert sets, "no windows: the test would prove nothing"
    assert ia.devices == ref.devices()
    for windows in sets:
        t0s, t1s = zip(*windows)
        got = ia.windows(t0s, t1s, top_gaps=0)
        assert got.span_ns == sum(b - a for a, b in windows)
        for dev in got.devices:
            want = ref.split(dev.device, windows, BURST_GAP_NS)
            s = dev.split
            assert (s.busy_ns, s.launch_bound_ns, s.sync_bound_ns, s.host_bound_ns) == \
                (want["busy"], want["launch"], want["sync"], want["host"]), (dev.device, windows[:2])
            # the four parts are the window, exactly
            assert s.busy_ns + s.launch_bound_ns + s.sync_bound_ns + s.host_bound_ns == s.window_ns
            lead = ref.lead(dev.device, windows)
            assert dev.lead.kernels == lead["kernels"]
            assert dev.lead.median_ns == lead["median"]
            assert dev.lead.p95_ns == lead["p95"] and dev.lead.max_ns == lead["max"]
            q = ref.queue(dev.device, windows)
            assert dev.queue.depth_ns == q["area"] and dev.queue.max_depth == q["max"]
            assert dev.queue.mean_depth == pytest.approx(q["mean"], rel=1e-12)


@pytest.mark.parametrize("name", ["sample", "small_ctx128_graphs", "small_ctx128_threads", "h100_2gpu_1s",
                                  "mfu_2gpu_before", "xl_ctx256"])
def test_every_range_instance_adds_up(name):
    """Vectorised over every NVTX range of the trace: four non-negative parts summing to its span."""
    trace = load_trace(_path(name))
    ia = idle_analysis(trace)
    r = trace.ranges
    t0, t1 = r["start"].to_numpy(), r["end"].to_numpy()
    assert len(t0)
    for d in ia.devices:
        parts = ia.device(d).split(t0, t1)
        assert all((p >= 0).all() for p in parts)
        np.testing.assert_array_equal(sum(parts), t1 - t0)


def test_a_burst_gap_of_zero_moves_dispatch_time_to_host_bound():
    """The burst gap is what separates launch overhead from host work: with none, the time
    between launches is host-bound, and nothing else changes."""
    trace, ref = _load("sample")
    windows = _windows(SAMPLES / "small_ctx128.sqlite", STEP_WINDOWS)
    t0s, t1s = zip(*windows)
    wide = idle_analysis(trace).windows(t0s, t1s, top_gaps=0).devices[0].split
    none = idle_analysis(trace, burst_gap_ns=0).windows(t0s, t1s, top_gaps=0).devices[0].split
    want = ref.split(0, windows, 0)
    assert (none.busy_ns, none.launch_bound_ns, none.sync_bound_ns, none.host_bound_ns) == \
        (want["busy"], want["launch"], want["sync"], want["host"])
    assert none.busy_ns == wide.busy_ns and none.sync_bound_ns == wide.sync_bound_ns
    assert none.launch_bound_ns < wide.launch_bound_ns and none.host_bound_ns > wide.host_bound_ns


@pytest.mark.parametrize("name", ["sample", "small_ctx128_threads"])
def test_longest_gaps_and_what_the_cpu_did(name):
    trace, ref = _load(name)
    ia = idle_analysis(trace)
    windows = _windows(_path(name), STEP_WINDOWS)
    t0s, t1s = zip(*windows)
    got = ia.windows(t0s, t1s, top_gaps=10)
    # the reference's idle stretches: the complement of the merged busy intervals, per window
    merged = list(zip(*union((o[0], o[1]) for o in ref.ops if o[2] == 0)))
    gaps = [g for t0, t1 in windows for g in idle_gaps(merged, t0, t1)]
    gaps.sort(key=lambda g: -(g[1] - g[0]))
    assert [g.duration_ns for g in got.gaps] == [b - a for a, b in gaps[:10]]
    for g in got.gaps:
        want = ref.split(0, [(g.start_ns, g.end_ns)], BURST_GAP_NS)
        assert (g.launch_bound_ns, g.sync_bound_ns, g.host_bound_ns) == (want["launch"], want["sync"], want["host"])
        assert want["busy"] == 0
        # every API call overlapping the gap is listed under its thread
        calls = {}
        for c in ref.calls:
            if c[0] < g.end_ns and c[1] > g.start_ns:
                calls[c[2]] = calls.get(c[2], 0) + 1
        listed = {t.gtid: sum(n for _, n, _ in t.api_calls) for t in g.threads if t.api_calls}
        assert listed == calls


def test_sync_calls_are_the_documented_names():
    trace, _ = _load("sample")
    kinds = idle_analysis(trace).api_kind
    names = [trace.api_names[c] for c in trace.api["name"].to_numpy()]
    assert {n for n, k in zip(names, kinds) if k == API_SYNC} == {n for n in names if is_sync(n)}
    assert any(is_sync(n) for n in names)
    for name in ("cudaMemcpy_v3020", "cudaStreamSynchronize_v3020", "cuCtxSynchronize", "cudaMemcpy2D_ptds_v7000"):
        assert is_sync_name(name)
    for name in ("cudaMemcpyAsync_v3020", "cudaLaunchKernel_v7000", "cudaEventQuery_v3020", "cudaStreamWaitEvent"):
        assert not is_sync_name(name)
