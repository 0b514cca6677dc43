"""Backward mapped onto the forward's parts (parsers/analyses/backward_parts.py), against the mapping
computed here independently: SQL over the export for "which ranges hold this launch", plain
Python for the rest, on the committed samples captured with --autograd-nvtx, --emit-nvtx and
--backward-ranges (and the shared large captures when present)."""
from __future__ import annotations

import re
from collections import defaultdict

from helpers import process_sql
import pytest
from conftest import SAMPLES, sample_file
from nsight_tui.parsers.analyses.backward_parts import backward_parts
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model

SEQ_SAMPLES = ["small_ctx128_agnvtx", "small_ctx128_emitnvtx"]
NAME_SAMPLES = ["small_ctx128_bwdranges"]

_SEQ = re.compile(r", seq = (\d+)")


def kind_of(text: str) -> str:
    base = re.sub(r", (seq|op_id) = \d+", "", text)
    if base.startswith("autograd::engine::evaluate_function: "):
        return "wrapper"
    if base == "torch::autograd::AccumulateGrad":
        return "accum"
    if _SEQ.search(text) and re.search(r"Backward\d*$", base):
        return "node"
    if ", op_id = " in text or ", seq = " in text or base.startswith(("aten::", "autograd::", "torch::autograd::")):
        return "op"
    return "user"


def fold(text: str) -> str:
    return re.sub(r"\d+$", "N", text)


class Expected:
    """The mapping, written from its definition."""

    def __init__(self, path):
        self.con = con = process_sql.connect(path)
        con.create_function("kind_of", 1, kind_of)
        con.create_function("seq_of", 1, lambda t: int(_SEQ.search(t).group(1)) if _SEQ.search(t) else -1)
        con.executescript("""
            CREATE TEMP TABLE k AS SELECT rid, gtid, pid, s, e, text, kind_of(text) AS kind, seq_of(text) AS seq FROM rng;
            CREATE INDEX temp.k_gtid ON k(gtid, s);
            CREATE INDEX temp.k_seq ON k(pid, seq, s);
            CREATE INDEX temp.k_kind ON k(gtid, kind, s);  -- the innermost range of a kind: a walk back over that kind only
        """)
        self.main = process_sql.main_threads(con)
        steps = "SELECT s, e, gtid FROM rng WHERE text GLOB 'step_[0-9]*'"
        self.phase = {name: [r for (r,) in con.execute(
            f"SELECT p.rid FROM rng p JOIN ({steps}) st ON p.gtid = st.gtid AND p.s >= st.s AND p.e <= st.e "
            f"WHERE p.text = ? AND p.gtid IN ({','.join(map(str, self.main.values()))})", (name,))]
            for name in ("forward", "backward")}
        self.dur = {(kind, i): d for kind, i, d in con.execute(
            "SELECT 0, rowid, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL")}
        self.launch = {(kind, i): (g, cs, ce) for kind, i, g, cs, ce in con.execute(
            "SELECT kind, id, gtid, cs, ce FROM launch")}

    def kernels_of(self, phase: str) -> set:
        held = process_sql.held_ops(self.con, f"rid IN ({','.join(map(str, self.phase[phase]))})", main=self.main)
        return {op for ops in held.values() for op in ops if op[0] == 0}

    def innermost(self, gtid, cs, ce, kind: str):
        """The innermost range of `kind` on `gtid` holding the call."""
        row = self.con.execute(
            "SELECT rid, s, e, text, seq FROM k WHERE gtid = ? AND s <= ? AND e >= ? AND kind = ? "
            "ORDER BY s DESC, e ASC LIMIT 1", (gtid, cs, ce, kind)).fetchone()
        return row

    def user_path(self, gtid, s, e):
        """Names of the user ranges holding [s, e] on `gtid` from `forward` down, or None."""
        rows = self.con.execute("SELECT text FROM k WHERE gtid = ? AND kind = 'user' AND s <= ? AND e >= ? "
                                "ORDER BY s, e DESC", (gtid, s, e)).fetchall()
        names = [fold(t) for (t,) in rows]
        if "forward" not in names:
            return None
        return tuple(names[len(names) - 1 - names[::-1].index("forward"):])

    def forward_part(self, op):
        g, cs, ce = self.launch[op]
        (main,) = [m for m in self.main.values() if m >> 24 == g >> 24]
        # the main thread's user ranges hold its own calls whole, other threads' by their start
        return self.user_path(main, cs, ce if g == main else cs)

    def backward_by_seq(self, op):
        g, cs, ce = self.launch[op]
        node = self.innermost(g, cs, ce, "node")
        if node is None:
            wrapper = self.innermost(g, cs, ce, "wrapper")
            if wrapper is None:
                return "outside"
            node = self.con.execute(
                "SELECT rid, s, e, text, seq, kind FROM k WHERE gtid = ? AND s >= ? AND e <= ? AND kind IN "
                "('node', 'accum') ORDER BY s LIMIT 1", (g, wrapper[1], wrapper[2])).fetchone()
            if node is None or node[5] == "accum":
                return "accum" if node is not None else "outside"
        if self.innermost(g, cs, ce, "accum") is not None:
            return "accum"
        fwd = self.con.execute("SELECT gtid, s, e FROM k WHERE pid = ? AND seq = ? AND s < ? AND kind != 'node' "
                               "ORDER BY s DESC LIMIT 1", (g >> 24, node[4], node[1])).fetchone()
        if fwd is None:
            return "no forward op"
        return self.user_path(*fwd) or "outside forward"

    def backward_by_name(self, op):
        g, cs, ce = self.launch[op]
        row = self.con.execute("SELECT text FROM k WHERE gtid = ? AND s <= ? AND e >= ? AND text GLOB 'backward:*' "
                               "ORDER BY s DESC, e ASC LIMIT 1", (g, cs, ce)).fetchone()
        return None if row is None else row[0][len("backward:"):]


