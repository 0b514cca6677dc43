"""The replay's `fuse:` edit (parsers/replay/fused.py) and elementwise-chain's fix, on the committed
gelu-unfused capture (sample_traces/replay/fuse: GPT-2 small, ctx 128, batch 8, its MLP's GELU written
out as nanoGPT's tanh formula: per layer a chain of 8 elementwise kernels in the forward and 12 in
the backward), against SQL over the export: which chains, which launch calls go, the fused kernels'
time at each end of the assumption, and the host time the low end takes away."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.xz_samples import plain

from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.edits import EditError, fuse_spec
from nsight_tui.parsers.replay.predict import graph_of, predict

BASE = SAMPLES / "replay" / "fuse" / "small_ctx128_b8_async_gelu-unfused.sqlite.xz"
# Per stream, the kernels in start order, each with its launch call (same process and correlation id)
# and whether that call starts inside a step_N range. The GELU chains are found by their own kernels:
# nanoGPT's formula is 0.5*x * (1 + tanh(c * (x + 0.044715 * x**3))), so the forward's tanh is its
# 6th kernel of 8 (0.5*x, x**3, its scale, the sum, the scale, tanh, 1 + it, the product) and the
# backward's tanh_backward its 4th of 12 (the bias gradient's sum, then the formula's derivatives).
KERNELS_SQL = """
WITH st AS (SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId
            WHERE coalesce(n.text, t.value) GLOB 'step_[0-9]*' AND n.end IS NOT NULL)
SELECT k.streamId, k.start, k.end - k.start, s.value, a.globalTid, a.start, a.end,
       EXISTS (SELECT 1 FROM st WHERE a.start BETWEEN st.start AND st.end)
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = k.correlationId AND a.globalTid >> 24 = k.globalPid >> 24
ORDER BY k.streamId, k.start"""
CALLS_SQL = "SELECT globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY globalTid, start"


@pytest.fixture(scope="module")
def gelu(async_trace):
    path = async_trace(BASE)
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        rows = con.execute(KERNELS_SQL).fetchall()
        calls = con.execute(CALLS_SQL).fetchall()
    chains = []
    for i, r in enumerate(rows):
        if not r[7]:
            continue
        for word, before, after in (("tanh_kernel_cuda", 5, 2), ("tanh_backward_kernel_cuda", 3, 8)):
            if word in r[3]:
                chain = rows[i - before: i + after + 1]
                assert len({c[0] for c in chain}) == 1  # one stream
                chains.append(chain)
    return load_trace(path), chains, calls


def _host_between(chain, calls) -> int:
    """The time on the chain's launching thread from its first launch call's end to its last one's,
    less the CUDA calls made in it (their union): the host time between the chain's launches."""
    tid, first, last = chain[0][4], chain[0][6], chain[-1][6]
    inside = sorted((max(s, first), min(e, last)) for t, s, e in calls if t == tid and e > first and s < last)
    busy, reach = 0, first
    for s, e in inside:
        if e > reach:
            busy += e - max(s, reach)
            reach = e
    return (last - first) - busy


def test_the_findings_fix_fuses_each_gelu_chain_into_one_kernel(gelu):
    trace, chains, calls = gelu
    from nsight_tui.parsers.analyses.findings import findings

    f = next(x for x in findings(trace) if x.id == "elementwise-chain")
    assert [e.startswith("fuse:") and e.endswith(("@forward,3+,<20us", "@backward,3+,<20us")) for e in f.edits] == [True] * 2
    n_steps = graph_of(trace)[1].n_steps
    assert len(chains) == 2 * 12 * n_steps  # a forward and a backward chain a layer a step
    assert f.evidence["chains_per_step"] == len(chains) / n_steps
    g, sr = graph_of(trace)
    ed = edit_mod.apply(g, sr, [edit_mod.parse(e) for e in f.edits])
    ops = trace.ops
    start = ops["start"].to_numpy()
    # the kernel each chain keeps: its first; the others gone with their launch calls
    first_starts = {c[0][1] for c in chains}
    gone_starts = {k[1] for c in chains for k in c[1:]}
    gone = (ed.mid.op_launch_pt < 0) & (g.op_launch_pt >= 0)
    assert set(start[gone].tolist()) == gone_starts
    kept = np.flatnonzero(np.isin(start, list(first_starts)))
    assert len(kept) == len(chains)
    # the fused kernel's time: the chain's longest kernel (mid), its shortest (low), the whole chain (high)
    by_first = {c[0][1]: [k[2] for k in c] for c in chains}
    durs = [by_first[int(s)] for s in start[kept]]
    assert ed.mid.op_dur[kept].tolist() == [max(d) for d in durs]
    assert ed.low.op_dur[kept].tolist() == [min(d) for d in durs]
    assert ed.high.op_dur[kept].tolist() == [sum(d) for d in durs]
    assert (ed.mid.op_dur[gone] == 0).all()
    # the CPU: the time inside the gone launch calls, at every end; the low end also the host time
    # between each chain's launches (the first launch call's end to the last one's, other calls kept)
    call_ns = sum(k[6] - k[5] for c in chains for k in c[1:])
    assert int((g.delta_ns - ed.mid.delta_ns).sum()) == int((g.delta_ns - ed.high.delta_ns).sum()) == call_ns
    host_ns = sum(_host_between(c, calls) for c in chains)
    assert int((g.delta_ns - ed.low.delta_ns).sum()) == call_ns + host_ns
    assert 0 < host_ns and (ed.low.delta_ns <= ed.mid.delta_ns).all()
    assert ed.applied[0].assumption and "one pass" in ed.applied[0].assumption


