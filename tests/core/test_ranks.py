"""Per-rank figures against computations written here, independently: SQL over the export for
which op ran where, and a plain sweep over sorted intervals for unions and overlaps."""
from __future__ import annotations

import re
import sqlite3

import numpy as np
import pytest
from helpers import step_sql
from helpers.xz_samples import plain
from conftest import SAMPLES, sample_file, shared_trace
from helpers.idle_reference import gaps

from nsight_tui.parsers.model import intervals
from nsight_tui.parsers.analyses import ranks
from nsight_tui.parsers.read.load import load_trace

COMM = re.compile(r"(?i)nccl|nvshmem|rccl|all_?reduce|all_?gather|reduce_?scatter")


def _rows(path, sql):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _union(pairs):
    """Plain sweep: merge sorted intervals."""
    out = []
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(u):
    return sum(e - s for s, e in u)


def _overlap(u, v):
    total = 0
    for s, e in u:
        for a, b in v:
            total += max(0, min(e, b) - max(s, a))
    return total


def _kernels_by_rank(path):
    rows = _rows(path, "SELECT (k.globalPid >> 24) & 16777215, k.deviceId, k.start, k.end, s.value "
                       "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName")
    out = {}
    for pid, dev, s, e, name in rows:
        out.setdefault((pid, dev), []).append((s, e, bool(COMM.search(name))))
    return out


RANK_FILES = SAMPLES / "ranks_small_ctx128_ddp2"


@pytest.mark.parametrize("name", ["mfu_2gpu_before", "h100_2gpu_1s", "small_ctx128_threads", "small_ctx128_graphs",
                                  "sample:small_ctx128_ddp2", "ranks:small_ctx128_ddp2_rank0",
                                  "ranks:small_ctx128_ddp2_rank1"])
def test_per_rank_kernels_and_communication_match_sql(name):
    where, _, stem = name.rpartition(":")
    path = (plain(SAMPLES / f"{stem}.sqlite.xz") if where == "sample" else plain(RANK_FILES / f"{stem}.sqlite.xz")
            if where else shared_trace(name))
    run = ranks.ranks_of_trace(load_trace(path))
    expected = _kernels_by_rank(path)
    assert {(s.rank.pid, s.rank.device) for s in run.ranks} >= set(expected)
    for s in run.ranks:
        ks = expected.get((s.rank.pid, s.rank.device), [])
        assert s.kernels == len(ks)
        assert s.kernel_ns == sum(e - b for b, e, _ in ks)
        comm = _union([(b, e) for b, e, c in ks if c])
        compute = _union([(b, e) for b, e, c in ks if not c])
        assert s.comm_kernels == sum(c for _, _, c in ks)
        assert s.comm_ns == _length(comm)
        assert s.compute_ns == _length(compute)
        assert s.exposed_comm_ns == _length(comm) - _overlap(comm, compute)


def test_two_gpu_export_has_two_ranks_with_exposed_communication():
    run = ranks.ranks_of_trace(load_trace(shared_trace("mfu_2gpu_before")))
    assert [r.rank.rank for r in run.ranks] == [0, 1]
    assert len({r.rank.pid for r in run.ranks}) == 2
    assert all(r.comm_ns > 0 for r in run.ranks)
    assert run.straggler is not None
    compute = {r.rank.rank: r.compute_ns for r in run.ranks}
    assert run.straggler.rank.rank == max(compute, key=compute.get)


@pytest.mark.parametrize("name", ["small_ctx128", "small_ctx128_ddp2", "async:large_ctx512_async",
                                  "async:small_ctx512_b8_ddp2_async"])
def test_steps_and_phases_match_sql(name, async_trace):
    """Per phase inside the steps: the CPU span, the GPU time (each instance's first op start to
    last op end, of the ops its process launched while it was open) and the busy, comm and exposed
    time inside those GPU windows. On the unsynchronised captures the phase's CPU span holds the
    previous phase's kernels, so a figure taken in it would be another phase's (it was: forward
    busy 126.3 ms against the tree's 271.4 ms on large_ctx512_async)."""
    where, _, stem = name.rpartition(":")
    path = async_trace(stem) if where else sample_file(stem)
    run = ranks.ranks_of_trace(load_trace(path))
    names = dict(_rows(path, "SELECT id, value FROM StringIds"))
    rows = _rows(path, "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE end IS NOT NULL "
                       "AND eventType = 59")
    named = [(s, e, t if t is not None else names.get(i), tid) for s, e, t, i, tid in rows]
    by_rank = _kernels_by_rank(path)
    ops = _rows(path, "SELECT (globalPid >> 24) & 16777215, deviceId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                      "UNION ALL SELECT (globalPid >> 24) & 16777215, deviceId, start, end FROM "
                      "CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT (globalPid >> 24) & 16777215, deviceId, start, "
                      "end FROM CUPTI_ACTIVITY_KIND_MEMSET")
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    assert run.ranks
    for r in run.ranks:
        pid = r.rank.pid
        steps = sorted((s, e) for s, e, t, tid in named
                       if re.fullmatch(r"step_\d+", t or "") and (tid >> 24) & 0xFFFFFF == pid)
        assert r.steps_ns == [it.period for it in step_sql.steps(path, pid)]  # each step is its period
        busy = _union([(s, e) for p, d, s, e in ops if (p, d) == (pid, r.rank.device)])
        ks = by_rank[(pid, r.rank.device)]
        comm = _union([(b, e) for b, e, c in ks if c])
        compute = _union([(b, e) for b, e, c in ks if not c])
        exposed = [g for s, e in comm for g in gaps(compute, s, e)]  # comm minus compute (a plain sweep)
        assert set(r.phases) == {"forward", "backward", "optimizer"}
        for phase, got in r.phases.items():
            inst = [(s, e, tid) for s, e, t, tid in named if t == phase and (tid >> 24) & 0xFFFFFF == pid
                    and any(a <= s and e <= b for a, b in steps)]
            spans = [step_sql.gpu_span(con, tid, s, e) for s, e, tid in inst]
            spans = [(a, b) for a, b in spans if a is not None]
            assert got.instances == len(inst)
            assert got.cpu_ns == sum(e - s for s, e, _ in inst)
            assert got.gpu_ns == sum(b - a for a, b in spans)
            window = _union(spans)
            assert got.busy_ns == _overlap(busy, window)
            assert got.comm_ns == _overlap(comm, window)
            assert got.exposed_comm_ns == _overlap(_union(exposed), window)
    con.close()


