"""Time as the GPU sees it, on real captures where nothing synchronises inside any
range (sample_traces/async): the step is its period and equals the workload's own Python step
time; ranges' GPU time is NVIDIA's projection; diff's step change is the Python change. Expected
values come from the workload's marks, NVIDIA's CSVs and tests/helpers/step_sql.py, never the code."""
from __future__ import annotations

import csv
import functools
import io
import json

import pytest

from helpers import step_sql
from conftest import ASYNC, FINDINGS, async_names, oracle_csv, read_oracle
from helpers.cli import run_main
from nsight_tui.parsers import Options, Profile
from nsight_tui.render.document import document
from nsight_tui.parsers.read.load import load_trace

NAMES = async_names()
# fp32 / --tf32 twins captured on an H200 machine by devruns/gpu_issuerate.sh after the estimate was
# written: the fp32-gemm figure is checked on them, not designed on them (their README section)
H200 = ASYNC / "h200_twins"
H100_REPEATS = ASYNC / "h100_repeats"
H200_NAMES = sorted(p.name[: -len(".sqlite.xz")] for p in H200.glob("*.sqlite.xz"))


def report_of(trace, attribution="process", **options) -> dict:
    """The report's JSON document on `trace` (the front door's report, laid out by render)."""
    return document(Profile(trace, Options(attribution=attribution, **options)).report())


def _mean(xs):
    return sum(xs) / len(xs)


def _nsys_step_projection(name: str, folder=ASYNC) -> float:
    """NVIDIA's step_N projection per instance (nvtx_gpu_proj_sum: Total Proj Time / instances)."""
    rows = [r for r in csv.DictReader(io.StringIO(read_oracle(oracle_csv(folder, name, "nvtx_gpu_proj_sum"))))
            if r["Range"].split(":")[-1].startswith("step_")]
    return sum(float(r["Total Proj Time (ns)"]) for r in rows) / sum(int(r["Range Instances"]) for r in rows)


@pytest.mark.parametrize("name", NAMES)
def test_the_step_is_its_period_and_the_workloads_step(name, async_trace):
    path = async_trace(name)
    q = report_of(load_trace(path))
    python = _mean(step_sql.python_steps(path))
    periods = [it.period for it in step_sql.steps(path)]
    # the definition, exactly, and the workload's own clock within 3%
    assert q["timing"]["step_period_mean_ns"] == int(_mean(periods))
    # findings read one process's steps (rank 0's in a two-rank export)
    assert q["findings"]["step_ns"] == pytest.approx(_mean([it.period for it in step_sql.steps(path, _rank0(q))]),
                                                     rel=1e-12)
    assert q["findings"]["step_ns"] == pytest.approx(python, rel=0.03)
    step = q["ranges"]["step"]
    assert step["period_ns"] == sum(periods)
    # the step range's GPU time is NVIDIA's projection of it (first start to last end of its work)
    assert step["proj_ns"] / step["instances"] == pytest.approx(_nsys_step_projection(name), rel=1e-9)


def _rank0(q: dict) -> int:
    """The process whose steps the per-step rules read: the first main thread's (rank 0's)."""
    return q["main_threads"][0]["pid"]


def test_the_headline_case_no_longer_takes_the_cpu_span_for_the_step(async_trace):
    """GPT-2 large ctx 512 fp32: the CPU issues a step's work in ~185 ms and the GPU runs it in ~283;
    the step (the basis of every per-step finding) is the GPU's pace, and the tree's lag is said."""
    path = async_trace("large_ctx512_async")
    q = report_of(load_trace(path))
    its = step_sql.steps(path)
    cpu, python = _mean([it.cpu for it in its]), _mean(step_sql.python_steps(path))
    assert cpu < 0.8 * python  # the trap: the NVTX span is far short of the step
    assert q["findings"]["step_ns"] == pytest.approx(python, rel=0.03)
    assert q["timing"]["gpu_lags"] is True and q["ranges"]["forward"]["gpu_lags"] is True
    fwd = q["ranges"]["forward"]
    assert fwd["proj_ns"] > 1.3 * fwd["range_ns"]  # forward's work runs long after the CPU issued it
    for f in q["findings"]["findings"]:
        assert f["saving_ms_per_step"] * 1e6 < q["findings"]["step_ns"], f["id"]


