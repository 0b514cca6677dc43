"""The planted causes (capture/plant.py) that can run on a CPU, and the refusals of those that
cannot: where each plant acts in the iteration, and what it passes to DDP and nsys."""
from __future__ import annotations

import contextlib

import pytest

from helpers import cli_process
from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

torch = pytest.importorskip("torch")

from nsight_tui.capture import ddp, plant  # noqa: E402
from nsight_tui.capture.annotate import NullAnnotator  # noqa: E402
from nsight_tui.capture.runner import CaptureConfig  # noqa: E402
from nsight_tui.capture.workload import WorkloadConfig, run_workload  # noqa: E402


class StackAnnotator(NullAnnotator):
    """Keeps the open ranges and, per iteration, the phases closed so far."""

    def __init__(self):
        self.stack: list[str] = []
        self.closed: list[str] = []

    @contextlib.contextmanager
    def range(self, name):
        if not self.stack:
            self.closed = []
        self.stack.append(name)
        try:
            yield
        finally:
            self.stack.pop()
            if len(self.stack) == 1:
                self.closed.append(name)


def tiny(**overrides) -> WorkloadConfig:
    return WorkloadConfig(**{**dict(model="tiny", ctx=16, batch=2, steps=2, warmup=1, device="cpu"), **overrides})


def _items_between_phases(monkeypatch, config):
    """Where .item() was called outside any phase: (iteration, phases closed before it)."""
    rec = StackAnnotator()
    seen = []
    real = torch.Tensor.item

    def spy(self):
        if len(rec.stack) == 1:  # inside the iteration's range, in no phase (AdamW calls .item() in its own)
            seen.append((rec.stack[0], tuple(rec.closed)))
        return real(self)

    monkeypatch.setattr(torch.Tensor, "item", spy)
    run_workload(config, rec, log=lambda line: None)
    return seen


def test_item_before_step_syncs_between_backward_and_optimizer(monkeypatch):
    got = _items_between_phases(monkeypatch, tiny(plant="item-before-step", phase_sync=False))
    assert got == [(n, ("forward", "backward")) for n in ("warmup_0", "step_0", "step_1")]
    got = _items_between_phases(monkeypatch, tiny(plant="item", phase_sync=False))
    assert got == [(n, ("forward",)) for n in ("warmup_0", "step_0", "step_1")]
    assert _items_between_phases(monkeypatch, tiny(phase_sync=False)) == []


def test_a_plant_every_other_step_acts_in_the_odd_ones_only(monkeypatch):
    """`--plant-every 2`: the change in step_1, step_3, ... and its absence in the others, in one
    capture; the dry run's command carries it and names the output for it."""
    got = _items_between_phases(monkeypatch, tiny(plant="item", phase_sync=False, steps=4, warmup=2, plant_every=2))
    assert got == [(n, ("forward",)) for n in ("warmup_1", "step_1", "step_3")]
    done = cli_process.run(["capture", "--plant", "item", "--plant-every", "2", "--no-sync", "--dry-run"],
                           text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--plant item --plant-every 2" in done.stdout and "_item-every2.sqlite" in done.stdout
    done = cli_process.run(["capture", "--plant", "foreach-off", "--plant-every", "2", "--dry-run"], text=True,
                           timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "nsight-tui capture: --plant-every needs a plant that acts inside a step: host-sleep, item, "
        "item-before-step, pageable-input, fp32-gemm, no-autocast, attention-manual"]


def test_pageable_input_every_other_step_copies_the_pinned_batch_in_the_others():
    seen = []

    class Batch:
        def __init__(self, kind):
            self.kind = kind

        def to(self, device, non_blocking):
            seen.append((self.kind, non_blocking))
            return torch.zeros(1)

    planter = plant.Planter("pageable-input", torch, torch.device("cpu"), every=2)
    planter.host_batch, planter.pinned_batch = Batch("pageable"), Batch("pinned")  # (pinning needs CUDA)
    for name in ("step_0", "step_1", "step_2", "step_3"):
        planter.begin(name)
        planter.step_start()
    assert seen == [("pinned", True), ("pageable", False)] * 2


def test_fp32_gemm_every_other_step_runs_the_odd_steps_matmuls_at_fp32_and_the_others_at_tf32(monkeypatch):
    """The precision each iteration's forward matmuls were launched at, read where the model's
    linear layers run: "highest" (fp32 on the CUDA cores) in the planted iterations, "high" (TF32
    tensor cores) in the others; `--tf32` beside the plant is refused."""
    rec = StackAnnotator()
    seen: dict[str, set[str]] = {}
    real = torch.nn.functional.linear

    def spy(*args, **kwargs):
        seen.setdefault(rec.stack[0], set()).add(torch.get_float32_matmul_precision())
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "linear", spy)
    before = torch.get_float32_matmul_precision()
    try:  # the plant sets the process's precision: this test process's next tests run at the old one
        run_workload(tiny(plant="fp32-gemm", steps=4, warmup=2, plant_every=2), rec, log=lambda line: None)
    finally:
        torch.set_float32_matmul_precision(before)
    assert seen == {n: {"highest" if n.endswith(("_1", "_3")) else "high"}
                    for n in ("warmup_0", "warmup_1", "step_0", "step_1", "step_2", "step_3")}
    with pytest.raises(ValueError, match="leave out --tf32"):
        plant.check("fp32-gemm", train=True, cuda=True, distributed=False, phase_sync=True, every=2, tf32=True)


