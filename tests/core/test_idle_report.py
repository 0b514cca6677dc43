"""`nsight-tui report` section (f) and its JSON, and the sweep's per-figure tables, against the
independent idle reference (tests/helpers/idle_reference.py) over windows read with SQL."""
from __future__ import annotations

import json
import shutil

import pytest

from helpers import step_sql
from conftest import SAMPLES
from helpers.cli import run_main
from helpers.idle_reference import Reference, ro

TRACE = SAMPLES / "small_ctx128.sqlite"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="sample trace missing")
BURST_GAP_NS = 100_000  # the documented default

WINDOWS = """
WITH r AS (SELECT e.start, e.end, e.globalTid AS g, coalesce(e.text, s.value) AS name
           FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE e.eventType IN (59, 60, 70, 71) AND e.end IS NOT NULL)
SELECT p.start, p.end FROM r p JOIN r st ON st.g = p.g AND st.start <= p.start AND st.end >= p.end
WHERE (p.name = :name OR (:name = 'step' AND p.name GLOB 'step_[0-9]*' AND p.start = st.start))
AND st.name GLOB 'step_[0-9]*' ORDER BY p.start"""


def _report(target, fmt):
    proc = run_main("report", target, "-f", fmt)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _windows(name):
    if name == "step":  # the step's window is its period (tests/helpers/step_sql.py)
        return [(it.start, it.start + it.period) for it in step_sql.steps(TRACE)]
    con = ro(TRACE)
    try:
        return [(int(a), int(b)) for a, b in con.execute(WINDOWS, {"name": name})]
    finally:
        con.close()


def test_report_json_and_markdown_section_f():
    ref = Reference(TRACE)
    data = json.loads(_report(TRACE, "json"))
    idle = data["gpu_idle"]
    assert idle["burst_gap_ns"] == BURST_GAP_NS and set(idle["definitions"]) >= {"launch-bound", "sync-bound"}
    text = _report(TRACE, "markdown")
    section = text[text.index("## (f) GPU idle and the CPU's lead"):]
    for phase in ("forward", "backward", "optimizer", "step"):
        windows = _windows(phase)
        assert len(windows) == 3, phase
        got = idle["phases"][phase]
        assert got["instances"] == 3 and got["window_ns"] == sum(b - a for a, b in windows)
        (dev,) = got["devices"]
        want = ref.split(0, windows, BURST_GAP_NS)
        assert (dev["busy_ns"], dev["launch_bound_ns"], dev["sync_bound_ns"], dev["host_bound_ns"]) == \
            (want["busy"], want["launch"], want["sync"], want["host"])
        lead = ref.lead(0, windows)
        assert (dev["lead"]["kernels"], dev["lead"]["median_ns"], dev["lead"]["p95_ns"], dev["lead"]["max_ns"]) == \
            (lead["kernels"], lead["median"], lead["p95"], lead["max"])
        # the Markdown row: per instance, in ms, with the share of the window
        span = got["window_ns"]
        row = next(line for line in section.splitlines() if line.startswith(f"| {phase} | 3 |"))
        busy = f"{want['busy'] / 3 / 1e6:,.3f} ({100 * want['busy'] / span:.1f}%)"
        host = f"{want['host'] / 3 / 1e6:,.3f} ({100 * want['host'] / span:.1f}%)"
        assert busy in row and host in row, row
    assert "The longest GPU gaps in the steps" in section
    gaps = idle["phases"]["step"]["gaps"]
    assert len(gaps) == 10 and gaps == sorted(gaps, key=lambda g: -g["duration_ns"])


def test_sweep_has_one_table_per_idle_figure(tmp_path):
    shutil.copy(TRACE, tmp_path / "small_ctx128.sqlite")
    (tmp_path / "medium_ctx128.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    data = json.loads(_report(tmp_path, "json"))
    titles = [t["title"] for t in data["tables"]]
    for title in ("(f) GPU busy, share of the step", "(f) Launch-bound GPU idle, share of the step",
                  "(f) Sync-bound GPU idle, share of the step", "(f) Host-bound GPU idle, share of the step",
                  "(f) CPU lead per kernel in the step, median / p95 (µs)",
                  "(f) Launch queue depth in the step, mean (max)"):
        assert title in titles
    ref = Reference(TRACE)
    windows = _windows("step")
    want = ref.split(0, windows, BURST_GAP_NS)
    span = sum(b - a for a, b in windows)
    busy = next(t for t in data["tables"] if t["title"] == "(f) GPU busy, share of the step")
    assert busy["columns"] == ["model", "ctx 128"]
    assert busy["rows"] == [["small", f"{100 * want['busy'] / span:.1f}%"], ["medium", "OOM"]]
    launch = next(t for t in data["tables"] if t["title"].startswith("(f) Launch-bound"))
    assert launch["rows"][0] == ["small", f"{100 * want['launch'] / span:.1f}%"]
    md = _report(tmp_path, "markdown")
    assert "### (f) Host-bound GPU idle, share of the step" in md
