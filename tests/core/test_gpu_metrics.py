"""Sampled GPU metrics on the committed --gpu-metrics captures of sample_traces/hw
(devruns/gpu_hwmetrics.sh, an H100 at 1 kHz): per range instance and per range name, the averages
against SQL over GPU_METRICS (the samples whose timestamp lies in the range's window on the GPU's
clock: a step's period, a phase's GPU work, both from tests/helpers/step_sql.py's SQL), and the GEMM math-path
check against a per-sample GEMM share computed here from the kernel rows."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SAMPLES
from helpers import step_sql
from helpers.export_sql import sql_rows

from nsight_tui.parsers.analyses.gpu_metrics import gemm_coverage, gpu_metrics_analysis, instance_metrics
from nsight_tui.parsers.kernels.families import classify_names
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from helpers import cli_process

HW = SAMPLES / "hw"
FP32, TF32 = "small_ctx512_b8_gpumetrics", "small_ctx512_tf32_b8_gpumetrics"
METRICS = ("SMs Active [Throughput %]", "Tensor Active [Throughput %]", "DRAM Read Bandwidth [Throughput %]",
           "DRAM Write Bandwidth [Throughput %]")
RANGES = """SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE e.eventType = 59 AND COALESCE(e.text, s.value) {cond} ORDER BY e.start"""
AVG = """SELECT AVG(g.value), COUNT(*) FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS t
         ON t.typeId = g.typeId AND t.metricId = g.metricId
         WHERE t.metricName = ? AND ({spans})"""


@pytest.fixture(scope="module")
def traces(async_trace):
    return {name: async_trace(HW / f"{name}.sqlite.xz") for name in (FP32, TF32)}


def sql_avg(path, metric: str, spans: list[tuple[int, int]]) -> tuple[float, int]:
    cond = " OR ".join(f"g.timestamp BETWEEN {a} AND {b}" for a, b in spans)
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(AVG.format(spans=cond), (metric,)).fetchone()
    finally:
        con.close()


def gpu_spans(path, rows) -> list[tuple[int, int]]:
    """Each NVTX range's GPU work (step_sql's SQL), its NVTX span where it launched nothing."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        spans = [(a, b, *step_sql.gpu_span(con, tid, a, b)) for a, b, tid in rows]
    finally:
        con.close()
    return [(a, b) if g0 is None else (g0, g1) for a, b, g0, g1 in spans]


@pytest.mark.parametrize("name", [FP32, TF32])
def test_per_range_name_averages_equal_sql(traces, name):
    path = traces[name]
    trace = load_trace(path)
    report = gpu_metrics_analysis(range_model(trace), dict(trace.meta().config))
    assert report.present and report.rate_hz == pytest.approx(1000, rel=0.01)  # --gpu-metrics 1000
    by = {r.name: r for r in report.ranges}
    assert set(by) == {"step", "forward", "backward", "optimizer"}
    steps = step_sql.steps(path)  # the step on the GPU's clock: its period
    assert by["step"].instances == len(steps) == 2
    for phase in ("step", "forward", "backward", "optimizer"):
        if phase == "step":
            spans = [(it.start, it.start + it.period) for it in steps]
        else:  # the phase's instances inside the steady steps, over their GPU work
            spans = gpu_spans(path, [(a, b, tid) for a, b, tid in sql_rows(path, RANGES.format(cond=f"= '{phase}'"))
                                     if any(it.start <= a and b <= it.end for it in steps)])
        for metric in METRICS:
            avg, count = sql_avg(path, metric, spans)
            assert by[phase].samples == count > 0
            assert by[phase].means[metric] == pytest.approx(avg, rel=1e-12), (phase, metric)


def test_per_instance_averages_equal_sql(traces):
    path = traces[FP32]
    model = range_model(load_trace(path))
    spans = gpu_spans(path, sql_rows(path, RANGES.format(cond="= 'backward'")))
    ids = np.flatnonzero(model.trace.ranges["text"].to_numpy() == "backward")
    assert len(ids) == len(spans) == 3  # 1 warmup + 2 steps
    for i, (a, b) in zip(ids[np.argsort(model.r_start[ids])].tolist(), spans):
        got = instance_metrics(model, model.trace.gpu_metrics.series[0], i)
        for metric in METRICS:
            avg, count = sql_avg(path, metric, [(a, b)])
            assert got.samples == count and got.means[metric] == pytest.approx(avg, rel=1e-12)


