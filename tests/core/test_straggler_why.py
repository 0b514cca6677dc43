"""analyses.straggler_why: the straggler's lateness at the collectives split into the CPU's (when
its launching calls began) and the GPU's, with its compute per step beside the others'. The DDP
samples hold both ranks in one export (one clock); expected values from SQL: each process's NCCL
kernels in start order, their launching calls by correlation ID in the same process."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from conftest import SAMPLES
from nsight_tui.parsers.analyses.ranks import straggler, summarise_trace
from nsight_tui.parsers.analyses.straggler_why import straggler_why
from nsight_tui.parsers.read.load import load_trace


def comm_sql(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("""SELECT (k.globalPid >> 24) & 16777215, k.start, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
             AND (r.globalTid >> 24) = (k.globalPid >> 24)
        WHERE s.value LIKE '%nccl%' ORDER BY k.start""").fetchall()
    con.close()
    by: dict[int, tuple[list, list]] = {}
    for pid, k_start, call in rows:
        by.setdefault(pid, ([], []))
        by[pid][0].append(k_start)
        by[pid][1].append(call)
    return by


@pytest.mark.parametrize("name", ["small_ctx128_ddp2.sqlite.xz", "async/small_ctx512_b8_ddp2_async.sqlite.xz"])
def test_the_stragglers_lateness_is_split_by_its_launches(name, async_trace):
    path = async_trace(SAMPLES / name)
    trace = load_trace(path)
    summaries = summarise_trace(trace)
    why = straggler_why(trace, summaries, straggler(summaries))
    by = comm_sql(path)
    pids = sorted(by)
    starts = np.array([by[p][0] for p in pids])
    calls = np.array([by[p][1] for p in pids])
    late = dict(zip(pids, (starts - starts.min(axis=0)).mean(axis=1)))
    issue = dict(zip(pids, (calls - calls.min(axis=0)).mean(axis=1)))
    slowest = max(late, key=late.get)
    assert why.process == slowest and why.collectives == starts.shape[1]
    assert why.lateness_ns == pytest.approx(late[slowest], rel=1e-12)
    assert why.issue_lateness_ns == pytest.approx(issue[slowest], rel=1e-12)
    assert why.gpu_lateness_ns == pytest.approx(late[slowest] - issue[slowest], rel=1e-9, abs=1e-3)
    mine = next(s for s in summaries if s.rank.pid == slowest)
    assert why.compute_per_step_ns == mine.median_compute_per_step_ns
    # these runs' straggler is late from its CPU: its launches were already as late as its kernels
    assert issue[slowest] >= 0.5 * late[slowest]
    assert why.verdict.startswith("its CPU issued the collectives late") and f"{issue[slowest] / 1e6:.2f} ms" in why.verdict


def test_no_why_without_a_straggler_or_collectives():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    summaries = summarise_trace(trace)
    assert straggler_why(trace, summaries, straggler(summaries)) is None
