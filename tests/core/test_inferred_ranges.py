"""Iterations, layers and stages inferred from the kernel sequence of a trace without NVTX,
against truths that share no code with nsight_tui:

- the NVTX twin (sample_traces/nonvtx/small_ctx512_b8_async: the same capture command without
  --no-nvtx, another run): its step_N/warmup_N periods (tests/helpers/step_sql.py) and, by SQL, which kernels
  (by their place in the iteration's launch order) its forward/backward/optimizer and manual-attention
  ranges hold;
- the Python step times the --no-nvtx run measured itself (STEM.steps.json beside the export);
- the model's layer count from the capture's config in that sidecar.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.iterations import STEP, iteration_ranges
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.render.document import inferred_json
from nsight_tui.parsers.nsys.reports import nvtx_gpu_proj_sum, nvtx_sum
from nsight_tui.parsers.read.load import load_trace

from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers.shuffled import names_shuffled_copy, shuffled_copy
from helpers.step_sql import iterations as sql_iterations

NONVTX = SAMPLES / "nonvtx"
# TRAIN + "_nonvtx": the capture without NVTX; TRAIN + TWIN its NVTX twin (renamed from the capture's
# stem, which sample_traces/async has too: the samples are decompressed by stem)
TRAIN = "small_ctx512_b8_async"
FORWARD = "small_ctx512_fwd_b8_async"
TWIN = "_twin"
BF16 = "small_ctx512_bf16_b8_async_nonvtx"  # no twin in this folder: its sidecar is the truth
# capture/bare_gpt2.cu: a GPT-2 small forward in CUDA C++ with cuBLAS, no NVTX; its own step times
BARE = "bare_gpt2_small_ctx512_b8"


@pytest.fixture(scope="module")
def nonvtx(async_trace):
    return lambda stem: async_trace(NONVTX / f"{stem}.sqlite.xz")


def sidecar(stem: str) -> dict:
    return json.loads((NONVTX / f"{stem}.steps.json").read_text())


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def launch_ordered_kernels(path: Path) -> list[tuple[int, int]]:
    """(launch call start, kernel start) of every kernel, in launch order (SQL)."""
    with _connect(path) as con:
        return con.execute("""SELECT r.start, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND (r.globalTid >> 24) = (k.globalPid >> 24)
            ORDER BY r.start, k.start""").fetchall()


def twin_ranges(path: Path, name: str) -> list[tuple[int, int]]:
    """(start, end) of the twin's NVTX ranges with this text, in time order (SQL)."""
    with _connect(path) as con:
        return con.execute("""SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE e.eventType = 59 AND coalesce(e.text, s.value) = ? ORDER BY e.start""", (name,)).fetchall()


