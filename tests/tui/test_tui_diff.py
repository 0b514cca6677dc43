"""The diff view driven by keys (Pilot) on the committed manual-vs-fused pair: opened by
`--diff` and from the files view, the tree's Δ columns, enter on a range -> its kernel diff,
`t`, `w`, `K`, `/`, and `e` exports checked against each file's own SQL (tests/helpers/diff_sql.py)."""
from __future__ import annotations

import asyncio
from pathlib import Path

from helpers import diff_sql as sql
import pytest
from conftest import SAMPLES
from helpers import cli_process
from helpers.xz_samples import plain

MANUAL = SAMPLES / "small_ctx128.sqlite"
FUSED = plain(SAMPLES / "small_ctx128_fused.sqlite.xz")  # decompressed under its own name (the title shows it)
STEPS = "step_[0-9]*"
ATTENTION = "step_N/forward/scaled_dot_product_attention"
pytestmark = pytest.mark.skipif(not (MANUAL.exists() and FUSED.exists()), reason="sample pair missing")


def run(coro):
    return asyncio.run(coro)


def n_steps(path: Path) -> int:
    return len(sql.ranges(path, STEPS, within="*"))


async def exported(ui, folder: Path, pattern: str) -> str:
    """`e`, then the file once the export worker has written it (bounded wait)."""
    await ui.press("e")
    for _ in range(200):
        hits = sorted(folder.glob(pattern))
        if hits:
            return hits[0].read_text()
        await ui.pilot.pause(0.02)
    raise AssertionError(f"no {pattern} exported")


async def search(ui, text: str) -> None:
    await ui.press("slash")
    await ui.type(text)
    await ui.press("enter")


def test_diff_view_tree_and_export_match_sql(tmp_path, tui, md_tables):
    async def body():
        async with tui([MANUAL, FUSED], size=(120, 40), diff=True, export_dir=tmp_path) as ui:
            app = ui.app
            screen = app.screen
            assert type(screen).__name__ == "DiffScreen"
            text = ui.text()
            assert "Δ = B − A · small_ctx128.sqlite → small_ctx128_fused.sqlite" in text
            assert "B slower" in text  # the fused run's NVTX step is slower by 0.3% on these captures
            lines = [ln for ln in text.splitlines() if "computing_softmax" in ln]
            assert len(lines) == 2 and all("removed" in ln for ln in lines)  # warmup_N and step_N
            return await exported(ui, tmp_path, "nsight-tui_diff.md")

    text = run(body())
    headers, rows = md_tables(text)[0]
    table = {r[headers.index("Range path")]: dict(zip(headers, r)) for r in rows}
    na, nb = n_steps(MANUAL), n_steps(FUSED)
    step_a, step_b = sql.range_figures(MANUAL, STEPS, "*"), sql.range_figures(FUSED, STEPS, "*")
    row = table["step_N"]
    assert float(row["CPU time A"]) == round(step_a["cpu_ns"] / na, 3)
    assert float(row["CPU time B"]) == round(step_b["cpu_ns"] / nb, 3)
    assert float(row["CPU time Δ"]) == round(step_b["cpu_ns"] / nb - step_a["cpu_ns"] / na, 3)
    assert float(row["GPU busy Δ"]) == round(step_b["busy_ns"] / nb - step_a["busy_ns"] / na, 3)
    soft = table[f"{ATTENTION}/computing_softmax"]
    fa = sql.range_figures(MANUAL, "computing_softmax")
    assert soft["Status"] == "removed" and soft["kernel time B"] == ""
    assert float(soft["kernel time A"]) == round(fa["kernel_ns"] / na, 3)
    assert float(soft["kernels A"]) == fa["kernels"] / na
    assert "Δ = B − A" in text and "basis: per steady-state step" in text


def test_enter_on_attention_shows_the_fused_kernel_added(tmp_path, tui, md_tables):
    async def body():
        async with tui([MANUAL, FUSED], size=(120, 40), diff=True, export_dir=tmp_path) as ui:
            app = ui.app
            await search(ui, ATTENTION)
            await ui.press("enter")
            screen = app.screen
            assert type(screen).__name__ == "DiffKernelsScreen"
            text = ui.text()
            assert "kernels of step_N/forward/scaled_dot_product_attention" in text
            fused = [ln for ln in text.splitlines() if "fmha_cutlassF" in ln]
            assert fused and "added" in fused[0]
            kernels = await exported(ui, tmp_path, "nsight-tui_diff_kernels_*.md")
            await ui.press("t")
            assert "Fused attention" in ui.text() and "names" in ui.text()
            return kernels

    text = run(body())
    headers, rows = md_tables(text)[0]
    got = {r[headers.index("Name (demangled)")]: dict(zip(headers, r)) for r in rows}
    na, nb = n_steps(MANUAL), n_steps(FUSED)

    def totals(path):
        out: dict[str, int] = {}
        for _kind, start, end, name in sql.unique_ops(path, "scaled_dot_product_attention"):
            out[name] = out.get(name, 0) + end - start
        return out

    ta, tb = totals(MANUAL), totals(FUSED)
    assert set(got) == set(ta) | set(tb)
    for name, r in got.items():
        assert r["Status"] == ("added" if name not in ta else "removed" if name not in tb else "")
        assert float(r["Δ (ns)"]) == round(tb.get(name, 0) / nb - ta.get(name, 0) / na, 3)


