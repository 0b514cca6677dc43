"""The names that the capture writes and the parsers read, in one place.

`capture/` records its configuration and step times as NVTX marks and names its iterations,
phases and output files; `parsers/` finds them by the same names. Both import them from here,
so renaming one side cannot silently empty the report.
"""
from __future__ import annotations

import json
import re

# -- marks: `nsight-tui:<kind> <json>` in NVTX's default domain -------------------------------
META_PREFIX = "nsight-tui:"
CONFIG = "config"  # the run's configuration (model, ctx, batch, dtype, ...)
STEP = "step"  # one iteration's Python-measured time and phase times
FLOPS = "flops"  # one range path's FLOPs and bytes, counted at capture (capture.counting)
OOM = "oom"  # the run ran out of GPU memory: {"path": the NVTX path open on the main thread, "message"}

# GPU memory in the step mark: torch's caching allocator's own figures, under
# "memory": {"start": {...}, PHASE: {...}} — "start" at the iteration's start, each phase's at its end
# with the peaks since the phase began (torch.cuda.reset_peak_memory_stats at its start).
STEP_MEMORY = "memory"
MEMORY_START = "start"
ALLOCATED = "allocated_bytes"  # torch.cuda.memory_allocated(): bytes in live tensors
RESERVED = "reserved_bytes"  # torch.cuda.memory_reserved(): the allocator's segments (cudaMalloc'd)
PEAK_ALLOCATED = "peak_allocated_bytes"  # torch.cuda.max_memory_allocated() over the phase
PEAK_RESERVED = "peak_reserved_bytes"  # torch.cuda.max_memory_reserved() over the phase
OOM_SUFFIX = ".oom"  # STEM.oom.json (the record) and STEM.oom.sqlite (the export of a run that ran out)
# A capture with no NVTX at all (`capture --no-nvtx`): no ranges and no marks, so the export
# is a truly unannotated trace; its Python step times go beside it in STEM.steps.json instead.
NO_NVTX_SUFFIX = "_nonvtx"
STEPS_SIDECAR_SUFFIX = ".steps.json"
# `capture --bare-run`: the same workload run alone (no profiler) just before its capture, its Python
# step times beside the export: what the program does without nsys's cost on its CUDA calls.
BARE_SIDECAR_SUFFIX = ".bare.json"
# The NVTX domain of ranges nsight-tui infers from a trace's kernel sequence (parsers.model.inferred):
# shown `inferred:step_0`, never written to any export.
INFERRED_DOMAIN = "inferred"


def mark_prefix(kind: str) -> str:
    return f"{META_PREFIX}{kind} "


def mark_text(kind: str, value: object) -> str:
    return mark_prefix(kind) + json.dumps(value)


def parse_mark(text: object) -> tuple[str, object] | None:
    """(kind, value) of an `nsight-tui:` mark, or None for any other text or bad JSON."""
    if not isinstance(text, str) or not text.startswith(META_PREFIX):
        return None
    kind, _, payload = text[len(META_PREFIX):].partition(" ")
    try:
        return kind, json.loads(payload)
    except json.JSONDecodeError:
        return None


# -- iterations and phases ---------------------------------------------------------------------
WARMUP_PREFIX, STEP_PREFIX = "warmup_", "step_"
STEP_RANGE = re.compile(r"^step_\d+$")  # steady-state iterations
WARMUP_RANGE = re.compile(r"^warmup_\d+$")
PHASES = ("forward", "backward", "optimizer")
ATTENTION_PARTS = ("computing_attention_scores", "computing_softmax", "final_matmul")
# The same three parts as stages inferred from a kernel sequence are named for what their kernels do,
# not after this capture's ranges; analyses that ask for a part by the capture's name meet both.
INFERRED_ATTENTION_PARTS = ("attention scores", "attention softmax", "attention x V")
INFERRED_PART_OF = dict(zip(ATTENTION_PARTS, INFERRED_ATTENTION_PARTS))  # capture's name -> inferred stage's


def iteration_names(warmup: int, steps: int) -> list[str]:
    return [f"{WARMUP_PREFIX}{i}" for i in range(warmup)] + [f"{STEP_PREFIX}{i}" for i in range(steps)]


# -- models and output files -------------------------------------------------------------------
MODEL_ORDER = ("tiny", "small4", "small", "medium", "large", "xl", "2.7B")  # size order, for tables
DEFAULT_BATCH = 4
STEM = re.compile(r"^(?P<model>.+?)_ctx(?P<ctx>\d+)(?P<variant>.*)$")


# How the backward was annotated: PyTorch's op ranges (nsys `--pytorch=autograd-nvtx`,
# or `--pytorch=autograd-shapes-nvtx`, which adds each op's input shapes to its range's text,
# or `emit_nvtx` in the workload), and `backward:<part>` ranges from module backward hooks.
OP_RANGE_SUFFIX = {"none": "", "autograd-nvtx": "_agnvtx", "autograd-shapes-nvtx": "_agshapes",
                   "emit-nvtx": "_emitnvtx"}
BACKWARD_RANGES_SUFFIX = "_bwdranges"
BACKWARD_PREFIX = "backward:"  # `backward:<part>`: a forward part's backward, on the autograd thread


def output_stem(model: str, ctx: int, mode: str = "train", dtype: str = "fp32",
                attention: str = "manual", batch: int = DEFAULT_BATCH, processes: int = 1,
                tf32: bool = False, op_ranges: str = "none", backward_ranges: bool = False) -> str:
    """`large_ctx512`, with a suffix for each non-default choice: `_fwd`, `_bf16`, `_tf32`, `_fused`,
    `_b8`, `_ddp2` (data-parallel over 2 GPUs), `_agnvtx` / `_agshapes` / `_emitnvtx`, `_bwdranges`."""
    stem = f"{model}_ctx{ctx}"
    if mode == "forward":
        stem += "_fwd"
    if dtype == "bf16":
        stem += "_bf16"
    if tf32:
        stem += "_tf32"
    if attention == "fused":
        stem += "_fused"
    if batch != DEFAULT_BATCH:
        stem += f"_b{batch}"
    if processes > 1:
        stem += f"_ddp{processes}"
    stem += OP_RANGE_SUFFIX[op_ranges]
    if backward_ranges:
        stem += BACKWARD_RANGES_SUFFIX
    return stem


def parse_stem(stem: str) -> tuple[str, int, str] | None:
    """(model, ctx, variant) of an output stem such as `large_ctx512_fwd`, or None."""
    m = STEM.match(stem)
    return (m["model"], int(m["ctx"]), m["variant"]) if m else None


# Per-rank exports: `report_rank3`, `run.1`, `trace_0` (nsys `--output ..._%q{RANK}`)
RANK_SUFFIX = re.compile(r"(?:[._-]?rank[._-]?|[._-])(\d+)$", re.IGNORECASE)


def split_rank(stem: str) -> tuple[str, int | None]:
    """(the stem without its rank suffix, the rank) — (stem, None) when it has none."""
    m = RANK_SUFFIX.search(stem)
    return (stem[: m.start()], int(m.group(1))) if m else (stem, None)


def model_rank(model: str) -> tuple:
    return (MODEL_ORDER.index(model), "") if model in MODEL_ORDER else (len(MODEL_ORDER), model)
