"""An Nsight Compute report joined to the nsys export of the same workload, on the real pair
(devruns/gpu_ncu.sh: GPT-2 small's width with 4 layers, one training step profiled by ncu).

Every figure is checked against NVIDIA's own readings, never this code's: the JSON the ncu_report
module of Nsight Compute 2025.3.1 dumped on the GPU machine, and `ncu --page raw --csv`. The join is
checked against SQL over the export (the kernels launched between cudaProfilerStart and Stop, by
every thread, in launch order, with their mangled names)."""
from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter

import pytest

from helpers.ncu_pair import oracle_kernels, oracle_raw_csv, unpacked
from nsight_tui.parsers.analyses import ncu
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.ncu_rep import read_ncu_report

DEFAULT = "<default domain>"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    export, _, trace, rep, joined = unpacked(tmp_path_factory.mktemp("ncu_pair"))
    return export, trace, rep, joined


@pytest.fixture(scope="module")
def oracle():
    return oracle_kernels()


def window_sql(export) -> list[tuple]:
    """(kernel rowid, mangled name, launching thread) of every kernel launched between
    cudaProfilerStart and cudaProfilerStop, in launch order."""
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    try:
        return db.execute("""
            WITH w AS (SELECT (SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                               WHERE s.value LIKE 'cudaProfilerStart%') AS a,
                              (SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                               WHERE s.value LIKE 'cudaProfilerStop%') AS b)
            SELECT k.rowid, m.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                 AND r.globalTid / 16777216 % 16777216 = k.globalPid / 16777216 % 16777216
            JOIN StringIds m ON m.id = k.mangledName, w
            WHERE r.start > w.a AND r.start < w.b ORDER BY r.start, k.start""").fetchall()
    finally:
        db.close()


def test_every_profiled_kernel_is_joined_to_the_kernel_sql_finds_in_the_window(pair, oracle):
    export, trace, rep, a = pair
    rows = window_sql(export)
    assert len(oracle) == len(rep.kernels) == len(rows) == 264
    assert [k["mangled"] for k in oracle] == [r[1] for r in rows]  # the same launch sequence in both runs
    rowids = trace.ops["rowid"].to_numpy()
    joined = [k for k in a.kernels if k.op >= 0]
    assert len(joined) / len(a.kernels) >= 0.99
    assert [int(rowids[k.op]) for k in a.kernels] == [r[0] for r in rows]


def test_backward_kernels_with_no_ncu_stack_land_in_backward(pair, oracle):
    """ncu records no NVTX stack for the kernels PyTorch's autograd thread launches; joined, they
    sit in step_1/backward, and SQL says another thread than the step's launched them."""
    export, trace, rep, a = pair
    rows = window_sql(export)
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    main = db.execute("SELECT e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                      "WHERE COALESCE(e.text, s.value) = 'step_1'").fetchone()[0]
    db.close()
    stackless = [i for i, k in enumerate(oracle) if not k["nvtx"].get(DEFAULT)]
    assert len(stackless) >= 150
    for i in stackless:
        assert a.kernels[i].path.startswith("step_1/backward"), (i, a.kernels[i].path)
    autograd = [i for i in stackless if rows[i][2] != main]
    assert len(autograd) >= len(stackless) - 1  # backward's one kernel on the main thread: loss.backward's seed
    assert Counter(k.path.split("/")[1] for k in a.kernels) == {"backward": 155, "forward": 85, "optimizer": 24}


def test_ncu_stack_agrees_with_the_export_range_where_ncu_has_one(pair, oracle):
    _, _, _, a = pair
    with_stack = [(k, o) for k, o in zip(a.kernels, oracle) if o["nvtx"].get(DEFAULT)]
    assert len(with_stack) > 100
    for k, o in with_stack:
        assert k.path == "/".join(o["nvtx"][DEFAULT])


def test_theoretical_occupancy_from_the_export_equals_ncu(pair, oracle):
    """parsers/kernels/occupancy.py, from the export's launch configuration alone, against ncu's
    sm__maximum_warps_per_active_cycle_pct for every profiled kernel, and its limiter against the
    launch__occupancy_limit_* ncu gives (fewest blocks per SM; ties: warps, blocks, registers, shared)."""
    _, _, _, a = pair
    order = ["warps", "blocks", "registers", "shared_mem"]
    for k, o in zip(a.kernels, oracle):
        m = o["metrics"]
        assert k.export_occupancy_pct == pytest.approx(m["sm__maximum_warps_per_active_cycle_pct"][0], abs=1e-9)
        limits = {n: m[f"launch__occupancy_limit_{n}"][0] for n in order}
        expected = min(order, key=lambda n: (limits[n], order.index(n))).replace("shared_mem", "shared memory")
        assert k.export_limiter == expected, (k.index, k.name, limits)
        assert k.figures.occupancy_limiter == expected


def test_joined_figures_equal_nvidia_reader(pair, oracle):
    _, _, _, a = pair
    pairs = {"duration_ns": "gpu__time_duration.sum",
             "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
             "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
             "dram_bytes": "dram__bytes.sum", "dram_bytes_per_s": "dram__bytes.sum.per_second",
             "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
             "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct"}
    assert oracle[0]["metrics"]["gpu__time_duration.sum"][1] == "ns"
    assert oracle[0]["metrics"]["dram__bytes.sum.per_second"][1] == "byte/s"
    for k, o in zip(a.kernels, oracle):
        assert k.name == o["name"] or k.function == o["name"]
        for ours, theirs in pairs.items():
            assert getattr(k.figures, ours) == pytest.approx(float(o["metrics"][theirs][0]), rel=1e-12), (k.index, ours)
        stalls = {n[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]: v[0]
                  for n, v in o["metrics"].items()
                  if n.startswith("smsp__average_warps_issue_stalled_") and n.endswith("_per_issue_active.ratio")}
        stalls.pop("selected")
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
        assert [(r, pytest.approx(v)) for r, v in k.figures.stalls] == [(r, pytest.approx(v)) for r, v in top]
        theirs = [(r["rule_identifier"], (r.get("speedup_estimation") or {}).get("speedup")) for r in o["rules"]]
        assert [(r.rule, r.speedup_pct) for r in k.figures.rules] == theirs


def test_figures_equal_ncu_command_line_raw_page(pair):
    """The same figures against `ncu --import R --page raw --csv` (ncu's own units, 6 decimals)."""
    _, _, _, a = pair
    rows = oracle_raw_csv()
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "%": 1}
    assert len(rows) == len(a.kernels)
    for k, row in zip(a.kernels, rows):
        assert int(row["ID"][0]) == k.index
        for ours, theirs in (("duration_ns", "gpu__time_duration.sum"), ("dram_bytes", "dram__bytes.sum"),
                             ("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                             ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active")):
            value, unit = row[theirs]
            expected = float(value.replace(",", "")) * scale[unit]
            assert getattr(k.figures, ours) == pytest.approx(expected, rel=1e-5, abs=1e-6 * scale[unit]), (k.index, ours)


