"""The inference put together: on a trace without iteration ranges (period, iterations, layers,
stages, ranges per process), or inside the export's own iteration ranges."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.gpu_memory import CUDA_ERROR_MEMORY_ALLOCATION
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.text_codes import Coded
from nsight_tui.parsers.model.inferred.backward_stage_names import backward_stages_of
from nsight_tui.parsers.model.inferred.decode import call_start, decode_steps, find_decode, step_mark
from nsight_tui.parsers.model.inferred.kernel_kinds import BACKWARD, kernel_kind
from nsight_tui.parsers.model.inferred.kernel_sequence import MIN_KERNELS, processes_by_kernels, kernel_sequence
from nsight_tui.parsers.model.inferred.layers import Layers, find_layers, layer_keys
from nsight_tui.parsers.model.inferred.micro import ONE, Micro, micro_starts, per_micro_batch, regrouped
from nsight_tui.parsers.model.inferred.period import PERIOD_TOLERANCE, iteration_starts, period_anchor, starts_from
from nsight_tui.parsers.model.inferred.range_rows import range_rows
from nsight_tui.parsers.model.inferred.result import Inference, InferredIteration
from nsight_tui.parsers.model.inferred.stage_names import forward_stages

MIN_REPEATS = 2  # iterations whose kernel sequence is the most common one
# A leading iteration this many times slower than the steady median is a warm-up even when it launches
# the steady kernels (cuBLAS's heuristics, the allocator, autotuning: first calls cost 10x)
WARMUP_SLOWER = 1.5
PARTIAL_HEAD = 16  # kernels before the first iteration worth saying (a stray memset or two is not)


def warmup_count(seqs: list[tuple], common: tuple, durations_ns: list[int]) -> int:
    """How many iterations lead the run as warm-ups: those before the first that launches the
    steady kernels, then those still WARMUP_SLOWER times the steady iterations' median or more."""
    leading = next(i for i, s in enumerate(seqs) if s == common)
    steady = [d for s, d in zip(seqs, durations_ns) if s == common]
    median = float(np.median(steady[1:] if len(steady) > 2 else steady))
    while leading < len(seqs) - MIN_REPEATS and seqs[leading] == common and durations_ns[leading] > WARMUP_SLOWER * median:
        leading += 1
    return leading


def is_iteration_text(texts: Coded) -> np.ndarray:
    """Per range text: `step_N` or `warmup_N` (tested once per distinct text: 10^6 op ranges share few)."""
    return texts.per_value(lambda t: isinstance(t, str) and bool(conventions.STEP_RANGE.match(t)
                                                                 or conventions.WARMUP_RANGE.match(t)),
                           key="is_iteration_text")



def infer(trace: Trace) -> Inference:
    """Each process on its own (a data-parallel run's ranks each run the loop); what is said of the
    run is said of the process with the most kernels, the others' ranges are added too."""
    found = [_infer_process(trace, gpid) for gpid in processes_by_kernels(trace)] or [_infer_process(trace, -1)]
    first = found[0]
    others = [f for f in found[1:] if f.found]
    if not first.found or not others:
        return first
    ranges = pd.concat([first.ranges, *[f.ranges for f in others]], ignore_index=True)
    ranges["rowid"] = -1 - np.arange(len(ranges), dtype=np.int64)
    first.ranges = ranges
    first.basis += f"; and {len(others)} other process{'es' if len(others) > 1 else ''} likewise"
    return first


