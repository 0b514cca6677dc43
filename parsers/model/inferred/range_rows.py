"""The inferred structure as ranges: forward/backward/optimizer, embedding, layers and their
stages, as rows like `Trace.ranges` (the NVTX domain `inferred`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.ids import PID_MASK
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.inferred.kernel_kinds import is_backward, is_fill, is_loss, is_optimizer
from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence
from nsight_tui.parsers.model.inferred.layers import Layers, find_layers, layer_keys
from nsight_tui.parsers.model.inferred.micro import ONE, Micro

DOMAIN = conventions.INFERRED_DOMAIN


def phase_spans(template: np.ndarray, op_names: list[str], layers: list[Layers], at: Micro = ONE) -> list[tuple[str, int, int]]:
    """forward/backward/optimizer as template positions (forward only: the whole iteration); under
    gradient accumulation (`at`: where each micro-batch begins, micro.micro_starts) a forward and a
    backward for each micro-batch, in order, then the optimizer."""
    n = len(template)
    micro = at.starts
    after_fwd = layers[0].end if layers else 0
    bounds = micro[1:] + [n]
    bwd = _backward_start(template, op_names, after_fwd, bounds[0])
    if bwd is None:
        return [("forward", 0, n)]
    after_bwd = layers[1].end if len(layers) > 1 else bwd
    after_last = min(micro[-1] + after_bwd - at.lead, n)  # the last micro-batch's backward layers' end, were it the first's
    opt = next((i for i in range(after_last, n) if is_optimizer(op_names[int(template[i])])), None)
    if opt is not None:
        opt = _per_parameter_start(template, op_names, opt, after_last)
    # a later micro-batch's forward is the first one's from its own start on (`lead`: the step's kernels before it)
    later = [_backward_start(template, op_names, m + after_fwd - at.lead, b) for m, b in zip(micro[1:], bounds[1:])]
    backwards = [bwd] + [b for b in later if b is not None]
    if len(backwards) < len(micro):  # a micro-batch unlike the first: the iteration as one
        return phase_spans(template, op_names, layers)
    ends = micro[1:] + [opt if opt is not None else n]
    out: list[tuple[str, int, int]] = []
    for start, b, end in zip(micro, backwards, ends):
        out += [("forward", start, b), ("backward", b, end)]
    if opt is not None:
        out.append(("optimizer", opt, n))
    return out


def _backward_start(template: np.ndarray, op_names: list[str], lo: int, hi: int) -> int | None:
    """The backward's first position in [lo, hi): the fill of ones `loss.backward()` begins with, after the
    forward's loss kernels (work on the loss between them, a division by the micro-batches, is the
    forward's), else right after the loss, else its first kernel named for a backward; None without one."""
    named = [is_backward(op_names[int(c)]) for c in template[lo:hi].tolist()]
    if not any(named):
        return None
    bwd = lo + named.index(True)
    losses = [i for i in range(lo, hi) if is_loss(op_names[int(template[i])]) and not named[i - lo]]
    if losses:
        # a compiled forward's kernels can carry a backward's name (Inductor names a fused kernel after every
        # op it holds: a layer norm's forward saving what its backward needs): the backward is the one after the loss
        bwd = next((i for i in range(losses[0] + 1, hi) if named[i - lo]), bwd)
    loss = [i for i in losses if i < bwd]
    if not loss:
        return bwd
    return next((i for i in range(loss[-1] + 1, bwd) if is_fill(op_names[int(template[i])])), loss[-1] + 1)


def _per_parameter_start(template: np.ndarray, op_names: list[str], first: int, lo: int) -> int:
    """Where an optimizer whose first kernel told by name is `first` begins. A foreach or fused one begins
    with it; a per-parameter one (AdamW(foreach=False): a block of plain elementwise kernels a parameter,
    the one told by name, `addcdiv`, last in each) begins with the first parameter's block: back from
    `first` while the kernels equal those one block on, at most a block (never before `lo`)."""
    after = next((i for i in range(first + 1, len(template)) if is_optimizer(op_names[int(template[i])])), None)
    if after is None:
        return first
    block, start = after - first, first
    while first - start < block - 1 and start - 1 >= lo and template[start - 1] == template[start - 1 + block]:
        start -= 1
    return start


