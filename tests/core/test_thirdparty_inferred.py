"""Inferred structure on workloads nobody here wrote (sample_traces/thirdparty: HF Trainer on a
Qwen2-shaped model, the same under PyTorch's autograd NVTX, a Lightning ResNet-50 channels-first and
channels-last, our GPT-2 with no NVTX at all), against truths that share no code with nsight_tui:
the Python clock each workload took around its own steps (STEM.steps.json, read here as JSON), its
configuration there (layers), the architecture as its library writes it (stage order), and SQL
over the export (the layout transposes)."""
from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

from helpers.stripped import without_nvtx
from nsight_tui.parsers.analyses.layout import layout_share
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.document import inferred_json

from conftest import SAMPLES

THIRD = SAMPLES / "thirdparty"
QWEN, QWEN_AG = "hf_trainer_qwen2_l4_b8", "hf_trainer_qwen2_l4_b8_agnvtx"
RESNET, RESNET_CL = "lightning_resnet50_b32", "lightning_resnet50_b32_channels_last"
GPT2 = "small_ctx512_b8_async_nonvtx"


@pytest.fixture(scope="module")
def captured(thirdparty):
    """STEM -> the export with its records beside it, as the capture left them (conftest.thirdparty)."""
    return thirdparty


def python_clock(stem: str) -> dict:
    return json.loads((THIRD / f"{stem}.steps.json").read_text())


@pytest.mark.parametrize("stem", [QWEN, QWEN_AG, GPT2])
def test_steady_steps_match_the_workloads_python_clock(captured, stem):
    """Each step's period within 5% of the workload's own time for it, the steady mean within 3%; the
    warm-ups and steps as many as the workload ran (no partial step)."""
    steps = python_clock(stem)["steps"]
    found = inference(load_trace(captured(stem)))
    assert [i.name for i in found.iterations] == [s["name"] for s in steps]
    for got, want in zip(found.iterations[1:], steps[1:]):
        assert (got.end_ns - got.start_ns) / 1e9 == pytest.approx(want["seconds"], rel=0.05), (got, want)
    steady = [(i.end_ns - i.start_ns) / 1e9 for i in found.iterations if i.name.startswith("step_")]
    assert np.mean(steady) == pytest.approx(np.mean([s["seconds"] for s in steps if s["name"].startswith("step_")]),
                                            rel=0.03)


@pytest.mark.parametrize("stem", [QWEN, QWEN_AG])
def test_a_qwen2_layer_is_found_and_named_for_what_it_does(captured, stem):
    # transformers' Qwen2DecoderLayer: input RMSNorm; q/k/v projections; rotary on q and k; SDPA;
    # o_proj; residual add; post-attention RMSNorm; gate_proj, SiLU, up_proj, (x) down_proj; residual add
    found = inference(load_trace(captured(stem)))
    assert found.layer_count == python_clock(stem)["config"]["layers"] == 4
    assert found.layer_stages == ["RMS norm", "QKV GEMM", "rotary embedding", "fused attention", "output projection",
                                  "residual add", "RMS norm", "MLP up GEMM", "activation", "MLP up GEMM",
                                  "MLP down GEMM", "residual add"]
    assert not any("computing" in s for s in found.layer_stages + found.backward_stages)


@pytest.mark.parametrize("stem", [RESNET, RESNET_CL])
def test_a_resnet_bottleneck_is_a_layer_of_convs(captured, stem):
    # timm's resnet50: layers of 3, 4, 6, 3 Bottlenecks, the first of each with a downsample: the longest
    # run of identical blocks is layer3's last 5; a Bottleneck: 1x1 conv, BN, ReLU, 3x3 conv, BN, ReLU,
    # 1x1 conv, BN, + shortcut, ReLU (cuDNN's NCHW<->NHWC transposes around the 3x3 conv when channels-first)
    found = inference(load_trace(captured(stem)))
    assert found.layer_count == 5
    stages = [s for s in found.layer_stages if s != "layout transpose"]
    assert stages == ["conv", "batch norm", "activation", "conv", "batch norm", "activation", "conv", "batch norm",
                      "residual add", "activation"]
    assert ("layout transpose" in found.layer_stages) == (stem == RESNET)
    # around the 5 alike blocks: the stem, layer1, layer2 and layer3's first block before them; layer4's 3 blocks,
    # the pool, the classifier and the loss after them: a conv net's parts, no transformer's embedding
    texts = set(found.ranges["text"])
    assert {"stem and earlier blocks", "later blocks, head and loss", "stem and earlier blocks backward",
            "later blocks, head and loss backward"} <= texts
    assert not {"embedding", "embedding backward"} & texts


