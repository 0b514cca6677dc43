"""`diff` matches per-layer ranges named otherwise on each side (`block_N` against the inferred
`layer_N`, or against another annotation's `transformer.h.N`) by role and index, and leaves them
apart, saying why, when they are not the same layers.

No committed capture has per-layer ranges, so they are written into copies of the real GPT-2
captures where a module's range would sit, from the model's structure in SQL (tests/helpers/layer_ranges.py).
Truths: SQL over each export (the kernels launched inside the per-layer ranges within the step
ranges; for the unannotated run, the same places in its launch order, the two runs' kernel names
checked equal one by one)."""
from __future__ import annotations

import shutil

import pytest

from nsight_tui.parsers.analyses.diff import ADDED, BOTH, REMOVED, diff_runs
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.diff import as_json, markdown

from conftest import SAMPLES
from helpers.layer_ranges import layer_kernels, with_layer_ranges

NONVTX = SAMPLES / "nonvtx"
TWIN, INFERRED, FWD_TWIN = "small_ctx512_b8_async_twin", "small_ctx512_b8_async_nonvtx", "small_ctx512_fwd_b8_async_twin"
LAYERS = 12  # GPT-2 small (the capture's config)


@pytest.fixture(scope="module")
def runs(async_trace, tmp_path_factory):
    """The twin with `block_N` around each layer, and the unannotated run of the same program (its
    STEM.steps.json beside it, as the capture left it); the negatives: `block_N` around pairs of
    layers, and around each layer's second half and the next one's first (one layer norm late)."""
    folder = tmp_path_factory.mktemp("layer_ranges")
    inferred = folder / f"{INFERRED}.sqlite"
    shutil.copyfile(async_trace(NONVTX / f"{INFERRED}.sqlite.xz"), inferred)
    shutil.copyfile(NONVTX / f"{INFERRED}.steps.json", folder / f"{INFERRED}.steps.json")
    twin = async_trace(NONVTX / f"{TWIN}.sqlite.xz")
    return {
        "inferred": inferred,
        "block": with_layer_ranges(twin, folder / "twin_block.sqlite"),
        "pairs": with_layer_ranges(twin, folder / "twin_pairs.sqlite", span=2),
        "shifted": with_layer_ranges(twin, folder / "twin_shifted.sqlite", shift=1),
        "tree": with_layer_ranges(twin, folder / "twin_tree.sqlite", name="transformer.h.{}", around="transformer"),
        "fwd_h": with_layer_ranges(async_trace(NONVTX / f"{FWD_TWIN}.sqlite.xz"), folder / "fwd_h.sqlite",
                                   name="transformer.h.{}", first=1),
    }


@pytest.mark.parametrize("order", ["annotated first", "inferred first"])
def test_annotated_layers_meet_the_inferred_layers_by_index(runs, order):
    annotated, inferred = runs["block"], runs["inferred"]
    a, b = (annotated, inferred) if order == "annotated first" else (inferred, annotated)
    d = diff_runs(load_trace(a), load_trace(b))
    node = d.find("step_N/forward/block_N")  # the annotated name stays, the inferred one is said
    assert node is not None and node.status == BOTH and node.layers_by_index == LAYERS
    other = "B" if order == "annotated first" else "A"
    assert node.role_match.startswith(f"{other}'s layer_N · {LAYERS} layers by index, kernel names")
    assert d.find("step_N/forward/layer_N") is None  # met, not shown twice
    want_ns, want_n = layer_kernels(annotated, "block_[0-9]*")
    inferred_ns, inferred_n = layer_kernels(annotated, "block_[0-9]*", same_program=inferred)
    got = {"annotated": (node.kernel_ns.a, node.kernels.a), "inferred": (node.kernel_ns.b, node.kernels.b)}
    if order == "inferred first":
        got = {"annotated": got["inferred"], "inferred": got["annotated"]}
    assert got["annotated"][1] == pytest.approx(want_n) and got["inferred"][1] == pytest.approx(inferred_n)
    assert got["annotated"][0] == pytest.approx(want_ns, rel=1e-6)
    assert got["inferred"][0] == pytest.approx(inferred_ns, rel=1e-6)
    # the attention's parts inside meet the inferred layer's stages of the same part (the inferred
    # stage named for what it does: `attention softmax` is the annotated `computing_softmax`)
    softmax = d.find("step_N/forward/block_N/attention softmax")
    assert softmax is not None and softmax.status == BOTH and "scaled_dot_product_attention/computing_softmax" in \
        softmax.role_match
    assert any("matched by role and index" in n and "step_N/forward/block_N" in n for n in d.notes)
    text = markdown(d)
    assert f"step_N/forward/block_N (= {other}'s layer_N · {LAYERS} layers by index" in text
    step = next(r for r in as_json(d)["threads"][0]["ranges"] if r["path"] == "step_N")
    forward = next(c for c in step["children"] if c["name"] == "forward")
    block = next(c for c in forward["children"] if c["name"] == "block_N")
    assert block["role_match"].startswith(f"{other}'s layer_N") and block["layers_by_index"] == LAYERS


