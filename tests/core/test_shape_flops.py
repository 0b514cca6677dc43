"""FLOPs from PyTorch's op shapes on the committed --autograd-shapes captures of
sample_traces/hw (devruns/gpu_hwmetrics.sh, an H100): each counted op against the hand formula of
the shapes SQL reads from its NVTX text, and the totals per range against the FLOPs the capture
counted (its nsight-tui:flops marks, PyTorch's FlopCounterMode in a process of its own)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.export_sql import sql_rows

from nsight_tui.parsers.analyses import roofline
from nsight_tui.parsers.kernels import flop_counts, shape_flops
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace

HW = SAMPLES / "hw"
COUNTED, SHAPES_ONLY = "small_ctx128_agshapes", "small_ctx128_agshapes_nocount"
TEXTS = """SELECT e.globalTid, e.start, COALESCE(e.text, s.value) FROM NVTX_EVENTS e
           LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL AND ({where})"""


@pytest.fixture(scope="module")
def traces(async_trace):
    return {name: async_trace(HW / f"{name}.sqlite.xz") for name in (COUNTED, SHAPES_ONLY)}


def hand_flops(text: str) -> int:
    """2·m·k·n (x b) from the first two (mm, bmm) or the 2nd and 3rd (addmm, baddbmm) shapes of the text."""
    shapes = [[int(d) for d in re.findall(r"\d+", s)] for s in re.findall(r"\[([\d, ]*)\]", text.split("sizes = ")[1])]
    op = text.split(",")[0]
    a, b = shapes[1:3] if op in ("aten::addmm", "aten::baddbmm") else shapes[0:2]
    batch = a[0] if len(a) == 3 else 1
    (m, k), n = a[-2:], b[-1]
    assert b[-2] == k
    return 2 * batch * m * k * n


@pytest.mark.parametrize("name", [COUNTED, SHAPES_ONLY])
def test_every_matmul_op_counted_by_its_own_shapes(traces, name):
    path = traces[name]
    where = " OR ".join(f"COALESCE(e.text, s.value) LIKE '{op}, %sizes = %'" for op in ("aten::mm", "aten::addmm", "aten::bmm"))
    expected = {(g, t): hand_flops(text) for g, t, text in sql_rows(path, TEXTS.format(where=where))}
    assert len(expected) > 600  # 3 iterations: 49 linears + 24 attention matmuls forward, twice that backward
    trace = load_trace(path)
    model = range_model(trace)
    got = {(int(model.r_gtid[o.range_id]), int(model.r_start[o.range_id])): o.flops
           for o in shape_flops.counted_ops(model, 4)}
    assert got == expected


def test_totals_per_range_equal_the_capture_counts(traces):
    trace = load_trace(traces[COUNTED])
    measured = flop_counts.from_marks(trace.marks)
    shapes = roofline.shape_counts(trace, range_model(trace), dict(trace.meta().config))
    assert measured is not None and shapes is not None and shapes.source == "shapes"
    paths = ["step_N", "step_N/forward", "step_N/backward",
             "step_N/forward/scaled_dot_product_attention/computing_attention_scores",
             "step_N/forward/scaled_dot_product_attention/final_matmul"]
    for path in paths:
        counted, from_shapes = measured.range_counts(path), shapes.range_counts(path)
        gemm = counted.families["gemm"]
        assert from_shapes.families["gemm"] == pytest.approx(gemm, rel=1e-12), path  # FLOPs and bytes (fp32)
        assert from_shapes.flops == pytest.approx(gemm[0], rel=1e-12)  # nothing but the matmuls here
    # no matmul in the optimizer or the softmax: not counted (None), never a 0 that reads as "no work"
    assert shapes.range_counts("step_N/optimizer") is None
    assert shapes.range_counts("step_N/forward/scaled_dot_product_attention/computing_softmax") is None
    assert measured.range_counts("step_N/optimizer").flops > 0


def test_roofline_and_mfu_work_on_a_trace_without_marks(traces):
    trace = load_trace(traces[SHAPES_ONLY])
    assert flop_counts.from_marks(trace.marks) is None  # --no-count: no nsight-tui:flops marks
    r = roofline.build(trace)
    assert r.source == "shapes" and "op shapes" in r.source_line()
    answers = roofline.answers(trace, roof=r)
    by = {p.label: p for p in answers.ranges}
    # per step: the shapes' matmul FLOPs by the hand formula over the steady steps' ranges, from SQL
    where = " OR ".join(f"COALESCE(e.text, s.value) LIKE '{op}, %sizes = %'" for op in ("aten::mm", "aten::addmm", "aten::bmm"))
    steps = sql_rows(traces[SHAPES_ONLY], """SELECT e.start, e.end FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId
                                            WHERE s.value GLOB 'step_[0-9]*'""")
    ops = [(t, hand_flops(text)) for _, t, text in sql_rows(traces[SHAPES_ONLY], TEXTS.format(where=where))]
    in_steps = sum(f for t, f in ops if any(a <= t <= b for a, b in steps))
    assert by["step"].flops == pytest.approx(in_steps, rel=1e-12)
    for name in ("step", "forward", "backward"):
        p = by[name]
        assert p.flops > 0 and p.bytes > 0 and p.source == "shapes" and p.mfu > 0
        assert p.verdict != roofline.UNKNOWN


def test_a_trace_with_neither_marks_shapes_nor_config_says_so():
    trace = load_trace(SAMPLES / "edge_deep.sqlite.xz")
    r = roofline.build(trace)
    assert r.counts is None
    line = r.source_line()
    assert "no nsight-tui:flops marks" in line and "no op shapes" in line and "autograd-shapes-nvtx" in line


def test_parse_sizes_and_formulas_by_hand():
    text = ("aten::_scaled_dot_product_flash_attention, seq = 9, op_id = 3, sizes = [[4, 12, 128, 64], "
            "[4, 12, 128, 64], [4, 12, 128, 64], [], [], []], input_op_ids = [(1,0)]")
    assert shape_flops.parse_sizes(text) == [[4, 12, 128, 64]] * 3 + [[], [], []]
    got = shape_flops.op_flops(text, 2)
    assert got.flops == 4 * 4 * 12 * 128 * 128 * 64  # QKᵀ and attn@V, 2 FLOPs a multiply-add
    back = ("aten::_scaled_dot_product_flash_attention_backward, op_id = 5, sizes = [[4, 12, 128, 64], "
            "[4, 12, 128, 64], [4, 12, 128, 64], [4, 12, 128, 64], [4, 12, 128, 64], [4, 12, 128], [], []]")
    assert shape_flops.op_flops(back, 2).flops == 10 * 4 * 12 * 128 * 128 * 64  # PyTorch's 2.5x forward
    assert shape_flops.op_flops("aten::linear, seq = 4, op_id = 1, sizes = [[4, 128, 768], [2304, 768]]", 4) is None
    assert shape_flops.op_flops("aten::mm, op_id = 1, sizes = [[2, 3]", 4) is None  # cut short: not counted
    assert shape_flops.op_flops("aten::mm, seq = 1, op_id = 2", 4) is None  # no shapes
    assert np.isclose(shape_flops.op_flops("aten::mm, sizes = [[2, 3], [3, 5]]", 4).bytes, 4 * (6 + 15 + 10))


def test_report_json_notes_a_trace_without_flop_counts(tmp_path):
    import json

    from helpers.cli import run_main

    out = tmp_path / "r.json"
    done = run_main("report", SAMPLES / "edge_deep.sqlite.xz", "-f", "json", "-o", out)
    assert done.returncode == 0, done.stderr
    notes = json.loads(out.read_text())["notes"]
    assert any("no FLOP counts" in n and "no op shapes" in n for n in notes)


# -- convolutions (capture/conv_shapes.py: a conv net with a strided and a transposed convolution) ----------
CONV = ("conv_agshapes", "conv_emitshapes")  # nsys --pytorch=autograd-shapes-nvtx; emit_nvtx(record_shapes=True)


@pytest.mark.parametrize("name", CONV)
def test_convolutions_per_step_equal_pytorchs_flop_counter(async_trace, name):
    """The workload counted one step with FlopCounterMode and marked it (`conv-flops {...}`): per op
    kind, the shapes' FLOPs per steady step equal it; the convolutions' backward exceeds it by exactly
    the first layer's grad input, which PyTorch skips (its input needs no gradient) and the text cannot show."""
    import json

    path = async_trace(HW / f"{name}.sqlite.xz")
    (mark,), = sql_rows(path, """SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s
                                 ON s.id = e.textId WHERE COALESCE(e.text, s.value) LIKE 'conv-flops %'""")
    truth = json.loads(mark[len("conv-flops "):])["by_op"]
    (first,), = sql_rows(path, """SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s
                                  ON s.id = e.textId WHERE COALESCE(e.text, s.value) LIKE 'aten::conv2d,%'
                                  ORDER BY e.start LIMIT 1""")
    (n, _c, h, w), weight = [[int(d) for d in re.findall(r"\d+", t)] for t in re.findall(r"\[([\d, ]+)\]", first)][:2]
    first_grad_input = 2 * n * h * w * int(np.prod(weight))  # padding 1, stride 1: output is h x w
    trace = load_trace(path)
    counts = roofline.build(trace).counts
    assert counts.source == "shapes"
    steps = counts.instances["step_N"]
    per_op: dict[str, float] = {}
    for row in counts.rows:
        if row.path.startswith("step_N/"):
            per_op[row.op] = per_op.get(row.op, 0.0) + row.flops / steps
    assert per_op["convolution"] == truth["aten.convolution"]
    assert per_op["convolution_backward"] == truth["aten.convolution_backward"] + first_grad_input
    assert per_op["addmm"] == truth["aten.addmm"] and per_op["mm"] == truth["aten.mm"]
    step = counts.range_counts("step_N")
    assert step.flops == sum(truth.values()) + first_grad_input
    assert set(step.families) == {"gemm"}  # convolutions run as implicit GEMMs
