"""A page damaged in the middle of a big table, opened in the explorer in a real terminal (tmux). The
explorer's start checks only the big tables' last pages (walking every row took ~14 s of a 4.4 GB
export's first open), so the damage is met by the load's own read: one line naming the
table, status 2, no traceback, and the terminal given back."""
from __future__ import annotations

import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import SAMPLES
from test_tui_tmux import Tmux, command, wait_file

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def _damaged_copy(src: Path, table: str, dest: Path) -> Path:
    """`src` with one leaf page of `table` (neither its first nor its last, by SQLite's own page
    map, dbstat) given a page type SQLite does not know."""
    with sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True) as con:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        leaves = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                                            "ORDER BY pageno", (table,))]
    assert len(leaves) >= 3, f"{table}: too few pages in {src.name}"
    data = bytearray(src.read_bytes())
    data[(leaves[len(leaves) // 2] - 1) * size] = 0xFF
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"])
def test_a_damaged_page_ends_the_explorer_in_one_line(table, repo_root: Path, tmp_path: Path):
    profile = _damaged_copy(SAMPLES / "small_ctx128.sqlite", table, tmp_path / "damaged.sqlite")
    status = tmp_path / "exit_status"
    shell = (f"cd {shlex.quote(str(tmp_path))} && NSIGHT_TUI_NO_CACHE=1 PYTHONPATH={shlex.quote(str(repo_root))} "
             f"{command(repo_root)} {shlex.quote(str(profile))}; echo $? > {shlex.quote(str(status))}")
    t = Tmux(tmp_path)
    try:
        t.start(shell, size=(200, 34))  # wide: the one line is not wrapped by the terminal
        assert wait_file(status) == "2"
        pane = [line for line in t.pane().splitlines() if line.strip()]
    finally:
        t.kill()
    said = [line for line in pane if line.startswith("nsight-tui: ")]
    assert len(said) == 1 and "damaged" in said[0] and table in said[0], pane
    assert "Traceback" not in "\n".join(pane)