def test_no_autocast_every_other_step_runs_the_odd_steps_forward_in_fp32_and_the_others_in_bf16(monkeypatch):
    """The dtype each iteration's forward matmuls ran in, read off their outputs where the model's
    linear layers run: fp32 in the planted iterations (bf16 autocast off), bf16 in the others; the
    plant without --dtype bf16 is refused."""
    rec = StackAnnotator()
    seen: dict[str, set[str]] = {}
    real = torch.nn.functional.linear

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.setdefault(rec.stack[0], set()).add(str(out.dtype))
        return out

    monkeypatch.setattr(torch.nn.functional, "linear", spy)
    run_workload(tiny(plant="no-autocast", dtype="bf16", steps=4, warmup=2, plant_every=2), rec, log=lambda line: None)
    assert seen == {n: {"torch.float32" if n.endswith(("_1", "_3")) else "torch.bfloat16"}
                    for n in ("warmup_0", "warmup_1", "step_0", "step_1", "step_2", "step_3")}
    with pytest.raises(ValueError, match="needs --dtype bf16"):
        run_workload(tiny(plant="no-autocast", steps=2, warmup=1, plant_every=2), rec, log=lambda line: None)
    plant_args = ["capture", "--plant", "no-autocast", "--plant-every", "2", "--no-sync", "--dry-run"]
    done = cli_process.run([*plant_args, "--dtype", "bf16"], text=True, timeout=120)
    assert done.returncode == 0 and "_bf16_async_no-autocast-every2.sqlite" in done.stdout, done.stderr
    done = cli_process.run(plant_args, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "nsight-tui capture: plant no-autocast turns bf16 autocast off step by step: it needs --dtype bf16"]


def test_attention_manual_every_other_step_writes_the_odd_steps_attention_out_and_fuses_the_others(monkeypatch):
    """Which attention each iteration ran, read where SDPA and softmax are called: the planted
    iterations' softmax (written out) and no SDPA, the others' SDPA and no softmax; every iteration
    the same weights (one model); the capture's name says the plant."""
    rec = StackAnnotator()
    seen: dict[str, set[str]] = {}
    sdpa, softmax = torch.nn.functional.scaled_dot_product_attention, torch.softmax

    def spy_sdpa(*args, **kwargs):
        seen.setdefault(rec.stack[0], set()).add("sdpa")
        return sdpa(*args, **kwargs)

    def spy_softmax(*args, **kwargs):
        seen.setdefault(rec.stack[0], set()).add("softmax")
        return softmax(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy_sdpa)
    monkeypatch.setattr(torch, "softmax", spy_softmax)
    run_workload(tiny(plant="attention-manual", steps=4, warmup=2, plant_every=2), rec, log=lambda line: None)
    assert seen == {n: {"softmax" if n.endswith(("_1", "_3")) else "sdpa"}
                    for n in ("warmup_0", "warmup_1", "step_0", "step_1", "step_2", "step_3")}
    done = cli_process.run(["capture", "--plant", "attention-manual", "--plant-every", "2", "--no-sync", "--dry-run"],
                           text=True, timeout=120)
    assert done.returncode == 0 and "_async_attention-manual-every2.sqlite" in done.stdout, done.stderr


@pytest.mark.parametrize("name, overrides, words", [
    ("cuda-graph", {}, "needs CUDA"),
    ("capturable", {}, "needs CUDA"),
    ("ddp-one-bucket", {}, "--ddp"),
    ("item-before-step", {"mode": "forward"}, "--mode train"),
])
def test_plants_that_cannot_run_here_say_why_before_any_work(name, overrides, words):
    with pytest.raises(ValueError, match=words):
        run_workload(tiny(plant=name, **overrides), NullAnnotator(), log=lambda line: None)


