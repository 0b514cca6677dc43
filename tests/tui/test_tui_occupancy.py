"""Theoretical occupancy where it shows: the kernel table's Occ column and detail line, the
report's JSON and Markdown; figures checked against NVIDIA's calculator written out by hand
(tests/core/test_occupancy.py) over SQL on the export, never against the module's own tables."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_occupancy import calculator  # noqa: E402  (the hand-written calculator)

from nsight_tui.parsers import Profile  # noqa: E402
from nsight_tui.parsers.model.ranges import range_model  # noqa: E402
from nsight_tui.parsers.read.load import load_trace  # noqa: E402
from nsight_tui.render import report  # noqa: E402
from nsight_tui.tui.viewmodels.kernels import trace_kernels  # noqa: E402


def _by_name_sql(path: Path) -> dict[str, tuple[float, str]]:
    """Per demangled name: the occupancy % and limiter of its configuration with the most GPU
    time (ties: most launches), by SQL and the hand calculator."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        (ma, mi, w, b, s), = con.execute(
            "SELECT computeMajor, computeMinor, maxWarpsPerSm, maxBlocksPerSm, maxShmemPerSm FROM TARGET_INFO_GPU")
        rows = con.execute(
            "SELECT s.value, registersPerThread, staticSharedMemory + dynamicSharedMemory, blockX*blockY*blockZ,"
            " coalesce(sharedMemoryExecuted, 0), sum(k.[end] - k.start), count(*)"
            " FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
            " GROUP BY 1, 2, staticSharedMemory, dynamicSharedMemory, 4, 5 ORDER BY 6 DESC, 7 DESC").fetchall()
    finally:
        con.close()
    out: dict[str, tuple[float, str]] = {}
    for name, regs, smem, threads, carve, _, _ in rows:
        if name not in out:
            pct, limiter, _ = calculator((ma, mi), regs, smem, threads, carve, w, b, s)
            out[name] = (round(pct, 6), limiter)
    return out


def test_kernel_table_occupancy_matches_the_calculator(sample: Path):
    view = trace_kernels(range_model(load_trace(sample), "process"))
    expected = _by_name_sql(sample)
    kernels = view.summary[view.summary["kind"] == "kernel"]
    assert len(kernels) == len(expected)
    for r in kernels.itertuples():
        assert (round(r.occ_pct, 6), r.occ_limiter) == expected[r.name], r.name
    memory = view.summary[view.summary["kind"] != "kernel"]
    assert memory["occ_pct"].isna().all()  # memcpy/memset: no occupancy


def test_report_json_and_markdown(sample: Path):
    answers = Profile(load_trace(sample)).report()
    expected = _by_name_sql(sample)
    data = json.loads(report.single_json(answers))
    occ = data["occupancy"]
    assert occ["what"] == "theoretical (from launch configuration)"
    assert {k["name"] for k in occ["kernels"]} == set(expected)
    for k in occ["kernels"]:
        assert (round(k["theoretical_occupancy_pct"], 6), k["occupancy_limiter"]) == pytest.approx(expected[k["name"]])
        assert sum(c["launches"] for c in k["configs"]) == k["launches"]
    # the top kernels of each range carry the figure of their configuration with most time there
    for phase in ("forward", "backward"):
        for k in data["ranges"][phase]["top_kernels"]:
            assert k["occupancy_limiter"] in ("warps", "blocks", "registers", "shared memory")
            assert 0 < k["theoretical_occupancy_pct"] <= 100
    text = report.single_markdown(answers)
    assert "## Occupancy: theoretical (from launch configuration)" in text
    assert "| cuBLAS gemm tn 64x64x8 f32 | 9.005 | 25% | registers | 128 | 128 | 13056 | 4 | 1 |" in text


def test_screen_shows_occ_and_the_limiter(sample: Path, tui):
    async def body():
        async with tui(sample, size=(100, 30)) as ui:
            await ui.press("2")
            await ui.until_text("Occ")
            await ui.press("j")  # the top GEMM: 128 registers x 128 threads
            text = await ui.until_text("Theoretical occupancy (from launch configuration) 25%, limited by registers")
            assert "128 regs × 128 threads" in text

    asyncio.run(body())
