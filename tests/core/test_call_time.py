"""analyses.call_time: a CUDA call's duration named for what it was. The DDP sample's device-to-host
copies (cudaMemcpyAsync into pageable memory): 6 of its 10 returned only after their copy ended, and
their time is the GPU's (queued behind earlier work, then the copy), not "launch overhead" as the
correlation view called it. Expected values from SQL over the export."""
from __future__ import annotations

import sqlite3

from helpers.xz_samples import plain
from conftest import SAMPLES
from nsight_tui.parsers.analyses import call_time as ct
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.tui.viewmodels.correlation import detail_lines

PATH = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")


def sql(query: str):
    con = sqlite3.connect(f"file:{PATH}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_blocking_device_to_host_copies_are_the_gpus_wait():
    copies = sql("""SELECT r.correlationId, r.globalTid >> 24 & 16777215, r.start, r.end, m.start, m.end
        FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId
        AND (r.globalTid >> 24) = (m.globalPid >> 24) WHERE m.copyKind = 2""")
    model = range_model(load_trace(PATH), "process")
    gpid_of = {p: g for g, (p, _) in model.trace.processes.items()}
    blocked = 0
    for corr, pid, a, b, ms, me in copies:
        c = model.correlation(corr, gpid_of[pid])
        t = ct.of_correlation(c)
        assert t.duration_ns == b - a
        if b >= me:
            blocked += 1
            assert (t.label, t.queued_ns, t.gpu_ns) == (ct.BLOCKED, ms - a, me - ms)
            assert t.launch_overhead_ns is None
            lines = dict(detail_lines(c, model.mode))
            assert ct.LAUNCH not in lines and lines[ct.BLOCKED]
        else:
            assert t.label == ct.ASYNC
    assert blocked == sum(b >= me for _, _, _, b, _, me in copies) > 0


def test_a_kernel_launch_is_launch_overhead():
    corr, pid, a, b = sql("""SELECT r.correlationId, r.globalTid >> 24 & 16777215, r.start, r.end
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        AND (r.globalTid >> 24) = (k.globalPid >> 24) ORDER BY r.start LIMIT 1""")[0]
    model = range_model(load_trace(PATH), "process")
    gpid = next(g for g, (p, _) in model.trace.processes.items() if p == pid)
    c = model.correlation(corr, gpid)
    t = ct.of_correlation(c)
    assert (t.label, t.launch_overhead_ns) == (ct.LAUNCH, b - a)
    assert dict(detail_lines(c, model.mode))[ct.LAUNCH]


def test_a_synchronise_waits_by_design():
    t = ct.call_time("cudaStreamSynchronize_v3020", 0, 1000, [], [], [])
    assert t.label == ct.SYNCHRONISE and t.launch_overhead_ns is None
