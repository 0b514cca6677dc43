"""The profiled workload: GPT-2 training steps or forward passes, annotated with NVTX.

Run as `python -m nsight_tui.capture.workload ...` (the runner starts it under `nsys profile`), or call
`run_workload` directly (tests, on a CPU). Each iteration is an NVTX range `warmup_N` or `step_N`
holding `forward`, `backward`, `optimizer`; every phase ends with a device synchronise, so a
range's length is the time its GPU work took. The run's configuration and the step times
measured here are written into the trace as NVTX marks (see capture.annotate).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from nsight_tui.capture import ddp
from nsight_tui.capture import plant as plants
from nsight_tui.capture.plant import PLANTS, Planter, optimizer_kwargs
from nsight_tui.parsers.read import conventions
from nsight_tui.capture.annotate import (Annotator, NullAnnotator, NvtxAnnotator, PathTracking, config_message,
                                         flops_message,
                                         oom_message, step_message)
from nsight_tui.capture.sizes import (ATTENTIONS, DEFAULT_BATCH, DTYPES, MODEL_SIZES, MODES, OOM_EXIT_CODE, OP_RANGES,
                                      VOCAB, RunSettings)


@dataclass(frozen=True)
class WorkloadConfig(RunSettings):
    device: str = "cuda"

    def validate(self) -> None:
        if self.model not in MODEL_SIZES:
            raise ValueError(f"unknown model {self.model!r}; choose from {', '.join(MODEL_SIZES)}")
        if self.mode not in MODES or self.dtype not in DTYPES or self.attention not in ATTENTIONS:
            raise ValueError(f"bad mode/dtype/attention: {self.mode}/{self.dtype}/{self.attention}")
        if self.ctx < 1 or self.batch < 1 or self.steps < 0 or self.warmup < 0:
            raise ValueError("ctx and batch must be >= 1, steps and warmup >= 0")
        if self.op_ranges not in OP_RANGES:
            raise ValueError(f"op ranges must be one of {', '.join(OP_RANGES)}, not {self.op_ranges!r}")
        if not self.range_sync and self.phase_sync:
            raise ValueError("no synchronise inside the ranges (range_sync off) needs phase_sync off too")
        if not self.nvtx and (self.op_ranges != "none" or self.backward_ranges):
            raise ValueError("no NVTX (--no-nvtx) leaves no room for op ranges or backward ranges")


@dataclass
class StepRecord:
    name: str
    seconds: float
    phases: dict[str, float]
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # conventions.STEP_MEMORY


def oom_error_type():
    import torch

    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


class _Workload:
    """The model, optimizer and fixed batch of one configuration (one rank of it under
    torchrun), and one iteration of it."""

    def __init__(self, config: WorkloadConfig, annotator: Annotator, distributed=None):
        import torch
        import torch.nn.functional as F

        from nsight_tui.capture.model import GPT2, ModelDims, add_backward_ranges

        config.validate()
        self.config = config
        self.annotator = annotator
        self.torch = torch
        self.distributed = distributed if distributed is not None else ddp.from_environment()
        self.device = ddp.setup(self.distributed, config.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available to this PyTorch build")
        self.cuda = self.device.type == "cuda"
        self.train = config.mode == "train"
        plants.check(config.plant, train=self.train, cuda=self.cuda, distributed=self.distributed.active,
                     phase_sync=config.phase_sync, every=config.plant_every, tf32=config.tf32,
                     bf16=config.dtype == "bf16")
        if config.tf32:
            # TF32 tensor-core matmuls for fp32 tensors ("highest", PyTorch's default, keeps fp32
            # GEMMs on the CUDA cores).
            torch.set_float32_matmul_precision("high")
        torch.manual_seed(0)
        d_model, n_layers, n_heads = MODEL_SIZES[config.model]
        dims = ModelDims(d_model=d_model, n_layers=n_layers, n_heads=n_heads, ctx=config.ctx, vocab=VOCAB)
        self.gpt2 = GPT2(dims, attention=config.attention, annotator=annotator,
                         activation=plants.activation(config.plant)).to(self.device)
        self.gpt2.train(self.train)
        if config.backward_ranges and self.train:
            add_backward_ranges(self.gpt2, annotator)
        self.model = ddp.wrap(self.gpt2, self.distributed, self.device, **plants.ddp_kwargs(config.plant))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, **optimizer_kwargs(config.plant)) \
            if self.train else None
        self.planter = Planter(config.plant, torch, self.device, config.plant_every)
        # One fixed batch, made once: the profile should hold the model's kernels, not data loading.
        tokens = torch.randint(0, VOCAB, (plants.batch(config.plant, config.batch), config.ctx + 1), device=self.device)
        self.inputs, self.targets = tokens[:, :-1], tokens[:, 1:]
        self.autocast = torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                                       enabled=config.dtype == "bf16")
        self.F = F
        self.graphed = None
        if config.plant == plants.GRAPH:
            from nsight_tui.capture.graphed import GraphedStep

            self.graphed = GraphedStep(torch)
        self.sync()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def profiled(self, on: bool):
        """cudaProfilerStart/Stop around one iteration (`capture --ncu`): Nsight Compute started with
        `--profile-from-start off` profiles the kernels launched in between by EVERY thread, the
        autograd thread's backward included (an NVTX include filter follows the launching thread's
        own push/pop stack and would lose them). Outside ncu the two calls do nothing."""
        if not (on and self.cuda):
            yield
            return
        self.sync()  # nothing of the previous iteration is still launching into the window
        self.torch.cuda.profiler.start()
        try:
            yield
        finally:
            self.sync()
            self.torch.cuda.profiler.stop()

    def device_name(self) -> str:
        return self.torch.cuda.get_device_name(self.device) if self.cuda else "cpu"

    def memory_now(self) -> dict[str, int]:
        """torch's caching allocator: bytes in live tensors and in its segments, now."""
        cuda = self.torch.cuda
        return {conventions.ALLOCATED: int(cuda.memory_allocated(self.device)),
                conventions.RESERVED: int(cuda.memory_reserved(self.device))}

    def _phase(self, name: str, phases: dict[str, float], work: Callable[[], object],
               memory: dict[str, dict[str, int]] | None = None):
        if self.cuda and memory is not None:
            self.torch.cuda.reset_peak_memory_stats(self.device)
        start = time.perf_counter()
        with self.annotator.range(name):
            result = work()
            if self.config.phase_sync:
                self.sync()
        phases[name] = time.perf_counter() - start
        if self.cuda and memory is not None:  # the allocator's books are on the host: no sync needed
            cuda = self.torch.cuda
            memory[name] = {**self.memory_now(),
                            conventions.PEAK_ALLOCATED: int(cuda.max_memory_allocated(self.device)),
                            conventions.PEAK_RESERVED: int(cuda.max_memory_reserved(self.device))}
        return result

    def _forward_loss(self):
        with contextlib.nullcontext() if self.planter.autocast_off else self.autocast:
            logits = self.model(self.inputs)
            return self.F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.targets.reshape(-1))

    def _optimizer_step(self):
        assert self.optimizer is not None  # only called when training
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _captured_step(self):
        loss = self._forward_loss()
        loss.backward()
        assert self.optimizer is not None
        self.optimizer.step()

    def capture_graph(self) -> None:
        """The cuda-graph plant: capture the step once, before the first measured iteration."""
        assert self.graphed is not None and self.optimizer is not None
        self.graphed.capture(self._captured_step, self.optimizer, self.annotator, self.sync)

    def iteration(self, name: str) -> StepRecord:
        """One `name` range holding forward (+ backward + optimizer when training); with the
        step captured as a CUDA graph, the range holds its replay (no phases)."""
        if self.graphed is not None and self.graphed.graph is not None:
            with self.annotator.range(name):
                start = time.perf_counter()
                self.graphed.replay()
                self.sync()
                seconds = time.perf_counter() - start
            return StepRecord(name, seconds, {})
        with self.graphed.warmup() if self.graphed is not None else contextlib.nullcontext():
            return self._eager_iteration(name)

    def _eager_iteration(self, name: str) -> StepRecord:
        phases: dict[str, float] = {}
        memory: dict[str, dict[str, int]] = {conventions.MEMORY_START: self.memory_now()} if self.cuda else {}
        with self.annotator.range(name):
            start = time.perf_counter()
            self.planter.begin(name)
            if self.planter.attention is not None:
                self.gpt2.set_attention(self.planter.attention)
            self.planter.step_start()
            if self.train:
                loss = self._phase("forward", phases, self._forward_loss, memory)
                self.planter.after_forward(loss)
                self._phase("backward", phases, loss.backward, memory)
                self.planter.before_optimizer(loss)
                self._phase("optimizer", phases, self._optimizer_step, memory)
            else:
                with self.torch.no_grad():
                    self._phase("forward", phases, self._forward_loss, memory)
            if not self.config.phase_sync and self.config.range_sync:
                self.sync()  # one synchronise, at the step's end, inside its range
        if not self.config.range_sync:
            self.sync()  # after the range: the range is the CPU's span, the mark the GPU's pace
        seconds = time.perf_counter() - start
        return StepRecord(name, seconds, phases, memory)


