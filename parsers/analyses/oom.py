"""A run that ran out of GPU memory: the failed allocation as the run's headline.

What nsys recorded (the `cudaMalloc` that returned cudaErrorMemoryAllocation, the memory events
up to it: analyses.memory's `OutOfMemory`), what PyTorch said when it raised (its message, kept by
the capture in an `nsight-tui:oom` mark or in the `STEM.oom.json` record beside the export: how
much it tried to allocate, how much was free, allocated and reserved), which tensor that was where
the run's configuration tells (B·H·T² attention scores, the logits, an MLP activation ...), and
the fixes that apply. `steps_finished` says whether any iteration ended before it: a run that
never finished a step has no step time to speak of."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


from nsight_tui.parsers.analyses.memory import MemoryReport, memory_analysis
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_AMOUNT = r"([0-9]+(?:\.[0-9]+)?) ?(B|KiB|MiB|GiB|TiB)"
# PyTorch's torch.OutOfMemoryError text (c10/cuda/CUDACachingAllocator.cpp), each figure rounded to two decimals
_ASKED = re.compile(r"Tried to allocate " + _AMOUNT)
_FREE = re.compile(r"of which " + _AMOUNT + " is free")
_ALLOCATED = re.compile(_AMOUNT + " is allocated by PyTorch")
_RESERVED_UNUSED = re.compile(_AMOUNT + " is reserved by PyTorch but unallocated")
_CAPACITY = re.compile(r"total capacity of " + _AMOUNT)
_DTYPE_BYTES = {"fp32": 4, "float32": 4, "tf32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
FRAGMENTED_SHARE = 0.05  # reserved but unallocated above this share of the GPU: fragmentation is worth a setting


@dataclass(frozen=True)
class Amount:
    """A figure from PyTorch's message: `bytes` as written (two decimals of its unit) and the
    rounding it carries (half a unit of the last decimal), so a size can be told within it."""

    bytes: int
    rounding_bytes: int
    text: str


@dataclass(frozen=True)
class Fix:
    id: str  # oom-batch, oom-sdpa, oom-checkpointing, oom-bf16, oom-expandable-segments
    text: str


@dataclass(frozen=True)
class OomFacts:
    t_ns: int  # when the failing call started (CPU clock, the capture's)
    call: str  # the CUDA runtime call that failed
    return_value: int  # its returnValue (2: cudaErrorMemoryAllocation)
    path: str  # the NVTX path open at the failure (the calling thread's, else the main thread's)
    thread: str
    failed_calls: int  # failed allocations in the run (PyTorch retries after freeing its cache)
    in_use_bytes: int | None  # nsys's memory events: held on the GPU when the call failed
    total_bytes: int | None  # the GPU's memory (TARGET_INFO_GPU)
    steps_finished: int  # iterations (step_N / warmup_N, annotated or inferred) ended before the failure
    asked: Amount | None = None  # PyTorch: "Tried to allocate ..."
    free: Amount | None = None  # PyTorch: "... of which X is free"
    torch_allocated: Amount | None = None  # PyTorch: "X is allocated by PyTorch"
    reserved_unallocated: Amount | None = None  # PyTorch: "X is reserved by PyTorch but unallocated"
    tensor: str | None = None  # what the asked allocation is, where the configuration tells
    fixes: list[Fix] = field(default_factory=list)
    message: str = ""  # PyTorch's message as raised
    message_source: str = ""  # where it was read: the oom mark, or the record beside the export


def amount(pattern: re.Pattern, message: str) -> Amount | None:
    m = pattern.search(message or "")
    if m is None:
        return None
    value, unit = m.group(1), m.group(2)
    decimals = len(value.split(".", 1)[1]) if "." in value else 0
    scale = _UNITS[unit]
    return Amount(round(float(value) * scale), int(scale * 0.5 * 10 ** -decimals), f"{value} {unit}")


def record_beside(path: Path) -> dict:
    """The `STEM.oom.json` record `capture` writes beside an OOM run's `STEM.oom.sqlite` ({} if none)."""
    name = Path(path).name
    if not name.endswith(".sqlite"):
        return {}
    side = Path(path).with_name(name[: -len(".sqlite")].removesuffix(conventions.OOM_SUFFIX) + ".oom.json")
    try:
        value = json.loads(side.read_text()) if side.is_file() else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


# the names third-party scripts give the same dimensions (HF: batch_size, seq_len, hidden_size, ...)
_ALIASES = {"batch": ("batch", "batch_size"), "ctx": ("ctx", "seq", "seq_len", "max_length", "block_size"),
            "n_heads": ("n_heads", "num_attention_heads", "heads"), "d_model": ("d_model", "hidden_size", "hidden"),
            "vocab": ("vocab", "vocab_size")}


def _dim(config: dict, key: str) -> int | None:
    for name in _ALIASES.get(key, (key,)):
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def sidecar_config(path: Path) -> dict:
    """The configuration in the Python clock's record beside the export (`STEM.steps.json`, the OOM
    run's stem without `.oom`), {} if none."""
    name = Path(path).name
    if not name.endswith(".sqlite"):
        return {}
    side = Path(path).with_name(name[: -len(".sqlite")].removesuffix(conventions.OOM_SUFFIX)
                                + conventions.STEPS_SIDECAR_SUFFIX)
    try:
        value = json.loads(side.read_text()) if side.is_file() else {}
    except (OSError, ValueError):
        return {}
    config = value.get("config") if isinstance(value, dict) else None
    return config if isinstance(config, dict) else {}


