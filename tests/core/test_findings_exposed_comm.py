"""exposed-communication (parsers/analyses/findings.py) against its twins (DDP with one gradient bucket vs
DDP's overlapping 25 MB buckets, two GPUs) and against its definition computed here, per rank,
over its step_N ranges: collective kernel time with no compute kernel running (exposed) while the
step waited on it (a compute op issued and not started, or a thread of the rank in a synchronising
call); the rule takes the rank that waits least and fires at >= 5% of its step."""
from __future__ import annotations

import pytest

from helpers import step_sql
from helpers.xz_samples import plain
from conftest import SAMPLES
from helpers.findings_twins import assert_pair, intersect, length, merge, ro, subtract
from helpers.idle_reference import is_sync
from nsight_tui.parsers.analyses.findings import THRESHOLDS, findings, waited_communication
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.analyses.ranks import find_ranks

RULE = "exposed-communication"


def _ids(path):
    return {f.id: f for f in findings(load_trace(path))}


def test_fires_on_one_bucket_silent_on_overlapped_buckets_and_estimates_the_saving():
    assert_pair(RULE, "small_ctx512_ddp2_nosync_ddp-one-bucket", "small_ctx512_ddp2_nosync")


def _reference(path) -> dict[tuple[int, int], dict]:
    """(pid, device) -> per-step comm / exposed / waited ns and the mean step, from SQL."""
    con = ro(path)
    kernels = con.execute("""SELECT k.start, k.end, (k.globalPid >> 24) & 16777215, k.deviceId, k.correlationId, s.value
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName""").fetchall()
    others = []
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        others += con.execute(f"SELECT start, end, (globalPid >> 24) & 16777215, deviceId, correlationId FROM {table}").fetchall()
    calls = con.execute("""SELECT r.start, r.end, (r.globalTid >> 24) & 16777215, r.correlationId, s.value
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId""").fetchall()
    step_rows = con.execute("""SELECT e.start, e.end, (e.globalTid >> 24) & 16777215 FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59
        AND coalesce(e.text, s.value) GLOB 'step_[0-9]*'""").fetchall()
    con.close()
    call_end = {(pid, corr): e for s, e, pid, corr, _ in calls}
    out = {}
    for pid, dev in sorted({(k[2], k[3]) for k in kernels}):
        mine = [k for k in kernels if (k[2], k[3]) == (pid, dev)]
        comm = merge((k[0], k[1]) for k in mine if k[5].startswith("nccl"))
        compute = merge((k[0], k[1]) for k in mine if not k[5].startswith("nccl"))
        issued = [(call_end[(pid, o[4])], o[0]) for o in [*[k for k in mine if not k[5].startswith("nccl")],
                                                          *[o for o in others if (o[2], o[3]) == (pid, dev)]]
                  if (pid, o[4]) in call_end]
        blocked = [(s, e) for s, e, p, _, name in calls if p == pid and is_sync(name)]
        windows = merge((s, e) for s, e, p in step_rows if p == pid)
        exposed = subtract(comm, compute)
        waited = intersect(exposed, merge(issued + blocked))
        n = len(windows)
        out[(pid, dev)] = {"comm": length(intersect(comm, windows)) / n, "exposed": length(intersect(exposed, windows)) / n,
                           "waited": length(intersect(waited, windows)) / n,
                           "step": sum(e - s for s, e in windows) / n}
    return out


@pytest.mark.parametrize("path", [plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"),
                                  plain(SAMPLES / "ranks_small_ctx128_ddp2" / "small_ctx128_ddp2_rank1.sqlite.xz")])
def test_waited_communication_and_firing_follow_the_definition(path):
    expected = _reference(path)
    trace = load_trace(path)
    for rank in find_ranks(trace):
        got = waited_communication(trace, rank)
        want = expected[(rank.pid, rank.device)]
        n = got["steps"]
        assert (got["comm_ns"] / n, got["exposed_ns"] / n, got["waited_ns"] / n) == \
            pytest.approx((want["comm"], want["exposed"], want["waited"]), rel=1e-12)
    pace = min(expected.values(), key=lambda r: r["waited"])
    fires = pace["waited"] >= THRESHOLDS["comm_min_share"].value * pace["step"]
    found = _ids(path)
    assert (RULE in found) == fires
    if fires:
        assert found[RULE].saving_ms_per_step * 1e6 == pytest.approx(pace["waited"], rel=1e-12)


def test_a_rank_waiting_for_a_slower_one_is_no_overlap_problem():
    """In the two-rank export of default DDP (overlapping buckets) rank 1's collectives last longer:
    it waits inside them for rank 0. Rank 0 sets the pace and its step hardly waits on
    communication, so nothing fires; rank 1's own export cannot see rank 0 and says so."""
    both = _reference(plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"))
    fast, slow = sorted(both.values(), key=lambda r: r["waited"])
    assert slow["waited"] > 5 * fast["waited"]
    assert RULE not in _ids(plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"))
    alone = _ids(plain(SAMPLES / "ranks_small_ctx128_ddp2" / "small_ctx128_ddp2_rank1.sqlite.xz"))[RULE]
    assert "only this rank" in alone.basis


def test_per_step_rules_read_rank_0_of_a_two_rank_export():
    """Both ranks' step_N ranges are in one export; the per-step rules take rank 0's (its config
    mark says rank 0), not the two ranks' overlapping windows together."""
    path = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
    con = ro(path)
    pid0 = next(p for (p,) in con.execute("""SELECT (e.globalTid >> 24) & 16777215 FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:config%'
        AND coalesce(e.text, s.value) LIKE '%"rank": 0%'"""))
    con.close()
    rank0 = [it.period for it in step_sql.steps(path, pid0)]
    launch = _ids(path)["launch-bound"]
    assert len(rank0) == 3
    # the per-step basis is rank 0's step period, not both ranks' windows together
    assert launch.evidence["step_ns"] == pytest.approx(sum(rank0) / len(rank0), rel=1e-12)