def kernel_places(kernels: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[list[int]]:
    """Per span, the positions (in launch order) of the kernels whose launch call starts inside it."""
    launches = np.array([k[0] for k in kernels])
    return [np.flatnonzero((launches >= s) & (launches <= e)).tolist() for s, e in spans]


def kernel_starts(model, range_id: int) -> np.ndarray:
    """GPU start times of the kernels (not memcpys) the model gives a range."""
    ops = model.trace.ops
    pos = model.ops_of(range_id)
    return ops["start"].to_numpy()[pos][ops["kind"].to_numpy()[pos] == 0]


# -- iterations --------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", [TRAIN, FORWARD])
def test_inferred_iterations_match_the_twins_in_count_and_duration(nonvtx, stem):
    twin = sql_iterations(nonvtx(stem + TWIN))
    found = inference(load_trace(nonvtx(stem + "_nonvtx")))
    assert found.found, found.reason
    assert len(found.iterations) == len(twin) == 6  # 2 warmup + 4 steps, as captured
    # The steady steps' mean against the twin's step periods, within 2%. The twin is another run of
    # the same command: one iteration may differ from its counterpart by a few percent (the twin's
    # forward-only step_0 took 28.4 ms against its neighbours' 27.1), so each steady one within 5%;
    # the first (cuBLAS and the allocator warming up, AdamW making its state) is left out here.
    mean_inferred = np.mean([i.end_ns - i.start_ns for i in found.iterations[2:]])
    mean_twin = np.mean([it.period for it in twin if it.name.startswith("step_")])
    assert mean_inferred == pytest.approx(mean_twin, rel=0.02)
    for got, want in list(zip(found.iterations, twin))[1:]:
        assert got.end_ns - got.start_ns == pytest.approx(want.period, rel=0.05), (got, want)


@pytest.mark.parametrize("stem", [TRAIN + "_nonvtx", FORWARD + "_nonvtx", BF16, BARE])
def test_inferred_iterations_match_the_runs_own_python_step_times(nonvtx, stem):
    steps = sidecar(stem)["steps"]
    found = inference(load_trace(nonvtx(stem)))
    assert len(found.iterations) == len(steps)
    # Python times an iteration from its start to the synchronise after its last kernel; the inferred
    # period also holds the host's pause before the next iteration's first launch (the GPU idles
    # then), so it is no shorter (the last: it ends with its last kernel, just before the
    # synchronise returns) and at most a few percent longer; the steady mean within 2%.
    for got, want in list(zip(found.iterations, steps))[1:]:
        assert 0.99 * want["seconds"] <= (got.end_ns - got.start_ns) / 1e9 <= 1.05 * want["seconds"], (got, want)
    steady = [(i.end_ns - i.start_ns) / 1e9 for i in found.iterations[2:]]
    assert np.mean(steady) == pytest.approx(np.mean([s["seconds"] for s in steps[2:]]), rel=0.02)


def test_steady_iterations_hold_the_twins_kernels(nonvtx):
    # The kernel count of each inferred iteration against the kernels whose launch call starts inside
    # the twin's iteration range (SQL): the same program, so the same kernels per iteration.
    twin = nonvtx(TRAIN + TWIN)
    counts = [len(p) for p in kernel_places(launch_ordered_kernels(twin),
                                            [(it.start, it.start + it.period - 1) for it in sql_iterations(twin)])]
    found = inference(load_trace(nonvtx(TRAIN + "_nonvtx")))
    assert [i.kernels for i in found.iterations][1:] == counts[1:]


def test_the_range_model_reads_inferred_iterations_as_steps(nonvtx):
    model = range_model(load_trace(nonvtx(TRAIN + "_nonvtx")))
    steps = iteration_ranges(model, STEP)
    names = model.trace.ranges["name"].to_numpy()[steps]
    assert len(steps) == 5 and all(n.startswith("inferred:step_") for n in names)
    # every step's kernels: those launched between its first launch and the next iteration's (SQL)
    kernels = launch_ordered_kernels(nonvtx(TRAIN + "_nonvtx"))
    gpu = inference(model.trace).iterations
    for i, rid in enumerate(steps.tolist()):
        it = gpu[i + 1]
        want = [k for k in kernels if it.start_ns <= k[1] < it.end_ns]
        assert model.kernel_count[rid] == len(want) == it.kernels
    period = steps_of(model).times(steps).period_ns.mean()  # the CPU clock's period, like the twin's
    twin_steps = [it.period for it in sql_iterations(nonvtx(TRAIN + TWIN)) if it.name.startswith("step_")]
    assert period == pytest.approx(np.mean(twin_steps), rel=0.02)


# -- layers and stages -------------------------------------------------------------------------
@pytest.mark.parametrize("stem", [TRAIN + "_nonvtx", FORWARD + "_nonvtx", BF16, BARE])
def test_layer_count_is_the_models(nonvtx, stem):
    assert inference(load_trace(nonvtx(stem))).layer_count == sidecar(stem)["config"]["n_layers"] == 12


# The twin's manual-attention ranges (capture/model.py's names) and the inferred stage of the same part,
# named for what its kernels do: the scores' matmul, the softmax, the product with V
STAGE_OF = {"computing_attention_scores": "attention scores", "computing_softmax": "attention softmax",
            "final_matmul": "attention x V"}


@pytest.mark.parametrize("stem", [TRAIN, FORWARD])
def test_attention_stages_hold_the_twins_attention_kernels(nonvtx, stem):
    """In one steady iteration, each inferred layer's attention scores / softmax / x V stage holds the
    kernels (by place in the iteration) the twin's computing_attention_scores / computing_softmax /
    final_matmul ranges hold."""
    twin, bare = nonvtx(stem + TWIN), nonvtx(stem + "_nonvtx")
    twin_kernels, bare_kernels = launch_ordered_kernels(twin), launch_ordered_kernels(bare)
    step = [it for it in sql_iterations(twin) if it.name == "step_1"][0]
    first_twin = kernel_places(twin_kernels, [(step.start, step.start + step.period - 1)])[0][0]
    model = range_model(load_trace(bare))
    texts = model.trace.ranges["text"].to_numpy()
    domains = model.trace.ranges["domain"].to_numpy()
    # the twin has two warm-ups, the inference one (the first: unlike the steady ones, or many times slower)
    inferred_step = iteration_ranges(model, STEP)[2]
    bare_start = {k[1]: i for i, k in enumerate(bare_kernels)}
    first_bare = min(bare_start[int(s)] for s in kernel_starts(model, inferred_step))
    for part, stage in STAGE_OF.items():
        spans = [s for s in twin_ranges(twin, part) if step.start <= s[0] < step.start + step.period]
        want = [[p - first_twin for p in places] for places in kernel_places(twin_kernels, spans)]
        ids = [i for i in np.flatnonzero((texts == stage) & (domains == "inferred")).tolist()
               if model.r_start[inferred_step] <= model.r_start[i] <= model.r_end[inferred_step]]
        got = [sorted(bare_start[int(s)] - first_bare for s in kernel_starts(model, i)) for i in ids]
        assert len(got) == len(want) == 12
        assert got == want, part


def test_one_layers_stages_in_the_models_order(nonvtx):
    # capture/model.py's Block: x + attn(ln1(x)), then x + mlp(ln2(x)); attention = qkv, scores,
    # softmax, @V, proj; mlp = fc, gelu, proj. Written here from the model, not from the code's output.
    want = ["layer norm", "QKV GEMM", "attention scores", "attention softmax", "attention x V",
            "output projection", "residual add", "layer norm", "MLP up GEMM", "activation", "MLP down GEMM",
            "residual add"]
    for stem in (TRAIN + "_nonvtx", FORWARD + "_nonvtx", BF16, BARE):  # bare_gpt2.cu's forward() is the same block
        assert inference(load_trace(nonvtx(stem))).layer_stages == want, stem


def test_phases_hold_the_twins_phase_kernels(nonvtx):
    """forward / backward / optimizer of an inferred steady step against the twin's ranges (kernels by
    place in the iteration): the same counts (the backward begins after the loss's forward kernels)."""
    twin, bare = nonvtx(TRAIN + TWIN), nonvtx(TRAIN + "_nonvtx")
    twin_kernels = launch_ordered_kernels(twin)
    step = [it for it in sql_iterations(twin) if it.name == "step_1"][0]
    window = (step.start, step.start + step.period - 1)
    want = {}
    for phase in ("forward", "backward", "optimizer"):
        spans = [s for s in twin_ranges(twin, phase) if window[0] <= s[0] <= window[1]]
        want[phase] = len(kernel_places(twin_kernels, spans)[0])
    model = range_model(load_trace(bare))
    texts = model.trace.ranges["text"].to_numpy()
    inferred_step = iteration_ranges(model, STEP)[2]
    for phase, count in want.items():
        ids = [i for i in np.flatnonzero(texts == phase).tolist()
               if model.r_start[inferred_step] <= model.r_start[i] <= model.r_end[inferred_step]]
        assert len(ids) == 1
        assert int(model.kernel_count[ids[0]]) == count, (phase, model.kernel_count[ids[0]], count)


def test_a_part_closing_its_iteration_ends_with_its_last_launch(nonvtx):
    """The optimizer closes each training iteration: its CPU span ends when the launch call of the
    iteration's last kernel returns (SQL), so the loop's wait before the next iteration (the step's
    synchronise: the GPU runs ~10 ms behind here) stays the iteration's, as the twin's annotated
    optimizer range ends when optimizer.step() returns; forward/backward stay contiguous."""
    path = nonvtx(TRAIN + "_nonvtx")
    with _connect(path) as con:
        calls = con.execute("""SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND (r.globalTid >> 24) = (k.globalPid >> 24) ORDER BY r.start, k.start""").fetchall()
    launch_starts = np.array([c[0] for c in calls])
    model = range_model(load_trace(path))
    texts = model.trace.ranges["text"].to_numpy()
    steps = sorted(iteration_ranges(model, STEP).tolist(), key=lambda i: model.r_start[i])
    def inside(name: str, step: int) -> list[int]:
        return [i for i in np.flatnonzero(texts == name).tolist()
                if model.r_start[step] <= model.r_start[i] <= model.r_end[step]]

    for step in steps[:-1]:  # the last iteration ends with its last launch anyway
        (opt,), (bwd,) = inside("optimizer", step), inside("backward", step)
        # the iteration's last kernel: the last launch call starting inside the iteration's span
        last = int(np.flatnonzero(launch_starts <= model.r_end[step])[-1])
        assert model.r_end[opt] == calls[last][1]
        assert model.r_end[opt] < model.r_end[step] - 1_000_000  # the wait is the iteration's
        assert model.r_end[bwd] + 1 == model.r_start[opt]  # parts inside an iteration stay contiguous


# -- what is not inferred ----------------------------------------------------------------------
def test_nvidias_reports_never_show_inferred_ranges(nonvtx):
    # nvtx_sum and nvtx_gpu_proj_sum as NVIDIA wrote them for this export (oracle CSVs): the library's
    # own CCCL ranges, nothing inferred
    trace = load_trace(nonvtx(TRAIN + "_nonvtx"))
    range_model(trace)  # the views' model, inferred ranges in it, built first
    oracle = NONVTX / "oracle" / f"{TRAIN}_nonvtx_nvtx_sum.csv.xz"
    import lzma

    want = sorted(line.rsplit(",", 1)[1] for line in lzma.open(oracle, "rt").read().splitlines()[1:])
    assert sorted(row[-1] for row in nvtx_sum(trace).rows) == want
    assert not any("inferred" in str(row[0]) for row in nvtx_gpu_proj_sum(trace).rows)


def test_a_trace_with_its_own_steps_infers_nothing(nonvtx):
    trace = load_trace(nonvtx(TRAIN + TWIN))
    found = inference(trace)
    assert not found.found and "own iteration ranges" in found.reason
    assert not (range_model(trace).trace.ranges["domain"] == "inferred").any()


def test_a_sequence_without_a_period_infers_nothing_and_says_so(nonvtx, tmp_path):
    trace = load_trace(names_shuffled_copy(nonvtx(TRAIN + "_nonvtx"), tmp_path / "no_period.sqlite"))
    found = inference(trace)
    assert not found.found and "no period" in found.reason
    assert not (range_model(trace).trace.ranges["domain"] == "inferred").any()


def test_edge_traces_without_iterations_infer_nothing():
    # the committed edge-case exports: NVTX but no step ranges, and too few kernels to repeat
    for path in sorted(SAMPLES.glob("edge_*.sqlite*")):
        found = inference(load_trace(path))
        assert not found.found and found.reason, path


def test_the_rows_order_in_the_export_changes_nothing(nonvtx, tmp_path):
    # nsys 2025.6+ does not promise time order: the same export with its rows scrambled
    a = inference(load_trace(nonvtx(TRAIN + "_nonvtx")))
    b = inference(load_trace(shuffled_copy(nonvtx(TRAIN + "_nonvtx"), tmp_path / "scrambled.sqlite")))
    assert b.iterations == a.iterations and b.layer_count == a.layer_count and b.layer_stages == a.layer_stages


def _iterations_only(source: Path, target: Path, keep: str = "step_[0-9]*") -> Path:
    """The twin with every NVTX range but step_N / warmup_N (and `keep`) deleted: NVTX around the
    iteration only."""
    shutil.copyfile(source, target)
    con = sqlite3.connect(target)
    con.execute("""DELETE FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND NOT (
        coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) GLOB 'step_[0-9]*'
        OR coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) GLOB 'warmup_[0-9]*'
        OR coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) GLOB ?)""", (keep,))
    if keep != "step_[0-9]*":  # the kept ranges on the iterations' thread, as a library called there pushes them
        con.execute("""UPDATE NVTX_EVENTS SET globalTid = (SELECT globalTid FROM NVTX_EVENTS
            WHERE coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) GLOB 'step_[0-9]*' LIMIT 1)
            WHERE coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) GLOB ?""", (keep,))
    con.commit()
    con.close()
    return target


@pytest.mark.parametrize("keep", ["step_[0-9]*", "cub::*"])
def test_nvtx_around_the_iteration_only_gets_its_parts_inferred_inside(nonvtx, tmp_path, keep):
    """(`cub::*` kept, on the iterations' thread: CCCL's own ranges inside the embedding backward, which
    the library pushes by itself, are no structure of the user's: the parts are inferred all the same.)"""
    twin = nonvtx(TRAIN + TWIN)
    model = range_model(load_trace(_iterations_only(twin, tmp_path / "steps_only.sqlite", keep)))
    found = inference(model.trace)
    assert found.found and found.inside and found.layer_count == 12 and not found.iterations
    texts, domains = model.trace.ranges["text"].to_numpy(), model.trace.ranges["domain"].to_numpy()
    kernels = launch_ordered_kernels(twin)
    for step in [it for it in sql_iterations(twin) if it.name.startswith("step_")]:
        (step_id,) = [i for i in np.flatnonzero(texts == step.name).tolist() if domains[i] != "inferred"]
        for phase in ("forward", "backward", "optimizer"):
            spans = [s for s in twin_ranges(twin, phase) if step.start <= s[0] <= step.end]
            want = len(kernel_places(kernels, spans)[0])  # the twin's own phase range, by SQL
            (pid,) = [i for i in np.flatnonzero((texts == phase) & (domains == "inferred")).tolist()
                      if model.parent[i] == step_id]  # nested right under the export's step_N
            assert int(model.kernel_count[pid]) == want, (step.name, phase)


# -- the backward layers' stages -----------------------------------------------------------------
# capture/model.py's Block run backward: the MLP's down GEMM, GELU and up GEMM, the second layer norm,
# the residual's gradient sum; then the attention's output projection, @V, softmax, scores and QKV
# GEMMs, the first layer norm, the residual's sum. Written from the model, not from the code's output.
BACKWARD_STAGES = ["MLP down GEMM (grad)", "activation (grad)", "MLP up GEMM (grad)", "layer norm (grad)",
                   "residual add (grad)", "output projection (grad)", "attention x V (grad)",
                   "attention softmax (grad)", "attention scores (grad)", "QKV GEMM (grad)",
                   "layer norm (grad)", "residual add (grad)"]
BWDRANGES = plain(SAMPLES / "small_ctx128_bwdranges.sqlite.xz")  # capture --backward-ranges: backward:<part> ranges


@pytest.mark.parametrize("stem", [TRAIN + "_nonvtx", BF16])
def test_one_backward_layers_stages_in_the_models_order(nonvtx, stem):
    found = inference(load_trace(nonvtx(stem)))
    assert found.backward_stages == BACKWARD_STAGES
    assert inferred_json(found)["backward_stages"] == BACKWARD_STAGES
    # every backward layer of a steady step holds its stages, in that order
    model = range_model(load_trace(nonvtx(stem)))
    texts, parent = model.trace.ranges["text"].to_numpy(), model.parent
    backward = [i for i in np.flatnonzero(texts == "backward").tolist()]
    layers = [i for i in np.flatnonzero(texts == "layer_0").tolist() if parent[i] in backward]
    assert layers
    for layer in layers:
        kids = sorted((i for i in np.flatnonzero(parent == layer).tolist()), key=lambda i: model.r_start[i])
        assert [texts[i] for i in kids] == BACKWARD_STAGES


def _start_end_ranges(path: Path, name: str) -> list[tuple[int, int]]:
    """(start, end) of the start/end NVTX ranges (the backward hooks' kind, eventType 60) named so (SQL)."""
    with _connect(path) as con:
        return con.execute("""SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE e.eventType = 60 AND coalesce(e.text, s.value) = ? ORDER BY e.start""", (name,)).fetchall()


def test_backward_attention_stages_hold_the_backward_ranges_kernels(tmp_path):
    """The capture with backward ranges (`backward:computing_softmax`, ... started and ended by the
    parts' backward hooks on the autograd thread), its other ranges deleted but step_N: the parts
    inferred inside its iterations, each backward layer's `attention softmax (grad)` ... against the
    kernels the capture's own `backward:<part>` range of that layer holds (SQL, launch order)."""
    copy = _iterations_only(BWDRANGES, tmp_path / "bwd_steps_only.sqlite")
    model = range_model(load_trace(copy))
    found = inference(model.trace)
    assert found.inside and found.layer_count == 12 and found.backward_stages == BACKWARD_STAGES
    kernels = launch_ordered_kernels(BWDRANGES)
    gpu_start = {k[1]: i for i, k in enumerate(kernels)}
    texts, domains = model.trace.ranges["text"].to_numpy(), model.trace.ranges["domain"].to_numpy()
    steps = [it for it in sql_iterations(BWDRANGES) if it.name.startswith("step_")]
    assert len(steps) == 2
    for step in steps:
        for part, stage in STAGE_OF.items():
            spans = [s for s in _start_end_ranges(BWDRANGES, "backward:" + part) if step.start <= s[0] <= step.end]
            want = kernel_places(kernels, spans)
            ids = [i for i in np.flatnonzero((texts == stage + " (grad)") & (domains == "inferred")).tolist()
                   if step.start <= model.r_start[i] <= step.end]
            got = [sorted(gpu_start[int(s)] for s in kernel_starts(model, i)) for i in ids]
            assert len(got) == len(want) == 12 and all(want)
            assert got == want, (step.name, part)


def test_one_model_serves_views_and_reports_where_nothing_is_inferred(nonvtx):
    # `stats` asks for the views' model (its main-thread note) and NVIDIA's (no inferred ranges):
    # with nothing inferred they are the same model, built once, in either order of asking
    for first_inferred in (True, False):
        trace = load_trace(nonvtx(TRAIN + TWIN))
        a = range_model(trace, inferred=first_inferred)
        b = range_model(trace, inferred=not first_inferred)
        assert a is b and a.trace is trace and a.n == len(trace.ranges)
    # the reports from the shared model are those of a trace that never built the views' model
    fresh = load_trace(nonvtx(TRAIN + TWIN))
    assert nvtx_gpu_proj_sum(trace).rows == nvtx_gpu_proj_sum(fresh).rows
    # where ranges are inferred, NVIDIA's model is its own: the export's ranges only
    trace = load_trace(nonvtx(TRAIN + "_nonvtx"))
    views, nsys_model = range_model(trace), range_model(trace, inferred=False)
    assert views is not nsys_model and nsys_model.trace is trace
    assert nsys_model.n == len(trace.ranges) < views.n


# -- where an iteration begins: forward's first kernel, whatever the host did ------------------------
def _pause_before_optimizer(source: Path, target: Path, pause_ns: int = 200_000_000) -> Path:
    """A copy whose host pauses before every optimizer.step(), as a `loss.item()` there makes it: every
    runtime call from each optimizer's first launch on moves `pause_ns` later (GPU work untouched). The
    longest host pause of each cycle is then the one before the optimizer, not before the forward."""
    shutil.copyfile(source, target)
    con = sqlite3.connect(target)
    rows = con.execute("""SELECT r.start, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds s ON s.id = k.demangledName ORDER BY r.start""").fetchall()
    firsts = [start for (start, name), (_, before) in zip(rows[1:], rows[:-1])
              if "multi_tensor_apply" in name and "multi_tensor_apply" not in before]
    for t in reversed(firsts):
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start + ?, end = end + ? WHERE start >= ?",
                    (pause_ns, pause_ns, t))
    con.commit()
    con.close()
    return target