def test_resnet_layout_transposes_per_step_against_sql(captured):
    """Channels-first: every iteration launches the same transposes (SQL count over the export / the
    workload's iterations), per step as the analysis says; channels-last: none (SQL and the analysis)."""
    sql = """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
             WHERE s.value LIKE '%nchwToNhwc%' OR s.value LIKE '%nhwcToNchw%'"""
    for stem in (RESNET, RESNET_CL):
        with sqlite3.connect(f"{captured(stem).resolve().as_uri()}?mode=ro", uri=True) as con:
            (count,) = con.execute(sql).fetchone()
        iterations = len(python_clock(stem)["steps"])
        got = layout_share(range_model(load_trace(captured(stem))))
        assert got.steps == sum(1 for s in python_clock(stem)["steps"] if s["name"].startswith("step_"))
        assert count % iterations == 0 and got.layout_kernels == count / iterations
        if stem == RESNET:
            assert count > 0 and got.share_of_kernels > 0.10  # a visible share of the step's GPU work
        else:
            assert count == 0 and got.layout_ns == 0


GENERATE, GENERATE_STATIC = "hf_generate_llama_eager", "hf_generate_llama_static"


@pytest.mark.parametrize("stem", [GENERATE, GENERATE_STATIC])
def test_a_generate_call_is_an_iteration_with_its_decode_loop(captured, stem):
    """HF generate(), eager and with a static cache (transformers compiles the decode step and replays it as
    a CUDA graph): each call an iteration (its warm-up apart), the model's layers (not its tokens), and
    inside each call the prefill then one decode step per new token. Truth: the workload's per-token clock
    (the gaps between its StoppingCriteria calls; the first, from the call's start, is its prefill), its
    configuration (layers, new tokens)."""
    record = python_clock(stem)
    config, calls = record["config"], [s for s in record["steps"] if s["name"].startswith("step_")]
    found = inference(load_trace(captured(stem)))
    assert [i.name for i in found.iterations] == [s["name"] for s in record["steps"]]
    for got, want in zip(found.iterations, record["steps"]):
        assert (got.end_ns - got.start_ns) / 1e9 == pytest.approx(want["seconds"], rel=0.05), (got, want)
    assert found.layer_count == config["layers"] == 6
    d = found.decode
    assert d is not None and d.calls == len(calls) and d.graph == (stem == GENERATE_STATIC)
    assert d.tokens_per_call == config["new_tokens"] - 1 == len(calls[0]["decode_token_s"])
    tokens = np.array([t for s in calls for t in s["decode_token_s"]]) * 1e9
    assert d.median_ns == pytest.approx(np.median(tokens), rel=0.15)
    assert d.p90_ns == pytest.approx(np.percentile(tokens, 90), rel=0.15)
    assert d.tokens_per_s == pytest.approx(1e9 / np.median(tokens), rel=0.15)
    # The time to the first token: Python's prefill runs from the call's start on the host (its work before the
    # first kernel too) to its StoppingCriteria's first call, after the first token's sampling; the GPU's from
    # the call's first kernel to that token's sampling (eager: its stopping check), so at most Python's. A static
    # cache's first replay waits on the host's set-up of the decode (11 ms), which Python's clock gives the
    # second token: the prefill ran to that replay once (31.3 ms against Python's 21.6)
    prefill = np.median([s["prefill_s"] * 1e9 for s in calls])
    assert 0.85 * prefill <= d.prefill_ns <= prefill
    # batch 1: the GPU idle most of the decode, waiting on the host (eager: its launches; static: its eager
    # sampling and stopping check between the replays)
    assert d.launch_bound
    assert inferred_json(found)["decode"]["median_ns"] == d.median_ns


@pytest.mark.parametrize("stem", [QWEN, RESNET, GPT2])
def test_a_training_run_has_no_decode_loop(captured, stem):
    assert inference(load_trace(captured(stem))).decode is None


def test_the_report_on_a_generate_run_speaks_of_tokens_not_training(captured):
    from nsight_tui.parsers.analyses.report import build
    from nsight_tui.render.report import single_markdown

    text = single_markdown(build(load_trace(captured(GENERATE))))
    assert "**An inference run**" in text and "per-token decode: median" in text and "tokens/s" in text
    assert "One backward layer's stages" not in text  # the next token's layers are no backward
    assert "| softmax / matmul runtime | – |" not in text and "no backward" in text



