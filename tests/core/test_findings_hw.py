"""Findings from the hardware: occupancy-limited kernels from an Nsight Compute
report, tensor cores idle while GEMMs are named as tensor-core kernels (sampled GPU metrics), and
chains of short elementwise kernels. Each figure against an independent computation: NVIDIA's own
reading of the ncu report (sample_traces/ncu/oracle), SQL over the exports, hand formulas."""
from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest

from helpers import step_sql
from conftest import SAMPLES, sample_file
from helpers.ncu_pair import oracle_kernels, unpacked
from nsight_tui.parsers.analyses.findings import THRESHOLDS, answers, findings
from nsight_tui.render.findings import findings_json
from nsight_tui.parsers.analyses.roofline import build as build_roofline
from nsight_tui.parsers.kernels.families import classify_names
from nsight_tui.parsers.read.load import load_trace

FP32 = SAMPLES / "hw" / "small_ctx512_b8_gpumetrics.sqlite.xz"
TF32 = SAMPLES / "hw" / "small_ctx512_tf32_b8_gpumetrics.sqlite.xz"


def _sql(path, query, args=()):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(query, args).fetchall()
    finally:
        db.close()


def step_kernels_sql(path) -> tuple[list[tuple], int]:
    """(start, end, stream, demangled name, mangled name, launch call start) of the kernels whose launching call starts
    inside a steady-state step's period (step_sql: the step's start to the next's), by start; and the
    number of steps."""
    steps = step_sql.steps(path)
    rows = _sql(path, """SELECT k.start, k.end, k.streamId, d.value, m.value, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
                         JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                              AND (r.globalTid >> 24) = (k.globalPid >> 24)
                         JOIN StringIds d ON d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName
                         ORDER BY k.start""")
    inside = [r for r in rows if any(s.start <= r[5] < s.start + s.period for s in steps)]
    return inside, len(steps)


def union_ns(spans) -> int:
    total, end = 0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


# -- occupancy-limited -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ncu_pair(tmp_path_factory):
    export, _, trace, _, joined = unpacked(tmp_path_factory.mktemp("hw_ncu"))
    return export, trace, joined