def _infer_process(trace: Trace, gpid: int) -> Inference:
    seq = kernel_sequence(trace, gpid)
    if seq is None:
        return Inference(reason=f"fewer than {MIN_KERNELS} kernels: no iteration to find")
    found = period_anchor(seq.codes)
    if found is None:
        return Inference(reason="no kernel recurs at a steady spacing: the kernel sequence has no period")
    anchors, period = found
    starts = iteration_starts(seq, anchors, period, trace.op_names)
    split = _split(seq, starts)
    if isinstance(split, str):
        return Inference(reason=split)
    starts, ends, seqs, common = split
    mark = _decode_mark(trace, seq, starts, ends, seqs, common)
    if mark is not None:  # an inference loop: each iteration one call, from its prefill on
        steps = decode_steps(seq, *_last_steady(starts, ends, seqs, common, followed=True), mark)
        if len(steps) >= 2:
            moved = _split(seq, starts_from(seq, min(call_start(seq, steps), len(seq.codes) - 1), period))
            if not isinstance(moved, str):
                starts, ends, seqs, common = moved
    repeats = seqs.count(common)
    if _ran_out_of_memory(trace, gpid) and not any(BACKWARD.search(trace.op_names[c]) for c in set(common)):
        # Dying in its first forward, a run repeats only its layers: the unit found is a layer, no step
        return Inference(reason="the run ran out of GPU memory before it finished an iteration (a failed "
                         "allocation; no backward before it): the kernels repeat by layer, not by step")
    dropped = []  # what was left out, said in the basis
    if len(seqs) > MIN_REPEATS and len(seqs[-1]) < (1 - PERIOD_TOLERANCE) * len(common):
        # the capture (or the loop) stopped inside an iteration: a part of one is no step
        dropped.append(f"a partial last iteration ({len(seqs[-1]):,} of {len(common):,} kernels) left out")
        starts, ends, seqs = starts[:-1], ends[:-1], seqs[:-1]
    partial_last = bool(dropped)
    if starts[0] >= len(common) and len(trace.meta().steps) == len(seqs) + 1 + partial_last:
        # the capture's record holds one iteration more than the sequence repeats, and more than one
        # iteration's kernels run before the first repeat: the record's first iteration is those (a
        # compiled model's first step holds its compilation's kernels and runs unlike the steady one)
        dropped.append(f"the first iteration the {int(starts[0]):,} kernels before the repeats (the capture's record "
                       "has one more)")
        starts, ends = np.r_[0, starts], np.r_[starts[0], ends]
        seqs = [tuple(seq.codes[:int(starts[1])].tolist())] + seqs
    elif starts[0] >= PARTIAL_HEAD:
        dropped.append(f"the {int(starts[0]):,} kernels before the first iteration (set-up, or a partial iteration) "
                       "in none")
    gpu_ends = [int(seq.gpu_start[b]) if b < len(seq.codes) and i + 1 < len(starts) else int(seq.gpu_end[a:b].max())
                for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist()))]
    leading = warmup_count(seqs, common, [e - int(seq.gpu_start[a]) for a, e in zip(starts.tolist(), gpu_ends)])
    template = np.array(common, dtype=np.int64)
    op_names = trace.op_names
    micro = micro_starts(template, op_names)
    k = len(micro.starts)
    record = trace.meta().steps
    clocks_micro = per_micro_batch(record, len(seqs), k)
    recorded = _recorded_warmups(trace, len(seqs), partial_dropped=partial_last)
    if clocks_micro:  # an iteration a warm-up where any of its micro-batches' entries is one
        recorded = sum(any(str(e.get("name", "")).startswith(conventions.WARMUP_PREFIX) for e in record[i * k:(i + 1) * k])
                       for i in range(len(seqs)))
    if recorded is not None:  # the capture's own record says how many warm-ups led the run
        leading = recorded
    names = [f"{conventions.WARMUP_PREFIX}{i}" if i < leading else f"{conventions.STEP_PREFIX}{i - leading}"
             for i in range(len(seqs))]
    kinds = [kernel_kind(op_names[c]) for c in template.tolist()]
    layers = _layers(template, kinds, op_names, micro)
    if not any(BACKWARD.search(op_names[c]) for c in set(common)):
        layers = layers[:1]  # no backward: a second layered region is the next forward's (a decode step's), no mirror
    a, b = _last_steady(starts, ends, seqs, common)
    mark = step_mark(seq, a, b, template, op_names, layers)
    steps = decode_steps(seq, a, b, mark) if mark is not None else np.zeros(0, dtype=np.int64)
    if len(steps):
        # A call's model is its prefill's forward (one forward with every layer): a span of decode steps
        # repeats by token, and compiled steps name each layer's kernels apart
        prefill = int(steps[0]) - a
        layers = find_layers(template[:prefill], kinds[:prefill])[:1] or layers
    iterations = [InferredIteration(names[i], int(seq.gpu_start[a]), gpu_ends[i], b - a)
                  for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist()))]
    stages = forward_stages(template, kinds, layers, op_names)
    backward = backward_stages_of(template, kinds, op_names, layers, stages)
    named = " (warm-ups as the capture recorded them)" if recorded is not None else ""
    anchor = int(seq.codes[anchors[0]])
    basis = (f"inferred from the kernel sequence (process {gpid >> 24 & 0xFFFFFF}"
             f", launch order): {len(seqs)} iterations of ~{len(template):,} kernels, the name "
             f"'{_short(op_names[anchor])}' {_times(common.count(anchor))} per iteration; {repeats} launch the same kernels in "
             f"the same order{named}" + (f"; {layers[0].count} layers of {layers[0].lengths()} kernels (the kernel "
                                  f"'{_short(op_names[int(template[layers[0].anchor])])}' at a steady spacing)"
                                  if layers else "; no repeated layer found")
             + (f"; {leading} warm-up{'s' if leading != 1 else ''} apart" if leading else "")
             + "".join(f"; {d}" for d in dropped))
    basis += _micro_clause(k)
    if clocks_micro:
        basis += (f"; the capture's record clocks each micro-batch ({len(record)} entries for {len(seqs)} iterations): an "
                  f"iteration's Python time is its {k} entries' sum, warm-ups the iterations holding one")
    ranges = range_rows(trace, seq, starts, ends, names, seqs, common, layers, kinds, stages, backward=backward,
                        decode_from=int(steps[0]) - a if len(steps) else None, micro=micro)
    decode = find_decode(seq, starts, ends, [s == common and n.startswith(conventions.STEP_PREFIX)
                                             for s, n in zip(seqs, names)], mark, op_names)
    if decode is not None:
        basis += (f"; a decode loop inside each: {decode.tokens_per_call} decode steps of ~{decode.step_kernels:,} "
                  f"kernels after the prefill" + (" (each a CUDA graph replay)" if decode.graph else "")
                  + "; each iteration one call, from its prefill to its last token's sampling")
    return Inference(iterations=iterations, layer_count=layers[0].count if layers else 0, decode=decode,
                     micro_batches=k, record=regrouped(record, names, k) if clocks_micro else None,
                     layer_stages=[s for s, _, _ in stages], backward_stages=[s for s, _, _ in backward],
                     period_kernels=len(template), basis=basis, ranges=ranges)