def run_workload(config: WorkloadConfig, annotator: Annotator,
                 log: Callable[[str], None] = print, counts: list[dict] | None = None) -> list[StepRecord]:
    """Build the model, emit the config mark (and the FLOP/byte counts, when given), run
    warmup + measured iterations; return their times."""
    work = _Workload(config, annotator)
    distributed = work.distributed
    annotator.mark(config_message({**config.metadata(), "device": work.device_name(),
                                   "torch": work.torch.__version__, **distributed.metadata()}))
    for row in counts or []:
        annotator.mark(flops_message(row))
    if distributed.rank != 0:
        log = lambda line: None  # noqa: E731 - one rank speaks for the run
    log(f"{config.model}: {work.gpt2.n_params() / 1e6:.1f}M parameters, batch {config.batch}, ctx {config.ctx}, "
        f"{config.mode}, {config.dtype}{' (TF32 matmuls)' if config.tf32 else ''}, {config.attention} attention, "
        f"on {config.device}")
    names = conventions.iteration_names(config.warmup, config.steps)
    report_every = 1 if len(names) <= 20 else max(1, len(names) // 10)
    records: list[StepRecord] = []
    # emit_nvtx: PyTorch's own NVTX range around every op (forward, on this thread) and every
    # backward node (on the autograd thread), with the sequence numbers that pair them.
    emit = work.torch.autograd.profiler.emit_nvtx() if config.op_ranges == "emit-nvtx" else contextlib.nullcontext()
    with emit:
        for index, name in enumerate(names):
            if work.graphed is not None and work.graphed.graph is None and conventions.STEP_RANGE.match(name):
                work.capture_graph()
            with work.profiled(name == config.profile_step):
                record = work.iteration(name)
            annotator.mark(step_message(name, record.seconds, record.phases, record.memory))
            records.append(record)
            if index % report_every == 0 or index == len(names) - 1:
                detail = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in record.phases.items())
                log(f"  [{index + 1}/{len(names)}] {name}: {record.seconds * 1e3:.1f} ms ({detail})")
    ddp.teardown(distributed)
    return records


