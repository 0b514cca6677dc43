"""`capture --bare-run`: the workload run alone beside its capture (STEM.bare.json), against the
capture's own step marks: what the profiler cost the step. Two real H100 captures of one call
(sample_traces/bare: launch-bound ctx 128 and GPU-bound ctx 512 batch 8, devruns/gpu_bare_run.sh),
opened as committed (`.sqlite.xz`, the record beside the file given)."""
from __future__ import annotations

import json
import shutil
import statistics

import pytest
from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.step_sql import python_steps
from helpers.xz_samples import plain

from nsight_tui.parsers.read.bare import profiler_cost
from nsight_tui.parsers.read.load import load_trace

BARE = SAMPLES / "bare"
LAUNCH_BOUND, GPU_BOUND = BARE / "small_ctx128_nosync.sqlite.xz", BARE / "small_ctx512_b8_async.sqlite.xz"


def _whatif_json(path) -> dict:
    run = cli_process.run(["whatif", str(path), "-f", "json"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("path", [LAUNCH_BOUND, GPU_BOUND], ids=lambda p: p.name)
def test_whatif_says_the_step_without_the_profiler(path):
    """The bare run's median step from its record, the captured one from the step marks in SQL."""
    record = json.loads(path.with_name(path.name.replace(".sqlite.xz", ".bare.json")).read_text())
    alone = [s["seconds"] for s in record["steps"] if s["name"].startswith("step_")]
    captured = python_steps(plain(path))
    got = _whatif_json(path)["without_profiler"]
    assert got["alone_steps"] == len(alone) >= 3 and got["captured_steps"] == len(captured)
    assert got["alone_step_ns"] == pytest.approx(statistics.median(alone) * 1e9, abs=1)
    assert got["captured_step_ns"] == pytest.approx(statistics.median(captured), abs=1)
    assert got["slowdown"] == pytest.approx(statistics.median(captured) / (statistics.median(alone) * 1e9), abs=1e-4)
    text = cli_process.run(["whatif", str(path)], text=True, cwd=ROOT, timeout=300).stdout
    assert "Without the profiler (the workload run alone just before this capture" in text


def test_the_profiler_costs_a_step_the_cpu_holds_more_than_one_the_gpu_holds():
    """Launch-bound against GPU-bound, one machine, one call: nsys slows every CUDA call it traces, so
    the step the CPU holds (the whatif's own critical path says which) lengthens the more."""
    cpu, gpu = _whatif_json(LAUNCH_BOUND), _whatif_json(GPU_BOUND)
    assert cpu["cpu_share_of_step"] >= 0.5 > gpu["cpu_share_of_step"]
    assert cpu["without_profiler"]["slowdown"] > gpu["without_profiler"]["slowdown"]


def test_no_record_or_a_broken_one_is_no_figure(tmp_path):
    """A capture without the record says nothing of it; a record cut short or without steps is read
    as none, never an error."""
    assert _whatif_json(SAMPLES / "replay" / "tf32" / "small_ctx512_b8_async.sqlite.xz")["without_profiler"] is None
    copy = tmp_path / LAUNCH_BOUND.name
    shutil.copy(LAUNCH_BOUND, copy)
    side = tmp_path / "small_ctx128_nosync.bare.json"
    for text in ('{"steps": [{"name": "step_0", "seconds": 0.0', '{"steps": []}', '[1, 2]',
                 '{"steps": [{"name": "step_0", "seconds": "fast"}]}', '{"steps": [{"name": "step_0", "seconds": -1}]}',
                 '{"steps": [{"name": "step_0", "seconds": true}]}', '{"steps": [{"name": "step_0", "seconds": NaN}]}'):
        side.write_text(text)
        assert profiler_cost(load_trace(copy)) is None
    side.write_text(json.dumps({"steps": [{"name": "warmup_0", "seconds": 1.0}, {"name": "step_0", "seconds": 0.5}]}))
    cost = profiler_cost(load_trace(copy))
    assert cost is not None and cost.alone_step_ns == 500_000_000 and cost.alone_steps == 1
