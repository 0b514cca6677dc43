"""The kernel table read by a child process gives exactly what the serial read gives,
and a table the child cannot read (a NULL) falls back to the serial read."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from conftest import SAMPLES
from nsight_tui.parsers import parallel_fetch
from nsight_tui.parsers.load import load_trace
from nsight_tui.parsers.model import range_model


@pytest.fixture()
def sample():
    path = SAMPLES / "small_ctx128.sqlite"
    if not path.exists():
        pytest.skip("sample trace missing")
    return path


def _same(a, b):
    assert a.op_names == b.op_names
    assert a.ops.equals(b.ops)
    assert range_model(a, "process").kernel_count.tolist() == range_model(b, "process").kernel_count.tolist()


@pytest.fixture()
def child_results(monkeypatch):
    """What the child process handed back, so a test knows the parallel path really ran."""
    seen = []
    original = parallel_fetch.ChildFetch.result

    def recording(self):
        out = original(self)
        seen.append(out)
        return out

    monkeypatch.setattr(parallel_fetch.ChildFetch, "result", recording)
    return seen


def _kernel_rows(path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()


def test_child_fetch_equals_serial(sample, child_results):
    child = load_trace(sample, parallel_min_rows=0)
    assert len(child_results) == 1 and child_results[0] is not None  # the child delivered the rows
    assert child_results[0].shape[0] == _kernel_rows(sample)
    _same(child, load_trace(sample, parallel_min_rows=10**12))


def test_null_in_kernel_table_falls_back(sample, tmp_path, child_results):
    path = tmp_path / "with_null.sqlite"
    shutil.copy(sample, path)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid = 1")
    con.commit()
    con.close()
    child = load_trace(path, parallel_min_rows=0)
    assert child_results == [None]  # the child refused the NULL; the serial read took over
    serial = load_trace(path, parallel_min_rows=10**12)
    _same(child, serial)
    # the kernel without a process still finds its launch (by correlation ID alone)
    first = child.ops.index[child.ops["rowid"] == 1][0]
    assert child.ops.at[first, "api"] >= 0