@pytest.mark.parametrize("stem", ["timm_vit_small_b64", "timm_convnext_tiny_b32"])
def test_inferred_phases_hold_the_kernels_of_the_workloads_own_phase_ranges(captured, tmp_path, stem):
    """timm ViT and ConvNeXt marked by their own loops (`mark.hooks`, `mark.step`/`mark.phase`: step_N with
    forward/backward/optimizer), stripped of NVTX: the inferred phases of a steady step hold the kernels the
    workload's own phase ranges hold (SQL: kernels whose launch call starts inside them); the forward also
    the few the step launches before its forward range opens (the batch's casts), which an inferred
    iteration gives the forward they precede."""
    phases_against_own_ranges(captured(stem), tmp_path)


def test_a_per_parameter_adamw_is_the_optimizer_phase_of_an_inferred_step(async_trace, tmp_path):
    """AdamW(foreach=False), as a Trainer handed its own optimizer runs it: a block of plain elementwise kernels a
    parameter (none named for an optimizer; `addcdiv` last in each). Stripped of NVTX, the inferred step ends
    after the last parameter's update, its optimizer phase holds every block and its layers are the model's, as
    the workload's own ranges say (GPT-2 small, sample_traces/replay/optim: step_N with forward/backward/optimizer;
    GPT-2 small: 12 layers)."""
    annotated = async_trace(SAMPLES / "replay" / "optim" / "small_ctx512_b8_async_foreach-off.sqlite.xz")
    want = phases_against_own_ranges(annotated, tmp_path)
    assert want["optimizer"] > 300  # a block a parameter, not a kernel a parameter group
    assert inference(load_trace(tmp_path / annotated.name)).layer_count == 12


VIT_ACCUM = "timm_vit_small_d4_b8_accum2"


def test_gradient_accumulation_each_micro_batch_is_a_forward_and_a_backward(captured, tmp_path):
    """timm ViT cut to 4 blocks (its command line), gradient accumulation of 2 micro-batches a step (its record's
    config), marked by its own loop: step_N holding forward, backward, forward, backward, optimizer. Stripped of
    NVTX (its records beside it), the kernel sequence repeats by micro-batch inside each step: no name but the
    optimizer's comes once a step. The inferred steps are the workload's (its Python clock: within 5% each),
    each step's parts those its own ranges hold, in order, kernel for kernel (SQL), and every forward and
    backward holds the model's blocks as layers."""
    annotated = captured(VIT_ACCUM)
    record = python_clock(VIT_ACCUM)
    command = json.loads((THIRD / f"{VIT_ACCUM}.run.json").read_text())["command"]
    depth = int(command[command.index("--depth") + 1])
    want = own_step_parts(annotated)
    assert [n for n, _ in want] == ["forward", "backward"] * record["config"]["accumulation"] + ["optimizer"]

    stripped = without_nvtx(annotated, tmp_path / annotated.name)
    for side in THIRD.glob(f"{VIT_ACCUM}.*.json"):
        shutil.copyfile(side, tmp_path / side.name)
    trace = load_trace(stripped)
    found = inference(trace)
    assert found.micro_batches == record["config"]["accumulation"] and found.layer_count == depth
    assert inferred_json(found)["micro_batches"] == record["config"]["accumulation"]
    steps = [s for s in record["steps"] if s["name"].startswith("step_")]
    got = [i for i in found.iterations if i.name.startswith("step_")]
    assert [i.name for i in got] == [s["name"] for s in steps]
    for i, s in zip(got, steps):
        assert (i.end_ns - i.start_ns) / 1e9 == pytest.approx(s["seconds"], rel=0.05), (i, s)
    model = range_model(trace)
    texts = model.trace.ranges["text"].to_numpy()
    from nsight_tui.parsers.model.iterations import STEP, iteration_ranges

    inferred_step = iteration_ranges(model, STEP)[1]
    parts = [i for i in np.flatnonzero(model.parent == inferred_step).tolist()]
    assert [[texts[i], int(model.kernel_count[i])] for i in parts] == want
    for i in parts[:-1]:
        assert sum(str(texts[c]).startswith("layer_") for c in np.flatnonzero(model.parent == i)) == depth