def test_gemm_share_per_sample_and_the_math_path_check(traces):
    checks = {}
    for name, path in traces.items():
        trace = load_trace(path)
        model = range_model(trace)
        series = trace.gpu_metrics.series[0]
        # GEMM kernels by (demangled) name from SQL; their busy time in each sample's period [t, t + 1 ms), brute force
        rows = sql_rows(path, """SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                                 JOIN StringIds s ON s.id = k.demangledName""")
        fams = classify_names([r[2] for r in rows])
        gemm = sorted((a, b) for (a, b, _), f in zip(rows, fams) if f == "gemm")
        share = gemm_coverage(model, series)
        t = series.times_ns
        for i in np.linspace(0, len(t) - 1, 400).astype(int).tolist():
            lo, hi = int(t[i]), int(t[i]) + 1_000_000 * 1000 / series.rate_hz
            points = sorted({lo, int(hi), *[x for a, b in gemm for x in (a, b) if lo < x < hi]})
            busy = sum(q - p for p, q in zip(points, points[1:])
                       if any(a <= p and q <= b for a, b in gemm if a < hi and b > lo))
            assert share[i] == pytest.approx(busy / (hi - lo), abs=1e-9)
        checks[name] = gpu_metrics_analysis(model, dict(trace.meta().config)).gemm
    # fp32 GEMMs run on the CUDA cores (tensor cores near idle), TF32 ones on the tensor cores
    assert checks[FP32].named_path == "fp32" and checks[FP32].verdict == "confirmed"
    assert checks[TF32].named_path == "tf32" and checks[TF32].verdict == "confirmed"
    assert checks[TF32].tensor_active_pct > 10 > 2 > checks[FP32].tensor_active_pct


def test_report_json_and_text(traces, tmp_path):
    from helpers.cli import run_main

    out = tmp_path / "r.json"
    done = run_main("report", traces[TF32], "-f", "json", "-o", out)
    assert done.returncode == 0, done.stderr
    g = json.loads(out.read_text())["gpu_metrics"]
    assert g["present"] and round(g["rate_hz"]) == 1000 and "samples" in g["definition"]
    assert {"name": "Tensor Active", "unit": "Throughput %", "full_name": "Tensor Active [Throughput %]"} in g["metrics"]
    text = run_main("report", traces[TF32]).stdout
    assert "## GPU metrics (sampled)" in text and "Measured by sampling (1,000 samples a second" in text


def test_no_metrics_no_section():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    assert not trace.gpu_metrics.present
    report = gpu_metrics_analysis(range_model(trace))
    assert not report.present and report.ranges == []


def test_timeline_lanes_hold_the_samples(traces):
    from nsight_tui.parsers.analyses.idle import idle_analysis
    from nsight_tui.parsers.analyses.timeline import METRIC, timeline

    path = traces[TF32]
    trace = load_trace(path)
    tl = timeline(trace, range_model(trace), idle_analysis(trace))
    lanes = {lane.metric: lane for lane in tl.lanes if lane.kind == METRIC}
    assert set(lanes) == set(METRICS)
    lane = lanes["Tensor Active [Throughput %]"]
    rows = sql_rows(path, """SELECT g.timestamp, g.value FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS t
                             ON t.typeId = g.typeId AND t.metricId = g.metricId
                             WHERE t.metricName = 'Tensor Active [Throughput %]' ORDER BY g.timestamp""")
    by_time = dict(rows)
    assert len(lane) > 50 and all(by_time[int(s)] == v for s, v in zip(lane.start, lane.value))
    # the lane covers the trace's own span, not nsys's session from its start
    first_kernel = sql_rows(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert lane.start[0] > rows[0][0] and lane.start[0] <= first_kernel
    # one cell per 10 ms: the mean of the samples starting in it, by SQL
    t0 = int(lane.start[0])
    t1 = t0 + 200_000_000
    cells = lane.cells(t0, t1, 20)
    for k in range(20):
        a, b = t0 + k * 10_000_000, t0 + (k + 1) * 10_000_000
        vals = [v for t, v in rows if a <= t < b]
        assert cells.fullness[k] == pytest.approx(min(sum(vals) / len(vals) / 100, 1.0))
    item = tl.describe(lane, int(np.argmax(lane.value)))
    assert item.kind == METRIC and "Tensor Active" in item.name and "sampled" in item.name


def test_a_damaged_sample_is_left_out_not_a_traceback(traces, tmp_path):
    import shutil
    import sqlite3

    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(traces[FP32], path)
    con = sqlite3.connect(path)
    sm = con.execute("SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName = 'SMs Active [Throughput %]'").fetchone()[0]
    con.execute("UPDATE GPU_METRICS SET value = 'garbage' WHERE metricId = ? AND rowid % 3 = 0", (sm,))
    con.commit()
    con.close()
    cond = " OR ".join(f"g.timestamp BETWEEN {it.start} AND {it.start + it.period}" for it in step_sql.steps(path))
    (avg,), = sql_rows(path, f"""SELECT AVG(g.value) FROM GPU_METRICS g WHERE g.metricId = {sm}
                                 AND typeof(g.value) = 'integer' AND ({cond})""")
    trace = load_trace(path)
    step = gpu_metrics_analysis(range_model(trace)).ranges[0]
    assert step.name == "step" and step.means["SMs Active [Throughput %]"] == pytest.approx(avg, rel=1e-12)
    done = cli_process.run(["report", str(path)], text=True,
                           timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "GPU metrics (sampled)" in done.stdout