def test_cuda_graph_refuses_phase_syncs_even_on_cuda():
    with pytest.raises(ValueError, match="no-phase-sync"):
        plant.check("cuda-graph", train=True, cuda=True, distributed=False, phase_sync=True)
    plant.check("cuda-graph", train=True, cuda=True, distributed=False, phase_sync=False)
    with pytest.raises(ValueError, match="one process"):
        plant.check("cuda-graph", train=True, cuda=True, distributed=True, phase_sync=False)


def test_graph_twins_share_the_optimizer_and_nsys_records_graph_kernels():
    assert plant.optimizer_kwargs("capturable") == plant.optimizer_kwargs("cuda-graph") == \
        {"foreach": True, "capturable": True}
    graph = CaptureConfig(plant="cuda-graph", phase_sync=False, batch=1)
    assert "--cuda-graph-trace=node" in graph.nsys_options()
    assert graph.stem == "small_ctx128_b1_nosync_cuda-graph"
    assert CaptureConfig(plant="capturable", phase_sync=False, batch=1).nsys_options() == []


def test_one_bucket_reaches_ddp():
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not built in")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = torch.nn.Linear(4, 4)
        wrapped = ddp.wrap(model, ddp.Distributed(0, 0, 2), torch.device("cpu"), **plant.ddp_kwargs("ddp-one-bucket"))
        default = ddp.wrap(torch.nn.Linear(4, 4), ddp.Distributed(0, 0, 2), torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    assert wrapped.bucket_bytes_cap == plant.ONE_BUCKET_MB * 2**20
    # larger than every model here: all gradients in one bucket (2.7B in fp32: 10.8 GB)
    assert wrapped.bucket_bytes_cap > 2.7e9 * 4
    assert default.bucket_bytes_cap == 25 * 2**20


def test_capture_refuses_a_plant_that_cannot_run_before_nsys_starts():

    done = cli_process.run(["capture", "--plant", "cuda-graph", "--dry-run"], text=True, timeout=120)
    assert done.returncode == 2 and "nsys profile" not in done.stdout
    assert done.stderr.strip().splitlines() == [
        "nsight-tui capture: plant cuda-graph needs CUDA, one process and --no-phase-sync (nothing may "
        "synchronise inside a captured graph)"]


def _sync_depths(monkeypatch, config):
    """The NVTX ranges open at each device synchronise of the measured steps' iterations."""
    from nsight_tui.capture import workload

    rec = StackAnnotator()
    seen = []
    monkeypatch.setattr(workload._Workload, "sync", lambda self: seen.append(tuple(rec.stack)))
    run_workload(config, rec, log=lambda line: None)
    return [s for s in seen if not s or s[0].startswith("step_")]


def test_where_each_sync_mode_synchronises(monkeypatch):
    """Phase syncs: at the end of every phase, inside it. --no-phase-sync: once per step inside the
    step's range. --no-sync: never inside a range; once after each step's range closes (the step
    mark stays the GPU's pace, the range is the CPU's span)."""
    phase = _sync_depths(monkeypatch, tiny())
    assert {s for s in phase if s} == {(f"step_{i}", p) for i in (0, 1) for p in ("forward", "backward", "optimizer")}
    step = _sync_depths(monkeypatch, tiny(phase_sync=False))
    assert [s for s in step if s] == [("step_0",), ("step_1",)]
    none = _sync_depths(monkeypatch, tiny(phase_sync=False, range_sync=False))
    assert none and all(s == () for s in none)
    assert len(none) >= 2  # one after each measured step at least


def test_no_sync_in_ranges_needs_no_phase_syncs():
    with pytest.raises(ValueError, match="phase_sync off"):
        run_workload(tiny(range_sync=False), NullAnnotator(), log=lambda line: None)
    assert CaptureConfig(phase_sync=False, range_sync=False).stem.endswith("_async")
    assert "--no-range-sync" in CaptureConfig(phase_sync=False, range_sync=False).workload_args()


def _aten_ops(fn) -> list[str]:
    """The aten ops `fn` runs (forward and whatever backward it calls), in order."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    with Record() as rec:
        fn()
    return rec.ops


@pytest.mark.parametrize("name, activation", [("gelu-unfused", "gelu-manual"), ("gelu-fused", "gelu-tanh"),
                                              ("", "gelu"), ("host-sleep", "gelu")])
def test_gelu_plants_reach_every_block_of_the_model(name, activation):
    from nsight_tui.capture.workload import _Workload

    work = _Workload(tiny(plant=name), NullAnnotator())
    assert plant.activation(name) == activation
    assert [b.mlp.activation for b in work.gpt2.blocks] == [activation] * len(work.gpt2.blocks)


def test_gelu_twins_compute_the_same_function_the_unfused_one_in_a_chain_of_ops():
    from nsight_tui.capture.model import MLP

    torch.manual_seed(0)
    x = torch.randn(64, 32, dtype=torch.float64)
    out, ops, grads = {}, {}, {}
    for act in ("gelu-manual", "gelu-tanh"):
        mlp = MLP(8, act)
        xi = x.clone().requires_grad_(True)

        def run(mlp=mlp, xi=xi, act=act):
            y = mlp.act(xi)
            out[act] = y.detach()
            y.sum().backward()

        ops[act] = _aten_ops(run)
        grads[act] = xi.grad
    # the written-out formula is GELU's tanh approximation, forward and backward
    assert torch.allclose(out["gelu-manual"], out["gelu-tanh"], atol=1e-12)
    assert torch.allclose(grads["gelu-manual"], grads["gelu-tanh"], atol=1e-12)
    # the ops that compute (views and the test's own sum and its seed gradient left out)
    math = {a: [o for o in ops[a] if o not in ("detach", "expand", "ones_like")] for a in ops}
    split = {a: math[a].index("sum") for a in math}
    # nanoGPT's formula, left to right: 0.5 * x, x ** 3, its scale, x + it, the scale, tanh, 1 + it, the product
    assert math["gelu-manual"][:split["gelu-manual"]] == ["mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"]
    assert math["gelu-tanh"][:split["gelu-tanh"]] == ["gelu"]
    # its backward is a chain too (each op's derivative): 11 pointwise ops against one gelu_backward
    assert len(math["gelu-manual"][split["gelu-manual"] + 1:]) == 11
    assert math["gelu-tanh"][split["gelu-tanh"] + 1:] == ["gelu_backward"]


def test_gelu_unfused_trains_on_the_cpu():
    got = run_workload(tiny(plant="gelu-unfused", phase_sync=False), NullAnnotator(), log=lambda line: None)
    assert len(got) == 3


def test_a_plant_on_one_rank_acts_there_alone():
    """`--plant-rank R` under torchrun: the plant on the process whose RANK is R (a straggler the
    others wait for in their collectives), none on the others; a process without RANK is rank 0."""
    from nsight_tui.capture.workload import build_parser, plant_here

    args = build_parser().parse_args(["--plant", "host-sleep", "--plant-rank", "1"])
    assert [plant_here(args.plant, args.plant_rank, {"RANK": r}) for r in ("0", "1", "2")] == ["", "host-sleep", ""]
    assert plant_here(args.plant, args.plant_rank, {}) == ""
    assert plant_here("host-sleep", None, {"RANK": "3"}) == "host-sleep"


def test_a_gpu_bound_straggler_keeps_fp32_where_the_others_run_tf32():
    """`--tf32 --plant fp32-gemm --plant-rank 1`: rank 1 alone runs fp32 GEMMs, the others TF32 (a GPU-bound
    straggler); without --plant-rank the two together stay refused (plants.check)."""
    from nsight_tui.capture.workload import build_parser, plant_here, tf32_here

    args = build_parser().parse_args(["--tf32", "--plant", "fp32-gemm", "--plant-rank", "1"])
    here = {r: plant_here(args.plant, args.plant_rank, {"RANK": r}) for r in ("0", "1")}
    assert here == {"0": "", "1": "fp32-gemm"}
    assert [tf32_here(here[r], args.plant_rank, args.tf32) for r in ("0", "1")] == [True, False]
    assert tf32_here("fp32-gemm", None, True) is True  # not a straggler: plants.check refuses it


def test_an_uneven_batch_is_one_ranks_larger_share():
    """`--plant uneven-batch --plant-rank 1`: rank 1 runs 1.5x the batch (a straggler of the same kernels,
    longer), the others the workload's; refused without data-parallel ranks."""
    from nsight_tui.capture import plant as plants
    from nsight_tui.capture.workload import build_parser, plant_here

    args = build_parser().parse_args(["--batch", "8", "--plant", "uneven-batch", "--plant-rank", "1"])
    sizes = [plants.batch(plant_here(args.plant, args.plant_rank, {"RANK": r}), args.batch) for r in ("0", "1")]
    assert sizes == [8, 12] and plants.batch("uneven-batch", 1) == 2
    with pytest.raises(ValueError, match="needs data-parallel ranks"):
        plants.check("uneven-batch", train=True, cuda=True, distributed=False, phase_sync=False)