def test_gradient_accumulation_inside_the_workloads_own_step_ranges(captured, tmp_path):
    """The accumulating ViT with its step_N/warmup_N ranges kept and its phase ranges deleted (SQL on a copy): the
    parts inferred inside step_1 are its deleted ranges' parts, in order, kernel for kernel, each forward and
    backward the 4 blocks (a loop that marks its steps but not the micro-batches in them)."""
    annotated = captured(VIT_ACCUM)
    want = own_step_parts(annotated)
    copy = tmp_path / annotated.name
    shutil.copyfile(annotated, copy)
    with sqlite3.connect(copy) as con:
        con.execute("""DELETE FROM NVTX_EVENTS WHERE eventType = 59 AND coalesce(text,
            (SELECT value FROM StringIds WHERE id = textId)) IN ('forward', 'backward', 'optimizer')""")
    trace = load_trace(copy)
    found = inference(trace)
    assert found.inside and found.micro_batches == python_clock(VIT_ACCUM)["config"]["accumulation"]
    model = range_model(trace)
    texts, domains = model.trace.ranges["text"].to_numpy(), model.trace.ranges["domain"].to_numpy()
    (step_id,) = [i for i in np.flatnonzero(texts == "step_1").tolist() if domains[i] != "inferred"]
    parts = np.flatnonzero(model.parent == step_id).tolist()
    assert [[texts[i], int(model.kernel_count[i])] for i in parts] == want
    for i in parts[:-1]:
        assert sum(str(texts[c]).startswith("layer_") for c in np.flatnonzero(model.parent == i)) == 4


def test_gradient_accumulation_phases_against_python_per_step(captured):
    """The accumulating ViT's report (a): its step is the optimizer step of `accumulation` micro-batches (its
    record's config), each forward and backward range met that many times a step and said so; each phase's CPU
    against Python's is the step's ranges summed (SQL over the export's own NVTX ranges) over Python's phase time,
    which sums a step's micro-batches (its record), not one range's time against the step's sum (0.5)."""
    from nsight_tui.parsers import Profile
    from nsight_tui.render.report import single_markdown

    path = captured(VIT_ACCUM)
    record = python_clock(VIT_ACCUM)
    k = record["config"]["accumulation"]
    steps = [s for s in record["steps"] if s["name"].startswith("step_")]
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59""").fetchall()
    bounds = [(b, e) for name, b, e in ranges if name in {s["name"] for s in steps}]
    report = Profile.open(path).report()
    assert report.timing.phases_per_step == {"forward": k, "backward": k} and report.timing.micro_batches == k
    page = single_markdown(report)
    page = page[page.index("## (a)"):page.index("## (b)")]  # the section comparing with Python's clock
    assert f"Gradient accumulation: {k} forward and backward ranges a step" in page
    for phase in ("forward", "backward", "optimizer"):
        spans = [e - b for name, b, e in ranges if name == phase and any(s0 <= b <= s1 for s0, s1 in bounds)]
        assert len(spans) == len(steps) * (k if phase != "optimizer" else 1)
        python = np.mean([s["phases"][phase] for s in steps]) * 1e9
        want = sum(spans) / len(steps) / python
        label = f"{phase} (×{k} a step)" if phase != "optimizer" else phase
        (row,) = [line for line in page.splitlines() if line.startswith(f"| {label} |")]
        assert float(row.strip("|").split("|")[-1]) == pytest.approx(want, abs=0.0015)


def test_gradient_accumulation_memory_rows_number_each_micro_batch(captured):
    """The accumulating ViT's memory section: a phase met K times in one iteration (K its record's accumulation,
    SQL: the backward ranges inside each iteration) is numbered #1..#K in time order, not the same path twice."""
    from nsight_tui.parsers import Profile
    from nsight_tui.render.report import single_markdown

    path = captured(VIT_ACCUM)
    k = python_clock(VIT_ACCUM)["config"]["accumulation"]
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59""").fetchall()
    (s0, s1), = [(b, e) for name, b, e in ranges if name == "warmup_0"]
    assert sum(1 for name, b, _ in ranges if name == "backward" and s0 <= b <= s1) == k
    page = single_markdown(Profile.open(path).report())
    page = page[page.index("Where device memory was taken"):]
    rows = [line.split("|")[1].strip() for line in page.splitlines()[4:] if line.startswith("| warmup_0/backward")]
    assert rows == [f"warmup_0/backward #{i + 1}" for i in range(k)]


def test_a_record_that_clocks_each_micro_batch_is_summed_by_iteration(captured, tmp_path):
    """A Lightning Callback's on_train_batch_start/end fires once a micro-batch under accumulate_grad_batches, so a
    user's clock there records K entries a step (devruns/gpu_thirdparty_resnet_accum.log: 14 for 7 steps). Made
    here from the accumulating ViT's own ranges (SQL): one entry a micro-batch, its forward's start to its
    backward's end (the last one's to the optimizer's end), the first three named warm-ups as a per-batch clock
    with warmup=3 names them, written beside the export stripped of NVTX. The tool reads it one entry an
    iteration: the iterations holding a warm-up entry are the warm-ups (2), each step's Python time its two
    entries' sum, which its own time meets within 5% (before, each step met one micro-batch's entry: ~2x)."""
    from nsight_tui.parsers.analyses.questions import timing

    annotated = captured(VIT_ACCUM)
    with sqlite3.connect(f"{annotated.resolve().as_uri()}?mode=ro", uri=True) as con:
        ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start""").fetchall()
    phases = [(name, s, e) for name, s, e in ranges if name in ("forward", "backward", "optimizer")]
    micro: list[tuple[int, int]] = []
    for name, s, e in phases:
        if name == "forward":
            micro.append((s, e))
        else:
            micro[-1] = (micro[-1][0], e)
    k = python_clock(VIT_ACCUM)["config"]["accumulation"]
    record = {"config": {"accumulation": k}, "steps": [
        {"name": f"warmup_{j}" if j < 3 else f"step_{j - 3}", "seconds": (e - s) / 1e9, "phases": {}}
        for j, (s, e) in enumerate(micro)]}
    stripped = without_nvtx(annotated, tmp_path / annotated.name)
    (tmp_path / f"{VIT_ACCUM}.steps.json").write_text(json.dumps(record))
    trace = load_trace(stripped)
    found = inference(trace)
    assert len(record["steps"]) == k * len(found.iterations)
    assert [i.name for i in found.iterations][:3] == ["warmup_0", "warmup_1", "step_0"]
    rows = timing(trace, range_model(trace)).steps
    steps = [i.name for i in found.iterations if i.name.startswith("step_")]
    assert [r.step for r in rows] == steps
    for r, j in zip(rows, range(2 * k, len(micro), k)):
        assert r.python_ns == pytest.approx(sum(e - s for s, e in micro[j:j + k]), abs=k)
        assert r.own_ns == pytest.approx(r.python_ns, rel=0.05)