def test_interval_helpers_against_a_plain_sweep():
    rng = np.random.default_rng(7)
    for _ in range(50):
        a = rng.integers(0, 1000, size=(30, 2))
        b = rng.integers(0, 1000, size=(25, 2))
        a_pairs = [(min(x), max(x)) for x in a]
        b_pairs = [(min(x), max(x)) for x in b]
        ua, ub = intervals.union(*np.array(a_pairs).T), intervals.union(*np.array(b_pairs).T)
        assert list(zip(ua[0].tolist(), ua[1].tolist())) == [tuple(x) for x in _union(a_pairs)]
        assert intervals.overlap(ua, ub) == _overlap(_union(a_pairs), _union(b_pairs))
        assert intervals.length(intervals.intersect(ua, ub)) == _overlap(_union(a_pairs), _union(b_pairs))
        assert intervals.length(intervals.difference(ua, ub)) == _length(_union(a_pairs)) - _overlap(
            _union(a_pairs), _union(b_pairs))


def test_rank_from_file_name():
    assert ranks.rank_from_name("report_rank3.sqlite") == 3
    assert ranks.rank_from_name("run_1.sqlite") == 1
    assert ranks.rank_from_name("small_ctx128.sqlite") is None  # a context length is not a rank


def test_committed_ddp_capture_numbers_ranks_from_its_config_marks():
    run = ranks.ranks_of_trace(load_trace(plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")))
    assert [(r.rank.rank, r.rank.rank_source) for r in run.ranks] == [(0, "the capture's config mark"),
                                                                       (1, "the capture's config mark")]
    for r in run.ranks:  # DDP's gradient all-reduce runs in backward, partly hidden behind its kernels
        assert len(r.steps_ns) == 3
        assert r.phases["backward"].comm_ns > 0
        assert r.phases["optimizer"].comm_ns == 0
        assert 0 <= r.phases["backward"].exposed_comm_ns < r.phases["backward"].comm_ns


def test_report_on_a_multi_rank_export_has_the_ranks_section(tmp_path):
    import json

    from helpers.cli import run_main

    path = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
    md = run_main("report", path)
    assert md.returncode == 0, md.stderr
    assert "## Ranks" in md.stdout and "count every rank" in md.stdout and "Straggler" in md.stdout
    js = run_main("report", path, "-f", "json")
    data = json.loads(js.stdout)
    expected = _kernels_by_rank(path)
    assert [(r["rank"]["pid"], r["kernels"]) for r in data["ranks"]["ranks"]] == [
        (pid, len(ks)) for (pid, _dev), ks in sorted(expected.items())]
    single = run_main("report", SAMPLES / "small_ctx128.sqlite", "-f", "json")
    assert "ranks" not in json.loads(single.stdout)  # one rank: no section


NONVTX = SAMPLES / "nonvtx"


def test_an_unannotated_capture_has_its_inferred_steps_per_rank(async_trace, tmp_path):
    """No NVTX at all: the rank's steps are the model's inferred iterations (the tree's
    `inferred:step_N`), labelled so, each its period; truth: the workload's own Python step times
    (STEM.steps.json, which the capture writes beside the export: copied beside it here as a user
    has it, so the warm-ups are the run's own). It had 0 steps before."""
    import json
    import shutil

    stem = "small_ctx512_b8_async_nonvtx"
    path = tmp_path / f"{stem}.sqlite"
    shutil.copyfile(async_trace(NONVTX / f"{stem}.sqlite.xz"), path)
    shutil.copyfile(NONVTX / f"{stem}.steps.json", tmp_path / f"{stem}.steps.json")
    marks = json.loads((NONVTX / f"{stem}.steps.json").read_text())["steps"]
    python = [m["seconds"] * 1e9 for m in marks if m["name"].startswith("step_")]
    assert _rows(path, "SELECT count(*) FROM NVTX_EVENTS WHERE text GLOB '*step_*'")[0][0] == 0
    run = ranks.ranks_of_trace(load_trace(path))
    (r,) = run.ranks
    assert r.step_domain == "inferred" and r.step_label == "inferred:step_N"
    assert len(r.steps_ns) == len(python) == 4
    assert r.steps_ns == pytest.approx(python, rel=0.02)  # the GPU's pace against Python's clock
    assert set(r.phases) == {"forward", "backward", "optimizer"}
    assert all(p.domain == "inferred" and p.instances == len(python) for p in r.phases.values())
    # each phase's GPU time lies inside its steps' periods; together they are most of them
    gpu = sum(p.gpu_ns for p in r.phases.values())
    assert 0.8 * sum(python) < gpu <= sum(r.steps_ns)
    from nsight_tui.render.ranks import ranks_json_text, ranks_markdown

    text = ranks_markdown(run)
    assert "4 (inferred:step_N)" in text and "| inferred:backward |" in text and "inferred from the kernel" in text
    assert "CPU ms (launch span, total)" in text and "NVTX" not in text.split("### Communication")[1].split("\n")[2]
    (j,) = json.loads(ranks_json_text(run))["ranks"]
    assert j["step_domain"] == "inferred" and j["step_label"] == "inferred:step_N"


def test_an_annotated_capture_keeps_its_nvtx_steps_unlabelled(async_trace):
    run = ranks.ranks_of_trace(load_trace(async_trace(NONVTX / "small_ctx512_b8_async_twin.sqlite.xz")))
    (r,) = run.ranks
    assert r.step_domain == "" and r.step_label == "step_N" and len(r.steps_ns) == 4
    assert all(p.domain == "" for p in r.phases.values())
    from nsight_tui.render.ranks import ranks_markdown

    assert "CPU ms (NVTX, total)" in ranks_markdown(run)


def test_a_ddp_export_stripped_of_nvtx_gets_inferred_steps_on_every_rank(tmp_path):
    """The committed 2-rank DDP export with its NVTX deleted (a copy): every rank's steps are
    inferred, and the NVTX step_N periods of the original (SQL, tests/helpers/step_sql.py) are found
    among them (the same pace, found from the kernels alone)."""
    import shutil

    bare = tmp_path / "ddp2_bare.sqlite"
    shutil.copyfile(plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"), bare)
    con = sqlite3.connect(bare)
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    run = ranks.ranks_of_trace(load_trace(bare))
    assert len(run.ranks) == 2
    for r in run.ranks:
        truth = [it.period for it in step_sql.steps(plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"), r.rank.pid)]
        assert r.step_domain == "inferred" and len(r.steps_ns) >= len(truth) == 3
        # each within 1%, the last within 2%: an inferred step begins at its first kernel's launch, an NVTX
        # step_N when the loop opens it, before the host's work ahead of that launch (~0.45 ms here); every
        # period but the last holds that work all the same (the next step's starts where this one's ends)
        for i, period in enumerate(truth):
            assert min(abs(s - period) for s in r.steps_ns) < (0.02 if i == len(truth) - 1 else 0.01) * period
        assert r.phases and all(p.domain == "inferred" for p in r.phases.values())


@pytest.mark.parametrize("path", [SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz",
                                  SAMPLES / "small_ctx128_ddp2.sqlite.xz"], ids=lambda p: p.name.split(".")[0])
def test_each_ranks_compute_beside_communication_as_by_hand(path):
    """Per rank, how much slower its GPU's kernels ran beside a collective (the what-if's contention
    factor): as a plain loop over SQL finds it, said in the Markdown, the JSON and the TUI's lines."""
    from helpers.contention_by_hand import by_hand, factor_by_hand
    from nsight_tui.render.ranks import ranks_json, ranks_markdown
    from nsight_tui.tui.viewmodels.ranks import summary_lines

    run = ranks.ranks_of_trace(load_trace(path))
    coll, other = by_hand(path)
    assert sorted(coll) == sorted(s.rank.device for s in run.ranks)
    for s in run.ranks:
        factor, kernels = factor_by_hand(coll[s.rank.device], other[s.rank.device])
        assert s.compute_beside_comm_kernels == kernels >= 3
        assert s.compute_beside_comm == pytest.approx(factor, rel=1e-9) and factor > 1.0
        said = f"{s.rank.label} x{factor:.2f} ({kernels:,} kernels)"
        assert said in ranks_markdown(run) and any(said in line for line in summary_lines(run, []))
    assert [r["compute_beside_comm"] for r in ranks_json(run)["ranks"]] == [s.compute_beside_comm for s in run.ranks]


def test_a_rank_without_collectives_says_no_contention():
    run = ranks.ranks_of_trace(load_trace(SAMPLES / "small_ctx128.sqlite"))
    assert all(s.compute_beside_comm is None and s.compute_beside_comm_kernels == 0 for s in run.ranks)
    from nsight_tui.render.ranks import ranks_markdown

    assert "Compute beside communication" not in ranks_markdown(run)