def _layers(template: np.ndarray, kinds: list[str], op_names: list[str],
            micro: Micro = ONE) -> list[Layers]:
    """The repeated layers (layers.find_layers) of an iteration, looked for up to its backward's last
    kernel (a per-parameter optimizer's blocks after it repeat too, one a parameter, more often than any
    layer), and under gradient accumulation (`micro`) in the first micro-batch from its forward's own start
    (a Trainer's count of each micro-batch's tokens before it repeats once a micro-batch too)."""
    named_bwd = [i for i, c in enumerate(template.tolist()) if BACKWARD.search(op_names[c])]
    end = named_bwd[-1] + 1 if named_bwd else len(template)
    lead = micro.lead
    if len(micro.starts) > 1:
        end = min(end, micro.starts[1])
    keys = layer_keys(template, op_names)
    return [r.shifted(lead) for r in find_layers(keys[lead:end], kinds[lead:end])]


def _micro_clause(k: int) -> str:
    return (f"; {k} micro-batches each (gradient accumulation: a forward and a backward each, then one optimizer "
            "step)") if k > 1 else ""


def _times(k: int) -> str:
    return {1: "once", 2: "twice"}.get(k, f"{k} times")


def _split(seq, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple], tuple] | str:
    """The iterations from their starts: (starts, ends, each one's name codes, the most common), or why none."""
    if len(starts) < MIN_REPEATS:
        return "the kernel sequence does not repeat: no period"
    ends = np.append(starts[1:], min(len(seq.codes), int(starts[-1]) + int(np.median(np.diff(starts)))))
    seqs = [tuple(seq.codes[a:b].tolist()) for a, b in zip(starts.tolist(), ends.tolist())]
    common = max(set(seqs), key=lambda s: (seqs.count(s), -seqs.index(s)))
    if seqs.count(common) < MIN_REPEATS:
        return (f"{len(seqs)} candidate iterations, but no two launch the same kernels in the same order: no period")
    return starts, ends, seqs, common


def _last_steady(starts: np.ndarray, ends: np.ndarray, seqs: list[tuple], common: tuple,
                 followed: bool = False) -> tuple[int, int]:
    """The last iteration that launches the steady kernels (`followed`: one with an iteration after it, where
    there is one: the kernels closing it are seen)."""
    steady = [j for j, s in enumerate(seqs) if s == common]
    i = max(j for j in steady if j + 1 < len(seqs)) if followed and any(j + 1 < len(seqs) for j in steady) \
        else max(steady)
    return int(starts[i]), int(ends[i])


def _decode_mark(trace: Trace, seq, starts, ends, seqs, common):
    """How the decode steps are told in an inference loop's iterations (None: none, or a training loop)."""
    template = np.array(common, dtype=np.int64)
    if any(BACKWARD.search(trace.op_names[c]) for c in set(common)):
        return None
    kinds = [kernel_kind(trace.op_names[c]) for c in template.tolist()]
    return step_mark(seq, *_last_steady(starts, ends, seqs, common), template, trace.op_names,
                     find_layers(template, kinds)[:1])


def _ran_out_of_memory(trace: Trace, gpid: int) -> bool:
    """A CUDA call of this process returned cudaErrorMemoryAllocation (the export's runtime calls)."""
    failed = trace.gpu_memory.failed_calls
    if not len(failed):
        return False
    mine = (failed["gtid"].to_numpy() >> 24) == (gpid >> 24)
    return bool((mine & (failed["return_value"].to_numpy() == CUDA_ERROR_MEMORY_ALLOCATION)).any())