def compiled_oracle(stem: str):
    """A compiled capture's oracle (devruns/step_oracle.py): its JSON, the kernel names, the sequence as a
    KernelSequence in launch order (all the sequence-level rules read), and the iteration starts the period
    rule finds."""
    import lzma

    from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence
    from nsight_tui.parsers.model.inferred.period import iteration_starts, period_anchor

    with lzma.open(THIRD / "oracle" / f"{stem}.json.xz", "rt") as f:
        oracle = json.load(f)
    op_names, codes = oracle["names"], np.array(oracle["sequence"], dtype=np.int64)
    order = np.arange(len(codes), dtype=np.int64)
    seq = KernelSequence(order, codes, order, order, order, order + 1, np.zeros_like(order), order)
    anchors, period = period_anchor(codes)
    return oracle, op_names, codes, iteration_starts(seq, anchors, period, op_names).tolist(), period


def layers_of(template: np.ndarray, op_names: list[str]):
    from nsight_tui.parsers.model.inferred.infer import _layers
    from nsight_tui.parsers.model.inferred.kernel_kinds import kernel_kind
    from nsight_tui.parsers.model.inferred.micro import micro_starts

    kinds = [kernel_kind(op_names[c]) for c in template.tolist()]
    micro = micro_starts(template, op_names)
    return _layers(template, kinds, op_names, micro), micro


