"""Timeline lanes and bucketing (parsers/analyses/timeline.py): the lanes hold what the export holds
(SQL), and cells, the item under the cursor and the gap search agree with plain loops."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

from conftest import SAMPLES, shared_trace
from helpers.idle_reference import ro
from nsight_tui.parsers.analyses.idle import idle_analysis
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.analyses.timeline import API, GPU, IDLE, NVTX, cell_edges, timeline

_CACHE: dict = {}


def _path(name):
    return SAMPLES / "small_ctx128.sqlite" if name == "sample" else shared_trace(name)


def _timeline(name):
    if name not in _CACHE:
        trace = load_trace(_path(name))
        _CACHE[name] = timeline(trace, range_model(trace), idle_analysis(trace))
    return _CACHE[name]


NAMES = ["sample", "small_ctx128_graphs", "small_ctx128_threads", "h100_2gpu_1s"]


@pytest.mark.parametrize("name", NAMES)
def test_lanes_hold_the_exports_ops_and_launching_threads(name):
    tl = _timeline(name)
    con = ro(_path(name))
    try:
        want = {}
        for table in ("KERNEL", "MEMCPY", "MEMSET"):
            for d, s, n in con.execute(f"""SELECT deviceId, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_{table}
                                           GROUP BY 1, 2"""):
                want[(d, s)] = want.get((d, s), 0) + n
        launched = set()
        for table in ("KERNEL", "MEMCPY", "MEMSET"):
            launched |= set(con.execute(f"SELECT globalPid >> 24, correlationId FROM CUPTI_ACTIVITY_KIND_{table}"))
        launch_threads = {g for g, c, name in con.execute("""
            SELECT r.globalTid, r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r
            JOIN StringIds s ON s.id = r.nameId""")
            if (g >> 24, c) in launched and "Synchronize" not in name
            and not (name.startswith("cudaMemcpy") and "Async" not in name)}
        calls = dict(con.execute("SELECT globalTid, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY 1"))
    finally:
        con.close()
    gpu = {(lane.device, lane.stream): len(lane) for lane in tl.lanes if lane.kind == GPU}
    assert gpu == want
    api = {lane.gtid: len(lane) for lane in tl.lanes if lane.kind == API}
    assert set(api) == launch_threads
    assert all(api[g] == calls[g] for g in api)
    # lanes are in the order: NVTX, then API threads, then per GPU its streams and idle
    letters = "".join({NVTX: "N", API: "A", GPU: "G", IDLE: "I"}[lane.kind] for lane in tl.lanes)
    assert re.fullmatch(r"N*A+(G+I)+", letters), letters


def test_nvtx_lanes_are_the_main_threads_ranges_by_level():
    tl = _timeline("sample")
    con = ro(_path("sample"))
    try:
        gtid, count = con.execute("""SELECT globalTid, count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)
                                     GROUP BY 1 ORDER BY 2 DESC LIMIT 1""").fetchone()
        steps = con.execute("""SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                               WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.globalTid = ?
                               AND e.eventType IN (59, 60, 70, 71)""",
                            (gtid,)).fetchone()[0]
    finally:
        con.close()
    nvtx = [lane for lane in tl.lanes if lane.kind == NVTX]
    assert {lane.gtid for lane in nvtx} == {gtid}
    assert sum(len(lane) for lane in nvtx) == count
    assert [lane.depth for lane in nvtx] == list(range(len(nvtx)))
    top = tl.trace.ranges["text"].to_numpy()[nvtx[0].ref]
    assert sum(t.startswith("step_") for t in top) == steps


def _brute_cells(lane, t0, t1, n):
    """Per cell: coverage per category (union of clipped items, by loops) and of all items."""
    edges = [t0 + (k * (t1 - t0)) // n for k in range(n + 1)]
    starts, ends, cats = lane.start.tolist(), lane.end.tolist(), lane.cat.tolist()
    dominant, fullness = [], []
    for k in range(n):
        a, b = edges[k], edges[k + 1]
        pieces: dict[int, list] = {}
        for s, e, c in zip(starts, ends, cats):
            if s < b and e > a:
                pieces.setdefault(c, []).append((max(s, a), min(e, b)))

        def union(iv):
            total, cur_s, cur_e = 0, None, None
            for s, e in sorted(iv):
                if e <= s:
                    continue
                if cur_e is None or s > cur_e:
                    total += (cur_e - cur_s) if cur_e is not None else 0
                    cur_s, cur_e = s, e
                else:
                    cur_e = max(cur_e, e)
            return total + ((cur_e - cur_s) if cur_e is not None else 0)

        cover = {c: union(iv) for c, iv in pieces.items()}
        best = max(cover.values(), default=0)
        dominant.append(min(c for c, v in cover.items() if v == best) if best > 0 else -1)
        fullness.append(min(1.0, union([p for iv in pieces.values() for p in iv]) / max(b - a, 1)))
    return dominant, fullness


@pytest.mark.parametrize("name", ["sample", "small_ctx128_threads"])
def test_cells_match_loops_over_the_items(name):
    tl = _timeline(name)
    rng = random.Random(12)
    windows = [(tl.t_min, tl.t_max, 37)]
    for _ in range(6):  # random windows from a whole step down to a few µs, odd cell counts
        centre = rng.randrange(tl.t_min, tl.t_max)
        span = rng.choice([30_000_000, 2_000_000, 150_000, 7_000])
        windows.append((centre - span // 2, centre + span // 2, rng.choice([17, 60, 151])))
    for t0, t1, n in windows:
        for lane in tl.lanes:
            if lane.kind == IDLE:
                continue
            cells = lane.cells(t0, t1, n)
            sel = lane.overlapping(t0, t1)  # the loops only see items near the window
            sub = type(lane)(lane.key, lane.title, lane.kind, lane.categories, lane.start[sel], lane.end[sel],
                             lane.cat[sel], lane.ref[sel])
            dominant, fullness = _brute_cells(sub, t0, t1, n)
            assert cells.dominant.tolist() == dominant, (lane.title, t0, t1, n)
            np.testing.assert_allclose(cells.fullness, fullness, rtol=1e-12, atol=0)


def test_idle_lane_cells_are_the_idle_split_per_cell():
    tl = _timeline("sample")
    steps = [i for i, t in enumerate(tl.trace.ranges["text"]) if t.startswith("step_")]
    # a step with 5 ms either side, and the whole trace (idle before/after the GPU's work is host-bound)
    for t0, t1, n in [(int(tl.trace.ranges["start"].iat[steps[1]]) - 5_000_000,
                       int(tl.trace.ranges["end"].iat[steps[1]]) + 5_000_000, 64), (tl.t_min, tl.t_max, 47)]:
        _idle_cells_match(tl, t0, t1, n)


def _idle_cells_match(tl, t0, t1, n):
    edges = cell_edges(t0, t1, n)
    dev = tl.idle.device(0)
    _, launch, sync, host = dev.split(edges[:-1], edges[1:])
    lane = next(lane for lane in tl.lanes if lane.kind == IDLE)
    cells = lane.cells(t0, t1, n)
    parts = np.stack([launch, sync, host])
    want = np.where(parts.max(axis=0) > 0, parts.argmax(axis=0), -1)
    assert cells.dominant.tolist() == want.tolist()
    np.testing.assert_allclose(cells.fullness, (launch + sync + host) / np.diff(edges))


@pytest.mark.parametrize("chunk", [4096, 7])  # 7: the search crosses many blocks
@pytest.mark.parametrize("name", ["sample", "small_ctx128_graphs"])
def test_item_under_the_cursor_and_the_next_gap(name, chunk, monkeypatch):
    import nsight_tui.parsers.analyses.timeline as timeline_module

    monkeypatch.setattr(timeline_module, "GAP_SCAN_CHUNK", chunk)
    tl = _timeline(name)
    rng = random.Random(5)
    for _ in range(40):
        li = rng.randrange(len(tl.lanes))
        lane = tl.lanes[li]
        if lane.kind == IDLE or not len(lane):
            continue
        k = rng.randrange(len(lane))
        a = int(lane.start[k]) + rng.randrange(-2000, 2000)
        b = a + rng.choice([500, 5_000, 80_000])
        got = lane.item_in(a, b)
        overlap = [(min(int(e), b) - max(int(s), a), i) for i, (s, e) in enumerate(zip(lane.start, lane.end))
                   if s < b and e > a]
        if not overlap:
            assert got is None
            continue
        best = max(o for o, _ in overlap)
        assert got == max(i for o, i in overlap if o == best)
        item = tl.item(li, a, b)
        if lane.kind == GPU and item.kind == "kernel" and item.call_ref is not None:
            assert item.lead_ns == item.start_ns - int(tl.trace.api["start"].iat[item.call_ref])
    # gaps: the reference walks the merged busy intervals by hand
    ops = sorted((int(s), int(e)) for s, e, d in zip(tl.trace.ops["start"], tl.trace.ops["end"], tl.trace.ops["device"])
                 if d == tl.idle.devices[0] and e > s)
    merged = []
    for s, e in ops:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    gaps = [(merged[i][1], merged[i + 1][0]) for i in range(len(merged) - 1)]
    for t in (tl.t_min, (tl.t_min + tl.t_max) // 2, merged[len(merged) // 3][1]):
        for min_ns in (1, 50_000, 1_000_000):
            after = [g for g in gaps if g[0] > t and g[1] - g[0] >= min_ns]
            before = [g for g in gaps if g[1] < t and g[1] - g[0] >= min_ns]
            assert tl.next_gap(tl.idle.devices[0], t, min_ns, True) == (after[0] if after else None)
            assert tl.next_gap(tl.idle.devices[0], t, min_ns, False) == (before[-1] if before else None)


def test_window_table_lists_each_overlapping_item_once():
    tl = _timeline("sample")
    steps = [i for i, t in enumerate(tl.trace.ranges["text"]) if t.startswith("step_")]
    t0 = int(tl.trace.ranges["start"].iat[steps[0]])
    t1 = t0 + 3_000_000
    table = tl.window_table(t0, t1)
    con = ro(_path("sample"))
    try:
        want = {}
        for kind, tbl in (("kernel", "KERNEL"), ("memcpy", "MEMCPY"), ("memset", "MEMSET")):
            want[kind] = con.execute(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{tbl} WHERE start < ? AND end > ?",
                                     (t1, t0)).fetchone()[0]
        calls = con.execute("""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start < ? AND end > ?""",
                            (t1, t0)).fetchone()[0]
        leads = dict(con.execute("""SELECT k.correlationId, k.start - r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
            WHERE k.start < ? AND k.end > ?""", (t1, t0)))
    finally:
        con.close()
    counts = table["kind"].value_counts().to_dict()
    assert {k: counts.get(k, 0) for k in want} == want
    assert counts["api"] == calls  # every call on the sample's two threads (both launch work)
    kernels = table[table["kind"] == "kernel"]
    assert dict(zip(kernels["corr"], kernels["lead"])) == leads
