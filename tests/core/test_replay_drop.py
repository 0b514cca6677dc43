"""The replay's `drop:` edit (parsers/replay/edits.py) on the committed Lightning ResNet-50 capture
(NCHW, bf16: cuDNN turns the tensors round around every convolution, and the step is launch-bound),
against SQL over the export: which kernels go, with which launch calls, and the CPU time of those
calls, step by step."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from conftest import SAMPLES

from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.edits import EditError
from nsight_tui.parsers.replay.predict import baseline, graph_of, predict, replay

RESNET = SAMPLES / "thirdparty" / "lightning_resnet50_b32.sqlite.xz"
# the transposes, by their own names (cudnn::engines_precompiled::nchwToNhwcKernel / nhwcToNchwKernel),
# with the launch call each came from (same process, same correlation id), launched inside [?, ?]
TRANSPOSES_SQL = """
SELECT count(*), count(DISTINCT r.rowid), coalesce(sum(r.end - r.start), 0), coalesce(sum(k.end - k.start), 0)
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.demangledName
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24
WHERE (n.value LIKE '%nchwToNhwc%' OR n.value LIKE '%nhwcToNchw%')
  AND (r.globalTid >> 24) & 0xFFFFFF = ? AND r.start BETWEEN ? AND ?"""


@pytest.fixture(scope="module")
def resnet(async_trace):
    path = async_trace(RESNET)
    trace = load_trace(path)
    g, sr = graph_of(trace)
    # the steps as the replay reads them (inferred: the capture has no NVTX); their detection is
    # tested elsewhere, here they only say which launches count
    spans = edit_mod.range_spans(g, sr, edit_mod.STEP_RANGE)
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        per_step = np.array([con.execute(TRANSPOSES_SQL, span).fetchone() for span in spans], np.int64)
    return trace, g, sr, per_step


def test_drop_removes_the_transposes_and_the_cpu_time_of_their_launch_calls(resnet):
    trace, g, sr, per_step = resnet
    kernels, calls, call_ns, gpu_ns = per_step.sum(axis=0)
    assert kernels > 0 and calls == kernels  # one launch call a transpose
    ed = edit_mod.apply(g, sr, [edit_mod.parse("drop:layout@step")])
    plan = ed.mid
    gone = plan.op_dur != g.op_dur
    assert int(gone.sum()) <= kernels and (plan.op_dur[gone] == 0).all()
    dropped = (plan.op_launch_pt < 0) & (g.op_launch_pt >= 0)
    assert int(dropped.sum()) == kernels
    assert int(g.op_dur[dropped].sum()) == gpu_ns
    # the CPU: exactly the time inside those calls, between each one's start and end
    assert int((g.delta_ns - plan.delta_ns).sum()) == call_ns
    assert (plan.delta_ns <= g.delta_ns).all()
    changed = ed.applied[0].changed
    assert changed.startswith(f"{kernels:,} ops (family layout launched inside 'step') dropped")
    assert f"{calls:,} launch calls gone" in changed and not ed.applied[0].assumption


def test_a_cpu_held_step_saves_its_dropped_calls_cpu_time(resnet):
    """The ResNet's step is held by its CPU threads throughout (the GPU sets under 1% of the
    baseline's critical path), so each step's calls lie on the chain that sets it: replayed as it
    ran, each step is shorter by the CPU time of the transposes' launch calls made in it (SQL), no
    more (the GPU time dropped was hidden behind the CPU), and the step's GPU work cannot take over."""
    trace, g, sr, per_step = resnet
    p = predict(trace, [])
    assert sum(h.share for h in p.baseline_holders if h.kind == "gpu") < 0.01
    ed = edit_mod.apply(g, sr, [edit_mod.parse("drop:layout@step")])
    saved = baseline(trace).periods_ns - replay(g, sr, ed.mid).periods_ns
    call_ns = per_step[:, 2]
    assert len(saved) == len(call_ns)
    assert (saved <= call_ns + 1_000).all() and (saved >= 0.99 * call_ns).all(), (saved, call_ns)
    # the prediction replays the typical step (each stretch of CPU time at its median over the
    # steps): its saving lies within the steps' own, a tenth either way for medians taken call by call
    s = predict(trace, ["drop:layout@step"])
    assert s.low_ns <= s.step_ns <= s.high_ns
    assert 0.9 * call_ns.min() <= s.saving_ns <= 1.1 * call_ns.max(), (s.saving_ns, call_ns)


def test_drop_parses_and_refuses_what_it_cannot_do(resnet):
    trace, g, sr, _ = resnet
    e = edit_mod.parse("drop:layout@step")
    assert (e.kind, e.pattern) == ("drop", "layout@step")
    for bad in ("drop:", "drop:@step"):
        with pytest.raises(EditError):
            edit_mod.parse(bad)
    with pytest.raises(EditError):
        edit_mod.apply(g, sr, [edit_mod.parse("drop:no_such_kernel")])


# -- unfused-attention's fix: the manual attention's passes over the scores dropped (what it drops:
# tests/core/test_attention_passes.py, against SQL)
MANUAL = SAMPLES / "small_ctx128.sqlite"


@pytest.fixture(scope="module")
def manual():
    from nsight_tui.parsers.analyses.findings import findings

    trace = load_trace(MANUAL)
    return trace, next(f for f in findings(trace) if f.id == "unfused-attention"), None


def test_unfused_attention_saves_no_more_than_the_work_it_drops(manual):
    """The finding's replayed saving is more than nothing and no more than the work its edits take out
    of a step: the dropped kernels' GPU time plus the CPU time inside their launch calls, per steady
    step, on the typical step the edits replay (removing work from a chain of dependencies shortens
    it by at most that work). The committed fused-SDPA capture of the same workload cannot check the
    figure: its steps differ from these by 1.06 ms on the workload's Python clock (medians), under the
    pair's noise (2.7 ms: twice the standard error of the difference of their mean steps)."""
    from nsight_tui.parsers.replay.predict import typical

    trace, f, _ = manual
    assert f.replayed, f.basis
    assert f.replay_low_ms_per_step <= f.saving_ms_per_step <= f.replay_high_ms_per_step
    t, sr = typical(trace)[0], graph_of(trace)[1]
    ed = edit_mod.apply(t, sr, [edit_mod.parse(e) for e in f.edits])
    inside = edit_mod.in_steps(t, sr)
    cpu_ns = int((t.delta_ns - ed.mid.delta_ns)[inside].sum())
    dropped = (ed.mid.op_launch_pt < 0) & (t.op_launch_pt >= 0)
    gpu_ns = int(t.op_dur[dropped & inside[np.maximum(t.op_launch_pt, 0)]].sum())
    assert 0 < f.saving_ms_per_step * 1e6 <= (cpu_ns + gpu_ns) / sr.n_steps
