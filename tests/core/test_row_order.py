"""Every list in time order whatever the export's row order (nsys 2025.6+ does not promise time
order): a copy of committed samples with their tables' rows scrambled gives the same output,
everywhere: the six reports in both attributions, the report's answers, backward by part,
both range trees, kernel tables, launches, correlations."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import REPORTS, sample_file
from nsight_tui.parsers import Options, Profile
from nsight_tui.render.backward_parts import backward_parts_json
from nsight_tui.render.document import document
from nsight_tui.parsers.analyses.backward_parts import backward_parts
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.nsys.reports import build_report
from nsight_tui.render.nsys import render_csv
from helpers.shuffled import shuffled_copy

NAMES = ["small_ctx128", "small_ctx128_agnvtx"]


@pytest.fixture(scope="module", params=NAMES)
def pair(request, tmp_path_factory):
    src = sample_file(request.param)
    dst = shuffled_copy(src, tmp_path_factory.mktemp("shuffled") / src.name)
    return load_trace(src), load_trace(dst)


def report_of(trace, attribution="process", **options) -> dict:
    """The report's JSON document on `trace` (the front door's report, laid out by render)."""
    return document(Profile(trace, Options(attribution=attribution, **options)).report())


def test_the_copy_really_is_out_of_order(pair):
    _, shuffled = pair
    for frame in (shuffled.ranges, shuffled.api):
        assert (np.diff(frame["start"].to_numpy()) < 0).sum() > len(frame) // 4


@pytest.mark.parametrize("mode", ["process", "nsys"])
def test_reports(pair, mode):
    a, b = pair
    for report in REPORTS:
        assert render_csv(build_report(a, report, mode)) == render_csv(build_report(b, report, mode)), report


def _answers(out):
    return json.dumps({k: v for k, v in out.items() if k != "file"}, sort_keys=True)


@pytest.mark.parametrize("mode", ["process", "nsys"])
def test_report_answers_and_backward_parts(pair, mode):
    a, b = pair
    answers = report_of(b, mode)
    assert _answers(report_of(a, mode)) == _answers(answers)
    # the per-step list is in time order
    steps = [s["step"] for s in answers["timing"]["steps"]]
    assert steps == sorted(steps, key=lambda s: int(s.split("_")[1]))
    assert ([backward_parts_json(t) for t in backward_parts(range_model(a, mode))]
            == [backward_parts_json(t) for t in backward_parts(range_model(b, mode))])


def _tree(groups):
    rows = []
    for g in groups:
        stack = list(reversed(g.roots))
        while stack:
            n = stack.pop()
            rows.append((g.label, g.is_main, n.path, n.instances, n.cpu_ns, n.busy_ns, n.kernels, n.ops,
                         n.is_ops, n.foreign))
            stack.extend(reversed(n.children))
    return rows


@pytest.mark.parametrize("mode", ["process", "nsys"])
def test_range_trees(pair, mode):
    a, b = pair
    ma, mb = range_model(a, mode), range_model(b, mode)
    assert _tree(ma.aggregated_groups) == _tree(mb.aggregated_groups)
    assert _tree(ma.thread_groups) == _tree(mb.thread_groups)
    assert {k: (v.gtid, v.framed_ops, v.own_ops) for k, v in ma.main_info.items()} == \
        {k: (v.gtid, v.framed_ops, v.own_ops) for k, v in mb.main_info.items()}


def test_kernel_tables_launches_and_correlations(pair):
    a, b = pair
    ma, mb = range_model(a, "process"), range_model(b, "process")

    def backward_ops(m):
        return m.ops_of(m.ranges_named("backward"))

    ka, kb = ma.kernel_summary(backward_ops(ma)), mb.kernel_summary(backward_ops(mb))
    pd.testing.assert_frame_equal(ka, kb)
    top = ka["name"].iloc[0]
    # positions ("op") are the loader's own numbering; everything shown must agree
    la = ma.launches(backward_ops(ma), top).drop(columns=["op"])
    lb = mb.launches(backward_ops(mb), top).drop(columns=["op"])
    pd.testing.assert_frame_equal(la, lb)
    for corr in la["corr"].iloc[:: max(1, len(la) // 5)]:
        ca, cb = ma.correlation(int(corr)), mb.correlation(int(corr))
        assert (ca.api_name, ca.api_start, ca.thread, ca.own_stack, ca.main_stack, ca.attributed) == \
            (cb.api_name, cb.api_start, cb.thread, cb.own_stack, cb.main_stack, cb.attributed)
        cols = ["kind", "name", "start", "duration", "device", "stream", "corr"]
        pd.testing.assert_frame_equal(ca.ops[cols].reset_index(drop=True), cb.ops[cols].reset_index(drop=True))
