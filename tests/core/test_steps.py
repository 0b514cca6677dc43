"""The one `Steps` of a range model (parsers.model.steps) against tests/step_sql.py: the iterations
and their times on both clocks written from the definitions in SQL over the export, sharing no code
with nsight_tui; a capture without NVTX stands on iterations inferred from its kernel sequence."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import step_sql
from conftest import SAMPLES
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.model.steps import BASIS_INFERRED, BASIS_NVTX, process_steps, steps_of
from nsight_tui.parsers.read.load import load_trace


@pytest.mark.parametrize("name", ["small_ctx512_b8_async", "small_ctx512_b8_ddp2_async"])
def test_steps_and_their_clocks_are_the_sql_definitions(async_trace, name):
    """Every process's step_N in time order, each with its CPU span, GPU work's span and period
    (to the next iteration's start on its thread), and the warm-ups apart; one process's own."""
    path = async_trace(name)
    steps = steps_of(range_model(load_trace(path)))
    its = step_sql.iterations(path)
    sql = step_sql.steps_of(its)
    t = steps.steady_times
    assert steps.basis == BASIS_NVTX and steps.n == len(sql) > 0
    assert t.start_ns.tolist() == [it.start for it in sql]
    assert t.cpu_ns.tolist() == [it.cpu for it in sql]
    assert t.gpu_ns.tolist() == [it.gpu for it in sql]
    assert t.period_ns.tolist() == [it.period for it in sql]
    assert len(steps.warmup) == sum(it.name.startswith("warmup_") for it in its)
    pids = sorted({it.pid for it in sql})
    assert steps.pids.tolist() == pids
    for pid in pids:
        mine = steps.times(steps.of_process(pid))
        assert mine.start_ns.tolist() == [it.start for it in step_sql.steps_of(its, pid)]
    assert steps_of(steps.model) is steps  # built once per model


def test_one_process_steps_off_the_trace(async_trace):
    """process_steps (ranks, no range model): each process's step_N NVTX spans (SQL)."""
    path = async_trace("small_ctx512_b8_ddp2_async")
    trace = load_trace(path)
    its = step_sql.iterations(path)
    for pid in sorted({it.pid for it in its}):
        own = process_steps(trace, pid)
        sql = step_sql.steps_of(its, pid)
        assert own.domain == "" and own.start_ns.tolist() == [it.start for it in sql]
        assert own.end_ns.tolist() == [it.end for it in sql]


def test_steps_without_nvtx_are_inferred_and_say_so(async_trace):
    """A capture without NVTX: its steps are the ranges inferred from its kernel sequence (domain
    `inferred`, named step_N), and the basis says so."""
    from nsight_tui.parsers.read import conventions

    path = async_trace(SAMPLES / "nonvtx" / "small_ctx512_b8_async_nonvtx.sqlite.xz")
    model = range_model(load_trace(path))
    steps = steps_of(model)
    r = model.trace.ranges
    inferred = np.flatnonzero((r["domain"] == conventions.INFERRED_DOMAIN).to_numpy()
                              & r["text"].astype(str).str.match(r"step_\d+$").to_numpy())
    assert steps.basis == BASIS_INFERRED and steps.n > 1
    assert sorted(steps.steady.tolist()) == inferred.tolist()


def test_the_shared_steps_cannot_be_changed(async_trace):
    steps = steps_of(range_model(load_trace(async_trace("small_ctx512_b8_async"))))
    with pytest.raises(ValueError):
        steps.steady[0] = 0
    assert isinstance(steps.steady, np.ndarray)