def test_annotated_layers_named_otherwise_meet_by_index(runs):
    """`block_N` (training run, 0..11) against `transformer.h.N` (another run, forward only, numbered
    1..12): both annotated; the j-th index of one meets the j-th of the other."""
    d = diff_runs(load_trace(runs["block"]), load_trace(runs["fwd_h"]))
    node = d.find("step_N/forward/block_N")
    assert node is not None and node.status == BOTH and node.layers_by_index == LAYERS
    assert node.role_match.startswith("B's transformer.h.N · ")
    for side, path, pattern in (("a", runs["block"], "block_[0-9]*"), ("b", runs["fwd_h"], "transformer.h.[0-9]*")):
        want_ns, want_n = layer_kernels(path, pattern)
        assert getattr(node.kernels, side) == pytest.approx(want_n)
        assert getattr(node.kernel_ns, side) == pytest.approx(want_ns, rel=1e-6)


def test_layers_inside_a_module_tree_meet_the_inferred_layers(runs):
    """A module tree's ranges: `transformer` around `transformer.h.N` (the inferred run has no
    `transformer`): the series is met one level up, where the inferred layers sit, and leaves its
    parent (nothing twice); the parts inside meet the inferred stages from there."""
    d = diff_runs(load_trace(runs["tree"]), load_trace(runs["inferred"]))
    node = d.find("step_N/forward/transformer.h.N")
    assert node is not None and node.status == BOTH and node.layers_by_index == LAYERS
    assert node.role_match.startswith("B's layer_N · ")
    assert d.find("step_N/forward/transformer/transformer.h.N") is None
    assert d.find("step_N/forward/transformer").status == REMOVED
    want_ns, want_n = layer_kernels(runs["tree"], "transformer.h.[0-9]*")
    inferred_ns, inferred_n = layer_kernels(runs["tree"], "transformer.h.[0-9]*", same_program=runs["inferred"])
    assert node.kernels.a == pytest.approx(want_n) and node.kernels.b == pytest.approx(inferred_n)
    assert node.kernel_ns.a == pytest.approx(want_ns, rel=1e-6)
    assert node.kernel_ns.b == pytest.approx(inferred_ns, rel=1e-6)
    softmax = d.find("step_N/forward/transformer.h.N/attention softmax")  # the inferred stage of that part
    assert softmax.status == BOTH and softmax.role_match == "A's scaled_dot_product_attention/computing_softmax"


@pytest.mark.parametrize("case, why", [("pairs", "6 layers against 12"),
                                       ("shifted", "launches other kernels")])
def test_ranges_that_are_not_the_same_layers_stay_apart(runs, case, why):
    """Ranges around pairs of layers (6 against 12), and ranges one layer norm late (12 against
    12, each holding a layer's second half and the next one's first): never matched, and said why."""
    d = diff_runs(load_trace(runs[case]), load_trace(runs["inferred"]))
    block, layer = d.find("step_N/forward/block_N"), d.find("step_N/forward/layer_N")
    assert block is not None and block.status == REMOVED and not block.layers_by_index and not block.role_match
    assert layer is not None and layer.status == ADDED and not layer.role_match
    assert why in block.role_unmatched and why in layer.role_unmatched
    assert any(n.startswith("step_N/forward/block_N (A only) left unmatched") and why in n for n in d.notes)
    step = next(r for r in as_json(d)["threads"][0]["ranges"] if r["path"] == "step_N")
    forward = next(c for c in step["children"] if c["name"] == "forward")
    assert why in next(c for c in forward["children"] if c["name"] == "block_N")["role_unmatched"]
    # what each side holds is its own: the A-only series' kernels are those SQL finds inside its ranges
    want_ns, want_n = layer_kernels(runs[case], "block_[0-9]*")
    assert block.kernels.a == pytest.approx(want_n) and block.kernel_ns.a == pytest.approx(want_ns, rel=1e-6)
