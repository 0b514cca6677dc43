"""Kernels beside a collective (parsers/replay/contention.py), on the committed DDP pair (two H100s
in one export: 25 MB buckets, whose all-reduces overlap the backward, and one bucket, whose single
all-reduce runs after it): the factor read off the bucketed capture against a plain loop over SQL
here; the compute re-timed to the twin's overlap against the twin's own kernel times; the replay's
fixed point against the overlap recomputed here from its own timeline; a capture without
collectives and the unchanged replay untouched."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.contention_by_hand import by_hand as _by_hand, factor_by_hand as _factor_by_hand, overlap as _overlap
from helpers.xz_samples import XZ_TRACE, plain
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import contention, edits
from nsight_tui.parsers.replay.predict import graph_of, typical
from nsight_tui.parsers.replay.simulate import Plan, simulate

BUCKETS = SAMPLES / "async" / f"small_ctx512_b8_ddp2_async{XZ_TRACE}"
ONE_BUCKET = SAMPLES / "async" / f"small_ctx512_b8_ddp2_async_ddp-one-bucket{XZ_TRACE}"
SINGLE = SAMPLES / "small_ctx128.sqlite"

@pytest.fixture(scope="module")
def buckets():
    return load_trace(BUCKETS)


@pytest.fixture(scope="module")
def hand():
    return _by_hand(BUCKETS), _by_hand(ONE_BUCKET)


def test_beside_is_the_union_of_the_collectives():
    start = np.array([0, 10, 0, 50, 100, 0])
    end = np.array([100, 30, 20, 60, 200, 40])
    coll = np.array([False, True, True, True, False, False])
    device = np.array([0, 0, 0, 0, 0, 1])  # the last op on another GPU: no collective beside it
    got = contention.beside(start, end, coll, device)
    # the first op: 0..30 and 50..60 covered (the two overlapping collectives once), 40 of its 100 ns
    assert got.tolist() == pytest.approx([0.4, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_factor_read_off_the_capture_as_by_hand(buckets, hand):
    (coll, other), _ = hand
    c = contention.of_trace(buckets)
    assert set(c.factor) == set(coll)
    for dev in coll:
        factor, kernels = _factor_by_hand(coll[dev], other[dev])
        assert c.factor[dev] == pytest.approx(factor, rel=1e-9) and c.kernels[dev] == kernels
        assert c.factor[dev] > 1.2  # the bucketed backward runs well slower beside its all-reduces


def test_retimed_to_the_twins_overlap_meets_the_twins_kernels(buckets, hand):
    """The mechanism: each compute kernel of the bucketed capture at its time alone (its time over the
    slowdown at its own overlap) and then at the one-bucket twin's overlap of the same kernel (the two
    run the same kernels in the same order): the compute's time over the capture lands within 40% of the
    error that keeping the measured times makes, on each GPU."""
    (coll_a, other_a), (coll_b, other_b) = hand
    c = contention.of_trace(buckets)
    for dev in coll_a:
        a, b = other_a[dev], other_b[dev]
        assert [k for _, _, k in a] == [k for _, _, k in b]
        f = c.factor[dev]
        predicted = sum((e - s) * (1 + (f - 1) * _overlap(coll_b[dev], sb, eb)) / (1 + (f - 1) * _overlap(coll_a[dev], s, e))
                        for (s, e, _), (sb, eb, _) in zip(a, b))
        kept, twin = sum(e - s for s, e, _ in a), sum(e - s for s, e, _ in b)
        assert kept - twin > 3e6  # the twin's compute ran ms faster over the capture: the effect is there
        assert abs(predicted - twin) <= 0.4 * abs(kept - twin)


def test_no_collective_no_contention():
    t = load_trace(SINGLE)
    c = contention.of_trace(t)
    assert c.factor == {} and not c.any
    g, sr = graph_of(t)
    tl = simulate(g, Plan.of(g))
    assert contention.contended(g, Plan.of(g), tl, sr) is tl


def test_one_bucket_reads_no_factor():
    """The single all-reduce runs after the backward: no kernel runs both ways, so no factor (1)."""
    c = contention.of_trace(load_trace(ONE_BUCKET))
    assert c.factor and all(k == 1.0 for k in c.factor.values()) and not c.any


def test_unchanged_replays_unchanged(buckets):
    g, sr = graph_of(buckets)
    tl = simulate(g, Plan.of(g))
    after = contention.contended(g, Plan.of(g), tl, sr)
    assert np.array_equal(after.op_start_ns, tl.op_start_ns) and np.array_equal(after.op_end_ns, tl.op_end_ns)


def test_an_edits_kernels_settle_at_their_overlap(buckets):
    """`speed:gemm=2` moves the all-reduces against the compute; in the timeline the replay settles on,
    the kernels it left as measured are re-timed, over a step, by what their overlap there asks (each
    kernel's measured time x (1 + (f-1) x overlap now) / (1 + (f-1) x overlap in the unchanged replay),
    the overlaps walked here): within a tenth (a kernel at an all-reduce's edge may flip from round to
    round), and by milliseconds, where without the re-timing they would not move at all."""
    t, unchanged = typical(buckets)
    _, sr = graph_of(buckets)
    plan = edits.apply(t, sr, [edits.parse("speed:gemm=2")], load_trace).mid
    tl = contention.contended(t, plan, simulate(t, plan), sr)
    c = contention.of_trace(buckets)
    device = buckets.ops["device"].to_numpy()
    asked = replayed = 0.0
    for dev, f in c.factor.items():
        on = device == dev
        coll = list(zip(tl.op_start_ns[c.collective & on].tolist(), tl.op_end_ns[c.collective & on].tolist()))
        ref = list(zip(unchanged.timeline.op_start_ns[c.collective & on].tolist(),
                       unchanged.timeline.op_end_ns[c.collective & on].tolist()))
        for i in np.flatnonzero(c.retimed & on & (plan.op_dur == t.op_dur)).tolist():
            now = _overlap(coll, int(tl.op_start_ns[i]), int(tl.op_end_ns[i]))
            was = _overlap(ref, int(unchanged.timeline.op_start_ns[i]), int(unchanged.timeline.op_end_ns[i]))
            asked += t.op_dur[i] * ((1 + (f - 1) * now) / (1 + (f - 1) * was) - 1)
            replayed += int(tl.op_end_ns[i] - tl.op_start_ns[i]) - int(t.op_dur[i])
    asked, replayed = asked / sr.n_steps, replayed / sr.n_steps
    assert asked > 1e6  # over a millisecond a step of re-timing
    assert abs(replayed - asked) <= 0.1 * asked


def _whatif_json(path, edit: str) -> dict:
    run = cli_process.run(["whatif", str(path), edit, "-f", "json"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_whatif_says_what_it_assumes(buckets):
    said = _whatif_json(BUCKETS, "nohost:1ms")["contention_assumption"]
    c = contention.of_trace(buckets)
    assert said and f"GPU 0 x{c.factor[0]:.2f}" in said and f"read off {c.kernels[0]:,} kernels run both ways" in said
    assert _whatif_json(SINGLE, "speed:gemm=2")["contention_assumption"] is None


def test_an_export_without_launch_shapes_reads_no_factor(tmp_path):
    """Kernels without their grid and block (a trimmed export): a name alone spans shapes, so no factor
    is read and nothing is re-timed; whatif still answers."""
    import shutil
    import sqlite3

    copy = tmp_path / "ddp_noshape.sqlite"
    shutil.copyfile(plain(BUCKETS), copy)
    db = sqlite3.connect(copy)
    db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN registersPerThread")
    db.commit()
    db.close()
    c = contention.contention_of(load_trace(copy))
    assert c.collective.any() and not c.any and c.factor == {}
    assert _whatif_json(copy, "nohost:1ms")["contention_assumption"] is None


def test_the_ranks_count_the_collectives_the_replay_does():
    from nsight_tui.parsers.analyses import ranks
    from nsight_tui.parsers.kernels import families

    assert ranks.COMMUNICATION == families.COMMUNICATION