@pytest.mark.parametrize("stem", ["timm_vit_small_d4_b8_compiled", "timm_vit_small_d4_b8_compiled_accum2"])
def test_a_compiled_models_iterations_and_parts_are_its_own_ranges(stem):
    """torch.compile'd timm ViT (4 blocks, its command line; Inductor's Triton kernels, the optimizer eager), alone
    and with gradient accumulation of 2. Its first step holds thousands of kernels of the compilation; its forward's
    fused layer-norm kernels carry `native_layer_norm_backward` in their names (they save what the backward needs);
    Inductor numbers a block's fused kernels apart in the first and last block; under accumulation each micro-batch's
    forward begins with the same kernels. The whole kernel sequence and the workload's own ranges, taken by SQL from
    the annotated capture (devruns/step_oracle.py into sample_traces/thirdparty/oracle; the captures, 0.65 and 0.7 MB,
    stay in devruns/gpu_thirdparty_compile*.log's calls): every iteration after the compiling one begins where its
    own range's first kernel is, the kernels before them more than an iteration's (the record's first iteration,
    `_infer_process` then names them so); step_1 splits into its own ranges' parts kernel for kernel, the model's 4
    blocks its layers."""
    from nsight_tui.parsers.model.inferred.range_rows import phase_spans

    oracle, op_names, codes, starts, period = compiled_oracle(stem)
    want = [first for _, first, _ in oracle["iterations"]]
    assert starts == want[1:] and starts[0] >= period
    step = [name for name, _, _ in oracle["iterations"]].index(oracle["step"])
    template = codes[want[step]:want[step + 1]]
    layers, micro = layers_of(template, op_names)
    assert layers and layers[0].count == oracle["depth"] == 4
    assert [[name, b - a] for name, a, b in phase_spans(template, op_names, layers, micro)] == oracle["phases"]


@pytest.mark.parametrize("stem", ["hf_trainer_qwen2_l4_b4_compiled", "hf_trainer_qwen2_l6_b4_compiled"])
def test_a_compiled_models_layers_are_its_decoder_layers_though_the_first_and_last_run_other_kernels(stem):
    """HF's Trainer with torch_compile=True over a Qwen2-shaped model of 4 and 6 layers (its command line; no NVTX;
    devruns/gpu_thirdparty_compile3.log, the captures 1.1 and 1.25 MB: their kernel sequences are committed,
    devruns/step_oracle.py). Inductor computes the causal mask and the rotary tables inside the first layer's fused
    kernels and fuses each residual add with the next layer's norm; the last layer's backward runs its gradients in
    another order: only the layers between repeat kernel for kernel (before: 3 of 4 layers, 5 of 6, framed from one
    layer's second norm to the next's). A Qwen2 decoder layer is 7 linear layers (q, k, v, o, gate, up, down) and one
    attention: every forward layer holds exactly one forward attention kernel and 7 GEMM kernels, every backward
    layer one attention backward and 14 GEMMs (each linear's two gradients), by kernel name here; all the step's
    attention kernels lie in its layers."""
    import re

    oracle, op_names, codes, starts, _ = compiled_oracle(stem)
    template = codes[starts[-2]:starts[-1]]  # a steady step (the last whole one)
    layers, _ = layers_of(template, op_names)
    names = [op_names[c] for c in template.tolist()]
    gemm = [bool(re.match(r"nvjet_|sm\d+_xmma_gemm|cutlass::Kernel", n)) for n in names]
    attention = {"forward": [bool(re.search(r"sdpa.*fprop|flash_fwd", n)) for n in names],
                 "backward": [bool(re.search(r"sdpa.*bprop|flash_bwd", n)) for n in names]}
    depth = oracle["depth"]
    assert [r.count for r in layers] == [depth, depth]
    for region, phase, gemms in zip(layers, ("forward", "backward"), (7, 14)):
        for a, b in zip(region.bounds, region.bounds[1:]):
            assert (sum(attention[phase][a:b]), sum(gemm[a:b])) == (1, gemms), (phase, a, b)
        assert sum(attention[phase][region.first:region.end]) == sum(attention[phase]) == depth


def own_step_parts(annotated, step_name: str = "step_1") -> list[list]:
    """The annotated export's own forward/backward/optimizer ranges inside `step_name`, in time order, each
    [name, kernels whose launch call starts inside it] (SQL); the step's kernels before its first range
    counted with it (an inferred iteration gives them to the forward they precede)."""
    with sqlite3.connect(f"{annotated.resolve().as_uri()}?mode=ro", uri=True) as con:
        launches = np.array([r[0] for r in con.execute("""SELECT r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND (r.globalTid >> 24) = (k.globalPid >> 24)""")])
        ranges = con.execute("""SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start""").fetchall()
    inside = lambda s, e: int(((launches >= s) & (launches <= e)).sum())  # noqa: E731
    (step,) = [(s, e) for name, s, e in ranges if name == step_name]
    want = [[name, inside(s, e)] for name, s, e in ranges
            if name in ("forward", "backward", "optimizer") and step[0] <= s <= step[1]]
    want[0][1] += inside(*step) - sum(c for _, c in want)
    return want


