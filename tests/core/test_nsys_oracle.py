"""`nsight-tui stats --attribution nsys` must print what NVIDIA's `nsys stats -f csv` printed,
byte for byte, for every trace that has NVIDIA's CSVs beside it (committed samples always, the
xz'd captures without phase syncs in sample_traces/async too, ../shared/traces when present)."""
from __future__ import annotations

import pytest

from conftest import REPORTS, SAMPLES, oracle_cases, oracle_csv, read_oracle, trace_stem
from helpers.xz_samples import XZ_TRACE
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.nsys.reports import build_report
from nsight_tui.render.nsys import render_csv

CASES = oracle_cases()
_TRACES = {}


def _trace(path):
    if path not in _TRACES:
        _TRACES[path] = load_trace(path)
    return _TRACES[path]


@pytest.mark.parametrize("trace_path,csv_path,report", CASES,
                         ids=[f"{trace_stem(t)}-{r}" for t, _, r in CASES])
def test_reproduces_nsys_stats(trace_path, csv_path, report, async_trace):
    expected = read_oracle(csv_path)
    got = render_csv(build_report(_trace(async_trace(trace_path)), report, "nsys"))
    if got != expected:
        exp_lines, got_lines = expected.splitlines(), got.splitlines()
        diff = [(i, e, g) for i, (e, g) in enumerate(zip(exp_lines, got_lines)) if e != g][:3]
        pytest.fail(f"{report} differs: {len(exp_lines)} vs {len(got_lines)} lines; first: {diff}")


def test_committed_samples_have_nvidia_csvs():
    samples = sorted([*SAMPLES.glob("*.sqlite"), *SAMPLES.glob(f"*{XZ_TRACE}")])
    if not samples:
        pytest.skip("no committed sample traces yet")
    for trace in samples:
        for report in REPORTS:
            assert oracle_csv(SAMPLES, trace_stem(trace), report) is not None, trace


KERN_CASES = [c for c in CASES if c[2] == "nvtx_kern_sum"]


@pytest.mark.parametrize("path", ["columns", "two-key op order"])
@pytest.mark.parametrize("trace_path,csv_path,report", KERN_CASES,
                         ids=[f"{trace_stem(t)}-{r}" for t, _, r in KERN_CASES])
def test_nvtx_kern_sum_by_every_grouping(trace_path, csv_path, report, path, async_trace, monkeypatch):
    """nvtx_kern_sum's other two ways (parsers.nsys.kern_groups): the five columns grouped as they
    are (where the keys cannot be packed in one int64) and the ops ordered by a two-key sort
    (where a duration is too long to pack) print NVIDIA's CSV too."""
    from nsight_tui.parsers.nsys import kern_groups

    if path == "columns":
        monkeypatch.setattr(kern_groups, "KEY_LIMIT", 0)
    else:
        monkeypatch.setattr(kern_groups, "OP_KEY_BITS", 0)
    got = render_csv(build_report(_trace(async_trace(trace_path)), report, "nsys"))
    assert got == read_oracle(csv_path)


@pytest.mark.parametrize("mode", ["nsys", "process"])
def test_reports_built_together_equal_nvidias_and_each_alone(mode):
    """`stats` builds the reports that need no range model on a core of their own while the model
    is built (build_reports): the rows of each report alone, in the order asked; and NVIDIA's
    CSVs where those are the reference (--attribution nsys)."""
    from nsight_tui.parsers.nsys.reports import REPORTS as ALL, build_reports

    path = SAMPLES / "small_ctx128.sqlite"
    names = [ALL[4], ALL[2], ALL[0], ALL[5], ALL[1], ALL[3]]  # mixed: model-free and on the model
    together = build_reports(load_trace(path), names, mode)
    alone = [build_report(load_trace(path), n, mode) for n in names]
    assert [r.name for r in together] == names
    assert [(r.rows, r.message) for r in together] == [(r.rows, r.message) for r in alone]
    if mode == "nsys":
        for rep in together:
            assert render_csv(rep) == read_oracle(oracle_csv(SAMPLES, path.stem, rep.name))


@pytest.mark.parametrize("names", [["nvtx_gpu_proj_sum", "nvtx_kern_sum"], ["nvtx_kern_sum", "nvtx_sum"],
                                   ["nvtx_gpu_proj_sum", "cuda_api_sum"], ["nvtx_gpu_proj_sum"]])
def test_reports_on_the_model_built_side_by_side(names, monkeypatch):
    """The NVTX reports on the range model: nvtx_kern_sum (the longest) on the worker's core right
    after the model, the others on the caller's once the model is there (never a second model);
    each equal to the report built alone, and nothing computed ahead left behind."""
    import threading

    from nsight_tui.parsers.nsys import reports
    from nsight_tui.parsers.read.threads import cores

    if cores() < 2:
        pytest.skip("one core: the reports are built one after the other")
    path = SAMPLES / "small_ctx128.sqlite"
    trace = load_trace(path)
    seen: dict[str, tuple[str, bool]] = {}
    for name in names:
        real = reports.BUILDERS[name]

        def watched(tr, *args, _real=real, _name=name):
            model_there = any(isinstance(k, tuple) and k[:1] == ("range_model",) for k in tr.derived)
            seen[_name] = (threading.current_thread().name, model_there)
            return _real(tr, *args)

        monkeypatch.setitem(reports.BUILDERS, name, watched)
    together = reports.build_reports(trace, names, "process")
    monkeypatch.undo()
    alone = [build_report(load_trace(path), n, "process") for n in names]
    assert [(r.name, r.rows, r.message) for r in together] == [(r.name, r.rows, r.message) for r in alone]
    assert reports.NESTING not in trace.derived
    caller = threading.current_thread().name
    on_model = [n for n in names if n not in reports.MODEL_FREE]
    if len(names) > 1:  # one report alone builds its model itself
        assert all(seen[n][1] for n in on_model), seen  # built over the model already there
    if "nvtx_kern_sum" in names and len(names) > 1:
        assert seen["nvtx_kern_sum"][0] != caller, seen
    if len(on_model) == 2:
        assert seen["nvtx_gpu_proj_sum"][0] == caller, seen


def test_a_signal_on_the_callers_thread_before_its_part_ends_the_build():
    """`stats` ends on SIGHUP/SIGTERM by the handler raising SystemExit on the main thread, at any
    bytecode. One landing before the caller's part of build_reports had begun left the other thread
    waiting for a model nobody would build, and the command hung at exit (4 in 12 runs under load).
    Here the exception is raised exactly there: the build ends with it, the worker joined."""
    import threading

    from nsight_tui.parsers.nsys import reports
    from nsight_tui.parsers.read.threads import cores

    if cores() < 2:
        pytest.skip("one core: the reports are built one after the other")
    real = reports.in_parallel

    def signalled_first(*calls):
        def interrupted():
            raise SystemExit(129)  # what exit_on_signals' handler raises for SIGHUP
        return real(*calls[:-1], interrupted)

    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    ended: list[BaseException] = []

    def build():
        try:
            reports.build_reports(trace, ["nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum"], "process")
        except BaseException as exc:  # noqa: BLE001 - the SystemExit is what is checked
            ended.append(exc)

    import unittest.mock

    with unittest.mock.patch.object(reports, "in_parallel", signalled_first):
        worker = threading.Thread(target=build, daemon=True)
        worker.start()
        worker.join(timeout=120)
    assert not worker.is_alive(), "build_reports hung after the signal's exception"
    assert len(ended) == 1 and isinstance(ended[0], SystemExit) and ended[0].code == 129