def count_iteration(config: WorkloadConfig) -> list[dict]:
    """FLOPs and bytes per NVTX range path of one steady-state iteration (capture.counting):
    one uncounted iteration first (AdamW creates its state on its first step), then one
    counted. Nothing goes to NVTX: this runs outside the profiled process."""
    from dataclasses import replace

    from nsight_tui.capture.counting import CountingMode, PathTracker

    if config.plant == "ddp-one-bucket":  # the count runs one process; the bucket layout changes no FLOP
        config = replace(config, plant="")
    tracker = PathTracker()
    work = _Workload(config, tracker)
    work.iteration("warmup_0")
    tracker.opened.clear()
    with CountingMode(tracker, work.device) as mode:
        work.iteration("step_0")
    work.sync()
    rows = mode.rows()
    for row in rows:
        row["formulas"] = {op: mode.formulas[op] for op in row["ops"] if op in mode.formulas}
    return rows


def _write_status(path: str | None, status: dict) -> None:
    if path and ddp.from_environment().rank == 0:  # under torchrun, rank 0 reports for the run
        Path(path).write_text(json.dumps(status))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nsight_tui.capture.workload",
                                description="NVTX-annotated GPT-2 workload (normally started by `nsight-tui capture`).")
    p.add_argument("--model", default="small", choices=list(MODEL_SIZES))
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--mode", default="train", choices=MODES)
    p.add_argument("--dtype", default="fp32", choices=DTYPES)
    p.add_argument("--attention", default="manual", choices=ATTENTIONS)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--tf32", action="store_true", help="allow TF32 tensor-core matmuls for fp32 tensors")
    p.add_argument("--op-ranges", default="none", choices=OP_RANGES,
                   help="PyTorch's op ranges: autograd-nvtx or autograd-shapes-nvtx (nsys turns them on; recorded here "
                   "only) or "
                   "emit-nvtx (torch.autograd.profiler.emit_nvtx around the loop)")
    p.add_argument("--backward-ranges", action="store_true",
                   help="backward:<part> ranges around each annotated part's backward (module hooks)")
    p.add_argument("--plant", default="", choices=["", *PLANTS], help="plant a known cause (capture/plant.py)")
    p.add_argument("--plant-every", type=int, default=1, metavar="N",
                   help="the plant in every Nth iteration only (step_1, step_3, ... with 2), its absence in the others")
    p.add_argument("--plant-rank", type=int, default=None, metavar="R",
                   help="under torchrun, the plant on rank R alone (a straggler), none on the others (with "
                   "--tf32 and fp32-gemm: rank R's GEMMs fp32, the others' TF32)")
    p.add_argument("--no-phase-sync", action="store_true", help="synchronise once per step, not after every phase")
    p.add_argument("--no-range-sync", action="store_true",
                   help="with --no-phase-sync: the step's synchronise after its NVTX range, none inside any range")
    p.add_argument("--profile-step", default="", metavar="NAME",
                   help="call cudaProfilerStart/Stop around this iteration (step_1) for ncu --profile-from-start off")
    p.add_argument("--no-nvtx", action="store_true",
                   help="no NVTX ranges and no marks at all: an unannotated trace (the step times go to --status-file)")
    p.add_argument("--status-file", help="write a JSON status here: ok with the step times, or oom")
    counts = p.add_mutually_exclusive_group()
    counts.add_argument("--count-out", metavar="FILE",
                        help="count FLOPs and bytes of one iteration per range path into FILE (JSON) and exit; "
                        "no NVTX, nothing profiled (capture runs this before nsys)")
    counts.add_argument("--counts-in", metavar="FILE",
                        help="record the counts in FILE (from --count-out) as nsight-tui:flops marks")
    return p