def test_occupancy_limited_in_the_ranking_from_nvidia_reading_and_sql(ncu_pair):
    """Per kernel name (≥ 2% of the steps' GPU busy time by SQL, theoretical occupancy < 50% by
    NVIDIA's reader): the rule's estimate = ncu's TheoreticalOccupancy speedup (NVIDIA's reader),
    weighted by the profiled instances' nsys time (SQL), × the name's nsys time per step (SQL over the
    step periods). The fp32 GEMMs are fp32-gemm-without-tensor-cores' time already: before the replay
    each says so as overlap; its saving is the replay of its own fix (tests/core/test_findings_ceilings.py)."""
    export, trace, a = ncu_pair
    oracle = oracle_kernels()
    rows, n = step_kernels_sql(export)
    busy = union_ns([(r[0], r[1]) for r in rows])  # kernels only: this export's step copies are µs
    per_name: dict[str, int] = {}
    for r in rows:
        per_name[r[4]] = per_name.get(r[4], 0) + r[1] - r[0]
    dur = dict(_sql(export, "SELECT rowid, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    rowid = trace.ops["rowid"].to_numpy()
    prof: dict[str, list] = {}
    for k, o in zip(a.kernels, oracle):
        if k.op >= 0:
            prof.setdefault(o["mangled"], []).append((o, dur[int(rowid[k.op])]))
    expected = {}
    for mangled, members in prof.items():
        theo = max(o["metrics"]["sm__maximum_warps_per_active_cycle_pct"][0] for o, _ in members)
        ns = per_name.get(mangled, 0)
        if theo >= 50 or ns < 0.02 * busy:
            continue
        pct = [next(((r.get("speedup_estimation") or {}).get("speedup", 0) for r in o["rules"]
                     if r["rule_identifier"] == "TheoreticalOccupancy"), 0) for o, _ in members]
        speed = float(np.average(pct, weights=[d for _, d in members]))
        if speed > 0:
            expected[mangled] = (speed * ns / n / 100 / 1e6, theo, ns / n)
    got = [f for f in findings(trace, ncu=a) if f.id == "occupancy-limited"]
    mangled_of = {d: m for d, m in _sql(export, """SELECT d.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds d ON d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName""")}
    found = {mangled_of[f.evidence["kernel"]]: f for f in got}
    assert set(found) == set(expected) and len(found) >= 5
    for m, f in found.items():
        saving, theo, ns = expected[m]
        assert f.estimate_ms_per_step == pytest.approx(saving, rel=1e-9)
        assert f.evidence["ncu_theoretical_occupancy_pct"] == pytest.approx(theo)
        assert f.evidence["nsys_ns_per_step"] == pytest.approx(ns)
        assert f.evidence["ncu_occupancy_limiter"] == "registers"
        assert "upper bound" in f.estimate_basis and "measured by ncu" in f.estimate_basis
        assert f.replayed and f.edits[0].startswith("speed:")
    # every one is an fp32 GEMM the fp32 rule claimed first: without the replay, nothing left of its own,
    # said as overlap
    for f in (f for f in findings(trace, ncu=a, replay=False) if f.id == "occupancy-limited"):
        assert f.overlaps == ["fp32-gemm-without-tensor-cores"] and f.saving_ms_per_step == pytest.approx(0, abs=1e-9)
    # without the report the rule is silent; the JSON lists each, with its evidence, ranked or apart
    assert not [f for f in findings(trace) if f.id == "occupancy-limited"]
    doc = findings_json(answers(trace, ncu=a))
    listed = [p for p in doc["findings"] + doc["present_no_saving"] if p["id"] == "occupancy-limited"]
    assert len(listed) == len(found) and {p["evidence"]["kernel"] for p in listed} == {f.evidence["kernel"] for f in got}


# -- tensor cores idle / sampled evidence -----------------------------------------------------------
def sampled_tensor_sql(path) -> tuple[float, int]:
    """Mean Tensor Active over the samples whose period [t, t + 1/rate) is ≥ 50% GEMM kernels
    (by name family), from GPU_METRICS and the kernel table, brute force."""
    names = dict(_sql(path, "SELECT metricId, metricName FROM TARGET_INFO_GPU_METRICS"))
    tensor = next(i for i, m in names.items() if m.startswith("Tensor Active"))
    samples = _sql(path, "SELECT timestamp, value FROM GPU_METRICS WHERE metricId = ? ORDER BY timestamp", (tensor,))
    t = np.array([s[0] for s in samples], dtype=np.int64)
    period = int(np.median(np.diff(t)))
    ks = _sql(path, """SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                       JOIN StringIds s ON s.id = k.demangledName""")
    gemm = [(a, b) for (a, b, _), f in zip(ks, classify_names([k[2] for k in ks])) if f == "gemm"]
    vals = []
    for (ts, v) in samples:
        cov = union_ns([(max(a, ts), min(b, ts + period)) for a, b in gemm if a < ts + period and b > ts])
        if cov >= 0.5 * period:
            vals.append(v)
    return float(np.mean(vals)), len(vals)


@pytest.fixture(scope="module")
def hw(async_trace):
    return async_trace(FP32), async_trace(TF32)


def test_fp32_gemm_finding_carries_the_sampled_tensor_activity(hw):
    fp32, tf32 = hw
    f = {x.id: x for x in findings(load_trace(fp32))}
    ev = f["fp32-gemm-without-tensor-cores"].evidence
    mean, count = sampled_tensor_sql(fp32)
    assert ev["sampled_verdict"] == "confirmed" and ev["sampled_gemm_samples"] == count
    assert ev["sampled_tensor_active_pct"] == pytest.approx(mean, rel=1e-9) and mean < 2
    assert "tensor-cores-idle" not in f
    # TF32: tensor cores busy over the GEMMs: neither rule fires
    g = {x.id for x in findings(load_trace(tf32))}
    assert not g & {"fp32-gemm-without-tensor-cores", "tensor-cores-idle"}


def test_tensor_cores_idle_fires_when_the_samples_refute_the_names(hw, tmp_path):
    """A COPY of the TF32 capture with its Tensor Active samples set to 0: GEMMs named TF32, tensor
    cores idle. Saving = GEMM time per step (SQL) × (1 − fp32/tf32 peak), at most the CPU's wait."""
    _, tf32 = hw
    copy = tmp_path / "tf32_idle.sqlite"
    shutil.copy(tf32, copy)
    db = sqlite3.connect(copy)
    db.execute("""UPDATE GPU_METRICS SET value = 0 WHERE metricId IN
                  (SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName LIKE 'Tensor Active%')""")
    db.commit()
    db.close()
    trace = load_trace(copy)
    f = {x.id: x for x in findings(trace)}
    idle = f["tensor-cores-idle"]
    assert "fp32-gemm-without-tensor-cores" not in f  # no duplicate: the names say TF32
    ev = idle.evidence
    assert ev["named_path"] == "tf32" and ev["sampled_verdict"] == "refuted" and ev["sampled_tensor_active_pct"] == 0
    rows, n = step_kernels_sql(copy)
    gemm_ns = sum(r[1] - r[0] for r, fam in zip(rows, classify_names([r[3] for r in rows])) if fam == "gemm") / n
    assert ev["gemm_ns_per_step"] == pytest.approx(gemm_ns)
    pk = build_roofline(trace).peaks.peaks
    gpu_saved = gemm_ns * (1 - pk.tflops["fp32"] / pk.tflops["tf32"])
    assert idle.estimate_ms_per_step == pytest.approx(min(gpu_saved, ev["cpu_wait_ns_per_step"]) / 1e6)
    assert "estimate" in idle.estimate_basis  # its saving is its fix's replay (tests/core/test_findings_ceilings.py)
    assert not list(tmp_path.glob("*-journal"))  # the copy was written, the sample never


# -- elementwise chains -------------------------------------------------------------------------------
def attention_spans(path) -> list[tuple[int, int]]:
    return _sql(path, """SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                         WHERE coalesce(e.text, s.value) = 'scaled_dot_product_attention'""")


def chains_sql(path, in_attention: bool = False, keep=lambda row: True) -> list[list[int]]:
    """Runs of ≥ 3 consecutive kernels of one stream inside one step, each elementwise/reduction by
    name family, ≤ 20 µs and `keep(row)`, launched outside (or, `in_attention`, inside) a
    scaled_dot_product_attention NVTX range; the durations of each run. (The range-instance
    condition is left out: on these exports the runs found lie inside one phase, which the
    equality below checks.)"""
    rows, _ = step_kernels_sql(path)
    spans = attention_spans(path)
    rows = [r for r in rows if any(a <= r[5] < b for a, b in spans) == in_attention]
    fam = classify_names([r[3] for r in rows])
    out, by_stream = [], {}
    for r, f in zip(rows, fam):
        by_stream.setdefault(r[2], []).append((r, f))
    short = THRESHOLDS["chain_kernel_max_ns"].value
    for members in by_stream.values():
        run: list[int] = []
        for r, f in members + [(None, None)]:
            if r is not None and f in ("elementwise", "reduction") and r[1] - r[0] <= short and keep(r):
                run.append(r[1] - r[0])
                continue
            if len(run) >= 3:
                out.append(run)
            run = []
    return out


def test_elementwise_chains_equal_sql_and_the_saving_is_one_pass_per_chain():
    """The fused-attention twin: the chains SQL finds; saving = per chain its time − its longest kernel."""
    path = sample_file("small_ctx128_fused")
    expect = chains_sql(path)
    _, n = step_kernels_sql(path)
    f = {x.id: x for x in findings(load_trace(path))}["elementwise-chain"]
    assert f.evidence["chains_per_step"] == pytest.approx(len(expect) / n) and expect
    assert f.evidence["chain_ns_per_step"] == pytest.approx(sum(map(sum, expect)) / n)
    assert f.estimate_ms_per_step == pytest.approx(sum(sum(c) - max(c) for c in expect) / n / 1e6)
    assert f.evidence["memory_bound_by"] == "family" and "estimate" in f.estimate_basis
    # its saving is the replay of its fix: each chain one kernel (tests/core/test_replay_fuse.py)
    assert f.replayed and [e.startswith("fuse:") for e in f.edits] == [True]


def test_the_manual_attention_chain_is_left_to_unfused_attention():
    """The twins (manual vs fused attention) differ by the attention alone, and that is
    unfused-attention's saving (tested against the twins in test_findings.py): its scale/mask/
    softmax kernels are not a chain here, so the twins cannot measure the chain rule. What they
    show: SQL's runs on the manual twin all lie among the attention's kernels, and the rule (which
    leaves those to unfused-attention) finds no chain there: no double count."""
    manual = SAMPLES / "small_ctx128.sqlite"
    assert chains_sql(manual) == [] and chains_sql(manual, in_attention=True)  # scale, mask per layer
    f = {x.id: x for x in findings(load_trace(manual))}
    assert "unfused-attention" in f or any(p.id == "unfused-attention"
                                           for p in answers(load_trace(manual)).present_no_saving)
    assert "elementwise-chain" not in f


def test_no_chain_on_the_ncu_pair_by_ncu_figures(ncu_pair):
    """With the report, memory-bound means ncu's memory % > SM %. The ncu pair's only runs are its
    manual attention's (unfused-attention's): the rule stays silent with and without the report."""
    export, trace, a = ncu_pair
    assert chains_sql(export) == [] and len(chains_sql(export, in_attention=True)) >= 4
    assert not [f for f in findings(trace, ncu=a) if f.id == "elementwise-chain"]


def optimizer_kernel_ns_per_step(path) -> float:
    """The kernels launched inside the `optimizer` ranges of the step_N ranges, per step (SQL)."""
    (total, n), = _sql(path, """
        WITH r AS (SELECT e.start, e.end, e.globalTid AS tid, coalesce(e.text, s.value) AS name FROM NVTX_EVENTS e
                   LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL),
        o AS (SELECT a.start, a.end FROM r a JOIN r b ON b.tid = a.tid AND b.name GLOB 'step_[0-9]*'
              AND a.start >= b.start AND a.end <= b.end WHERE a.name = 'optimizer')
        SELECT sum(k.end - k.start), (SELECT count(*) FROM o) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE EXISTS (SELECT 1 FROM o WHERE r.start >= o.start AND r.start < o.end)""")
    return total / n


def test_the_per_parameter_optimizer_chain_against_its_fused_twin():
    """The twins that can tell: a per-parameter AdamW (foreach=False: mul, lerp, addcmul, sqrt, ...
    per tensor) and the same run with fused=True (one pass). The chain rule's estimate is GPU time:
    within 0.67-1.5x of the optimizer's kernel time the fused twin saves (SQL). The step saves far
    more (the ~1,100 launches: unfused-optimizer's and launch-bound's time). The chain's fix replayed
    (its chains fused, their launches gone) saves part of that step, less than unfused-optimizer's
    fix; all fixes together are one replay, so nothing is counted twice."""
    from helpers.findings_twins import sample

    plain, fused = sample("small_ctx128_foreach-off"), sample("small_ctx128_fused-optim")
    measured = optimizer_kernel_ns_per_step(plain) - optimizer_kernel_ns_per_step(fused)
    f = {x.id: x for x in findings(load_trace(plain))}
    chain = f["elementwise-chain"]
    assert 0.67 <= chain.estimate_ms_per_step * 1e6 / measured <= 1.5
    assert all(r["range"] == "step_N/optimizer" for r in chain.rows)
    step_saved = np.median(step_sql.python_steps(plain)) - np.median(step_sql.python_steps(fused))
    assert chain.replayed and 0 < chain.saving_ms_per_step * 1e6 < step_saved
    assert chain.saving_ms_per_step < f["unfused-optimizer"].saving_ms_per_step
    assert "elementwise-chain" not in {x.id for x in findings(load_trace(fused))}


def test_the_optimizer_chain_against_its_unsynchronised_fused_twin(async_trace):
    """The same pair without phase syncs (ctx 512, batch 8, H100): every phase GPU-bound, so the step
    itself can tell. The chain estimate is within 0.67-1.5x of the step time fusing saved (Python's
    own step clock, as unfused-optimizer's twin test measures it) and of the optimizer kernel time
    saved (SQL); so is the replay of its fix (its chains fused)."""
    planted = async_trace(SAMPLES / "async" / "small_ctx512_b8_async_foreach-off.sqlite.xz")
    fixed = async_trace(SAMPLES / "async" / "small_ctx512_b8_async_fused-optim.sqlite.xz")
    chain = {x.id: x for x in findings(load_trace(planted))}["elementwise-chain"]
    step_saved = (np.mean(step_sql.python_steps(planted)) - np.mean(step_sql.python_steps(fixed)))
    kernels_saved = optimizer_kernel_ns_per_step(planted) - optimizer_kernel_ns_per_step(fixed)
    got = chain.estimate_ms_per_step * 1e6
    assert step_saved > 0 and 0.67 <= got / step_saved <= 1.5, (got, step_saved)
    assert 0.67 <= got / kernels_saved <= 1.5, (got, kernels_saved)
    assert chain.replayed and 0.67 <= chain.saving_ms_per_step * 1e6 / step_saved <= 1.5, (chain.saving_ms_per_step, step_saved)


def test_memory_bound_by_ncu_figures(ncu_pair, monkeypatch):
    """With a report a kernel is memory-bound when ncu's memory throughput (% of peak) exceeds its SM
    throughput (NVIDIA's reader: mean over the name's profiled instances). To see the rule act on
    ncu's figures, the manual attention's kernels are not left to unfused-attention here: by family
    its mul, bitwise_not, masked_fill runs are chains (as SQL's runs); by ncu's figures they are not
    (masked_fill measures SM 29% > memory 20%), exactly as SQL's runs keeping only the names NVIDIA's
    reader says are memory-bound."""
    from nsight_tui.parsers.analyses.findings import fusion as rules
    from nsight_tui.parsers.analyses.findings import context

    export, trace, a = ncu_pair
    mem: dict[str, list[tuple[float, float]]] = {}
    for o in oracle_kernels():
        m = o["metrics"]
        mem.setdefault(o["mangled"], []).append((m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"][0],
                                                 m["sm__throughput.avg.pct_of_peak_sustained_elapsed"][0]))
    bound = {k: np.mean([x for x, _ in v]) > np.mean([y for _, y in v]) for k, v in mem.items()}
    assert True in bound.values() and False in bound.values()
    monkeypatch.setattr(rules, "_unfused_attention_ops", lambda c: np.zeros(0, dtype=np.int64))
    dur = trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy()

    def runs(chains) -> list:
        return sorted(sorted(int(x) for x in dur[p]) for p, _ in chains)

    by_family = rules.elementwise_chains(context(trace))
    assert runs(by_family) == sorted(sorted(r) for r in chains_sql(export, in_attention=True)) and len(by_family) >= 4
    by_ncu = rules.elementwise_chains(context(trace, ncu=a))
    expect = chains_sql(export, in_attention=True, keep=lambda r: bound.get(r[4], True))
    assert runs(by_ncu) == sorted(sorted(r) for r in expect) and len(by_ncu) < len(by_family)
