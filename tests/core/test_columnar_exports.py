"""nsys's own columnar exports read into the same model, with the same numbers.

sample_traces/twin_small_ctx128* come from ONE .nsys-rep, exported three ways on the GPU
machine (devruns/gpu_twin.sh): SQLite (with NVIDIA's `nsys stats` CSVs in oracle/, checked
by test_nsys_oracle.py), `--type parquetdir` and `--type arrowdir`. Every report must be
identical whichever export is read."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from conftest import REPORTS, SAMPLES
from helpers.xz_samples import plain
from nsight_tui.render.nsys import render_csv
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.nsys.reports import build_report

pytest.importorskip("pyarrow", exc_type=ImportError)

SQLITE = plain(SAMPLES / "twin_small_ctx128.sqlite.xz")
COLUMNAR = {"parquetdir": SAMPLES / "twin_small_ctx128_pqtdir", "arrowdir": SAMPLES / "twin_small_ctx128_arwdir"}
_cache: dict = {}


def _load(path):
    if path not in _cache:
        _cache[path] = load_trace(path)
    return _cache[path]


@pytest.mark.parametrize("kind", COLUMNAR)
@pytest.mark.parametrize("attribution", ["nsys", "process"])
@pytest.mark.parametrize("report", REPORTS)
def test_every_report_identical(kind, attribution, report):
    expected = render_csv(build_report(_load(SQLITE), report, attribution))
    got = render_csv(build_report(_load(COLUMNAR[kind]), report, attribution))
    assert expected  # the twin has data for every report: an empty match would prove nothing
    assert got == expected


@pytest.mark.parametrize("kind", COLUMNAR)
def test_same_model(kind):
    a, b = _load(SQLITE), _load(COLUMNAR[kind])
    assert b.info.export_kind == kind
    for name in ("ops", "api", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    assert (a.op_names, a.api_names, a.threads, a.processes) == (b.op_names, b.api_names, b.threads, b.processes)
    assert (a.info.gpus, a.info.span_ns, a.info.nsys_version) == (b.info.gpus, b.info.span_ns, b.info.nsys_version)
    ma, mb = range_model(a, "process"), range_model(b, "process")
    assert ma.busy_ns.tolist() == mb.busy_ns.tolist() and ma.kernel_count.tolist() == mb.kernel_count.tolist()


@pytest.mark.parametrize("kind", COLUMNAR)
def test_lazy_parts_stay_lazy_and_agree(kind):
    a, b = load_trace(SQLITE), load_trace(COLUMNAR[kind])
    assert "op_short" not in vars(b)  # short names are read on first use, not at load
    assert b.op_short == a.op_short
    assert any(s != n for s, n in zip(b.op_short, b.op_names))  # really nsys's short names
    pick = list(range(0, len(a.ops), max(1, len(a.ops) // 50)))
    details = b.op_details(pick)
    pd.testing.assert_frame_equal(details, a.op_details(pick))
    assert (details["grid"] != "").any() and (details["bytes"] > 0).any()


def test_stats_cli_reads_the_folder(tmp_path, capsys):
    from nsight_tui.cli import main

    outputs = {}
    for name, path in (("sqlite", SQLITE), *COLUMNAR.items()):
        assert main(["stats", str(path), "-f", "csv", "-o", str(tmp_path / name)]) == 0
        outputs[name] = {r: (tmp_path / f"{name}_{r}.csv").read_text() for r in REPORTS}
    assert outputs["parquetdir"] == outputs["sqlite"] == outputs["arrowdir"]


def test_truncated_parquet_file_is_one_clear_error(tmp_path):
    folder = tmp_path / "cut_pqtdir"
    shutil.copytree(COLUMNAR["parquetdir"], folder)
    kernels = folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    kernels.write_bytes(kernels.read_bytes()[: kernels.stat().st_size // 2])
    with pytest.raises(TraceError, match="cut_pqtdir: unreadable parquetdir export"):
        load_trace(folder)


def test_folder_without_string_table_is_refused(tmp_path):
    folder = tmp_path / "not_nsys"
    folder.mkdir()
    shutil.copy(COLUMNAR["parquetdir"] / "CUPTI_ACTIVITY_KIND_KERNEL.parquet", folder)
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(folder)