def inclusive(mapping: dict, dur: dict) -> dict:
    out = defaultdict(lambda: [0, 0])
    for op, path in mapping.items():
        if isinstance(path, tuple):
            for depth in range(1, len(path) + 1):
                out[path[:depth]][0] += dur[op]
                out[path[:depth]][1] += 1
    return out


def table(trace_name, method):
    path = sample_file(trace_name)
    (bp,) = [t for t in backward_parts(range_model(load_trace(path), "process")) if t.method == method]
    return path, bp


@pytest.mark.parametrize("name", SEQ_SAMPLES)
def test_seq_mapping_matches_an_independent_computation(name):
    path, bp = table(name, "seq")
    ex = Expected(path)
    fwd = inclusive({op: ex.forward_part(op) for op in ex.kernels_of("forward")}, ex.dur)
    bwd_map = {op: ex.backward_by_seq(op) for op in ex.kernels_of("backward")}
    bwd = inclusive(bwd_map, ex.dur)
    got = {p.path: (p.forward_kernel_ns, p.forward_kernels, p.backward_kernel_ns, p.backward_kernels)
           for p in bp.parts}
    assert got == {path: (*fwd[path], *bwd[path]) for path in set(fwd) | set(bwd)}
    # every backward kernel is in a part or listed by reason, never dropped
    assert bp.backward_kernels == len(bwd_map)
    assert bp.backward_kernel_ns == sum(ex.dur[op] for op in bwd_map)
    reasons = defaultdict(lambda: [0, 0])
    for op, where in bwd_map.items():
        if not isinstance(where, tuple):
            reasons[where][0] += ex.dur[op]
            reasons[where][1] += 1
    assert sorted(tuple(v) for v in bp.unmapped.values()) == sorted(tuple(v) for v in reasons.values())
    # self = inclusive less the direct sub-parts
    for part in bp.parts:
        kids = [p for p in bp.parts if p.path[:-1] == part.path]
        assert part.backward_self_ns == part.backward_kernel_ns - sum(k.backward_kernel_ns for k in kids)
        assert part.forward_self_ns == part.forward_kernel_ns - sum(k.forward_kernel_ns for k in kids)
    # the capture's parts are there, and nearly all backward maps (what does not is named)
    assert ("forward", "scaled_dot_product_attention", "computing_softmax") in got
    assert bp.mapped_share > 0.99 and bp.iterations == 2


@pytest.mark.parametrize("name", NAME_SAMPLES)
def test_name_mapping_matches_an_independent_computation(name):
    path, bp = table(name, "name")
    ex = Expected(path)
    paths = {p.path[-1]: p.path for p in bp.parts}
    bwd = inclusive({op: paths[n] if (n := ex.backward_by_name(op)) else ("forward",)
                     for op in ex.kernels_of("backward")}, ex.dur)
    fwd = inclusive({op: ex.forward_part(op) for op in ex.kernels_of("forward")}, ex.dur)
    got = {p.path: (p.forward_kernel_ns, p.forward_kernels, p.backward_kernel_ns, p.backward_kernels)
           for p in bp.parts}
    assert got == {path: (*fwd[path], *bwd[path]) for path in set(fwd) | set(bwd)}
    assert set(paths) == {"forward", "scaled_dot_product_attention", "computing_attention_scores",
                          "computing_softmax", "final_matmul"}


def test_seq_and_name_agree_on_the_parts():
    """The same workload mapped both ways (separate captures): the parts' bwd/fwd agree within
    run-to-run noise, and softmax's backward is within 2x of its forward."""
    _, by_seq = table("small_ctx128_agnvtx", "seq")
    _, by_name = table("small_ctx128_bwdranges", "name")
    named = {p.path: p for p in by_name.parts}
    for part in by_seq.parts:
        if len(part.path) > 1:
            assert part.ratio == pytest.approx(named[part.path].ratio, rel=0.05), part.path
            assert part.backward_kernels == named[part.path].backward_kernels


def test_traces_without_op_or_backward_ranges_have_no_table():
    assert backward_parts(range_model(load_trace(SAMPLES / "small_ctx128.sqlite"), "process")) == []
    assert backward_parts(range_model(load_trace(sample_file("small_ctx128_fwd")), "process")) == []
