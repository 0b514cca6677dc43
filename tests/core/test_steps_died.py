"""Steps.died: the iteration a run ran out of GPU memory in is no finished step (Steps.finished leaves
it out; Steps.steady and warmup keep it, as the report reads them). Against SQL over the export: the
iteration range open around the first cudaErrorMemoryAllocation (returnValue 2) of the CUDA runtime."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.read.load import load_trace

from conftest import ROOT, SAMPLES
from helpers import cli_process
from nsight_tui.parsers import Profile
from nsight_tui.parsers.replay.predict import NoSteps

NAMED = "(SELECT e.start, e.end, COALESCE(e.text, s.value) AS name FROM NVTX_EVENTS e " \
        "LEFT JOIN StringIds s ON s.id = e.textId)"
ITERATION = "(name GLOB 'step_[0-9]*' OR name GLOB 'warmup_[0-9]*')"


def _sql(path: Path) -> tuple[str | None, int]:
    """The iteration open at the first failed allocation (None without one), and the step_N count."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        t = db.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE returnValue = 2").fetchone()[0]
        row = None if t is None else db.execute(
            f"SELECT name FROM {NAMED} WHERE start <= ? AND end >= ? AND {ITERATION} ORDER BY start LIMIT 1",
            (t, t)).fetchone()
        steps = db.execute(f"SELECT COUNT(*) FROM {NAMED} WHERE name GLOB 'step_[0-9]*'").fetchone()[0]
    return (row[0] if row else None), steps


@pytest.mark.parametrize("sample", ["thirdparty/oom_qwen2_b256.oom.sqlite.xz", "memory/xl_ctx1024_b16.oom.sqlite.xz",
                                    "small_ctx128.sqlite"])
def test_the_iteration_a_run_died_in_is_no_finished_step(async_trace, sample):
    path = async_trace(SAMPLES / sample)
    died, steps = _sql(path)
    found = steps_of(range_model(load_trace(path), "process"))
    texts = found.model.trace.ranges["text"].to_numpy()
    assert found.n == steps  # steady unchanged: the report's view of the run
    if died is None:
        assert not len(found.died) and np.array_equal(found.finished, found.steady)
        return
    assert [str(texts[i]) for i in found.died] == [died]
    assert not np.isin(found.finished, found.died).any()
    assert len(found.finished) == found.n - int(died.startswith("step_"))


@pytest.mark.parametrize("sample", ["thirdparty/oom_qwen2_b256.oom.sqlite.xz", "memory/xl_ctx1024_b16.oom.sqlite.xz",
                                    "small_ctx128.sqlite"])
def test_died_reads_only_the_calls_after_the_last_launches(async_trace, sample):
    """An iteration dies at or after its process's last launch: Steps.died reads the failed calls
    from there on (SQLite seeks to the table's tail), and they are every failed call SQL finds
    from the earliest of those launches on; the full read of the GPU memory events is not made."""
    path = async_trace(SAMPLES / sample)
    found = steps_of(range_model(load_trace(path), "process"))
    assert found.died is not None
    assert "gpu_memory" not in found.model.trace.__dict__
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        pids = {int(r[0]) for r in db.execute(
            "SELECT DISTINCT (e.globalTid >> 24) & 16777215 FROM NVTX_EVENTS e LEFT JOIN StringIds s "
            "ON s.id = e.textId WHERE COALESCE(e.text, s.value) GLOB 'step_[0-9]*' "
            "OR COALESCE(e.text, s.value) GLOB 'warmup_[0-9]*'")}
        last = [db.execute("SELECT MAX(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k "
                           "ON k.correlationId = r.correlationId AND (r.globalTid >> 24) & 16777215 = ? "
                           "AND (k.globalPid >> 24) & 16777215 = ?", (pid, pid)).fetchone()[0] for pid in pids]
        earliest = min(t for t in last if t is not None)
        late = sorted(r[0] for r in db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE returnValue != 0 "
                                               "AND start >= ?", (earliest,)))
        every = sorted(r[0] for r in db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE returnValue != 0"))
    trace = load_trace(path)
    from nsight_tui.parsers.model.steps import _last_launch_position

    api, ops = trace.api, trace.ops
    at = ops["api"].to_numpy(np.int64)
    at = at[at >= 0]
    start = api["start"].to_numpy(np.int64)
    position = _last_launch_position(start, start[at], (api["gtid"].to_numpy(np.int64)[at] >> 24) & 0xFFFFFF,
                                     np.array(sorted(pids)))
    read = sorted(trace.failed_calls_from(position)["start"].tolist())
    assert set(late) <= set(read) <= set(every)
    if sample == "small_ctx128.sqlite":
        assert position > len(api) // 2  # a table in start order: its tail only


@pytest.mark.parametrize("sample", ["thirdparty/oom_qwen2_b256.oom.sqlite.xz", "memory/xl_ctx1024_b16.oom.sqlite.xz"])
def test_whatif_has_no_step_to_replay_where_the_run_died_before_finishing_one(async_trace, sample):
    """A run out of GPU memory in its first iteration finished no step (the report says "no step time
    to speak of"): `whatif` replayed the iteration it died in, its span to the failure, as "median of 1
    steady-state steps: measured 1,852.00 ms" and predicted savings on it. Now one line, exit 2, naming
    the iteration SQL finds open around the first failed allocation; the MCP tool and the TUI ask the
    same Profile.whatif."""
    path = async_trace(SAMPLES / sample)
    died, _ = _sql(path)
    run = cli_process.run(["whatif", str(path), "speed:gemm=2"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and not run.stdout, run.stdout
    said = run.stderr.strip().splitlines()
    assert len(said) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"ran out of GPU memory in {died} before it finished a step: no step to replay" in said[0]
    with pytest.raises(NoSteps, match=f"in {died} before"):
        Profile.open(path).whatif([])


def test_the_report_gives_the_iteration_a_run_died_in_no_step_period(thirdparty):
    """The Qwen2 run that died in its first forward (its record: no step, step_0 failed with status oom): the
    report's (a) row for it says it died and gives no period or ratio to a step, only its spans (CPU: the
    step_0 range's own, SQL)."""
    import json

    from nsight_tui.render.report import single_markdown

    record = json.loads((SAMPLES / "thirdparty" / "oom_qwen2_b256.steps.json").read_text())
    assert record["steps"] == [] and [s["status"] for s in record["failed_steps"]] == ["oom"]
    died = record["failed_steps"][0]["name"]
    path = thirdparty("oom_qwen2_b256.oom")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (span,) = db.execute(f"SELECT end - start FROM {NAMED} WHERE name = ?", (died,)).fetchone()
    page = single_markdown(Profile.open(path).report())
    page = page[page.index("## (a)"):page.index("## (b)")]
    (row,) = [line for line in page.splitlines() if line.startswith("| step")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "step (died: out of GPU memory, no step finished)"
    assert float(cells[2].replace(",", "")) == pytest.approx(span / 1e6, abs=0.001)
    assert cells[4] == "–" and cells[6] == "–"
