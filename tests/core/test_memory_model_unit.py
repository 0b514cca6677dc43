"""The memory model's parts (analyses/memory_model.py) against truths made apart from it:
the parameter count against the capture's own torch module, the limits against the prediction one
step past them, the fit against numpy's least squares on terms written out here."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from nsight_tui.parsers.analyses.memory_model import (ConfigPoint, fit, largest_batch, largest_ctx, model_sweep,
                                                      parameter_count, predict)

SIZES = {"small": (768, 12, 12), "medium": (1024, 24, 16), "large": (1280, 36, 20), "xl": (1600, 48, 25)}


def point(model, ctx, batch, measured=None, status="ok", attention="manual", file=None):
    d, layers, heads = SIZES[model]
    return ConfigPoint(file or f"{model}_ctx{ctx}_b{batch}", model, ctx, batch, d, layers, heads, 10_000,
                       attention=attention, status=status, measured_bytes=measured, gpu_bytes=85_017_493_504,
                       beside_allocator_bytes=134_734_387)


@pytest.mark.parametrize("d_model,layers,heads,ctx", [(64, 2, 2, 128), (96, 3, 4, 40)])
def test_parameter_count_is_the_capture_models(d_model, layers, heads, ctx):
    torch = pytest.importorskip("torch")
    from nsight_tui.capture.model import GPT2, ModelDims

    with torch.device("meta"):
        model = GPT2(ModelDims(d_model, layers, heads, ctx))
    assert parameter_count(d_model, layers, 10_000, ctx) == model.n_params()


def test_fit_is_least_squares_on_the_two_terms():
    measured = {("medium", 256): 6.83e9, ("medium", 512): 9.32e9, ("medium", 1024): 18.58e9, ("large", 1024): 35.9e9}
    points = [point(m, c, 4, int(v)) for (m, c), v in measured.items()]
    f = fit(points)
    rows, y = [], []
    for (m, c), v in measured.items():  # the terms written out again
        d, layers, heads = SIZES[m]
        params = 2 * 10_000 * d + c * d + layers * (12 * d * d + 13 * d) + 2 * d
        rows.append([4 * c * layers * d, 4 * heads * c * c * layers])
        y.append(int(v) - 16 * params)
    coef = np.linalg.lstsq(np.array(rows, float), np.array(y, float), rcond=None)[0]
    assert f.bytes_per_activation == pytest.approx(coef[0], rel=1e-9)
    assert f.bytes_per_score == pytest.approx(coef[1], rel=1e-9)


def test_one_context_length_cannot_part_the_terms():
    # scores / activations = ctx / d_head, and GPT-2's d_head is 64 in every size: one ctx, one ratio
    m = model_sweep([point("small", 512, 8, 5_796_528_128), point("medium", 512, 4, 9_242_148_864)])
    assert m.fit is None and "another context length" in m.note


def test_fused_attention_has_no_score_term():
    points = [point("medium", c, 4, int(v), attention="fused") for c, v in ((256, 6.0e9), (512, 7.5e9))]
    f = fit(points)
    assert f.bytes_per_score == 0 and f.bytes_per_activation > 0


def test_limits_are_the_last_that_fit():
    points = [point("medium", 256, 4, 6_830_000_000), point("medium", 512, 4, 9_320_000_000),
              point("medium", 1024, 4, 18_580_000_000)]
    f = fit(points)
    room = 85_017_493_504 - 134_734_387
    like = points[0]
    top = largest_ctx(f, like, room)
    as_ctx = lambda c: ConfigPoint(**{**like.__dict__, "ctx": c})  # noqa: E731
    assert predict(f, as_ctx(top)) <= room < predict(f, as_ctx(top + 1))
    b = largest_batch(f, as_ctx(1024), room)
    as_batch = lambda n: ConfigPoint(**{**as_ctx(1024).__dict__, "batch": n})  # noqa: E731
    assert predict(f, as_batch(b)) <= room < predict(f, as_batch(b + 1))


def test_an_oom_cell_is_explained_by_what_grew():
    points = [point("medium", 256, 4, 6_830_000_000), point("medium", 512, 4, 9_320_000_000),
              point("medium", 1024, 4, 18_580_000_000), point("medium", 4096, 4, status="oom")]
    m = model_sweep(points)
    (cell,) = m.out_of_memory
    assert cell.over_bytes == cell.predicted_bytes - m.room_bytes > 0
    assert cell.reference == "medium_ctx1024_b4" and cell.grew_most == "attention_scores"
    assert cell.growth["attention_scores"] > cell.growth["activations"] > 0 == cell.growth["fixed"] - (
        16 * 1024 * (4096 - 1024))  # only the learned positions grow the fixed part


def test_runs_without_a_usable_configuration_are_left_out_with_why(tmp_path):
    from nsight_tui.parsers.analyses.sweep import Run, memory_model, memory_points

    config = {"model": "medium", "d_model": 1024, "n_layers": 24, "n_heads": 16, "vocab": 10_000, "batch": 8,
              "ctx": 512, "dtype": "fp32", "mode": "train", "attention": "manual"}
    memory = {"allocator_peak_bytes": 14_390_657_024, "beside_allocator_bytes": 134_734_831,
              "gpu_total_bytes": 85_017_493_504}

    def ran(config):  # what memory_points reads of a run's report: its config and its memory figures
        return SimpleNamespace(config=config, memory=SimpleNamespace(**memory))

    runs = [Run(tmp_path / "a.sqlite", None, None, "", report=ran(config)),
            Run(tmp_path / "b.sqlite", None, None, "", report=ran({**config, "ctx": True})),
            Run(tmp_path / "c.sqlite", None, None, "", report=ran({**config, "mode": "forward"})),
            Run(tmp_path / "d.sqlite", None, None, "", report=ran({**config, "dtype": "bf16"})),
            Run(tmp_path / "e.oom.json", "xl", 1024, "", status="oom", oom_config=None),
            Run(tmp_path / "f.sqlite", None, None, "", status="error")]
    points, left_out = memory_points(runs)
    assert [p.file for p in points] == ["a.sqlite"] and points[0].measured_source == "nsys"
    assert [line.split(":")[0] for line in left_out] == ["b.sqlite", "c.sqlite", "d.sqlite", "e.oom.json"]
    assert "lacks ctx" in left_out[0] and "mode forward" in left_out[1] and "dtype bf16" in left_out[2]
    m = memory_model(runs)  # one run cannot fit two terms: said, not raised
    assert m.fit is None and m.note and len(m.left_out) == 4
