"""The profiled workload: GPT-2 training steps or forward passes, annotated with NVTX.

Run as `python -m nsight_tui.capture.workload ...` (the runner starts it under `nsys profile`), or call
`run_workload` directly (tests, on a CPU). Each iteration is an NVTX range `warmup_N` or `step_N`
holding `forward`, `backward`, `optimizer`; every phase ends with a device synchronise, so a
range's length is the time its GPU work took. The run's configuration and the step times
measured here are written into the trace as NVTX marks (see capture.annotate).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from nsight_tui.capture import ddp
from nsight_tui.parsers import conventions
from nsight_tui.capture.annotate import Annotator, NvtxAnnotator, config_message, step_message
from nsight_tui.capture.sizes import ATTENTIONS, DEFAULT_BATCH, DTYPES, MODEL_SIZES, MODES, OOM_EXIT_CODE, VOCAB, RunSettings


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


@dataclass
class StepRecord:
    name: str
    seconds: float
    phases: dict[str, float]


def oom_error_type():
    import torch

    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def run_workload(config: WorkloadConfig, annotator: Annotator,
                 log: Callable[[str], None] = print) -> list[StepRecord]:
    """Build the model, emit the config mark, run warmup + measured iterations; return their times."""
    import torch
    import torch.nn.functional as F

    from nsight_tui.capture.model import GPT2, ModelDims

    config.validate()
    distributed = ddp.from_environment()
    device = ddp.setup(distributed, config.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to this PyTorch build")
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    torch.manual_seed(0)
    d_model, n_layers, n_heads = MODEL_SIZES[config.model]
    dims = ModelDims(d_model=d_model, n_layers=n_layers, n_heads=n_heads, ctx=config.ctx, vocab=VOCAB)
    gpt2 = GPT2(dims, attention=config.attention, annotator=annotator).to(device)
    train = config.mode == "train"
    gpt2.train(train)
    model = ddp.wrap(gpt2, distributed, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    # One fixed batch, made once: the profile should hold the model's kernels, not data loading.
    tokens = torch.randint(0, VOCAB, (config.batch, config.ctx + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=config.dtype == "bf16")
    sync()

    annotator.mark(config_message({
        **config.metadata(), "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__, **distributed.metadata(),
    }))
    if distributed.rank != 0:
        log = lambda line: None  # noqa: E731 - one rank speaks for the run
    log(f"{config.model}: {gpt2.n_params() / 1e6:.1f}M parameters, batch {config.batch}, ctx {config.ctx}, "
        f"{config.mode}, {config.dtype}, {config.attention} attention, on {config.device}")

    def phase(name: str, phases: dict[str, float], work: Callable[[], object]):
        start = time.perf_counter()
        with annotator.range(name):
            result = work()
            sync()
        phases[name] = time.perf_counter() - start
        return result

    def forward_loss():
        with autocast:
            logits = model(inputs)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def optimizer_step():
        assert optimizer is not None  # only called when training
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    names = conventions.iteration_names(config.warmup, config.steps)
    report_every = 1 if len(names) <= 20 else max(1, len(names) // 10)
    records: list[StepRecord] = []
    for index, name in enumerate(names):
        phases: dict[str, float] = {}
        with annotator.range(name):
            start = time.perf_counter()
            if train:
                loss = phase("forward", phases, forward_loss)
                phase("backward", phases, loss.backward)
                phase("optimizer", phases, optimizer_step)
            else:
                with torch.no_grad():
                    phase("forward", phases, forward_loss)
            seconds = time.perf_counter() - start
        annotator.mark(step_message(name, seconds, phases))
        records.append(StepRecord(name, seconds, phases))
        if index % report_every == 0 or index == len(names) - 1:
            detail = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in phases.items())
            log(f"  [{index + 1}/{len(names)}] {name}: {seconds * 1e3:.1f} ms ({detail})")
    ddp.teardown(distributed)
    return records


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
    p.add_argument("--status-file", help="write a JSON status here: ok with the step times, or oom")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = WorkloadConfig(model=args.model, ctx=args.ctx, mode=args.mode, dtype=args.dtype,
                            attention=args.attention, batch=args.batch, steps=args.steps,
                            warmup=args.warmup, device=args.device)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("workload: PyTorch is not installed in this Python (pip install torch)", file=sys.stderr)
        return 2
    try:
        annotator = NvtxAnnotator()
    except ImportError:
        print("workload: the `nvtx` package is not installed in this Python (pip install nvtx)", file=sys.stderr)
        return 2
    oom = oom_error_type()
    try:
        records = run_workload(config, annotator, log=lambda line: print(line, flush=True))
    except oom as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
        _write_status(args.status_file, {"status": "oom", "config": asdict(config), "message": message})
        print(f"workload: out of memory: {message}", file=sys.stderr)
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
