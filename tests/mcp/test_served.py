"""Which paths `nsight-tui mcp` may read (nsight_tui.mcp.served), without a server: folders, nsys's
columnar exports, nested folders, names as listed."""
from __future__ import annotations

import os

import pytest

from conftest import ROOT
from nsight_tui.mcp.served import NotServed, ServedSet
from nsight_tui.parsers.read.errors import TraceError


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_folder_serves_its_direct_exports_only():
    s = ServedSet(["sample_traces"])
    kinds = {f.name: f.kind for f in s.files}
    assert kinds["sample_traces/small_ctx128.sqlite"] == "sqlite"
    assert kinds["sample_traces/twin_small_ctx128_pqtdir"] == "parquetdir"
    assert kinds["sample_traces/twin_small_ctx128_arwdir"] == "arrowdir"
    assert s.file(str(ROOT / "sample_traces" / "small_ctx128.sqlite")).name == "sample_traces/small_ctx128.sqlite"
    for other in ("sample_traces/ranks_small_ctx128_ddp2/small_ctx128_ddp2_rank0.sqlite.xz",  # one level down
                  "sample_traces/twin_small_ctx128_pqtdir/StringIds.parquet",  # inside an export
                  "sample_traces/make_edge_cases.py", "sample_traces", "README.md"):
        with pytest.raises(NotServed):
            s.file(other)


def test_one_file_is_the_default_and_the_only_one():
    s = ServedSet(["sample_traces/small_ctx128.sqlite"])
    assert s.file(None).name == s.file("").name == "sample_traces/small_ctx128.sqlite"
    assert s.file("./sample_traces/../sample_traces/small_ctx128.sqlite").path == (ROOT / "sample_traces/small_ctx128.sqlite")
    for other in ("sample_traces/small_ctx128_fused.sqlite.xz", "/etc/passwd", "~/x.sqlite", "sample_traces/small_ctx128.sqlite/.."):
        with pytest.raises(NotServed):
            s.file(other)
    two = ServedSet(["sample_traces/small_ctx128.sqlite", "sample_traces/small_ctx128_fused.sqlite.xz"])
    with pytest.raises(NotServed, match="name one"):
        two.file(None)


def test_bad_command_lines(tmp_path):
    for items, message in (([], "name at least one"), ([str(tmp_path / "nope")], "no such file"),
                           ([str(tmp_path)], "no .sqlite exports")):
        with pytest.raises(TraceError, match=message):
            ServedSet(items)
    fifo = tmp_path / "f.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        ServedSet([str(fifo)])
