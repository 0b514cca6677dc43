"""The timeline of a multi-rank export: each GPU's communication as a lane of its own, titled
with its rank. Expected: the collective kernels of each (process, device) by SQL
(test_ranks._kernels_by_rank), and the rank of each process from its config mark (the DDP
capture) or, without one, process/GPU order."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SAMPLES, shared_trace
from helpers.xz_samples import plain
from test_ranks import _kernels_by_rank, _rows

from nsight_tui.parsers.analyses.idle import idle_analysis
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.analyses.timeline import GPU, Timeline


def _ranks_by_sql(path) -> dict[tuple[int, int], int]:
    """(pid, device) -> rank: the config mark's rank, else the order of (pid, device)."""
    marks = _rows(path, "SELECT (e.globalTid >> 24) & 16777215, coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                        "LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE "
                        "'nsight-tui:config %'")
    by_pid = {pid: json.loads(text.split(" ", 1)[1]).get("rank") for pid, text in marks}
    pairs = sorted(_kernels_by_rank(path))
    return {pair: by_pid[pair[0]] if by_pid.get(pair[0]) is not None else i for i, pair in enumerate(pairs)}


@pytest.mark.parametrize("name", ["sample:small_ctx128_ddp2", "mfu_2gpu_before"])
def test_each_ranks_communication_is_one_lane_titled_with_its_rank(name):
    where, _, stem = name.rpartition(":")
    path = plain(SAMPLES / f"{stem}.sqlite.xz") if where else shared_trace(name)
    trace = load_trace(path)
    tl = Timeline(trace, range_model(trace), idle_analysis(trace))
    kernels = _kernels_by_rank(path)
    ranks = _ranks_by_sql(path)
    kind = trace.ops["kind"].to_numpy()
    for (pid, dev), ks in kernels.items():
        comm = sorted((s, e) for s, e, c in ks if c)
        assert comm, "a DDP run's ranks all communicate"
        lanes = [lane for lane in tl.lanes if lane.kind == GPU and lane.device == dev and lane.title.endswith("comm")]
        assert len(lanes) == 1, [lane.title for lane in tl.lanes]
        (lane,) = lanes
        assert lane.title == f"r{ranks[(pid, dev)]} GPU{dev} comm"
        is_kernel = kind[lane.ref] == KERNEL
        got = sorted(zip(lane.start[is_kernel].tolist(), lane.end[is_kernel].tolist()))
        assert got == comm  # every collective kernel of that rank, and nothing else that computes
        # the stream lanes keep their ops: each collective kernel is on a stream lane too
        streams = [x for x in tl.lanes if x.kind == GPU and x.device == dev and x.key.startswith("gpu:")]
        on_streams = np.concatenate([x.ref for x in streams])
        assert set(lane.ref.tolist()) <= set(on_streams.tolist())


def test_single_rank_export_keeps_plain_titles():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    tl = Timeline(trace, range_model(trace), idle_analysis(trace))
    titles = [lane.title for lane in tl.lanes if lane.kind != "api"]
    assert "GPU0 s7" in titles and "GPU0 idle" in titles and not any(t.startswith("r0 ") for t in titles)
    assert not any(t.endswith("comm") for t in titles)  # no collective kernels: no comm lane