def test_why_screen_waterfall_and_step_kernels(tmp_path, tui, md_tables):
    async def body():
        async with tui([MANUAL, FUSED], size=(100, 30), diff=True, export_dir=tmp_path) as ui:
            app = ui.app
            await ui.press("w")
            assert type(app.screen).__name__ == "WhyScreen"
            text = ui.text()
            assert "largest contributors" in text and "fmha_cutlassB" in text
            why = await exported(ui, tmp_path, "nsight-tui_diff_why.md")
            await ui.press("escape", "K")
            assert type(app.screen).__name__ == "DiffKernelsScreen"
            assert "kernels of step_N (steady-state step)" in ui.text()
            await ui.press("escape")
            assert type(app.screen).__name__ == "DiffScreen"
            return why

    text = run(body())
    headers, rows = md_tables(text)[0]
    by_phase = {r[0]: dict(zip(headers, r)) for r in rows}
    na, nb = n_steps(MANUAL), n_steps(FUSED)
    for phase in ("forward", "backward", "optimizer"):
        fa, fb = sql.range_figures(MANUAL, phase), sql.range_figures(FUSED, phase)
        assert float(by_phase[phase]["Δ total (ns)"]) == round(fb["op_ns"] / nb - fa["op_ns"] / na, 3)
    sa, sb = sql.range_figures(MANUAL, STEPS, "*"), sql.range_figures(FUSED, STEPS, "*")
    assert float(by_phase["step"]["Δ total (ns)"]) == round(sb["op_ns"] / nb - sa["op_ns"] / na, 3)


def test_metric_key_and_search_walk(tmp_path, tui):
    async def body():
        async with tui([MANUAL, FUSED], size=(100, 30), diff=True) as ui:
            app = ui.app
            assert "busy A" in ui.text()
            await ui.press("t")
            assert "kern A" in ui.text()
            await ui.press("t", "t", "t")
            assert "busy A" in ui.text()
            await search(ui, "computing_softmax")
            screen = app.screen
            first = screen.source.node_at(screen.grid.cursor)
            assert first.path_text == "warmup_N/forward/scaled_dot_product_attention/computing_softmax"
            await ui.press("n")
            second = screen.source.node_at(screen.grid.cursor)
            assert second.path_text == f"{ATTENTION}/computing_softmax"
            assert "match 2 of 2" in ui.text()
            await ui.press("N")
            assert screen.source.node_at(screen.grid.cursor) is first

    run(body())


def test_files_view_baseline_and_diff_keys(tmp_path, tui):
    async def body():
        async with tui([FUSED, MANUAL], size=(100, 30)) as ui:
            app = ui.app
            assert type(app.screen).__name__ == "FilesScreen"
            files = app.screen
            # rows follow the order the files were given; put the manual run first as A
            row = next(i for i in range(len(files.table)) if files.view.runs[files.table.position(i)].path == MANUAL)
            files.grid.move_to(row)
            await ui.press("b")
            assert "baseline (A): small_ctx128.sqlite" in ui.text()
            await ui.press("d")  # on the baseline with two files: the other one is B
            await ui.settle()
            assert type(app.screen).__name__ == "DiffScreen"
            assert (app.screen.a, app.screen.b) == (MANUAL, FUSED)
            assert "Δ = B − A · small_ctx128.sqlite → small_ctx128_fused.sqlite" in ui.text()
            await ui.press("escape")
            assert type(app.screen).__name__ == "FilesScreen"

    run(body())


def _cli(*args):
    return cli_process.run(args, text=True, timeout=120)


def test_diff_flag_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("text, not SQLite\n")
    for args, needle in (((MANUAL, bad, "--diff"), "not an SQLite file"), ((MANUAL, "--diff"), "two files"),
                         ((MANUAL, FUSED, MANUAL, "--diff"), "two files")):
        proc = _cli(*args)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr


def test_the_diffs_basis_is_on_screen_at_80x24(tui):
    """Every figure of the diff is per step (or per capture): at 80x24 the crumb cut the basis off
    after the two file names (`diff: A.sqlite → B.sqlite · Δ = B − A · per step (…` lost its end)."""
    async def body():
        async with tui([MANUAL, FUSED], size=(80, 24), diff=True) as ui:
            await ui.until(lambda: type(ui.screen).__name__ == "DiffScreen" and ui.screen.view is not None,
                           "the diff", timeout=120)
            await ui.settle()
            crumb = next(line for line in ui.text().splitlines() if line.strip().startswith("diff"))
            assert "per step (" in crumb and "Δ = B − A" in crumb

    run(body())
