"""The range tree of an op-range capture (--autograd-nvtx / emit_nvtx): the autograd thread's
ranges shown under the main-thread range they ran in, PyTorch's op ranges under an `ops`
level beside the user's ranges, names folded for aggregation. Expected values from SQL."""
from __future__ import annotations

import re

from helpers import process_sql
import pytest
from conftest import SAMPLES
from helpers.xz_samples import plain
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model, path_key

OP_SAMPLES = ["small_ctx128_agnvtx", "small_ctx128_emitnvtx"]


def walk(nodes):
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


@pytest.mark.parametrize("name", OP_SAMPLES)
def test_autograd_ranges_sit_under_the_main_range_they_ran_in(name):
    path = plain(SAMPLES / f"{name}.sqlite.xz")
    trace = load_trace(path)
    model = range_model(trace, "process")
    con = process_sql.connect(path)
    (main,) = process_sql.main_threads(con).values()
    # Top ranges of the other thread (no range of its own thread around them), per main-thread
    # `backward` (rowid) they began in. A range o != f of f's thread is around f when o.s <= f.s
    # and o.e >= f.e: `reach` is the furthest end of the other ranges starting at or before f
    # (those before it in (s, rid) order, and those after it with the same start), so f is on
    # top when reach < f.e. One pass of window functions, not a scan of the earlier ranges per range.
    con.executescript("""
        CREATE TEMP TABLE around AS
            SELECT rid, max(coalesce(max(e) OVER (PARTITION BY gtid ORDER BY s, rid
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1),
                            coalesce(max(e) OVER (PARTITION BY gtid, s ORDER BY rid
                                                  ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), -1)) AS reach
            FROM rng;
        CREATE UNIQUE INDEX temp.around_rid ON around(rid);
        CREATE INDEX temp.rng_pid ON rng(pid, s);""")
    expected = dict(con.execute("""
        SELECT b.rid, count(*) FROM rng b JOIN rng f ON f.pid = b.pid AND f.gtid != b.gtid
             AND f.s >= b.s AND f.s <= b.e
        JOIN around a ON a.rid = f.rid
        WHERE b.gtid = ? AND b.text = 'backward' AND a.reach < f.e
        GROUP BY b.rid""", (main,)).fetchall())
    rowid = trace.ranges["rowid"].to_numpy()
    (group,) = [g for g in model.thread_groups if g.is_main]
    got = {}
    for node in walk(group.roots):
        if node.label == "backward" and not node.foreign:
            kids = [c for c in node.children if c.foreign] + [c for o in node.children if o.is_ops
                                                              for c in o.children if c.foreign]
            got[int(rowid[node.ids[0]])] = len(kids)
            assert all(model.r_gtid[c.ids[0]] != main for c in kids)
    assert got == expected and sum(got.values()) > 500
    # ...and the other thread keeps its own tree under nsys's rule.
    assert any(not g.is_main and g.roots for g in model.thread_groups)
    # nsys's attribution shows each thread's own tree only.
    nsys_main = next(g for g in range_model(trace, "nsys").thread_groups if g.is_main)
    assert not any(n.foreign for n in walk(nsys_main.roots))


@pytest.mark.parametrize("name", OP_SAMPLES)
def test_op_ranges_go_under_an_ops_level_beside_user_ranges(name):
    trace = load_trace(plain(SAMPLES / f"{name}.sqlite.xz"))
    model = range_model(trace, "process")
    (group,) = [g for g in model.aggregated_groups if g.is_main]
    is_op = re.compile(r", (seq|op_id) = |^(aten|autograd|torch::autograd)::")
    texts = trace.ranges["text"].to_numpy()
    for level in [group.roots, *(n.children for n in walk(group.roots))]:
        ops = [n for n in level if n.is_ops]
        # as exported (aggregated labels are folded): PyTorch's ranges carry an op id
        users = [n for n in level if not n.is_ops and not is_op.search(texts[n.ids[0]])]
        plain_ops = [n for n in level if not n.is_ops and n not in users]
        # never mixed: a level with user ranges holds its op ranges under one `ops`, last
        assert not (users and plain_ops)
        assert len(ops) <= 1 and (not ops or level[-1] is ops[0])
    step = next(n for n in group.roots if n.label == "step_N")
    assert [c.label for c in step.children][:3] == ["forward", "backward", "optimizer"]
    forward = step.children[0]
    assert [c.label for c in forward.children] == ["scaled_dot_product_attention", "ops"]
    # Aggregated names carry no seq / op id: one row per op name.
    labels = [n.label for n in walk(group.roots)]
    assert not any(", seq = " in x or ", op_id = " in x for x in labels)
    backward = step.children[1]
    addmm = next(c for c in backward.children if c.label == "AddmmBackward0 [engine]")
    # 12 layers x 4 linear layers, in each of the 2 steps
    assert addmm.instances == 12 * 4 * 2
    assert addmm.children[0].label == "AddmmBackward0"


def test_path_key_folds_op_details():
    assert path_key(":aten::addmm, seq = 1195, op_id = 614") == ":aten::addmm"
    assert path_key(":aten::mm, op_id = 3, sizes = [[4, 768], [768, 768]]") == ":aten::mm"
    assert path_key(":autograd::engine::evaluate_function: AddmmBackward0, op_id = 9") == ":AddmmBackward0 [engine]"
    assert path_key(":step_12") == ":step_N"
    assert path_key("trainer:step_3") == "trainer:step_N"