def phases_against_own_ranges(annotated, tmp_path) -> dict[str, int]:
    """The export stripped of NVTX: its inferred phases of step_1 hold the kernels its own phase ranges of
    step_1 hold (SQL over the annotated export). Returns those counts, by phase."""
    with sqlite3.connect(f"{annotated.resolve().as_uri()}?mode=ro", uri=True) as con:
        launches = np.array([r[0] for r in con.execute("""SELECT r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND (r.globalTid >> 24) = (k.globalPid >> 24)""")])

        def span(name: str) -> list[tuple[int, int]]:
            return con.execute("""SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                WHERE e.eventType = 59 AND coalesce(e.text, s.value) = ? ORDER BY e.start""", (name,)).fetchall()
        step = span("step_1")[0]
        inside = lambda s, e: int(((launches >= s) & (launches <= e)).sum())  # noqa: E731
        want = {p: sum(inside(s, e) for s, e in span(p) if step[0] <= s <= step[1])
                for p in ("forward", "backward", "optimizer")}
    step_kernels = inside(*step)
    want["forward"] += step_kernels - sum(want.values())
    model = range_model(load_trace(without_nvtx(annotated, tmp_path / annotated.name)))
    texts = model.trace.ranges["text"].to_numpy()
    from nsight_tui.parsers.model.iterations import STEP, iteration_ranges

    inferred_step = iteration_ranges(model, STEP)[1]
    assert int(model.kernel_count[inferred_step]) == step_kernels
    for phase, count in want.items():
        (i,) = [i for i in np.flatnonzero(texts == phase).tolist()
                if model.r_start[inferred_step] <= model.r_start[i] <= model.r_end[inferred_step]]
        assert int(model.kernel_count[i]) == count, phase
    return want


@pytest.mark.parametrize("stem", [RESNET, RESNET_CL])
def test_a_lightning_step_reads_like_its_hook_clock_by_its_own_time_not_its_period(captured, stem):
    """Lightning's clock (a Callback's on_train_batch_start/end, synchronised at the end) runs inside the loop:
    the next batch's fetch and host-to-device copy happen before on_train_batch_start, outside it. The step's
    own time (its first launch to its work's end) is within 5% of that clock each step; its period, which
    holds the loop's work between steps, is not (its mean over 5% above: not the figure to compare with it).
    The step's between-steps time holds the batch's copy: SQL, a 4·B·3·S² bytes host-to-device copy in each
    gap between a step's last kernel and the next step's first."""
    from nsight_tui.parsers.analyses.questions import timing

    trace = load_trace(captured(stem))
    model = range_model(trace)
    t = timing(trace, model)
    py = {s["name"]: s["seconds"] * 1e9 for s in python_clock(stem)["steps"]}
    rows = t.steps
    assert [r.step for r in rows] == [n for n in py if n.startswith("step_")]
    for r in rows:
        assert r.own_ns == pytest.approx(py[r.step], rel=0.05), r
        assert r.own_ns + r.between_ns == r.period_ns
    assert np.mean([r.period_ns for r in rows]) > 1.05 * np.mean(list(py[r.step] for r in rows))
    assert t.python_clock_covers == "own"
    config = python_clock(stem)["config"]
    batch_bytes = 4 * config["batch_size"] * 3 * config["image"] ** 2
    found = inference(trace)
    with sqlite3.connect(f"{captured(stem).resolve().as_uri()}?mode=ro", uri=True) as con:
        copies = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND bytes = ?"
                                            " ORDER BY start", (batch_bytes,))]
    steps = [i for i in found.iterations if i.name.startswith("step_")]
    for r, it, nxt in zip(rows, steps, steps[1:]):  # the last step has no gap after it
        assert sum(it.start_ns + r.own_ns - 10**6 < c < nxt.start_ns for c in copies) == 1


