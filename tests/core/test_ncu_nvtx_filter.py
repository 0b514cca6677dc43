"""A report made with ncu's NVTX filter (`--nvtx --nvtx-include step_1/`) beside an export without
cudaProfilerStart/Stop: ncu profiled only the kernels launched by a thread with `step_1` open (forward
and the optimizer, on the main thread); backward's, launched by PyTorch's autograd thread with no
NVTX stack, were never profilable. The agreement used to count them as missing (42% on the real pair:
"different runs or workloads"); it is measured over the kernels ncu could have profiled.

The real pair (capture/gpu_ncu.sh), the filter applied as ncu applies it: the report's kernels that
have a stack (ncu_report's reading), the export's profiler calls left out of the join."""
from __future__ import annotations

import pytest

from helpers.ncu_pair import EXPORT_XZ, STEM, report_xz, unpack
from nsight_tui.parsers.analyses import ncu
from nsight_tui.parsers.kernels import ncu_join
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.read.ncu_rep import NcuReport, read_ncu_report
from nsight_tui.render.ncu import warning_line, ncu_json


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_filter")
    report = read_ncu_report(unpack(report_xz(), folder / f"{STEM}.ncu-rep"))
    trace = load_trace(unpack(EXPORT_XZ, folder / f"{STEM}.sqlite"))
    return trace, report


def filtered(report: NcuReport) -> NcuReport:
    return NcuReport(report.path, [k for k in report.kernels if k.nvtx_stack])


def test_an_nvtx_filtered_report_agrees_with_its_export(pair, monkeypatch):
    trace, report = pair
    reference = ncu_join.join(trace, report)  # by the profiler window: every thread (checked against SQL in test_ncu)
    partial = filtered(report)
    assert 0 < len(partial.kernels) < len(report.kernels)  # backward's kernels have no stack
    monkeypatch.setattr(ncu_join, "profiler_windows", lambda trace: [])
    a = ncu.analyse(trace, partial)
    assert a.join.window == ncu_join.BY_RANGE_THREAD.format("step_1")
    assert a.join.agreement >= ncu.MIN_AGREEMENT and not a.mismatch["sequence"]
    assert a.warnings == [] and warning_line(ncu_json(a)) == ""
    # each profiled kernel is joined to the export kernel the full report's join gave it
    full = dict(zip((k.index for k in report.kernels), reference.op_of.tolist()))
    assert a.join.op_of.tolist() == [full[k.index] for k in partial.kernels]
    # the window is the main thread's launches: exactly the kernels the filtered report holds
    assert len(a.join.window_ops) == len(partial.kernels)
    left = len(report.kernels) - len(partial.kernels)
    assert any(f"the {left} kernels other threads launched in the window" in n for n in a.notes)


def test_a_report_with_stackless_kernels_keeps_every_threads_window(pair, monkeypatch):
    """No filter (backward's kernels are in the report, with no stack): the window stays every
    thread's, as before, and agrees."""
    trace, report = pair
    monkeypatch.setattr(ncu_join, "profiler_windows", lambda trace: [])
    j = ncu_join.join(trace, report)
    assert j.window == ncu_join.BY_RANGE.format("step_1")
    assert j.agreement >= ncu.MIN_AGREEMENT


def test_another_workload_is_still_told_apart(pair, monkeypatch):
    """The filter does not excuse a different workload: the filtered report's kernels in reverse
    order do not follow the main thread's launches."""
    trace, report = pair
    partial = filtered(report)
    shuffled = NcuReport(report.path, list(reversed(partial.kernels)))
    monkeypatch.setattr(ncu_join, "profiler_windows", lambda trace: [])
    a = ncu.analyse(trace, shuffled)
    assert a.mismatch["sequence"]
