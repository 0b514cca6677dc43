"""A second open of an unchanged file (parsers/read/cache.py): the app goes straight to the tree
with its GPU columns, from the cache, and shows what the first open showed, row for row."""
from __future__ import annotations

import asyncio
import mmap
import shutil

from conftest import SAMPLE, Ui, make_app
from nsight_tui.parsers.read import cache
from nsight_tui.tui.session import StagedLoad


def _mapped(values) -> bool:
    while values is not None:
        if isinstance(values, mmap.mmap):
            return True
        values = getattr(values, "base", None)
    return False


async def _screen(path) -> tuple[list[str], bool]:
    app = make_app(path)
    async with app.run_test(size=(140, 40)) as pilot:
        ui = Ui(app, pilot)
        await ui.loaded()
        # every line but the header's timing ("loaded in N s" differs from run to run)
        lines = [line for line in ui.text().splitlines() if "loaded in" not in line]
        return lines, _mapped(app.session.trace.ops["start"].to_numpy())


def test_second_open_shows_the_first_opens_tree_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.setattr(cache, "_off_for_process", False)
    path = tmp_path / SAMPLE.name
    shutil.copyfile(SAMPLE, path)
    first, first_mapped = asyncio.run(_screen(path))
    cache.wait_all()
    second, second_mapped = asyncio.run(_screen(path))
    assert not first_mapped and second_mapped
    assert second == first
    assert any("step_N" in line for line in second)
    # and the staged load knows there is nothing to show early: one stage, GPU columns included
    staged = StagedLoad(path, "process")
    assert staged.tree() is None
    trace, _ = staged.finish()
    assert not trace.info.gpu_pending and trace.info.kernels > 0


def test_a_cached_unchanged_file_is_opened_without_touching_every_table(tmp_path, monkeypatch):
    """`nsight-tui FILE` touches the last page of every big table before the app starts (a
    truncated copy fails there); a file the cache holds, unchanged since it was read to its
    end, skips that (30 s at 4 GB). A changed file is touched again."""
    import os

    from nsight_tui.parsers.read import columns
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.tui.launch import check_readable

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.setattr(cache, "_off_for_process", False)
    touched: list = []
    real = columns.probe_integrity
    monkeypatch.setattr(columns, "probe_integrity", lambda *a: touched.append(a[1]) or real(*a))
    path = tmp_path / SAMPLE.name
    shutil.copyfile(SAMPLE, path)
    check_readable(path)
    assert touched == [path]  # not cached yet
    load_trace(path)
    cache.wait_all()
    touched.clear()
    check_readable(path)
    assert touched == []
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    check_readable(path)
    assert touched == [path]