def candidate_tensors(config: dict) -> list[tuple[str, int]]:
    """The activations a GPT-style run allocates whole, (what, bytes), from its configuration; [] where
    it lacks the dimensions."""
    dims: dict[str, int] = {}
    for k in ("batch", "ctx", "n_heads", "d_model", "vocab"):
        value = _dim(config, k)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return []
        dims[k] = value
    b, t, h, d, v = (dims[k] for k in ("batch", "ctx", "n_heads", "d_model", "vocab"))
    out = []
    for dtype, size in sorted({(str(config.get("dtype", "fp32")), _DTYPE_BYTES.get(str(config.get("dtype", "fp32")), 4)),
                               ("fp32", 4)}, key=lambda x: -x[1]):
        out += [(f"one layer's attention scores, B·H·T² = {b}×{h}×{t}×{t} {dtype}", b * h * t * t * size),
                (f"the logits, B·T·vocab = {b}×{t}×{v} {dtype}", b * t * v * size),
                (f"an MLP activation, B·T·4d = {b}×{t}×{4 * d} {dtype}", b * t * 4 * d * size),
                (f"the QKV projection, B·T·3d = {b}×{t}×{3 * d} {dtype}", b * t * 3 * d * size),
                (f"a hidden state, B·T·d = {b}×{t}×{d} {dtype}", b * t * d * size)]
    return out


def which_tensor(asked: Amount | None, config: dict) -> str | None:
    """The one candidate whose size is the asked one within the message's rounding (none, or two that
    fit alike: not told)."""
    if asked is None:
        return None
    fits = [what for what, size in candidate_tensors(config) if abs(size - asked.bytes) <= asked.rounding_bytes]
    return fits[0] if len(fits) == 1 else None


def fixes_for(config: dict, path: str, tensor: str | None, reserved_unallocated: Amount | None,
              total_bytes: int | None) -> list[Fix]:
    """The fixes that apply to where and what ran out, the likeliest first."""
    out: list[Fix] = []
    attention = "attention" in path or (tensor or "").startswith("one layer's attention")
    manual = str(config.get("attention", "")) == "manual" or (tensor or "").startswith("one layer's attention")
    if attention and manual:
        out.append(Fix("oom-sdpa", "use F.scaled_dot_product_attention (flash / memory-efficient kernels): it never "
                                   "writes the B·H·T² scores"))
    batch = _dim(config, "batch")
    if batch is not None and batch > 1:
        out.append(Fix("oom-batch", f"halve the batch ({batch} → {batch // 2}): activations scale with it; gradient "
                                    "accumulation keeps the effective batch"))
    else:
        out.append(Fix("oom-batch", "a smaller batch: activations scale with it; gradient accumulation keeps the "
                                    "effective batch"))
    training = str(config.get("mode", "train")) == "train"
    if training and "backward" not in path.split("/") and "optimizer" not in path.split("/"):
        out.append(Fix("oom-checkpointing", "activation checkpointing (torch.utils.checkpoint) per layer: the "
                                            "forward keeps one layer's activations for backward, not every layer's"))
    if str(config.get("dtype", "")) in ("fp32", "float32"):
        out.append(Fix("oom-bf16", "bf16 autocast: activations at half the bytes"))
    if reserved_unallocated is not None and total_bytes and reserved_unallocated.bytes > FRAGMENTED_SHARE * total_bytes:
        out.append(Fix("oom-expandable-segments", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: "
                                                  f"{reserved_unallocated.text} reserved but unallocated (fragments)"))
    return out


def oom_facts(model: RangeModel, memory: MemoryReport | None = None) -> OomFacts | None:
    """The run's out-of-memory facts, None where no allocation failed."""
    memory = memory if memory is not None else memory_analysis(model)
    oom = memory.out_of_memory
    if oom is None:
        return None
    trace = model.trace
    record = record_beside(trace.beside)
    message, source = oom.message, "the oom mark"
    if not message and isinstance(record.get("message"), str):
        message, source = record["message"], record_name(trace.beside)
    config = trace.meta().config or sidecar_config(trace.beside) \
        or (record.get("config") if isinstance(record.get("config"), dict) else {}) or {}
    iterations = steps_of(model).iterations
    finished = int((model.r_end[iterations] < oom.t_ns).sum()) if len(iterations) else 0
    asked = amount(_ASKED, message)
    reserved = amount(_RESERVED_UNUSED, message)
    total = oom.total_memory_bytes
    tensor = which_tensor(asked, config)
    path = oom.path or oom.workload_path or ""
    return OomFacts(t_ns=oom.t_ns, call=oom.call, return_value=oom.return_value, path=path, thread=oom.thread,
                    failed_calls=oom.failed_calls, in_use_bytes=oom.in_use_bytes, total_bytes=total,
                    steps_finished=finished, asked=asked, free=amount(_FREE, message),
                    torch_allocated=amount(_ALLOCATED, message), reserved_unallocated=reserved, tensor=tensor,
                    fixes=fixes_for(config, path, tensor, reserved, total), message=message,
                    message_source=source if message else "")


def record_name(path: Path) -> str:
    name = Path(path).name
    return name[: -len(".sqlite")].removesuffix(conventions.OOM_SUFFIX) + ".oom.json"