# "achieved 41% of ...", or "achieved  close to 1% of ..." (ncu's words for a small non-zero share)
ROOFLINE_RULE = re.compile(r"achieved\s+(close to )?(\d+)% of this device's FP32 peak performance and (\d+)% of its FP64")


def test_measured_roofline_points_equal_ncu_own(pair, oracle):
    """ncu's SOLFPRoofline rule states the achieved share of the FP32 and FP64 peaks it plots; the
    peak is the section's own (2 x FFMA per cycle x SM frequency). Our FLOP/s over that peak rounds
    to ncu's percentage for every kernel; the arithmetic intensity is FLOP/s over ncu's DRAM bytes/s."""
    _, _, _, a = pair
    checked = 0
    for k, o in zip(a.kernels, oracle):
        m = {n: v[0] for n, v in o["metrics"].items()}
        message = next(r["rule_message"]["message"] for r in o["rules"] if r["rule_identifier"] == "SOLFPRoofline")
        close, fp32_text, fp64_text = ROOFLINE_RULE.search(message).groups()
        fp32_pct, fp64_pct = int(fp32_text), int(fp64_text)
        peak32 = m["derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2"] * m["sm__cycles_elapsed.avg.per_second"] \
            if "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2" in m else None
        # ncu's achieved work: its own derived 2 x FFMA metric beside FADD and FMUL, at the SM frequency
        achieved = (m["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"]
                    + m["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"]
                    + m["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"]) * m["smsp__cycles_elapsed.avg.per_second"]
        assert k.figures.fp32_flops_per_s == pytest.approx(achieved, rel=1e-9)
        if peak32:
            share = 100 * k.figures.fp32_flops_per_s / peak32
            assert abs(share - fp32_pct) <= (1.0 if close else 0.5 + 1e-9), (k.index, share, message)
            checked += fp32_pct > 0
        assert fp64_pct == 0 and k.figures.fp64_flops_per_s == 0
        if m["dram__bytes.sum.per_second"]:
            assert k.figures.intensity_flops_per_byte == pytest.approx(achieved / m["dram__bytes.sum.per_second"])
    assert checked >= 50  # the GEMMs: tens of % of the FP32 peak