def _twin_phase_counts(twin: Path, step_name: str) -> dict[str, int]:
    """Kernels whose launch call starts inside the twin's forward/backward/optimizer of one step (SQL)."""
    kernels = launch_ordered_kernels(twin)
    step = [it for it in sql_iterations(twin) if it.name == step_name][0]
    window = (step.start, step.start + step.period - 1)
    return {phase: len(kernel_places(kernels, [s for s in twin_ranges(twin, phase)
                                               if window[0] <= s[0] <= window[1]])[0])
            for phase in ("forward", "backward", "optimizer")}


def test_an_iteration_begins_at_the_forward_even_where_the_host_waits_before_the_optimizer(nonvtx, tmp_path):
    """The twin's step_N and its phases (SQL) against the inferred ones on a copy whose longest host
    pause is before the optimizer: 6 iterations of the twin's kernels each (none of 48 optimizer kernels
    alone at the end), the optimizer inside its own step, the forward holding no optimizer kernel."""
    twin = nonvtx(TRAIN + TWIN)
    paused = _pause_before_optimizer(nonvtx(TRAIN + "_nonvtx"), tmp_path / f"{TRAIN}_paused.sqlite")
    counts = [len(p) for p in kernel_places(launch_ordered_kernels(twin),
                                            [(it.start, it.start + it.period - 1) for it in sql_iterations(twin)])]
    model = range_model(load_trace(paused))
    found = inference(model.trace)
    assert [i.kernels for i in found.iterations] == counts  # the first (AdamW making its state) too
    assert found.iterations[0].name.startswith("warmup_")  # its kernels unlike the steady ones
    want = _twin_phase_counts(twin, "step_1")
    texts = model.trace.ranges["text"].to_numpy()
    steps = iteration_ranges(model, STEP)
    for step in steps.tolist():
        for phase, count in want.items():
            ids = [i for i in np.flatnonzero(texts == phase).tolist()
                   if model.r_start[step] <= model.r_start[i] <= model.r_end[step]]
            assert len(ids) == 1 and int(model.kernel_count[ids[0]]) == count, (phase, step)


