"""Per-layer ranges of two runs matched by role and index, whatever each run calls its layers.

One run names its transformer layers `block_3`, another `transformer.h.3`, `layer.3` or (inferred
from the kernel sequence, parsers.model.inferred) `layer_3`: the names never meet, yet the
N-th layer of one run's forward is the N-th layer of the other's. A per-layer range is a *series*:
a range whose instances' texts all end in a number, aggregated under one name path (`block_N`).
Two series under the same parent (the same iteration and phase) are the same layers when

1. both hold the same number of layers (distinct indices; the j-th smallest index of one side
   meets the j-th of the other, so `layer.1..12` meets `block_0..11`), and
2. every pair of j-th layers launches alike kernels: the kernel names in launch order alike
   (SequenceMatcher ratio ≥ ALIKE: the same program), or, where the names differ wholesale (a
   dtype or a library changed every GEMM's name), the layers' skeletons alike (the sequence of
   kernel kinds the inferred stages are named from, parsers.model.inferred.kernel_kinds:
   layer norm, GEMM, softmax, activation, add; consecutive repeats as one).

Otherwise they stay apart and `LayerMatch.reason` says why (the counts, or the first layer whose
kernels disagree and how alike they were). A ratio, not equality: the two runs' ranges may place
a layer's edge a kernel apart (an annotated block that begins at its module's first launch, an
inferred one at its layer norm), while ranges half a layer off (a series around the MLP and the
next layer's attention) share about three quarters of their kernels and must not meet.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import kernel_kind
from nsight_tui.parsers.model.ranges import RangeNode
from nsight_tui.parsers.read.ids import KERNEL

ALIKE = 0.9  # lowest ratio of alike kernels in launch order for two layers to be one
SAMPLE = 8  # instances read per layer index (each step's forward has one): the most common sequence wins
NAMES, KINDS = "kernel names", "kernel kinds"


@dataclass(frozen=True)
class LayerMatch:
    matched: bool
    a_layers: int
    b_layers: int
    alike: float  # the least alike pair of j-th layers, 0..1 (0: not compared)
    basis: str  # NAMES | KINDS: what was compared ("" when not)
    reason: str = ""  # why not matched, in words


def _index(text: str) -> int | None:
    """The number a text ends with (`block_3` -> 3), None without one."""
    i = len(text)
    while i > 0 and text[i - 1].isdecimal():
        i -= 1
    return int(text[i:]) if i < len(text) else None


def is_series(node: RangeNode) -> bool:
    """Every instance of the node is numbered (a per-layer range, aggregated)."""
    texts = node.model.trace.range_texts.objects[node.ids]
    return len(texts) > 1 and all(isinstance(t, str) and _index(t) is not None for t in texts)


def layer_count(node: RangeNode) -> int:
    """Distinct indices of a series' instances: its layers (read before any kernel is)."""
    texts = node.model.trace.range_texts.objects[node.ids]
    return len({_index(t) for t in texts})


def _layers(node: RangeNode) -> list[tuple[str, ...]]:
    """Per distinct index, in index order: the most common kernel-name sequence of its instances."""
    model = node.model
    texts = model.trace.range_texts.objects
    ops = model.trace.ops
    kind, start, names = ops["kind"].to_numpy(), ops["start"].to_numpy(), ops["name"].to_numpy()
    by_index: dict[int, list[tuple[str, ...]]] = {}
    ids = np.asarray(node.ids, dtype=np.int64)
    for rid in ids[np.argsort(model.trace.ranges["start"].to_numpy()[ids], kind="stable")].tolist():
        seqs = by_index.setdefault(_index(texts[rid]) or 0, [])
        if len(seqs) >= SAMPLE:
            continue
        pos = model.ops_of(np.array([rid]))
        pos = pos[kind[pos] == KERNEL]
        pos = pos[np.argsort(start[pos], kind="stable")]
        seqs.append(tuple(model.trace.op_names[int(c)] for c in names[pos]))
    return [Counter(by_index[i]).most_common(1)[0][0] for i in sorted(by_index)]


def _skeleton(names: tuple[str, ...]) -> list[str]:
    """The kinds of a layer's kernels in order, kind-less kernels out, repeats as one."""
    out: list[str] = []
    for name in names:
        k = kernel_kind(name)
        if k and (not out or out[-1] != k):
            out.append(k)
    return out


def _ratio(a: list | tuple, b: list | tuple) -> float:
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def match_layers(a: RangeNode, b: RangeNode, read: dict | None = None) -> LayerMatch:
    """Whether two numbered series under one parent are the same layers (module docstring). `read`:
    the layers' kernel sequences by node, kept across calls (one series is tried against several)."""
    na, nb = layer_count(a), layer_count(b)
    if na != nb:
        return LayerMatch(False, na, nb, 0.0, "", f"{na} layers against {nb}")
    if na < 2:
        return LayerMatch(False, na, nb, 0.0, "", "a single layer is no series to match by index")
    read = {} if read is None else read
    for node in (a, b):
        if id(node) not in read:
            read[id(node)] = _layers(node)
    a_seqs, b_seqs = read[id(a)], read[id(b)]
    for basis, view in ((NAMES, lambda s: s), (KINDS, _skeleton)):
        ratios = [_ratio(view(x), view(y)) for x, y in zip(a_seqs, b_seqs)]
        if min(ratios) >= ALIKE:
            return LayerMatch(True, na, nb, min(ratios), basis)
    # not alike by either: say the first layer that disagrees, by the kinds (the kinder measure)
    ratios = [_ratio(_skeleton(x), _skeleton(y)) for x, y in zip(a_seqs, b_seqs)]
    j = next(i for i, r in enumerate(ratios) if r < ALIKE)
    return LayerMatch(False, na, nb, min(ratios), KINDS,
                      f"layer {j} (by index order) launches other kernels: {100 * ratios[j]:.0f}% alike by kind, "
                      f"{100 * ALIKE:.0f}% needed")