@pytest.mark.parametrize("a, b", [("large_ctx512_async", "large_ctx512_tf32_async"),
                                  ("small_ctx512_b8_async", "small_ctx512_tf32_b8_async"),
                                  ("small_ctx512_b8_async_foreach-off", "small_ctx512_b8_async_fused-optim"),
                                  *[pytest.param(f"h200_twins/{a}", f"h200_twins/{a.replace('_b8', '_tf32_b8')}", id=a)
                                    for a in ("small_ctx512_b8_async", "small_ctx1024_b8_async", "medium_ctx512_b8_async")]])
def test_diff_step_change_is_the_workloads_change(a, b, async_trace):
    pa, pb = async_trace(ASYNC / f"{a}.sqlite.xz"), async_trace(ASYNC / f"{b}.sqlite.xz")
    proc = run_main("diff", pa, pb, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["step"]["slower_pct"]
    python = 100 * (_mean(step_sql.python_steps(pb)) / _mean(step_sql.python_steps(pa)) - 1)
    assert abs(got - python) <= 2.0
    periods = 100 * (_mean([i.period for i in step_sql.steps(pb)]) / _mean([i.period for i in step_sql.steps(pa)]) - 1)
    assert got == pytest.approx(periods, abs=1e-9)


@pytest.mark.parametrize("name", ["small_ctx512_b8_ddp2_async", "small_ctx512_b8_ddp2_async_ddp-one-bucket"])
def test_ranks_step_is_the_period_and_the_straggler_arrives_last(name, async_trace):
    """Each rank's step is its period (within 3% of its own Python steps); the straggler is the
    rank whose collectives start last on average, from the NCCL kernels' starts in SQL."""
    import sqlite3

    from nsight_tui.parsers.analyses.ranks import ranks_of_trace

    path = async_trace(name)
    run = ranks_of_trace(load_trace(path))
    python = _mean(step_sql.python_steps(path))  # both ranks' marks: they step in lockstep
    for s in run.ranks:
        assert s.steps_ns == [it.period for it in step_sql.steps(path, s.rank.pid)]
        assert s.median_step_ns == pytest.approx(python, rel=0.03)
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    rows = con.execute("""SELECT (k.globalPid >> 24) & 16777215, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nccl%' ORDER BY k.start""").fetchall()
    con.close()
    by_pid: dict[int, list[int]] = {}
    for pid, start in rows:
        by_pid.setdefault(pid, []).append(start)
    n = len(next(iter(by_pid.values())))
    assert all(len(v) == n for v in by_pid.values())
    late = {pid: _mean([v[i] - min(w[i] for w in by_pid.values()) for i in range(n)]) for pid, v in by_pid.items()}
    assert run.straggler.rank.pid == max(late, key=late.get)
    assert run.straggler.value_ns == pytest.approx(max(late.values()), rel=1e-9)
    assert "arrival at the collectives" in run.straggler.basis


def test_the_tui_says_whose_clock_and_opens_the_gpu_work(async_trace):
    """The header's `?` lines say the GPU runs behind, with the step's figures (per step: CPU span,
    GPU time, period: tests/helpers/step_sql.py); a committed phase-synced sample says nothing; `t` on a
    lagging range opens its window through the end of its GPU work (SQL: the last op launched
    while it was open), not only its CPU span."""
    from conftest import SAMPLES
    from nsight_tui.parsers.model.iterations import STEP, iteration_ranges
    from nsight_tui.render import numbers
    from nsight_tui.tui.session import Session
    from nsight_tui.tui.viewmodels.timeline import median_instance, target_for_node

    path = async_trace("large_ctx512_async")
    s = Session(path, load_trace(path), "process", 0.0)
    its = step_sql.steps(path)
    clocks = s.header().clocks
    assert "GPU runs behind" in clocks and "GPU behind" in s.header().badge
    from nsight_tui.tui.viewmodels.header import fit

    for width in (80, 100):  # the badge is drawn whole at 80 columns: fields give way first
        rows = fit(s.header(), width)
        assert "GPU behind" in rows[-1].badge and all(len(r.text) + 2 + len(r.badge) <= width for r in rows)
    for figure in (_mean([i.cpu for i in its]), _mean([i.gpu for i in its]), _mean([i.period for i in its])):
        assert numbers.duration(figure) in clocks
    plain = Session(SAMPLES / "small_ctx128.sqlite", load_trace(SAMPLES / "small_ctx128.sqlite"), "process", 0.0)
    assert plain.header().clocks == "" and "GPU behind" not in plain.header().badge

    model = s.model
    steps = iteration_ranges(model, STEP)
    step_node = next(n for g in model.aggregated_groups if g.is_main for n in g.roots if n.label == "step_N")
    fwd = next(c for c in step_node.children if c.label == "forward")
    target = target_for_node(model, fwd)
    rid = median_instance(model, fwd.ids)
    import sqlite3

    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    a, b = int(model.r_start[rid]), int(model.r_end[rid])
    (gpu_end,) = con.execute("""SELECT max(k.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        WHERE r.start >= ? AND r.start <= ?""", (a, b)).fetchone()
    con.close()
    assert gpu_end > b + (b - a) // 10  # the trap: forward's work ends well after its CPU span
    assert target.fit == (a, gpu_end) and "GPU runs behind" in target.title
    assert len(steps) == 3
    # the optimizer: its GPU work spans less than its CPU span, but runs ~100 ms after it (queued
    # behind backward's): the window still runs through it, not its CPU span of backward's GEMMs
    opt = next(c for c in step_node.children if c.label == "optimizer")
    rid = median_instance(model, opt.ids)
    a, b = int(model.r_start[rid]), int(model.r_end[rid])
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    (first, last) = con.execute("""SELECT min(k.start), max(k.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        AND (r.globalTid >> 24) = (k.globalPid >> 24) WHERE r.start >= ? AND r.start <= ?""", (a, b)).fetchone()
    con.close()
    assert last - first < b - a and first > b  # shorter than its CPU span, all of it after
    target = target_for_node(model, opt)
    assert target.fit == (a, last) and "through its GPU work" in target.title


@functools.cache  # several tests read one trace's findings; each reads them, none changes them
def _findings(path):
    from nsight_tui.parsers.analyses.findings import findings

    return {f.id: f for f in findings(load_trace(path))}


@pytest.mark.parametrize("name, absent", [
    ("small_ctx512_bf16_b8_async", "fp32-gemm-without-tensor-cores"),  # nvJet bf16 tensor-core GEMMs
    ("small_ctx512_tf32_b8_async", "fp32-gemm-without-tensor-cores"),  # TF32 tensor-core GEMMs
    ("large_ctx512_tf32_async", "fp32-gemm-without-tensor-cores"),
    ("small_ctx512_b8_async", "unfused-optimizer"),  # foreach AdamW (multi_tensor_apply)
    ("large_ctx512_async", "unfused-optimizer"),  # foreach, its CPU span long only behind a full queue
    ("large_ctx512_tf32_async", "unfused-optimizer"),
    ("small_ctx512_b8_async_fused-optim", "unfused-optimizer"),
    *[(f"h200_twins/{n}", "fp32-gemm-without-tensor-cores")
      for n in ("small_ctx512_tf32_b8_async", "small_ctx1024_tf32_b8_async", "medium_ctx512_tf32_b8_async")],
])
def test_no_false_positive(name, absent, async_trace):
    assert absent not in _findings(async_trace(ASYNC / f"{name}.sqlite.xz"))


def test_unfused_optimizer_estimate_against_its_unsynchronised_twin(async_trace):
    """AdamW's per-parameter loop vs fused, nothing synchronised: the loop's CPU span (~38 ms) hides
    behind the backward's GPU work; what fusing saved is Python's step change (the workload's own
    clock), and the estimate (the loop's GPU time minus the memory roof) is within 0.67-1.5x of it."""
    planted, fixed = async_trace("small_ctx512_b8_async_foreach-off"), async_trace("small_ctx512_b8_async_fused-optim")
    got = _findings(planted)["unfused-optimizer"].saving_ms_per_step
    measured = (_mean(step_sql.python_steps(planted)) - _mean(step_sql.python_steps(fixed))) / 1e6
    assert measured > 0
    assert 0.67 <= got / measured <= 1.5, (got, measured)


def test_nvjet_gemms_are_tensor_core_gemms_without_a_config_mark(async_trace, tmp_path):
    """A bf16 autocast run's nvJet GEMMs (their names carry no input type) on a trace not made by
    `capture` (its config mark removed): tensor-core GEMMs, never fp32 on CUDA cores, so no
    fp32-GEMM finding; the same run's fp32 twin (CUTLASS simt / xmma ffma names) still has one."""
    import sqlite3

    from conftest import mutated_copy
    from nsight_tui.parsers.analyses.roofline import kernel_math_path
    from nsight_tui.parsers.kernels.kernel_names import gemm_math

    src = async_trace("small_ctx512_bf16_b8_async")
    bare = mutated_copy(tmp_path, "bf16_no_config", "DELETE FROM NVTX_EVENTS WHERE textId IN (SELECT id FROM "
                        "StringIds WHERE value LIKE 'nsight-tui:config%') OR text LIKE 'nsight-tui:config%'", src=src)
    con = sqlite3.connect(f"{bare.resolve().as_uri()}?mode=ro", uri=True)
    nvjet = [n for (n,) in con.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                       "ON s.id = k.demangledName WHERE s.value LIKE 'nvjet%'")]
    configs = con.execute("SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                          "WHERE coalesce(e.text, s.value) LIKE 'nsight-tui:config%'").fetchone()[0]
    con.close()
    assert nvjet and configs == 0
    assert all(kernel_math_path(n, {}) != "fp32" and gemm_math(n) == "tensor cores" for n in nvjet)
    assert "fp32-gemm-without-tensor-cores" not in _findings(bare)
    assert "fp32-gemm-without-tensor-cores" in _findings(async_trace("small_ctx512_b8_async"))


def test_diff_names_the_gemm_math_path_change(async_trace):
    """fp32 -> TF32 on the large model: the why-summary says the GEMMs moved from fp32 on CUDA
    cores to TF32 tensor cores, with each side's GEMM time per step (SQL: kernels named gemm whose
    launching call starts inside a step, per step)."""
    import sqlite3

    pa, pb = async_trace("large_ctx512_async"), async_trace("large_ctx512_tf32_async")
    proc = run_main("diff", pa, pb, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    step = json.loads(proc.stdout)["step"]
    assert step["gemm_math_path_change"] == {"a": "fp32", "b": "tf32"}

    def gemm_per_step(path):
        its = step_sql.steps(path)
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        total = 0
        for it in its:
            (ns,) = con.execute("""SELECT coalesce(sum(k.end - k.start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                JOIN StringIds s ON s.id = k.demangledName JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
                WHERE (s.value LIKE '%gemm%' OR s.value LIKE '%splitKreduce%') AND r.start >= ? AND r.start <= ?""",
                (it.start, it.end)).fetchone()
            total += ns
        con.close()
        return total / len(its)

    paths = step["gemm_math_path_ns"]
    assert paths["fp32"]["a"] == pytest.approx(gemm_per_step(pa), rel=1e-9) and paths["fp32"]["b"] == 0
    assert paths["tf32"]["b"] == pytest.approx(gemm_per_step(pb), rel=1e-9) and paths["tf32"]["a"] == 0
    md = run_main("diff", pa, pb).stdout
    assert "GEMM math path changed: fp32 on CUDA cores → TF32 on tensor cores" in md


def test_findings_honour_the_rank_filter(async_trace):
    """Under a rank filter (`R` then `F`) the rules read that rank's steps (their periods) on that
    rank's GPU; without it, rank 0's."""
    from nsight_tui.parsers.analyses.findings import context
    from nsight_tui.parsers.analyses.ranks import find_ranks

    path = async_trace("small_ctx512_b8_ddp2_async")
    trace = load_trace(path)
    ranks = find_ranks(trace)
    assert len(ranks) == 2
    for r in ranks:
        c = context(trace, rank=r)
        periods = [it.period for it in step_sql.steps(path, r.pid)]
        assert c.device == r.device and c.step_ns == pytest.approx(_mean(periods), rel=1e-12)
    default = context(trace)
    r0 = next(r for r in ranks if r.rank == 0)
    assert default.device == r0.device
    assert default.step_ns == pytest.approx(_mean([it.period for it in step_sql.steps(path, r0.pid)]), rel=1e-12)


@pytest.mark.parametrize("name", H200_NAMES)
def test_the_step_on_the_h200_twins(name, async_trace):
    """The same definitions on the captures made after them: the step is the period (SQL) and the
    workload's own step within 3%; the step range's GPU time is NVIDIA's projection."""
    path = async_trace(H200 / f"{name}.sqlite.xz")
    q = report_of(load_trace(path))
    periods = [it.period for it in step_sql.steps(path)]
    assert q["findings"]["step_ns"] == pytest.approx(_mean(periods), rel=1e-12)
    assert q["findings"]["step_ns"] == pytest.approx(_mean(step_sql.python_steps(path)), rel=0.03)
    step = q["ranges"]["step"]
    assert step["proj_ns"] / step["instances"] == pytest.approx(_nsys_step_projection(name, H200), rel=1e-9)


# The fp32 run and its TF32 twin, nothing synchronised inside the step. The H100 small pair is the one
# miss: its TF32 twin's CPU issued the step ~1.3x slower than the fp32 run's CPU work (the backward's
# thread 1.7x), so the fixed step is CPU-bound well above the pace the estimate assumes. The same pair
# captured again on one H200 machine (h200_twins/small_ctx512*) is in range; there a run of the fp32 step
# with every launch blocking (the GPU always caught up, devruns/gpu_issuerate.sh) gave no steady pace
# (its backward's CPU time between calls 1.0x the fp32 run's in two steps, 2.5x in two): nothing in an
# fp32 trace tells how fast its CPU will issue once the GPU keeps up.
TWINS = [
    pytest.param(ASYNC, "large_ctx512_async", "large_ctx512_tf32_async", id="h100-large-ctx512"),
    pytest.param(ASYNC, "small_ctx512_b8_async", "small_ctx512_tf32_b8_async", id="h100-small-ctx512-b8",
                 marks=pytest.mark.xfail(strict=True, reason="the TF32 twin's CPU issues its step ~1.3x slower "
                                         "than the fp32 run's CPU work: 1.77x; one pair cannot tell this "
                                         "saving (see the H100 repeats' test below)")),
    pytest.param(H200, "small_ctx512_b8_async", "small_ctx512_tf32_b8_async", id="h200-small-ctx512-b8"),
    pytest.param(H200, "small_ctx1024_b8_async", "small_ctx1024_tf32_b8_async", id="h200-small-ctx1024-b8"),
    pytest.param(H200, "medium_ctx512_b8_async", "medium_ctx512_tf32_b8_async", id="h200-medium-ctx512-b8"),
]


@pytest.mark.parametrize("folder, planted_name, fixed_name", TWINS)
def test_fp32_gemm_estimate_against_its_tf32_twin(folder, planted_name, fixed_name, async_trace):
    """The estimate (the GEMM time TF32 saves, at most the time the CPU waited for the GPU) within
    0.67-1.5x of the workload's own step change between the twins (its Python step marks)."""
    planted = async_trace(folder / f"{planted_name}.sqlite.xz")
    fixed = async_trace(folder / f"{fixed_name}.sqlite.xz")
    got = _findings(planted)["fp32-gemm-without-tensor-cores"].saving_ms_per_step
    measured = (_mean(step_sql.python_steps(planted)) - _mean(step_sql.python_steps(fixed))) / 1e6
    assert measured > 0
    assert 0.67 <= got / measured <= 1.5, (got, measured)


_WAIT_SQL = """
SELECT r.start, r.end, s.value,
       EXISTS (SELECT 1 FROM ops o WHERE o.corr = r.correlationId AND o.pid = ((r.globalTid >> 24) & 16777215)) AS launched
FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
WHERE ((r.globalTid >> 24) & 16777215) = :pid AND r.start >= :s AND r.start < :e
"""


def _cpu_wait_sql(path) -> float:
    """Per step, from the definition: within each step's period, the time its process spent in
    synchronising calls (cuda*Synchronize, blocking cudaMemcpy) up to the period's end, plus what each
    launching call took beyond 50 µs (a full launch queue held it)."""
    import re
    import sqlite3

    its = step_sql.steps(path)
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    # every GPU op's (correlation, pid), indexed: the EXISTS below is a lookup, not a scan per call
    con.execute("CREATE TEMP TABLE ops AS SELECT correlationId AS corr, (globalPid >> 24) & 16777215 AS pid FROM "
                "CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT correlationId, (globalPid >> 24) & 16777215 FROM "
                "CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT correlationId, (globalPid >> 24) & 16777215 "
                "FROM CUPTI_ACTIVITY_KIND_MEMSET")
    con.execute("CREATE INDEX temp.ops_corr ON ops(corr, pid)")
    sync = re.compile(r"^cu(da)?(Device|Stream|Event|Thread|Ctx)Synchronize|^cu(da)?Memcpy(?!.*Async)")
    total = 0
    pid = its[0].pid
    for it in its:
        end = it.start + it.period
        for s, e, name, launched in con.execute(_WAIT_SQL, {"pid": pid, "s": it.start, "e": end}):
            if sync.search(name):
                total += min(e, end) - s
            elif launched:
                total += max(min(e, end) - s - 50_000, 0)
    con.close()
    return total / len(its)


def _gpu_busy_sql(path) -> float:
    """Per step: the time any GPU op of the device runs inside each step's period (merged intervals)."""
    import sqlite3

    from helpers.findings_twins import busy_union, gaps, length, steps

    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    (device,) = con.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    windows, busy = steps(con), busy_union(con, device)
    con.close()
    return sum((e - s) - length(gaps(busy, s, e)) for s, e, _ in windows) / len(windows)


@pytest.mark.parametrize("where", [(ASYNC, "small_ctx512_b8_async"), (ASYNC, "large_ctx512_async"),
                                   (H200, "medium_ctx512_b8_async")], ids=lambda w: w[1])
def test_the_figures_the_estimate_stands_on(where, async_trace):
    """The fp32-gemm figure's cap (the CPU's wait), the CPU pace it assumes (step − wait), the GPU's busy
    time and the range's low end (step − (CPU work + GPU busy − GPU time saved)), against SQL."""
    folder, name = where
    path = async_trace(folder / f"{name}.sqlite.xz")
    f = _findings(path)["fp32-gemm-without-tensor-cores"]
    ev = f.evidence
    wait, busy = _cpu_wait_sql(path), _gpu_busy_sql(path)
    assert ev["cpu_wait_ns_per_step"] == pytest.approx(wait, rel=1e-9)
    period = _mean([it.period for it in step_sql.steps(path)])
    assert ev["cpu_work_ns_per_step"] == pytest.approx(period - wait, rel=1e-9)
    assert ev["gpu_busy_ns_per_step"] == pytest.approx(busy, rel=1e-9)
    saved = ev["gpu_saved_ns_per_step"]
    assert ev["saving_low_ns_per_step"] == pytest.approx(max(period - (period - wait + busy - saved), 0), rel=1e-9)
    assert ev["saving_high_ns_per_step"] == saved
    assert f"between {ev['saving_low_ns_per_step'] / 1e6:.1f} " in f.estimate_basis and f"and {saved / 1e6:.1f} ms" in f.estimate_basis


# The H100 small pair's configuration captured three more times on one H100 (devruns/gpu_issuerate.sh
# repeat): fp32, TF32, fp32, TF32, ...
REPEATS = [(H100_REPEATS, f"small_ctx512_b8_async_r{i}", f"small_ctx512_tf32_b8_async_r{i}") for i in (1, 2, 3)]


def test_fp32_gemm_estimate_against_the_mean_of_h100_repeats(async_trace):
    """Where one pair of twins cannot tell the saving, four can. Once TF32 makes the step CPU-bound, what
    a pair measures is set by that TF32 run's own CPU pace, which moves from run to run (the four H100
    pairs of one configuration measure 19.6 to 45.0 ms). The mean of the four estimates (each from its
    own fp32 run) within 0.67-1.5x of the mean of the four measured changes (Python step marks)."""
    pairs = [(ASYNC, "small_ctx512_b8_async", "small_ctx512_tf32_b8_async"), *REPEATS]
    got, measured = [], []
    for folder, planted_name, fixed_name in pairs:
        planted = async_trace(folder / f"{planted_name}.sqlite.xz")
        fixed = async_trace(folder / f"{fixed_name}.sqlite.xz")
        got.append(_findings(planted)["fp32-gemm-without-tensor-cores"].saving_ms_per_step)
        measured.append((_mean(step_sql.python_steps(planted)) - _mean(step_sql.python_steps(fixed))) / 1e6)
    assert all(m > 0 for m in measured)
    assert 0.67 <= _mean(got) / _mean(measured) <= 1.5, (got, measured)


# every fp32 / TF32 pair, the phase-synced one of sample_traces/findings and the H100 repeats too
RANGE_TWINS = [*(p.values for p in TWINS), (FINDINGS, "small_ctx512", "small_ctx512_tf32"), *REPEATS]


@pytest.mark.parametrize("folder, planted_name, fixed_name", RANGE_TWINS,
                         ids=[*(p.id for p in TWINS), "findings-small-ctx512-phase-synced",
                              *(f"h100-repeat-r{i}" for i in (1, 2, 3))])
def test_the_step_change_falls_in_the_stated_range(folder, planted_name, fixed_name, async_trace):
    """What the finding states as sure: the workload's own step change (its Python marks) lies between
    the range's ends, on every pair, the H100 small one (the point estimate's miss) included."""
    planted = async_trace(folder / f"{planted_name}.sqlite.xz")
    fixed = async_trace(folder / f"{fixed_name}.sqlite.xz")
    ev = _findings(planted)["fp32-gemm-without-tensor-cores"].evidence
    measured = _mean(step_sql.python_steps(planted)) - _mean(step_sql.python_steps(fixed))
    assert ev["saving_low_ns_per_step"] <= measured <= ev["saving_high_ns_per_step"], (ev, measured)
