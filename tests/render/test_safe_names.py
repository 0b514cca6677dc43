"""Names from a profile are untrusted: every output path gets a kernel, an NVTX range and a
thread named with each kind of control character, Rich markup and Markdown/HTML syntax, and
none of it may reach the output raw (issues #10 and #16).

The hostile profile is a copy of the committed sample with three StringIds rows edited.
Expectations are written here from the characters themselves, not from the code's escaper.
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES
from helpers import cli_process

# Each kind: OSC (set title) ended by BEL, CSI clear screen and colour, CR, NUL, a C1 CSI (0x9b),
# DEL, a bidi override, a newline; Rich markup (a closing tag alone crashes Rich); Markdown link
# and HTML; a pipe (a Markdown cell break).
EVIL = ("E\x1b]0;pwned\x07\x1b[2J\x1b[31mred\rCR\x00NUL\x9bC1\x7fDEL\u202eRLO\nNL\tTAB "
        "[bold red]markup[/] [/] <script>alert(1)</script> [text](http://x.y) a|b ")
RAW = ["\x1b", "\x07", "\r", "\x00", "\x9b", "\x7f", "\u202e"]  # never in any output
SHOWN = ["\\x1b", "\\x07", "\\r", "\\x00", "\\x9b", "\\x7f", "\\u202e", "\\n", "\\t"]  # how they read instead
TOP_KERNEL_SQL = """SELECT s.id, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
                    GROUP BY s.id ORDER BY sum(k.end - k.start) DESC LIMIT 1"""


@pytest.fixture(scope="module")
def evil(tmp_path_factory) -> Path:
    """The sample with its top kernel, the attention range and a thread renamed."""
    path = tmp_path_factory.mktemp("evil") / "evil.sqlite"
    shutil.copy(SAMPLES / "small_ctx128.sqlite", path)
    con = sqlite3.connect(path)
    kid, kname = con.execute(TOP_KERNEL_SQL).fetchone()
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (EVIL + kname, kid))  # still a GEMM by name
    # a non-GEMM kernel of forward's top five: the report shows its (shortened) name
    copy_id = con.execute("SELECT id FROM StringIds WHERE value LIKE 'void at::native::elementwise_kernel<(int)128, "
                          "(int)2, void at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda%'"
                          ).fetchone()[0]
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (EVIL + "copy", copy_id))
    con.execute("UPDATE StringIds SET value = ? WHERE value = 'scaled_dot_product_attention'", (EVIL + "sdpa",))
    con.execute("UPDATE StringIds SET value = ? WHERE id = (SELECT nameId FROM ThreadNames LIMIT 1)", (EVIL + "thr",))
    con.commit()
    con.close()
    return path


def _cli(*args) -> subprocess.CompletedProcess:
    proc = cli_process.run(args, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return proc


def _no_raw(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"raw {ch!r} reached the output"
    assert not any(line.startswith("NL") for line in text.splitlines()), "a name broke a line"


def _shown(text: str) -> None:
    for esc in SHOWN:
        assert esc in text, f"{esc} not shown"


def _markdown_safe(text: str) -> None:
    _no_raw(text)
    _shown(text.replace("\\\\", "\\"))  # Markdown doubles the backslash of `\x1b`
    assert "<script>" not in text and "\\<script\\>" in text
    assert "[text](" not in text and "\\[text\\](http://x.y)" in text
    assert "a\\|b" in text


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "json"])
def test_stats_outputs(evil, fmt):
    out = _cli("stats", evil, "-f", fmt, "-r", "cuda_gpu_kern_sum,nvtx_sum").stdout.decode("utf-8")
    _no_raw(out)
    if fmt == "json":
        docs = json.loads(out)["reports"]  # several reports: one document
        names = {row[-1] for d in docs for row in d["rows"]}
        assert EVIL + "sdpa" in names or any(n.endswith(EVIL + "sdpa") for n in names)  # data kept as it is
        assert any(n.startswith(EVIL) for n in names)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(out)))
        names = [r[-1] for r in rows if r]
        assert any(n.startswith("E\\x1b]0;pwned\\x07") and "[bold red]markup[/]" in n for n in names)
        _shown(out)
    elif fmt == "markdown":
        _markdown_safe(out)
    else:  # the terminal table: literal markup, visible escapes (Rich used to crash: MarkupError)
        _shown(out)
        assert "[/]" in out and "[bold" in out


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_report_outputs(evil, fmt):
    out = _cli("report", evil, "-f", fmt).stdout.decode("utf-8")
    _no_raw(out)
    if fmt == "json":
        data = json.loads(out)
        assert data["ranges"]["forward"]["top_kernels"][0]["name"].startswith(EVIL)
    else:  # the report shows kernels by their short names: `EVIL...[/] [/]<script>` survives
        _no_raw(out)
        assert "E\\\\x1b\\]0;pwned\\\\x07" in out and "\\[bold red\\]markup\\[/\\]" in out
        assert "<script>" not in out and "\\<script\\>" in out


def test_report_markdown_file_name_is_safe(evil, tmp_path):
    named = tmp_path / "run\x1b[2J<b>[x](y).sqlite"
    shutil.copy(evil, named)
    out = _cli("report", named).stdout.decode("utf-8")
    first = out.splitlines()[0]
    assert "\x1b" not in first and "\\<b\\>\\[x\\](y)" in first


def test_tree_rows_show_names_visibly(evil):
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.tui.tree_source import RangeTreeSource

    model = range_model(load_trace(evil), "process")
    for groups, agg in ((model.thread_groups, False), (model.aggregated_groups, True)):
        source = RangeTreeSource(groups, agg)
        i = 0
        while i < len(source):  # open everything
            source.expand(i)
            i += 1
        cells = "\n".join(source.cell(r, c) for r in range(len(source)) for c in source.columns)
        _no_raw(cells.replace("\n", " "))
        assert "E\\x1b]0;pwned\\x07" in cells and "[bold red]markup[/]" in cells


def test_tui_screen_and_export(evil, tmp_path):
    """The screen (what the terminal gets) and `e`'s file, on the ranges and a kernels view."""
    from nsight_tui.tui.app import NsightApp

    async def settle(app, pilot):
        for _ in range(3000):  # bounded: until no worker is pending or running
            await pilot.pause()
            if not any(w.state.name in ("PENDING", "RUNNING") for w in app.workers):
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the app did not settle")

    async def press(app, pilot, *keys):
        for key in keys:
            await pilot.press(key)
            await settle(app, pilot)

    async def wait_loaded(app, pilot):
        for _ in range(3000):
            if app.loaded:
                return await settle(app, pilot)
            assert not app.error_message, app.error_message
            await pilot.pause(0.02)
        raise AssertionError("not loaded in time")

    async def body():
        app = NsightApp([str(evil)], export_dir=tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_loaded(app, pilot)
            await press(app, pilot, "slash", *"sdpa", "enter")
            screens = [_screen(app)]
            await press(app, pilot, "e")
            await press(app, pilot, "enter")  # the kernels of the evil range: the evil GEMM among them
            await settle(app, pilot)
            screens.append(_screen(app))
            await press(app, pilot, "e")
            for _ in range(200):  # the export runs in a worker: wait for both files
                if len(list(tmp_path.glob("*.md"))) >= 2:
                    break
                await pilot.pause(0.02)
        return screens

    screens = asyncio.run(body())
    for text in screens:
        _no_raw(text)
    assert any("\\x1b" in s for s in screens)
    files = sorted(tmp_path.glob("*.md"))
    assert len(files) == 2, files
    for f in files:
        _markdown_safe(f.read_text())


def _screen(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@pytest.mark.parametrize("command", ["stats", "report"])
def test_error_lines_quote_paths_visibly(tmp_path, command):
    """A one-line error that names the file (here: missing) shows its control characters too."""
    missing = tmp_path / "gone\x1b]0;pwned\x07\nsecond line.sqlite"
    proc = cli_process.run([command, str(missing)],
                           timeout=120)
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 2 and err.count("\n") == 1, err
    _no_raw(err)
    assert "gone\\x1b]0;pwned\\x07\\nsecond line" in err


def test_tui_timeline_shows_names_visibly(evil):
    """The timeline: range names inside their bars, lane titles and the line under the
    lanes wrote U+009B, U+202E and the rest raw; on the range tree's `t` and the findings' `enter`."""
    from nsight_tui.tui.app import NsightApp

    async def settle(app, pilot):
        for _ in range(3000):
            await pilot.pause()
            if not any(w.state.name in ("PENDING", "RUNNING") for w in app.workers):
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the app did not settle")

    async def body():
        app = NsightApp([str(evil)])
        screens = []
        async with app.run_test(size=(200, 60)) as pilot:
            for _ in range(3000):
                if app.loaded:
                    break
                await pilot.pause(0.02)
            await settle(app, pilot)
            for keys in (["slash", *"sdpa", "enter", "t"], ["escape", "F", "enter"]):
                for key in keys:
                    await pilot.press(key)
                    await settle(app, pilot)
                screens.append((type(app.screen).__name__, _screen(app)))
        return screens

    screens = asyncio.run(body())
    assert [name for name, _ in screens] == ["TimelineScreen", "TimelineScreen"]
    for _, text in screens:
        _no_raw(text)
    assert any("\\x1b" in text or "\\u202e" in text for _, text in screens)