def _count(config: WorkloadConfig, path: str) -> int:
    """The --count-out pass: one line on stderr and exit 1 if counting fails (the capture
    then goes on without counts)."""
    from nsight_tui.render.output import write_atomic

    try:
        rows = count_iteration(config)
    except Exception as exc:  # noqa: BLE001 - any failure only costs the counts, never the capture
        print(f"workload: counting FLOPs failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    write_atomic(path, json.dumps({"counts": rows}) + "\n", overwrite=True)
    total = sum(r["flops"] for r in rows)
    print(f"counted one iteration: {total / 1e9:,.1f} GFLOP, {sum(r['bytes'] for r in rows) / 1e9:,.2f} GB "
          f"in {len(rows)} range paths -> {path}", flush=True)
    return 0


def _read_counts(path: str | None) -> list[dict]:
    if not path:
        return []
    try:
        rows = json.loads(Path(path).read_text())["counts"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"workload: ignoring the counts in {path}: {exc}", file=sys.stderr)
        return []
    return rows if isinstance(rows, list) else []


def plant_here(plant: str, plant_rank: int | None, env) -> str:
    """The plant this process runs: `plant`, or none where --plant-rank names another rank (torchrun's RANK;
    a process without one is rank 0)."""
    return plant if plant_rank is None or int(env.get("RANK", "0")) == plant_rank else ""


def tf32_here(plant: str, plant_rank: int | None, tf32: bool) -> bool:
    """--tf32 on this process: a straggler planted fp32-gemm (--plant-rank) runs its own fp32 GEMMs while the
    other ranks keep --tf32 (a GPU-bound straggler, where host-sleep is a CPU-bound one)."""
    return tf32 and not (plant == "fp32-gemm" and plant_rank is not None)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.plant = plant_here(args.plant, args.plant_rank, os.environ)
    args.tf32 = tf32_here(args.plant, args.plant_rank, args.tf32)
    config = WorkloadConfig(model=args.model, ctx=args.ctx, mode=args.mode, dtype=args.dtype,
                            attention=args.attention, batch=args.batch, steps=args.steps,
                            warmup=args.warmup, device=args.device, tf32=args.tf32,
                            plant=args.plant, plant_every=args.plant_every, phase_sync=not args.no_phase_sync,
                            range_sync=not args.no_range_sync,
                            op_ranges=args.op_ranges,
                            backward_ranges=args.backward_ranges, nvtx=not args.no_nvtx,
                            profile_step=args.profile_step)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("workload: PyTorch is not installed in this Python (pip install torch)", file=sys.stderr)
        return 2
    if args.count_out:
        return _count(config, args.count_out)
    try:
        # --no-nvtx: the same workload with every range and mark dropped (PathTracking still names
        # the Python range an out-of-memory error left, for the status file).
        annotator = PathTracking(NvtxAnnotator() if config.nvtx else NullAnnotator())
    except ImportError:
        print("workload: no NVTX here: neither the `nvtx` package (pip install nvtx) nor a CUDA build of PyTorch",
              file=sys.stderr)
        return 2
    oom = oom_error_type()
    try:
        records = run_workload(config, annotator, log=lambda line: print(line, flush=True),
                               counts=_read_counts(args.counts_in))
    except oom as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
        # The ranges are closed by now; the mark names the one that was open when memory ran out,
        # so the export (nsys writes it: the process exits normally) says where.
        annotator.mark(oom_message(annotator.failed_path, message))
        _write_status(args.status_file, {"status": "oom", "config": asdict(config), "message": message,
                                         "range": annotator.failed_path})
        print(f"workload: out of memory in {annotator.failed_path}: {message}", file=sys.stderr)
        return OOM_EXIT_CODE
    except (ValueError, RuntimeError) as exc:
        _write_status(args.status_file, {"status": "error", "config": asdict(config), "message": str(exc)})
        print(f"workload: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    _write_status(args.status_file, {"status": "ok", "config": asdict(config),
                                     "steps": [asdict(r) for r in records]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