def test_range_points_sum_ncu_kernels_and_show_the_estimate(pair, oracle):
    _, trace, _, a = pair
    points = {p.path: p for p in a.ranges}
    for path in ("step_1", "step_1/forward", "step_1/backward", "step_1/optimizer"):
        members = [o for k, o in zip(a.kernels, oracle) if (k.path + "/").startswith(path + "/")]
        rate = [(o["metrics"]["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"][0]
                 + o["metrics"]["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"][0]
                 + o["metrics"]["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"][0])
                * o["metrics"]["smsp__cycles_elapsed.avg.per_second"][0] for o in members]
        flops = sum(r * o["metrics"]["gpu__time_duration.sum"][0] * 1e-9 for r, o in zip(rate, members))
        p = points[path]
        assert p.kernels == len(members)
        assert p.measured_flops == pytest.approx(flops, rel=1e-9)
        assert p.measured_dram_bytes == pytest.approx(sum(o["metrics"]["dram__bytes.sum"][0] for o in members))
        assert p.ncu_duration_ns == pytest.approx(sum(o["metrics"]["gpu__time_duration.sum"][0] for o in members))
        assert p.estimated_flops is not None and p.estimated_flops_per_s is not None
    # the counted FLOPs of the step (the capture's nsight-tui:flops marks) against ncu's: within 3%
    assert points["step_1"].measured_flops == pytest.approx(points["step_1"].estimated_flops, rel=0.03)


def test_per_name_means_are_the_means_of_the_instances(pair, oracle):
    _, _, _, a = pair
    for row in a.by_name()[:10]:
        members = [o for k, o in zip(a.kernels, oracle) if k.path == row["range"] and k.name == row["name"]]
        assert row["instances"] == len(members) > 0
        for ours, theirs in (("duration_ns", "gpu__time_duration.sum"), ("dram_bytes", "dram__bytes.sum"),
                             ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active")):
            assert row[ours] == pytest.approx(math.fsum(o["metrics"][theirs][0] for o in members) / len(members))


def test_a_file_that_is_not_a_report_is_one_line(tmp_path):
    pytest.importorskip("ncu_report")
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"not a report")
    with pytest.raises(TraceError, match="no profiled kernel|not a readable"):
        read_ncu_report(bad)
    with pytest.raises(TraceError, match="no such file"):
        read_ncu_report(tmp_path / "absent.ncu-rep")


def test_without_the_profiler_calls_the_window_is_the_range_ncu_stacks_name(pair, monkeypatch):
    """A report made with an NVTX filter instead (no cudaProfilerStart/Stop in the export): the
    launches while `step_1` was open, every thread's, give the same pairing."""
    from nsight_tui.parsers.kernels import ncu_join

    export, trace, rep, a = pair
    monkeypatch.setattr(ncu_join, "profiler_windows", lambda trace: [])
    j = ncu_join.join(trace, rep)
    assert j.window == ncu_join.BY_RANGE.format("step_1")
    assert j.op_of.tolist() == a.join.op_of.tolist()
    # neither the calls nor stacks: the names alone find a stretch that agrees everywhere (step_0's
    # launches repeat step_1's: the first such stretch)
    monkeypatch.setattr(ncu_join, "stack_root_windows", lambda trace, report: ("", []))
    j = ncu_join.join(trace, rep)
    assert j.window == ncu_join.BY_SEARCH and j.joined == len(rep.kernels)
    names = trace.ops["name"].to_numpy()
    assert [trace.op_names[int(names[o])] for o in j.op_of] == [k.name for k in rep.kernels]


def test_occupancy_findings_from_ncu_rule_and_nsys_time(pair, oracle):
    """Kernels that matter (≥ 2% of the step's GPU time as nsys timed it) with a theoretical
    occupancy under 50%: the saving is ncu's TheoreticalOccupancy estimate (from NVIDIA's reading)
    times each instance's nsys duration (SQL)."""
    export, trace, rep, a = pair
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    nsys_ns = dict(db.execute("SELECT rowid, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
    db.close()
    rowids = trace.ops["rowid"].to_numpy()
    dur = [nsys_ns[int(rowids[k.op])] for k in a.kernels]
    step = sum(dur)
    groups: dict = {}
    for k, o, d in zip(a.kernels, oracle, dur):
        groups.setdefault((k.path, o["mangled"]), []).append((o, d))
    expected = {}
    for key, members in groups.items():
        total = sum(d for _, d in members)
        if total < 0.02 * step or max(o["metrics"]["sm__maximum_warps_per_active_cycle_pct"][0] for o, _ in members) >= 50:
            continue
        saving = sum(d * next(((r.get("speedup_estimation") or {}).get("speedup", 0) for r in o["rules"]
                               if r["rule_identifier"] == "TheoreticalOccupancy"), 0) / 100 for o, d in members)
        if saving:
            expected[key] = saving / 1e6
    found = {(f["ranges"][0], oracle[f["rows"][0]["ncu_index"]]["mangled"]): f for f in ncu.occupancy_findings(a)}
    assert set(found) == set(expected) and len(found) >= 5
    for key, f in found.items():
        assert f["saving_ms_per_step"] == pytest.approx(expected[key], rel=1e-12)
        assert f["evidence"]["occupancy_limiter"] == "registers"  # fp32 GEMMs on the CUDA cores here
    # what they claim is each kernel's own time once: never more than the kernels' time
    assert sum(f["saving_ms_per_step"] for f in found.values()) < sum(f["evidence"]["nsys_ms_per_step"] for f in found.values())
