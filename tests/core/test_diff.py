"""parsers.diff: two runs aligned per step, every Δ checked against B − A computed from each
file on its own with hand-written SQL (tests/helpers/diff_sql.py), never against the diff's own output.

The committed pair: GPT-2 small training with manual attention (A) and with fused SDPA (B)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from helpers import diff_sql as sql
import pytest
from helpers import step_sql
from helpers.shuffled import names_shuffled_copy
from helpers.xz_samples import plain
from conftest import SAMPLES, shared_trace

from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.analyses.diff import ADDED, BOTH, REMOVED, Delta, diff_runs, kernel_diff
from nsight_tui.parsers.read.load import load_trace

MANUAL = SAMPLES / "small_ctx128.sqlite"
FUSED = plain(SAMPLES / "small_ctx128_fused.sqlite.xz")
STEPS = "step_[0-9]*"
ATTENTION = "step_N/forward/scaled_dot_product_attention"
PARTS = ("computing_attention_scores", "computing_softmax", "final_matmul")


@pytest.fixture(scope="module")
def manual_vs_fused():
    return diff_runs(load_trace(MANUAL), load_trace(FUSED))


def periods(path: Path) -> int:
    """Every step_N's period summed, every process's (tests/helpers/step_sql.py's definition)."""
    return sum(it.period for it in step_sql.steps(path))


def step_count(path: Path) -> int:
    return len(sql.ranges(path, STEPS, within="*"))


def assert_delta(d: Delta, total_a: int | None, n_a: int, total_b: int | None, n_b: int) -> None:
    """A and B are the SQL totals per iteration; Δ is B − A to the nanosecond (bit for bit
    the same float division, and within 1e-6 ns of the exact fraction)."""
    assert d.a == (None if total_a is None else sql.per(total_a, n_a))
    assert d.b == (None if total_b is None else sql.per(total_b, n_b))
    exact = Fraction(total_b or 0, n_b) - Fraction(total_a or 0, n_a)
    assert abs(Fraction(d.delta) - exact) < Fraction(1, 10**6)
    if total_a:
        assert d.delta_pct == pytest.approx(float(100 * exact / Fraction(total_a, n_a)), rel=1e-12)


# -- the step -------------------------------------------------------------------------------
def test_step_delta_is_b_minus_a_from_each_file(manual_vs_fused):
    d = manual_vs_fused
    na, nb = step_count(MANUAL), step_count(FUSED)
    fa, fb = sql.range_figures(MANUAL, STEPS, within="*"), sql.range_figures(FUSED, STEPS, within="*")
    assert (d.step.a_steps, d.step.b_steps) == (na, nb) == (3, 3)
    assert_delta(d.step.step_cpu_ns, fa["cpu_ns"], na, fb["cpu_ns"], nb)
    assert_delta(d.step.step_ns, periods(MANUAL), na, periods(FUSED), nb)  # the step is its period
    assert_delta(d.step.busy_ns, fa["busy_ns"], na, fb["busy_ns"], nb)
    assert_delta(d.step.kernel_ns, fa["kernel_ns"], na, fb["kernel_ns"], nb)
    assert_delta(d.step.kernels, fa["kernels"], na, fb["kernels"], nb)
    assert_delta(d.step.op_ns, fa["op_ns"], na, fb["op_ns"], nb)
    node = d.find("step_N")
    assert node.status == BOTH and node.is_iteration and node.basis == "step"
    assert_delta(node.cpu_ns, fa["cpu_ns"], na, fb["cpu_ns"], nb)
    pct = 100 * (periods(FUSED) / nb - periods(MANUAL) / na) / (periods(MANUAL) / na)
    assert d.step.slower_pct == pytest.approx(pct, rel=1e-12)
    assert "per steady-state step" in d.basis


@pytest.mark.parametrize("phase", ["forward", "backward", "optimizer", "scaled_dot_product_attention"])
def test_phase_ranges_every_metric(manual_vs_fused, phase):
    path = f"{ATTENTION}" if phase == "scaled_dot_product_attention" else f"step_N/{phase}"
    node = manual_vs_fused.find(path)
    assert node.status == BOTH
    na, nb = step_count(MANUAL), step_count(FUSED)
    fa, fb = sql.range_figures(MANUAL, phase), sql.range_figures(FUSED, phase)
    assert (node.a_instances, node.b_instances) == (fa["instances"], fb["instances"])
    for metric in ("cpu_ns", "busy_ns", "kernel_ns", "kernels"):
        assert_delta(getattr(node, metric), fa[metric], na, fb[metric], nb)


@pytest.mark.parametrize("part", PARTS)
def test_attention_sub_ranges_are_gone_in_the_fused_run(manual_vs_fused, part):
    node = manual_vs_fused.find(f"{ATTENTION}/{part}")
    assert sql.ranges(FUSED, part, within="*") == []  # B really has none
    fa = sql.range_figures(MANUAL, part)
    assert fa["instances"] > 0
    assert node.status == REMOVED and node.b_node is None
    na, nb = step_count(MANUAL), step_count(FUSED)
    for metric in ("cpu_ns", "busy_ns", "kernel_ns", "kernels"):
        assert_delta(getattr(node, metric), fa[metric], na, None, nb)
        assert getattr(node, metric).delta == -getattr(node, metric).a


def test_fused_kernel_added_and_manual_kernels_removed(manual_vs_fused):
    scope = kernel_diff(manual_vs_fused.find(ATTENTION))
    na, nb = step_count(MANUAL), step_count(FUSED)

    def totals(path):
        out: dict[str, list[int]] = {}
        for _kind, start, end, name in sql.unique_ops(path, "scaled_dot_product_attention"):
            out.setdefault(name, [0, 0])
            out[name][0] += end - start
            out[name][1] += 1
        return out

    ta, tb = totals(MANUAL), totals(FUSED)
    assert {k.name for k in scope.added} == set(tb) - set(ta)
    assert {k.name for k in scope.removed} == set(ta) - set(tb)
    fused = [name for name in set(tb) - set(ta) if "fmha" in name]
    assert fused, "the fused run launches a FlashAttention-style kernel the manual one does not"
    assert all(families.classify(n) == "attention" for n in fused)
    for k in scope.kernels:
        a, b = ta.get(k.name), tb.get(k.name)
        assert_delta(k.time_ns, a and a[0], na, b and b[0], nb)
        assert_delta(k.count, a and a[1], na, b and b[1], nb)
    deltas = [abs(k.time_ns.delta) for k in scope.kernels]
    assert deltas == sorted(deltas, reverse=True)


def _family_totals(path: Path, name: str, within: str = STEPS) -> dict[str, int]:
    out: dict[str, int] = {}
    for _kind, start, end, op in sql.unique_ops(path, name, within):
        fam = families.classify(op)
        out[fam] = out.get(fam, 0) + end - start
    return out


def test_step_kernels_and_families(manual_vs_fused):
    d = manual_vs_fused
    na, nb = step_count(MANUAL), step_count(FUSED)
    fa, fb = _family_totals(MANUAL, STEPS, "*"), _family_totals(FUSED, STEPS, "*")
    by_key = {f.family: f for f in d.kernels.families}
    assert set(by_key) == set(fa) | set(fb)
    for fam, row in by_key.items():
        assert_delta(row.time_ns, fa.get(fam, 0), na, fb.get(fam, 0), nb)
    assert by_key["attention"].time_ns.a == 0 and by_key["attention"].added >= 2  # forward + backward kernels
    assert by_key["attention"].time_ns.delta > 0


def test_waterfall_phase_by_family_adds_up(manual_vs_fused):
    s = manual_vs_fused.step
    na, nb = s.a_steps, s.b_steps
    step_a, step_b = _family_totals(MANUAL, STEPS, "*"), _family_totals(FUSED, STEPS, "*")
    claimed_a, claimed_b = {}, {}
    for p in s.phases:
        if p.phase == "rest of step":
            # the step's ops in no phase: step minus the phases, per family, from SQL
            for fam in families.FAMILY_KEYS:
                assert_delta(p.family_ns[fam], step_a.get(fam, 0) - claimed_a.get(fam, 0), na,
                             step_b.get(fam, 0) - claimed_b.get(fam, 0), nb)
            continue
        pa, pb = _family_totals(MANUAL, p.phase), _family_totals(FUSED, p.phase)
        for fam in families.FAMILY_KEYS:
            assert_delta(p.family_ns[fam], pa.get(fam, 0), na, pb.get(fam, 0), nb)
            claimed_a[fam] = claimed_a.get(fam, 0) + pa.get(fam, 0)
            claimed_b[fam] = claimed_b.get(fam, 0) + pb.get(fam, 0)
        assert_delta(p.op_ns, sum(pa.values()), na, sum(pb.values()), nb)
    assert [p.phase for p in s.phases] == ["forward", "backward", "optimizer", "rest of step"]
    # the forward phase holds the attention change: fused kernel in, manual softmax out
    fwd = s.phases[0]
    assert fwd.family_ns["attention"].delta > 0 and fwd.family_ns["softmax"].delta < 0


def test_largest_contributors(manual_vs_fused):
    s = manual_vs_fused.step
    assert [k.name for k in s.top_kernels] == [k.name for k in manual_vs_fused.kernels.kernels[:len(s.top_kernels)]]
    assert any(k.status == ADDED and k.family == "attention" for k in s.top_kernels)
    paths = [r.path_text for r in s.top_ranges]
    assert f"{ATTENTION}/computing_attention_scores" in paths
    assert all(not r.is_iteration for r in s.top_ranges)


def test_config_side_by_side_nothing_normalised(manual_vs_fused):
    rows = {c.key: c for c in manual_vs_fused.config}
    assert (rows["attention"].a, rows["attention"].b) == ("manual", "fused") and not rows["attention"].same
    assert rows["ctx"].same and rows["batch"].same
    assert any("attention" in n and "not normalised" in n for n in manual_vs_fused.notes)


def test_warmup_is_apart(manual_vs_fused):
    d = manual_vs_fused
    warm = d.find("warmup_N")
    assert warm.basis == "warmup" and warm.is_iteration
    wa, wb = sql.ranges(MANUAL, "warmup_[0-9]*", within="*"), sql.ranges(FUSED, "warmup_[0-9]*", within="*")
    assert (warm.a_iterations, warm.b_iterations) == (len(wa), len(wb))
    assert_delta(warm.cpu_ns, sum(e - s for _, s, e in wa), len(wa), sum(e - s for _, s, e in wb), len(wb))
    assert_delta(d.step.warmup_ns, sum(e - s for _, s, e in wa), len(wa), sum(e - s for _, s, e in wb), len(wb))


# -- other shapes (../shared/traces) ----------------------------------------------------------------
def test_different_step_counts_align_per_step():
    """3 steps against 5, and B's steps sit inside `whole_run` in domain `trainer`."""
    b_path = shared_trace("small_ctx128_threads")
    d = diff_runs(load_trace(MANUAL), load_trace(b_path))
    na, nb = step_count(MANUAL), step_count(b_path)
    assert (na, nb) == (3, 5)
    node = d.find("step_N/forward")
    assert node.status == BOTH and (node.a_iterations, node.b_iterations) == (3, 5)
    fa, fb = sql.range_figures(MANUAL, "forward"), sql.range_figures(b_path, "forward")
    for metric in ("cpu_ns", "busy_ns", "kernel_ns", "kernels"):
        assert_delta(getattr(node, metric), fa[metric], na, fb[metric], nb)
    sa, sb = sql.range_figures(MANUAL, STEPS, "*"), sql.range_figures(b_path, STEPS, "*")
    assert_delta(d.step.step_cpu_ns, sa["cpu_ns"], na, sb["cpu_ns"], nb)
    assert_delta(d.step.step_ns, periods(MANUAL), na, periods(b_path), nb)


def test_no_common_range_names_still_diffs_kernels(tmp_path):
    # B without NVTX iterations and without a period to infer them from (the inference would otherwise find
    # h100_2gpu_1s's loop): its kernels' names dealt out at random, the same kernels and times
    b_path = names_shuffled_copy(shared_trace("h100_2gpu_1s"), tmp_path / "h100_2gpu_1s.sqlite")
    d = diff_runs(load_trace(MANUAL), load_trace(b_path))
    assert d.common_ranges == 0 and d.step is None
    assert any("no range names in common" in n for n in d.notes)
    assert d.kernels.scope == "whole capture" and d.kernels.basis == "capture"
    con_a, con_b = sql.connect(MANUAL), sql.connect(b_path)
    total = ("SELECT (SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL) + "
             "(SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY) + "
             "(SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_MEMSET)")
    ta, tb = con_a.execute(total).fetchone()[0], con_b.execute(total).fetchone()[0]
    assert_delta(d.kernels.time_ns, ta, 1, tb, 1)
    names_b = {r[0] for r in con_b.execute(
        "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName")}
    assert names_b <= {k.name for k in d.kernels.kernels}
    # two processes in B: process 1's thread pairs with A's only thread, process 2's is B's alone
    assert [t.label for t in d.threads] == ["process 1 · python3", "process 2 · python3"]
    assert [t.status for t in d.threads] == [BOTH, ADDED]


def test_one_gpu_against_a_two_rank_ddp_run():
    """The committed DDP capture: two processes, each with its own step_N, and autograd threads
    with NCCL ranges (the model takes those for the main thread). Threads pair by the ranges they
    share; the step averages every rank's steps; each process's tree is per that rank's steps."""
    b_path = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")
    if not b_path.exists():
        pytest.skip("no DDP sample")
    d = diff_runs(load_trace(MANUAL), load_trace(b_path))
    main = d.threads[0]
    assert main.status == BOTH and "pt_autograd" not in main.b_label
    assert d.find("step_N/forward").status == BOTH
    assert all(t.status == ADDED for t in d.threads[1:])
    con = sql.connect(b_path)
    per_pid = [n for _, n in con.execute(
        "SELECT e.globalTid >> 24, count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' GROUP BY 1 ORDER BY 1")]
    na, nb = step_count(MANUAL), step_count(b_path)
    assert len(per_pid) == 2 and sum(per_pid) == nb == d.step.b_steps
    assert f"{per_pid[0]} in each of 2 processes" in d.basis
    sa, sb = sql.range_figures(MANUAL, STEPS, "*"), sql.range_figures(b_path, STEPS, "*")
    assert_delta(d.step.step_cpu_ns, sa["cpu_ns"], na, sb["cpu_ns"], nb)
    assert_delta(d.step.step_ns, periods(MANUAL), na, periods(b_path), nb)
    assert d.find("step_N").b_iterations == per_pid[0]


SHAPES = [
    ("h100_2gpu_1s", "small_ctx128_threads"),  # 2 GPUs / 2 processes vs 1
    ("small_ctx128_threads", "small_ctx128_graphs"),  # no graphs vs CUDA graphs (warmup range open around all)
    ("small_ctx128_graphs", "mock"),  # graphs vs a file without NVTX
    ("mock", "healthy_1pct"),  # no NVTX either side; a cut-down export
    ("xl_ctx256", "medium_ctx1024_fwd_flash"),  # training vs forward-only, different model and ctx
    ("mfu_2gpu_before", "h100_2gpu_1s"),  # emit_nvtx trees of thousands of ranges, 2 processes each
]


@pytest.mark.parametrize("a,b", SHAPES, ids=[f"{a}-vs-{b}" for a, b in SHAPES])
def test_shared_pairs_of_different_shape(a, b):
    from nsight_tui.render.diff import render

    d = diff_runs(load_trace(shared_trace(a)), load_trace(shared_trace(b)))
    for fmt in ("markdown", "json", "csv"):
        assert render(d, fmt)
    # invariants that hold whatever the shape
    ta = sum(k.time_ns.a or 0 for k in d.kernels.kernels)
    assert ta == pytest.approx(d.kernels.time_ns.a or 0, rel=1e-12)
    assert sum(f.time_ns.delta for f in d.kernels.families) == pytest.approx(d.kernels.time_ns.delta, abs=1e-3)
    if d.step is not None:
        assert sum(p.op_ns.a for p in d.step.phases) == pytest.approx(d.step.op_ns.a, rel=1e-12)
        assert sum(p.op_ns.b for p in d.step.phases) == pytest.approx(d.step.op_ns.b, rel=1e-12)
    for r in d.ranges():
        assert (r.status == REMOVED) == (r.b_node is None) and (r.status == ADDED) == (r.a_node is None)
