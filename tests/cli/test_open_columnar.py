"""`nsight-tui DIR_pqtdir` opens nsys's Parquet export as one trace, not as a folder of files."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
from helpers.xz_samples import XZ_TRACE
from nsight_tui.parsers.read.source import export_paths
from nsight_tui.tui.launch import check_readable

pytest.importorskip("pyarrow", exc_type=ImportError)


@pytest.mark.parametrize("name", ["twin_small_ctx128_pqtdir", "twin_small_ctx128_arwdir"])
def test_export_folder_is_one_trace(name):
    folder = SAMPLES / name
    assert export_paths([str(folder)]) == [folder]
    check_readable(folder)  # raises TraceError if it could not be read


def test_plain_folder_still_lists_its_sqlite_files():
    """Its `*.sqlite` files and those compressed whole (`*.sqlite.xz`), in the order of the exports' names."""
    found = export_paths([str(SAMPLES)])
    exports = [*SAMPLES.glob("*.sqlite"), *SAMPLES.glob(f"*{XZ_TRACE}")]
    assert found == sorted(exports, key=lambda p: p.name.removesuffix(".xz")) and found


def test_report_identical_across_the_three_exports(tmp_path):
    """`nsight-tui report` (questions, findings, roofline, ranks) on the Parquet and Arrow
    folders says exactly what it says on the SQLite export of the same capture."""
    from nsight_tui.cli import main

    texts = {}
    # the SQLite export is committed compressed whole: the front door reads it as it is
    for name in ("twin_small_ctx128.sqlite.xz", "twin_small_ctx128_pqtdir", "twin_small_ctx128_arwdir"):
        out = tmp_path / f"{name}.json"
        assert main(["report", str(SAMPLES / name), "-f", "json", "-o", str(out)]) == 0
        texts[name] = out.read_text().replace(name, "TRACE")
    assert texts["twin_small_ctx128_pqtdir"] == texts["twin_small_ctx128.sqlite.xz"] == texts["twin_small_ctx128_arwdir"]
    assert '"roofline"' in texts["twin_small_ctx128.sqlite.xz"]  # the sections that read the file themselves ran