def _recorded_warmups(trace: Trace, iterations: int, partial_dropped: bool = False) -> int | None:
    """The warm-up count the capture recorded (`capture --no-nvtx`'s STEM.steps.json), when its
    iteration count is the one inferred (or one more, the partial last left out); None otherwise (then the leading iterations unlike the
    steady one are the warm-ups)."""
    steps = trace.meta().steps
    if len(steps) != iterations + (1 if partial_dropped else 0):  # the partial last left out: one more
        return None
    warm = [str(s.get("name", "")).startswith(conventions.WARMUP_PREFIX) for s in steps]
    return sum(warm) if warm == sorted(warm, reverse=True) else None


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."



# Ranges CUDA libraries push themselves (CCCL's `cub::DeviceRadixSort` inside an embedding's backward,
# NCCL's, cuDNN's and cuBLAS's own NVTX): no structure of the user's, so they frame nothing
LIBRARY_RANGE = re.compile(r"^(?:cub::|thrust::|nccl|cudnn|cublas)", re.I)


def is_library_text(texts: Coded) -> np.ndarray:
    """Per range text: a CUDA library's own range (tested once per distinct text)."""
    return texts.per_value(lambda t: isinstance(t, str) and bool(LIBRARY_RANGE.match(t)), key="is_library_text")


def bare_iterations(trace: Trace) -> bool:
    """The export names its iterations and nothing else of the user's on their threads (NVTX around
    the iteration only; a library's own ranges inside do not count): the parts inside can be inferred."""
    r = trace.ranges
    is_iteration = is_iteration_text(trace.range_texts)
    threads = np.unique(r["gtid"].to_numpy()[is_iteration])
    mine = ~is_iteration & ~is_library_text(trace.range_texts)
    return not (np.isin(r["gtid"].to_numpy(), threads) & mine).any()


def infer_inside(trace: Trace) -> Inference:
    """Phases, layers and stages inside the export's own iteration ranges (of the process with the
    most kernels): the kernels each range's thread launched inside it, the most common sequence
    of them the steady iteration."""
    processes = processes_by_kernels(trace)
    seq = kernel_sequence(trace, processes[0]) if processes else None
    if seq is None:
        return Inference(reason=f"fewer than {MIN_KERNELS} kernels: nothing to infer inside the iterations")
    r = trace.ranges
    texts = trace.range_texts.objects
    mine = (r["gtid"].to_numpy() >> 24) == (processes[0] >> 24)
    hit = np.flatnonzero(mine & is_iteration_text(trace.range_texts))
    hit = hit[np.argsort(r["start"].to_numpy()[hit], kind="stable")]
    starts = np.searchsorted(seq.launch, r["start"].to_numpy()[hit], side="left")
    ends = np.searchsorted(seq.launch, r["end"].to_numpy()[hit], side="right")
    seqs = [tuple(seq.codes[a:b].tolist()) for a, b in zip(starts.tolist(), ends.tolist())]
    nonempty = [s for s in seqs if s]
    if not nonempty:
        return Inference(reason="the iteration ranges hold no kernels")
    common = max(set(nonempty), key=lambda s: (seqs.count(s), -seqs.index(s)))
    if seqs.count(common) < MIN_REPEATS:
        return Inference(reason="no two iteration ranges launch the same kernels in the same order: nothing inferred "
                         "inside them")
    template = np.array(common, dtype=np.int64)
    kinds = [kernel_kind(trace.op_names[c]) for c in template.tolist()]
    micro = micro_starts(template, trace.op_names)
    layers = _layers(template, kinds, trace.op_names, micro)
    stages = forward_stages(template, kinds, layers, trace.op_names)
    backward = backward_stages_of(template, kinds, trace.op_names, layers, stages)
    gtids = r["gtid"].to_numpy()[hit]
    rows = range_rows(trace, seq, starts, ends, [str(t) for t in texts[hit]], seqs, common, layers, kinds, stages,
                   iterations=False, gtids=gtids, limits=r["end"].to_numpy()[hit], backward=backward, micro=micro)
    basis = (f"inferred inside the export's {len(hit)} iteration ranges from their kernel sequence: "
             f"{seqs.count(common)} launch the same {len(template):,} kernels in the same order"
             + (f"; {layers[0].count} layers of {layers[0].lengths()} kernels" if layers else "; no repeated layer found")
             + _micro_clause(len(micro.starts)))
    return Inference(layer_count=layers[0].count if layers else 0, micro_batches=len(micro.starts),
                     layer_stages=[s for s, _, _ in stages],
                     backward_stages=[s for s, _, _ in backward],
                     period_kernels=len(template), basis=basis, ranges=rows, inside=True)
