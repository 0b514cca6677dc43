"""The repeated layers inside one iteration, forward and (when present) the backward's mirror: where
each begins and ends, and the typical layer whose kernels repeat."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

MIN_LAYER_KERNELS = 4  # a layer launches at least this many kernels (a transformer layer: dozens)


@dataclass(frozen=True)
class Layers:
    """A layered region of an iteration, as template positions: layer j is [bounds[j], bounds[j + 1]).
    Its layers repeat the kernels of the typical one (bounds[typical], g kernels) exactly, but for
    layers at its edges that launch the same GEMMs and attention with other kernels around them (a
    compiled model's first layer computes the causal mask, its last fuses the final norm): those are
    as long as they are. `anchor`: the kernel whose steady spacing found the region."""
    bounds: tuple[int, ...]
    g: int
    anchor: int
    typical: int = 0

    @staticmethod
    def uniform(first: int, count: int, g: int, anchor: int) -> Layers:
        return Layers(tuple(first + j * g for j in range(count + 1)), g, anchor)

    @property
    def first(self) -> int:
        return self.bounds[0]

    @property
    def end(self) -> int:
        return self.bounds[-1]

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    @property
    def typical_first(self) -> int:
        """Where the typical layer (the one whose stages are named) begins."""
        return self.bounds[self.typical]

    def alike(self, j: int) -> bool:
        """Layer j launches as many kernels as the typical one (its stages sit where the typical's do)."""
        return self.bounds[j + 1] - self.bounds[j] == self.g

    def shifted(self, by: int) -> Layers:
        return Layers(tuple(b + by for b in self.bounds), self.g, self.anchor + by, self.typical)

    def lengths(self) -> str:
        """Kernels a layer, for the basis: `24`, or `24 (the first 25)` where edge layers differ."""
        sizes = [b - a for a, b in zip(self.bounds, self.bounds[1:])]
        odd = [f"{'the first' if j == 0 else 'the last' if j == len(sizes) - 1 else f'layer {j}'} {n}"
               for j, n in enumerate(sizes) if n != self.g]
        return f"{self.g}" + (f" ({', '.join(odd)})" if odd else "")


def _runs(template: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Per name: its longest run of occurrences at one spacing, (first, count, spacing, anchor)."""
    order = np.argsort(template, kind="stable")
    cuts = np.flatnonzero(np.diff(template[order])) + 1
    out = []
    for group in np.split(order, cuts):
        if len(group) < 2:
            continue
        gaps = np.diff(group)
        best = (0, 0, 0)  # (length in gaps, first gap index, spacing)
        i = 0
        while i < len(gaps):
            j = i
            while j + 1 < len(gaps) and gaps[j + 1] == gaps[i]:
                j += 1
            if gaps[i] >= MIN_LAYER_KERNELS and (j - i + 1) > best[0]:
                best = (j - i + 1, i, int(gaps[i]))
            i = j + 1
        if best[0]:
            out.append((int(group[best[1]]), best[0] + 1, best[2], int(group[best[1]])))
    return out


# Inductor numbers each Triton kernel it generates (`triton_per_fused_add_..._view_1`, `..._view_4`): the same
# fused op in two layers can carry two numbers, the first and last layer's often their own.
_INDUCTOR_INDEX = re.compile(r"^(triton_\w*?)_\d+$")


def layer_keys(template: np.ndarray, op_names: list[str]) -> np.ndarray:
    """The template with each kernel as the first code of its name without Inductor's number: what a
    layer repeats (a compiled model's layers launch the same fused ops under different numbers)."""
    first: dict[str, int] = {}
    out = np.empty(len(template), dtype=np.int64)
    for i, c in enumerate(template.tolist()):
        name = op_names[c]
        m = _INDUCTOR_INDEX.match(name)
        out[i] = first.setdefault(m.group(1) if m else name, c)
    return out


def find_layers(template: np.ndarray, kinds: list[str]) -> list[Layers]:
    """The forward layers and, when present, the backward's, in template order.

    Each spacing with a run of N occurrences is one layered region of N layers (the backward's
    layers are longer than the forward's); the layer count is the N whose regions, laid without
    overlap, cover the most kernels (runs of three or more first: two occurrences at one spacing
    are no evidence of a layer). A backward layer whose two halves launch the same kernels makes
    a run of 2N at half the spacing; the forward has no such run, so N covers more. The earliest
    region is the forward, the next one the backward; each then takes in the layers beside it that
    launch the same GEMMs and attention among other kernels (_with_edge_layers)."""
    runs = [r for r in _runs(template) if r[1] >= 2]
    if not runs:
        return []
    best: tuple[tuple, list] | None = None
    for count in sorted({r[1] for r in runs}):
        regions = []
        for g in sorted({r[2] for r in runs if r[1] == count}):
            earliest = min((r for r in runs if r[1] == count and r[2] == g), key=lambda r: r[0])
            region = _aligned(template, kinds, earliest)
            if region is not None and region[1] == count:
                regions.append(region)
        if not regions:
            continue
        regions.sort()
        laid = [regions[0]]
        for region in regions[1:]:
            if region[0] >= laid[-1][0] + count * laid[-1][2]:
                laid.append(region)
        laid = laid[:2]
        score = (count >= 3, sum(r[1] * r[2] for r in laid), count)
        if best is None or score > best[0]:
            best = (score, laid)
    if best is None:
        return []
    found = [Layers.uniform(*r) for r in best[1]]
    out: list[Layers] = []
    for i, r in enumerate(found):  # each widened no further than its neighbours (the one before as widened)
        hi = found[i + 1].first if i + 1 < len(found) else len(template)
        out.append(_with_edge_layers(template, kinds, r, out[-1].end if out else 0, hi))
    return out


# The kernels a layer's work is made of, which a compiler leaves alone: Inductor fuses the elementwise
# work around them into kernels of its own, and differently at a model's first and last layer.
BACKBONE = ("gemm", "attention", "conv")


def _with_edge_layers(template: np.ndarray, kinds: list[str], region: Layers, lo: int, hi: int) -> Layers:
    """`region` with the layers just before and after it (inside [lo, hi)) that launch the typical
    layer's GEMMs, attention and convolutions (the same kernels, in any order) among other kernels:
    a compiled model's first layer computes the causal mask and the rotary tables in its fused
    kernels, its last layer's backward runs its gradients in another order. Such a layer begins as
    many kernels before its first GEMM as the typical layer does (never before the GEMM before it) and
    ends as many after its last; it is half to one and a half times the typical layer's length."""
    g, t0 = region.g, region.typical_first
    backbone = [i for i, k in enumerate(kinds) if k in BACKBONE and lo <= i < hi]
    own = [i for i in backbone if t0 <= i < t0 + g]
    if len(own) < 2:
        return region
    want = Counter(template[own].tolist())
    lead, tail = own[0] - t0, t0 + g - own[-1]
    bounds, typical = list(region.bounds), region.typical
    while True:  # before it
        prev = [i for i in backbone if i < bounds[0]]
        block = prev[-len(own):]
        if len(block) < len(own) or Counter(template[block].tolist()) != want:
            break
        floor = prev[-len(own) - 1] + 1 if len(prev) > len(own) else lo
        start = max(block[0] - lead, floor)
        if not 0.5 * g <= bounds[0] - start <= 1.5 * g:
            break
        bounds.insert(0, start)
        typical += 1
    while True:  # after it
        nxt = [i for i in backbone if i >= bounds[-1]]
        block = nxt[:len(own)]
        if len(block) < len(own) or Counter(template[block].tolist()) != want:
            break
        end = min(block[-1] + tail, nxt[len(own)] if len(nxt) > len(own) else hi)
        if not 0.5 * g <= end - bounds[-1] <= 1.5 * g:
            break
        bounds.append(end)
    return Layers(tuple(bounds), g, region.anchor, typical)


def _aligned(template: np.ndarray, kinds: list[str], run: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """The run's layers placed where the repeat allows: the region where the sequence equals
    itself one spacing on reaches from `lo` to `hi`, and N layers fit in it with some slack (the
    embedding's add is the same kernel as a layer's residual add, the final layer norm as a
    layer's first). A layer starts at a layer norm where one fits (a pre-LN transformer's layer
    begins with it: of two norms, the one before the attention), at a convolution in a conv net,
    else as early as the repeat allows."""
    first, count, g, anchor = run
    lo = first
    while lo - 1 >= 0 and lo - 1 + g < len(template) and template[lo - 1] == template[lo - 1 + g] and lo > first - g + 1:
        lo -= 1
    hi = first + (count - 1) * g  # the last occurrence; extend while the repeat holds
    while hi + 1 < len(template) and hi + 1 - g >= 0 and template[hi + 1] == template[hi + 1 - g]:
        hi += 1
    count = min(count, (hi + 1 - lo) // g)  # whole layers only: the repeat must hold for all of each
    if count < 2:
        return None
    latest = hi + 1 - count * g
    # a CNN's block begins with its convolution (conv, norm, activation), a pre-LN transformer's with its norm
    lead = ("conv", "gemm") if "conv" in kinds[lo:hi + 1] else ("norm",)  # a 1x1 conv runs as a GEMM
    fits = [x for x in range(lo, latest + 1) if kinds[x] in lead]
    start = next((x for x in fits if lead == ("norm",) and _opens_attention(kinds[x + 1:x + g])), fits[0] if fits else lo)
    return (start, count, g, anchor)


def _opens_attention(after: list[str]) -> bool:
    """The kinds after a norm reach an attention (or a manual one's softmax) before another norm."""
    return next((k for k in after if k in ("norm", "attention", "softmax")), "norm") != "norm"
