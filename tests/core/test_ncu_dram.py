"""DRAM bytes of a report that collected ncu's DRAM rate but not its sum (`dram__bytes.sum.per_second`
without `dram__bytes.sum`): read as 0 before, so `ncu --by range` showed "DRAM GB 0.0" and the roofline's
measured points sat at 0 GB/s. The real pair's report (capture/gpu_ncu.sh) with the sum taken out of every
kernel, as ncu_report read it: the bytes come back as rate x duration, checked against NVIDIA's own
`dram__bytes.sum` (the JSON the ncu_report module dumped on the GPU machine), and a note says how."""
from __future__ import annotations

import dataclasses

import pytest

from helpers.ncu_pair import EXPORT_XZ, STEM, oracle_kernels, report_xz, unpack
from nsight_tui.parsers.analyses import ncu
from nsight_tui.parsers.kernels import ncu_metrics
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.read.ncu_rep import NcuReport, read_ncu_report
from nsight_tui.render.ncu import range_rows, ncu_json

GONE = ("dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


def without_sum(report: NcuReport) -> NcuReport:
    kernels = [dataclasses.replace(k, metrics={n: v for n, v in k.metrics.items() if n not in GONE})
               for k in report.kernels]
    return NcuReport(report.path, kernels)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_dram")
    report = read_ncu_report(unpack(report_xz(), folder / f"{STEM}.ncu-rep"))
    trace = load_trace(unpack(EXPORT_XZ, folder / f"{STEM}.sqlite"))
    return trace, report


def test_each_kernels_dram_bytes_are_nvidias_sum_from_rate_and_duration(pair):
    _, report = pair
    oracle = oracle_kernels()
    rate_only = without_sum(report)
    assert all(k.metric("dram__bytes.sum.per_second") is not None for k in rate_only.kernels)
    for k, o in zip(rate_only.kernels, oracle, strict=True):
        fig = ncu_metrics.figures(k)
        assert fig.dram_bytes == pytest.approx(o["metrics"]["dram__bytes.sum"][0], rel=1e-9, abs=1.0)
        assert fig.dram_bytes_from == ncu_metrics.DRAM_RATE_X_TIME
    # with the sum there, it is the sum, said so
    assert ncu_metrics.figures(report.kernels[0]).dram_bytes_from == ncu_metrics.DRAM_MEASURED


def test_read_plus_write_where_both_sums_are_there(pair):
    _, report = pair
    k = report.kernels[0]
    total = k.metrics["dram__bytes.sum"]
    split = dataclasses.replace(k, metrics={**{n: v for n, v in k.metrics.items() if n != "dram__bytes.sum"},
                                            "dram__bytes_read.sum": total * 0.75, "dram__bytes_write.sum": total * 0.25},
                                units={**k.units, "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte"})
    fig = ncu_metrics.figures(split)
    assert fig.dram_bytes == pytest.approx(total) and fig.dram_bytes_from == ncu_metrics.DRAM_READ_WRITE


def test_ranges_dram_totals_and_the_note(pair):
    trace, report = pair
    oracle = oracle_kernels()
    a = ncu.analyse(trace, without_sum(report))
    points = {p.path: p for p in a.ranges}
    for path in ("step_1", "step_1/forward", "step_1/backward", "step_1/optimizer"):
        members = [o for k, o in zip(a.kernels, oracle) if (k.path + "/").startswith(path + "/")]
        want = sum(o["metrics"]["dram__bytes.sum"][0] for o in members)
        assert want > 0
        assert points[path].measured_dram_bytes == pytest.approx(want, rel=1e-9)
    n = len(report.kernels)
    assert (f"DRAM bytes of {n} of {n} kernels are dram__bytes.sum.per_second x gpu__time_duration.sum "
            f"(the report has no dram__bytes.sum)") in a.notes
    rows = {r[0]: r for r in range_rows(ncu_json(a))}
    assert rows["step_1"][6] == round(points["step_1"].measured_dram_bytes / 1e9, 3) > 0  # "DRAM GB", not 0.0
    # the report as ncu wrote it: no note
    assert not any("DRAM bytes of" in note for note in ncu.analyse(trace, report).notes)