def test_the_replayed_saving_lies_between_the_gpu_and_the_cpu_it_takes_out(gelu):
    """The finding's saving is the replay of its fix; its range runs from the fused kernels at the
    whole chain's time with the host time kept (high step) to the shortest kernel with the host time
    gone (low step). No end saves more than the GPU time and the CPU time the edit takes out of a
    step (removing work from a chain of dependencies shortens it by at most that work)."""
    trace, chains, calls = gelu
    from nsight_tui.parsers.analyses.findings import findings

    f = next(x for x in findings(trace) if x.id == "elementwise-chain")
    assert f.replayed and f.replay_low_ms_per_step <= f.saving_ms_per_step <= f.replay_high_ms_per_step
    n = graph_of(trace)[1].n_steps
    gpu_ns = sum(sum(k[2] for k in c) - min(k[2] for k in c) for c in chains)
    cpu_ns = sum(k[6] - k[5] for c in chains for k in c[1:]) + sum(_host_between(c, calls) for c in chains)
    assert 0 < f.replay_high_ms_per_step * 1e6 <= (gpu_ns + cpu_ns) / n
    # the launch-bound step: the host time between the launches is what moves the step most
    assert f.replay_high_ms_per_step > 2 * f.saving_ms_per_step
    p = predict(trace, f.edits)
    assert p.low_ns <= p.step_ns <= p.high_ns and p.saving_ns / 1e6 == pytest.approx(f.saving_ms_per_step, abs=1e-6)


def test_fuse_by_family_and_its_words(gelu):
    trace, chains, _ = gelu
    g, sr = graph_of(trace)
    spec = fuse_spec("t", "a*+[+]b+c[[]d]@forward,3+,<20us")
    assert (spec.patterns, spec.range, spec.min_kernels, spec.max_ns) == (("a*", "[+]b", "c[[]d]"), "forward", 3, 20_000)
    assert fuse_spec("t", "elementwise") == type(spec)(("elementwise",))
    for bad in ("fuse:", "fuse:+x", "fuse:x@forward,1+", "fuse:x@forward,<soon", "fuse:x@forward,3"):
        with pytest.raises(EditError):
            edit_mod.parse(bad)
    with pytest.raises(EditError, match="no GPU op matches"):
        edit_mod.apply(g, sr, [edit_mod.parse("fuse:no_such_kernel")])
    with pytest.raises(EditError, match="no run of consecutive kernels"):
        edit_mod.apply(g, sr, [edit_mod.parse("fuse:*tanh_kernel_cuda*@forward")])  # one a layer: no run of two
    # by family, every run of elementwise kernels in the forward: the GELU chains among them
    ed = edit_mod.apply(g, sr, [edit_mod.parse("fuse:elementwise@forward")])
    gone = (ed.mid.op_launch_pt < 0) & (g.op_launch_pt >= 0)
    fwd_gone = {k[1] for c in chains if len(c) == 8 for k in c[1:]}
    assert fwd_gone <= set(trace.ops["start"].to_numpy()[gone].tolist())


@pytest.mark.parametrize("edit", ["fuse:", "fuse:x@forward,1+", "fuse:no_such_kernel", "fuse:*tanh*@no_such_range"])
def test_a_bad_fuse_edit_is_one_line_and_exit_2(edit):
    f = plain(SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz")
    run = cli_process.run(["whatif", str(f), edit], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_fusing_shortens_the_step_by_less_than_the_step():
    """On another capture (phase syncs, ctx 128): every elementwise run of the forward fused."""
    from helpers.xz_samples import plain

    trace = load_trace(plain(SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz"))
    p = predict(trace, ["fuse:elementwise@forward"])
    assert p.low_ns <= p.step_ns <= p.high_ns
    assert 0 <= p.saving_ns < p.replayed_step_ns and p.edits[0].assumption
