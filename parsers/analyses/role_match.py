"""Ranges of two runs matched by role where their names do not meet where they sit:
one run's ranges inferred from its kernel sequence and the other's annotated (an inferred layer's
`computing_softmax` against the annotated `scaled_dot_product_attention/computing_softmax`), or
per-layer ranges named otherwise on each side (`block_N` against `layer_N` or `transformer.h.N`,
checked by analyses.layer_match). Used by analyses.diff's merge of the two range trees: each
function takes the sibling ranges of both sides by match key, and `cut` (ranges met elsewhere,
which leave their own place so nothing counts twice)."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.layer_match import is_series, match_layers
from nsight_tui.parsers.model.ranges import RangeNode, display_name, path_key
from nsight_tui.parsers.read.conventions import INFERRED_DOMAIN, INFERRED_PART_OF

SAME_LEVEL, PLACED, LAYERS = ("same level",), ("placed",), "layers"  # keys of the roles, never a range name


def text_of(node: RangeNode) -> str:
    """The range's text (its first instance's: all share the name path)."""
    return node.model.trace.range_texts.objects[int(node.ids[0])]


def combined(nodes: list[RangeNode]) -> RangeNode:
    """One node over the instances of several (their figures are sums over `ids`)."""
    first = nodes[0]
    return RangeNode(first.model, first.name, np.concatenate([n.ids for n in nodes]), first.depth, None,
                     [c for n in nodes for c in n.children])


def is_inferred(node: RangeNode) -> bool:
    return node.model.trace.range_domains.objects[int(node.ids[0])] == INFERRED_DOMAIN


def _within(node: RangeNode, cut: set[int], trail: str = ""):
    """(range, its path from `node`'s level) for `node` and everything under it, pre-order; a range
    cut from its place (met elsewhere) is left out with what is under it."""
    if id(node) in cut:
        return
    path = trail + display_name(text_of(node))
    yield node, path
    for child in node.children:
        yield from _within(child, cut, path + "/")


def role_matches(a_by: dict[str, RangeNode], b_by: dict[str, RangeNode], cut: set[int]) -> dict:
    """Where one side's ranges are inferred and the other's annotated, the names need not meet where
    they sit: an inferred `layer_N` holds `computing_softmax` where the annotated run has it under
    `scaled_dot_product_attention`, a range the inferred side has no counterpart of; the annotated
    backward's `cub::DeviceRadixSort` is the inferred `embedding backward`'s. An inferred range one
    side only has adopts, for its children, the same-named ranges among the other side's one-sided
    siblings and under them (those then leave their own place, so nothing counts twice); it meets
    such a range itself where the names meet one level up (under an annotated `block_N` matched to
    the inferred `layer_N` by layer_roles, the inferred `computing_softmax` meets the annotated
    `scaled_dot_product_attention/computing_softmax`)."""
    out: dict = {}
    for side, mine, other in (("b", b_by, a_by), ("a", a_by, b_by)):
        lone = [n for k, n in mine.items() if k not in other and is_inferred(n)]
        strangers = [n for k, n in other.items() if k not in mine and not is_inferred(n)]
        if not lone or not strangers:
            continue
        found: dict[str, list[tuple[RangeNode, str]]] = {}
        for stranger in strangers:
            for node, path in _within(stranger, cut):
                # an annotated attention part meets the inferred stage of that part by the stage's name
                text = text_of(node)
                found.setdefault(path_key(INFERRED_PART_OF.get(text, text)), []).append((node, path))
        direct: dict[str, tuple[RangeNode, str]] = {}
        for key, node in mine.items():  # a lone inferred range meets a same-named range inside a stranger
            if any(node is n for n in lone) and key in found:
                direct[key] = _adopted(found.pop(key), cut, side)
        if direct:
            out.setdefault(SAME_LEVEL, []).append((side, direct))
        for inferred in lone:
            wanted = {path_key(text_of(c)) for c in inferred.children} & set(found)
            if not wanted:
                continue
            nodes: dict[str, tuple[RangeNode, str]] = {}
            for key in wanted:
                nodes[key] = _adopted(found.pop(key), cut, side)
            key = next(k for k, n in mine.items() if n is inferred)
            out[("children", key)] = {"side": side, "nodes": nodes}
    return out


def _adopted(group: list[tuple[RangeNode, str]], cut: set[int], side: str) -> tuple[RangeNode, str]:
    """The other side's same-named ranges (several places: one node over them) and their place in
    words; they leave their own place (`cut`)."""
    members = [n for n, _ in group]
    cut.update(id(n) for n in members)
    return (members[0] if len(members) == 1 else combined(members),
            f"{'A' if side == 'b' else 'B'}'s {_folded(group[0][1])}")


def _renamed(by: dict[str, RangeNode], old: str, new: str) -> dict[str, RangeNode]:
    return {(new if k == old else k): n for k, n in by.items()}


def _series(mine: dict[str, RangeNode], other: dict[str, RangeNode], cut: set[int]) -> list[tuple[str, RangeNode, str]]:
    """The per-layer series among one side's siblings the other side lacks, and inside such siblings
    (a module tree's `transformer` around its `transformer.h.N`): (key, node, its path from here)."""
    out = []

    def numbered(node: RangeNode, key: str) -> bool:
        # a numbered name folds to `..._N`: only those can be a series (a cheap test before reading instances)
        return key.endswith("N") and id(node) not in cut and is_series(node)

    for key, node in mine.items():
        if key in other or id(node) in cut:
            continue
        if numbered(node, key):
            out.append((key, node, key))
            continue
        stack = [(c, key + "/" + display_name(text_of(c))) for c in node.children]
        while stack:
            below, path = stack.pop()
            below_key = path_key(text_of(below))
            if numbered(below, below_key):
                out.append((below_key, below, _folded(path)))
            else:
                stack.extend((c, path + "/" + display_name(text_of(c))) for c in below.children)
    return out


def layer_roles(a_by: dict[str, RangeNode], b_by: dict[str, RangeNode], cut: set[int]) -> tuple:
    """Per-layer ranges named otherwise on each side (`block_N` against `layer_N` or `h.N`), one side
    only each (or inside a range one side only has), met by role and index where
    analyses.layer_match finds them the same layers (equal counts, the j-th layers' kernels alike);
    the merged row keeps the annotated side's name (A's where both are annotated) and says the
    other's. Returns (a_by, b_by) renamed, the roles ({key: text, (LAYERS, key): layer count,
    PLACED: [(side, key, node)], a series from inside a one-sided range, to sit here once the
    ranges cut from their place are gone}) and, for a series here left apart, why ({key: text})."""
    a_cands, b_cands = _series(a_by, b_by, cut), _series(b_by, a_by, cut)
    roles: dict = {}
    unmatched: dict[str, str] = {}
    if not a_cands or not b_cands:
        return a_by, b_by, roles, unmatched
    read: dict = {}  # each series' kernel sequences, read once
    tried = sorted(((match_layers(ca[1], cb[1], read), ca, cb) for ca in a_cands for cb in b_cands),
                   key=lambda t: (not t[0].matched, -t[0].alike))
    done: set[int] = set()
    for m, (ka, an, pa), (kb, bn, pb) in tried:
        if not m.matched or id(an) in done or id(bn) in done:
            continue
        keep_b = is_inferred(an) and not is_inferred(bn)
        key = kb if keep_b else ka
        if any(by.get(key) is not None and by.get(key) is not n for by, n in ((a_by, an), (b_by, bn))):
            continue  # the name is another range's here: no place for the pair
        done |= {id(an), id(bn)}
        for side, k, node, by in (("a", ka, an, a_by), ("b", kb, bn, b_by)):
            if by.get(k) is node:  # a sibling here: renamed in place
                renamed = _renamed(by, k, key)
                a_by, b_by = (renamed, b_by) if side == "a" else (a_by, renamed)
            else:  # from inside a one-sided range: leaves it, sits here
                cut.add(id(node))
                roles.setdefault(PLACED, []).append((side, key, node))
        roles[key] = f"{'A' if keep_b else 'B'}'s {pa if keep_b else pb} · {m.a_layers} layers by index, " \
                     f"{m.basis} {100 * m.alike:.0f}% alike"
        roles[(LAYERS, key)] = m.a_layers
    for m, (ka, an, pa), (kb, bn, pb) in tried:  # the best try of each series here left apart says why
        if not m.matched:
            if id(an) not in done and a_by.get(ka) is an and ka not in unmatched:
                unmatched[ka] = f"not the same layers as B's {pb}: {m.reason}"
            if id(bn) not in done and b_by.get(kb) is bn and kb not in unmatched:
                unmatched[kb] = f"not the same layers as A's {pa}: {m.reason}"
    return a_by, b_by, roles, unmatched


def _folded(path: str) -> str:
    return "/".join(path_key(p) for p in path.split("/"))