def outer_names(kinds: list[str], layers: list[Layers], phases, inference: bool = False) -> tuple[str, str]:
    """The forward's parts before and after its repeated layers, named for what they do: a transformer's
    embedding and its head (and loss); a conv net's stem and head, and the blocks unlike the repeated ones
    with them where those parts hold more than two layers' kernels (a ResNet's stages before and after its
    longest run of alike blocks)."""
    head = "head" if inference else "head and loss"
    if not layers:
        return "embedding", head
    region = layers[0]
    g = region.g
    if "conv" not in kinds[region.typical_first:region.typical_first + g]:
        return "embedding", head
    fwd_end = next((p1 for name, _, p1 in phases if name == "forward"), len(kinds))
    stem = "stem and earlier blocks" if region.first > 2 * g else "stem"
    tail = f"later blocks, {head}" if fwd_end - region.end > 2 * g else head
    return stem, tail


def range_rows(trace: Trace, seq: KernelSequence, starts, ends, names, seqs, common, layers, kinds, stages,
            iterations: bool = True, gtids: np.ndarray | None = None, limits: np.ndarray | None = None,
            backward: list[tuple[str, int, int]] | None = None, decode_from: int | None = None,
            micro: Micro = ONE) -> pd.DataFrame:
    """The inferred ranges as rows like trace.ranges': parents before children (`iterations`
    False: the parts only, inside the export's own iteration ranges, on their threads `gtids`; an
    inference call's decode steps from template position `decode_from` on: `prefill` holds its layers,
    `decode` the steps after it; `micro`: the micro-batches under gradient accumulation, each with its
    forward and backward and their layers)."""
    op_names = trace.op_names
    template = np.array(common, dtype=np.int64)
    phases = phase_spans(template, op_names, layers, micro)
    before, after = outer_names(kinds, layers, phases, inference=decode_from is not None)
    first_of: dict[str, int] = {}  # each phase's first occurrence: the first micro-batch's
    for phase, p0, _ in phases:
        first_of.setdefault(phase, p0)
    region = {"forward": layers[0] if layers else None, "backward": layers[1] if len(layers) > 1 else None}
    keys = layer_keys(template, op_names)
    placed = [_layers_in(keys, kinds, p0, p1, region.get(phase), first_of[phase]) for phase, p0, p1 in phases]
    rows: list[tuple[str, int, int]] = []  # (text, first, end) as sequence positions
    first_row: list[int] = []  # per iteration, its first row
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        first_row.append(len(rows))
        if iterations:
            rows.append((names[i], a, b))
        if seqs[i] != common:
            continue  # an iteration unlike the steady one: no parts inferred inside it
        for (phase, p0, p1), place in zip(phases, placed):
            if decode_from is not None and phase == "forward":  # a generate()-like call: prefill, then decode
                rows.append(("prefill", a + p0, a + decode_from))
                rows.append(("decode", a + decode_from, a + p1))
                p1 = decode_from
            else:
                rows.append((phase, a + p0, a + p1))
            if place is None:
                continue
            here, shift = place
            count = here.count
            if phase == "forward":
                parts, order, named = (before, after), range(count), stages
            else:  # the backward visits the layers last to first
                parts, order, named = (f"{after} backward", f"{before} backward"), range(count - 1, -1, -1), backward or []
            if here.first > p0:
                rows.append((parts[0], a + p0, a + here.first))
            typical = here.typical_first - (shift or 0)  # where the named stages' layer begins (the first micro-batch's)
            for j, layer in enumerate(order):
                x0 = here.bounds[j]
                rows.append((f"layer_{layer}", a + x0, a + here.bounds[j + 1]))
                for stage, s0, s1 in named if shift is not None and here.alike(j) else []:
                    rows.append((stage, a + s0 - typical + x0, a + s1 - typical + x0))
            if here.end < p1:
                rows.append((parts[1], a + here.end, a + p1))
    last = len(seq.codes)
    n = len(rows)
    owner = np.searchsorted(np.array(first_row, dtype=np.int64), np.arange(n), side="right") - 1
    r_start = np.array([seq.launch[a] for _, a, _ in rows], dtype=np.int64)
    # to just before the next kernel's launch: the next range holds that one (attribution counts
    # a call that starts at a range's end as inside it)
    r_end = np.array([seq.launch[b] - 1 if b < last else seq.launch_end[b - 1] for _, _, b in rows], dtype=np.int64)
    # A part that closes its iteration (the optimizer, a forward-only run's head) ends with its own
    # last launch call: the wait after it (the step's synchronise, logging, the next batch) is the
    # iteration's, not the part's, as an annotated part's range would end when its code returns.
    closing = np.array([b == ends[o] for (_, _, b), o in zip(rows, owner.tolist())], dtype=bool)
    if iterations:
        closing[np.array(first_row, dtype=np.int64)] = False  # the iteration itself keeps its whole span
    r_end = np.where(closing, seq.launch_end[np.array([b - 1 for _, _, b in rows], dtype=np.int64)], r_end)
    if limits is not None:  # inside the export's iteration ranges: never past their end
        r_end = np.minimum(r_end, np.asarray(limits, dtype=np.int64)[owner])
    r_end = np.maximum(r_end, r_start)
    texts = np.array([t for t, _, _ in rows], dtype=object)
    thread = np.full(n, _thread(trace, seq, starts), dtype=np.int64) if gtids is None else \
        np.asarray(gtids, dtype=np.int64)[owner]
    return pd.DataFrame({
        "rowid": -1 - np.arange(n, dtype=np.int64), "start": r_start, "end": r_end, "end_sum": r_end,
        "gtid": thread, "cross": np.zeros(n, dtype=bool), "pushpop": np.ones(n, dtype=bool),
        "name": np.array([f"{DOMAIN}:{t}" for t in texts], dtype=object), "domain": np.full(n, DOMAIN, dtype=object),
        "text": texts, "unended": np.zeros(n, dtype=bool), "copies": np.ones(n, dtype=np.int64),
    })


