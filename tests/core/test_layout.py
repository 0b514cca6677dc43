"""Layout transposes per step (parsers.analyses.layout) on the real conv captures, against SQL: the
kernels named cuDNN's nchwToNhwc / nhwcToNchw whose launch call starts inside a `step_N` range
(tests/step_sql.py's steps and periods), summed and divided by the steps."""
from __future__ import annotations

import sqlite3

import pytest

from nsight_tui.parsers.analyses.layout import layout_share
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace

from conftest import SAMPLES
from helpers.step_sql import steps as sql_steps

_IN_STEP = """SELECT count(*), coalesce(sum(k.end - k.start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL k
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
    JOIN StringIds s ON s.id = k.demangledName
    WHERE r.start >= ? AND r.start <= ? AND ({where})"""
_TRANSPOSE = "s.value LIKE '%nchwToNhwc%' OR s.value LIKE '%nhwcToNchw%'"


@pytest.fixture(scope="module")
def conv(async_trace):
    return lambda stem: async_trace(SAMPLES / "hw" / f"{stem}.sqlite.xz")


@pytest.mark.parametrize("stem", ["conv_agshapes", "conv_emitshapes"])
def test_layout_share_per_step_matches_sql(conv, stem):
    path = conv(stem)
    steps = sql_steps(path)
    assert steps
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        per = [con.execute(_IN_STEP.format(where=_TRANSPOSE), (s.start, s.end)).fetchone() for s in steps]
        every = [con.execute(_IN_STEP.format(where="1"), (s.start, s.end)).fetchone() for s in steps]
    got = layout_share(range_model(load_trace(path)))
    assert got.steps == len(steps)
    assert sum(c for c, _ in per) > 0  # the capture has transposes in its steps: the test can fail
    assert got.layout_kernels == pytest.approx(sum(c for c, _ in per) / len(steps))
    assert got.layout_ns == pytest.approx(sum(t for _, t in per) / len(steps))
    assert got.kernel_ns == pytest.approx(sum(t for _, t in every) / len(steps))
    mean_period = sum(s.period for s in steps) / len(steps)
    assert got.step_ns == pytest.approx(mean_period)
    assert got.share_of_step == pytest.approx(sum(t for _, t in per) / len(steps) / mean_period)
    assert 0 < len(got.top) <= 5 and all("Nhwc" in n or "Nchw" in n for n, _ in got.top)


def test_a_transformer_has_no_layout_transposes(async_trace):
    path = async_trace(SAMPLES / "nonvtx" / "small_ctx512_b8_async_twin.sqlite.xz")
    got = layout_share(range_model(load_trace(path)))
    assert got.steps == 4 and got.layout_ns == 0 and got.top == [] and got.share_of_step == 0


def test_the_layout_finding_on_the_channels_first_resnet_and_not_its_twin(async_trace):
    """`channels-last-layout` on the Lightning ResNet-50 captured in NCHW (its structure inferred):
    its estimate is the transposes' GPU time per inferred step, by SQL over that run's kernels; the
    channels_last twin of the same call has none and no finding."""
    from nsight_tui.parsers.analyses.findings import findings

    third = SAMPLES / "thirdparty"
    nchw = load_trace(async_trace(third / "lightning_resnet50_b32.sqlite.xz"))
    found = {f.id: f for f in findings(nchw)}
    assert "channels-last-layout" in found
    share = layout_share(range_model(nchw))
    with sqlite3.connect(f"{nchw.path.resolve().as_uri()}?mode=ro", uri=True) as con:
        total, all_kernels = con.execute(
            "SELECT sum(CASE WHEN s.value LIKE '%nchwToNhwc%' OR s.value LIKE '%nhwcToNchw%' THEN k.end - k.start "
            "ELSE 0 END), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName").fetchone()
    assert total > 0.05 * all_kernels  # a visible share over the whole run: the rule has something to find
    f = found["channels-last-layout"]
    # the rule's estimate; the saving is the replay's (the transposes dropped with their launch calls:
    # tests/core/test_replay_drop.py)
    assert f.estimate_ms_per_step == pytest.approx(share.layout_ns / 1e6)
    assert f.replayed and f.edits == ["drop:layout@step"]
    assert share.layout_ns * share.steps <= total  # the steps' transposes are some of the run's
    twin = load_trace(async_trace(third / "lightning_resnet50_b32_channels_last.sqlite.xz"))
    assert "channels-last-layout" not in {f.id for f in findings(twin)}