def _cut_after_last_forward(source: Path, target: Path) -> tuple[Path, int]:
    """A copy that stops inside its last iteration: every kernel launched after the last loss kernel
    (`nll_loss_forward`) deleted, as a capture cut short leaves it. Returns it and the kernels kept."""
    shutil.copyfile(source, target)
    con = sqlite3.connect(target)
    (cut,) = con.execute("""SELECT max(r.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nll_loss_forward%'""").fetchone()
    con.execute("""DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (
        SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start > ?)""", (cut,))
    (left,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    con.commit()
    con.close()
    return target, left


def test_a_partial_last_iteration_is_left_out_and_said(nonvtx, tmp_path):
    """Cut inside its last step: the Python clock's first five iterations, each within 5% of its own
    step time, the partial sixth in no step, and the basis says so."""
    path, _ = _cut_after_last_forward(nonvtx(TRAIN + "_nonvtx"), tmp_path / f"{TRAIN}_cut.sqlite")
    steps = sidecar(TRAIN + "_nonvtx")["steps"]
    found = inference(load_trace(path))
    assert len(found.iterations) == len(steps) - 1
    assert "partial last iteration" in found.basis
    for got, want in list(zip(found.iterations, steps))[1:]:
        assert 0.99 * want["seconds"] <= (got.end_ns - got.start_ns) / 1e9 <= 1.05 * want["seconds"], (got, want)


@pytest.mark.parametrize("stem", [FORWARD + "_nonvtx", BARE])
def test_a_slow_first_iteration_of_the_steady_kernels_is_a_warmup(nonvtx, stem):
    """The Python clock's first iteration (many times its steady ones: cuBLAS, the allocator) is a
    warm-up even where it launches the steady kernels; the steps after it are steps (no sidecar read:
    the sample is decompressed alone)."""
    steps = sidecar(stem)["steps"]
    assert steps[0]["seconds"] > 3 * steps[-1]["seconds"]  # the premise, from the Python clock
    found = inference(load_trace(nonvtx(stem)))
    assert found.iterations[0].name.startswith("warmup_")
    assert all(i.name.startswith("step_") for i in found.iterations[1:])