def _layers_in(keys: np.ndarray, kinds: list[str], p0: int, p1: int, region: Layers | None,
               first: int) -> tuple[Layers, int | None] | None:
    """Where the first micro-batch's layered region (positions in the template's layer keys,
    layers.layer_keys) lies in the phase [p0, p1) (`first`: where that phase begins
    in the first micro-batch): the same kernels `shift` positions on, their stages with them; else a region of
    as many layers found in the phase alone (a later micro-batch's backward, whose layers also add each
    parameter's gradient to the one before: no stages, shift None); None: no layers there."""
    if region is None:
        return None
    if p0 == first:
        return region, 0
    f0, size = region.first, region.end - region.first
    span = keys[f0:f0 + size]
    for x in np.flatnonzero(keys[p0:max(p0, p1 - size + 1)] == keys[f0]).tolist():
        if np.array_equal(keys[p0 + x:p0 + x + size], span):
            return region.shifted(p0 + x - f0), p0 + x - f0
    alone = [r for r in find_layers(keys[p0:p1], kinds[p0:p1]) if r.count == region.count]
    return (alone[0].shifted(p0), None) if alone else None


def _thread(trace: Trace, seq: KernelSequence, starts: np.ndarray) -> int:
    """The thread that launched most iterations' first kernels: the loop's (PyTorch's autograd
    thread launches the backward; the iteration starts on the Python thread)."""
    known = seq.gtid[starts][seq.gtid[starts] >= 0]
    if not len(known):  # no launch calls: the process itself stands for its thread
        return int(trace.ops["gpid"].to_numpy()[seq.pos[0]]) & PID_MASK
    values, counts = np.unique(known, return_counts=True)
    return int(values[np.argmax(counts)])
