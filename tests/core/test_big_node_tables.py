"""A range holding most of the trace (step_N over every step, whole_run) gets its kernel table
by a faster path (ops marked in one pass, the trace's ops sorted once by name and duration);
its numbers must be what a plain group-by of its ops gives, on every committed sample and
on every node, big or small, whichever path the size picks."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import sample_traces
from nsight_tui.parsers.analyses.ratios import family_shares
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model


def _nodes(model):
    stack = [n for g in model.aggregated_groups for n in g.roots]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _expected(trace, ids, model):
    """Independent: the ops of every instance, from the model's (range, op) pairs, then pandas."""
    ops = set()
    for i in ids:
        ops.update(model.pair_op[model.pair_range == i].tolist())
    pos = np.array(sorted(ops), dtype=np.int64)
    o = trace.ops.iloc[pos]
    frame = pd.DataFrame({"code": o["name"].to_numpy(), "dur": (o["end"] - o["start"]).to_numpy()})
    g = frame.groupby("code")["dur"]
    table = pd.DataFrame({"instances": g.size(), "total_ns": g.sum(), "min_ns": g.min(), "max_ns": g.max(),
                          "med_ns": g.median()})
    table.index = [trace.op_names[c] for c in table.index]
    return pos, table.sort_index()


@pytest.mark.parametrize("path", sample_traces()[:4], ids=lambda p: p.stem)
def test_node_tables_match_a_plain_group_by(path):
    trace = load_trace(path)
    model = range_model(trace, "process")
    checked_big = 0
    for node in _nodes(model):
        pos, expected = _expected(trace, node.ids, model)
        got_pos = node.op_positions()
        assert sorted(got_pos.tolist()) == pos.tolist()  # each op once (one instance: in start order)
        summary = model.kernel_summary(got_pos)
        if len(pos) * 16 >= len(trace.ops):
            checked_big += 1
        got = summary.set_index("name")[["instances", "total_ns", "min_ns", "max_ns", "med_ns"]].sort_index()
        pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_names=False)
        shares = family_shares(model, got_pos)
        fam = name_families(trace)[trace.ops["name"].to_numpy()[pos]]
        dur = (trace.ops["end"].to_numpy() - trace.ops["start"].to_numpy())[pos]
        for row in shares.itertuples():
            assert row.total_ns == int(dur[fam == row.family].sum())
            assert row.kernels == int((fam == row.family).sum())
    assert checked_big > 0  # the fast path really ran