def test_a_batch_1_decode_against_the_floor_its_weights_set(captured):
    """HF generate() eager: the memory-bound-decode finding's figures against the model as the script builds it
    (LlamaConfig: vocab 32000, hidden 1024, MLP 2816, 6 layers, 16 heads of 64 / 4 KV heads, untied head; bf16),
    the export's own peak (SQL), and the workload's per-token clock. Each token reads every weight (batch 1):
    their bytes over the peak are the floor; the eager decode runs far above it (the host's launches bound it)."""
    from nsight_tui.parsers.analyses.findings import findings

    vocab, hidden, mlp, layers, kv = 32000, 1024, 2816, 6, 4 * 64
    params = 2 * vocab * hidden + layers * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * mlp + 2 * hidden) + hidden
    path = captured(GENERATE)
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        (peak,) = con.execute("SELECT memoryBandwidth FROM TARGET_INFO_GPU ORDER BY id LIMIT 1").fetchone()
    found = {f.id: f for f in findings(load_trace(path), replay=False)}
    e = found["memory-bound-decode"].evidence
    assert e["weights_bytes"] == pytest.approx(2 * params, rel=1e-4)
    assert e["hbm_bytes_per_s"] == peak
    assert e["floor_ns_per_token"] == pytest.approx(2 * params / peak * 1e9, rel=1e-4)
    calls = [s for s in python_clock(GENERATE)["steps"] if s["name"].startswith("step_")]
    python_token_ns = np.median([t for s in calls for t in s["decode_token_s"]]) * 1e9
    assert e["share_of_hbm_peak"] == pytest.approx(2 * params / peak * 1e9 / python_token_ns, rel=0.15)
    assert e["share_of_hbm_peak"] < 0.05 and not e["memory_bound"]
    assert e["kernel_ns_per_token"] > 2 * e["floor_ns_per_token"]
    # the decode steps' kernel time: most of the steady calls' kernel time (SQL), the prefills' the rest
    first = next(i for i in inference(load_trace(path)).iterations if i.name == "step_0").start_ns
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        (kernel_ns,) = con.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ?",
                                   (first,)).fetchone()
    decode_ns = e["kernel_ns_per_token"] * e["tokens_per_call"] * len(calls)
    assert 0.5 * kernel_ns < decode_ns < kernel_ns
    assert "not the bound" in found["memory-bound-decode"].title
    from nsight_tui.tui.viewmodels.findings import EVIDENCE_VIEW, KERNELS
    assert EVIDENCE_VIEW["memory-bound-decode"] == KERNELS  # enter shows the decode's kernels, not the range


def test_the_tui_findings_on_a_run_dead_in_its_first_forward_lead_with_the_oom(async_trace, tmp_path):
    """Qwen2-shaped, batch 256 x 4096 tokens, out of memory in its first forward: the TUI's findings view runs no
    step-time rule (no step finished) and says the failed allocation instead. Truths: SQL (the runtime call that
    returned cudaErrorMemoryAllocation, 2) and PyTorch's message in the record beside the export."""
    from nsight_tui.tui.viewmodels.findings import build

    stem = "oom_qwen2_b256.oom"
    path = tmp_path / f"{stem}.sqlite"
    shutil.copyfile(async_trace(THIRD / f"{stem}.sqlite.xz"), path)
    shutil.copyfile(THIRD / f"{stem}.json", tmp_path / f"{stem}.json")
    record = json.loads((THIRD / f"{stem}.json").read_text())
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        (call,) = con.execute("""SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                                 WHERE r.returnValue = 2 ORDER BY r.start LIMIT 1""").fetchone()
    trace = load_trace(path)
    view = build(trace, range_model(trace), "process")
    assert view.findings == [] and view.steps == 0
    text = view.none_text()
    assert text.startswith("Out of GPU memory:") and f"{call} returned 2 in {record['range']}" in text
    assert "asked for 4.00 GiB" in text and "Tried to allocate 4.00 GiB" in record["message"]


def test_the_findings_view_says_all_fixes_together_as_the_report_does_never_more_than_the_step(captured):
    """A launch-bound ResNet-50: its findings' savings overlap (the graph fix alone takes most of the
    step), so their sum claims more than every fix does together. The view says what the report says:
    one replay with every fix (its estimates capped at the step that replay leaves), at most the step
    period."""
    from nsight_tui.parsers.analyses.findings import answers
    from nsight_tui.tui.viewmodels.findings import build

    path = captured(RESNET)
    trace = load_trace(path)
    view = build(trace, range_model(trace), "process")
    doc = answers(trace)
    assert view.together is not None
    assert view.together[0] == pytest.approx(doc.combined_saving_ms_per_step, abs=1e-9)
    assert view.together[0] <= view.step_ns / 1e6 + 1e-9
    how = "replay + estimates" if "plus the estimates" in doc.combined_basis else "replay"
    assert view.scope == (f"all fixes save {view.together[0]:.2f} ms/step ({how}) of {view.step_ns / 1e6:,.2f} "
                          f"ms/step measured (CPU clock, mean of {view.steps})")
    assert sum(f.saving_ms_per_step for f in view.findings) > view.together[0]  # what the sum claimed
