"""A straggler replayed (docs/whatif.md, "A straggler"): GPT-2 small under DDP on two H200s, one export
per rank (sample_traces/replay/straggler), a 5 ms host sleep at the start of rank 1's steps alone, so
rank 0 waits for rank 1 in every all-reduce, and its twin without the sleep, captured back to back.
The change is measured on rank 0's own step clock (its `nsight-tui:step` marks, read with SQL); the
prediction is `whatif BASE_FOLDER nohost:-5ms`, the two ranks replayed as one. Rank 0's NCCL kernels
spin through its backward while they wait, and the backward's kernels run slower beside them: kept at
their measured lengths (no contention factor), the replay missed the change by most of it."""
from __future__ import annotations

import dataclasses
import json
import statistics

import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.step_sql import python_steps, steps
from helpers.xz_samples import plain
from nsight_tui.parsers.api import Profile
from nsight_tui.parsers.replay import contention

STRAGGLER = SAMPLES / "replay" / "straggler"
EDIT = "nohost:-5ms"


def _rank0_step_ns(folder) -> float:
    return statistics.median(python_steps(plain(next(folder.glob("*rank0.sqlite*")))))


@pytest.fixture(scope="module")
def measured():
    base, twin = _rank0_step_ns(STRAGGLER / "base"), _rank0_step_ns(STRAGGLER / "twin")
    return twin - base, max(0.2 * abs(twin - base), 0.02 * twin)  # the change and the tolerance, ns


def test_the_sleep_on_one_rank_slows_the_other(measured):
    change, _ = measured
    assert change < -3e6  # rank 0 never sleeps, yet its step lost milliseconds to rank 1's pause


def test_the_ranks_replayed_as_one_keep_rank_0s_step():
    """Identity on the merged folder: the unchanged replay's step within 3% of rank 0's step ranges'
    period (start to the next step's start, SQL on its own export)."""
    want = statistics.median(it.period for it in steps(plain(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank0.sqlite.xz"))
                             if it.period)
    got = Profile.open_ranks(STRAGGLER / "base").whatif([]).replayed_step_ns
    assert abs(got - want) <= 0.03 * want, (got, want)


def test_the_straggler_removed_is_predicted_within_tolerance(measured):
    change, tol = measured
    run = cli_process.run(["whatif", str(STRAGGLER / "base"), EDIT, "-f", "json"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    d = json.loads(run.stdout)
    predicted = d["predicted"]["step_ns"] - d["baseline"]["replayed_step_ns"]
    assert abs(predicted - change) <= tol, (predicted, change, tol)
    assert "GPU 0 x" in d["contention_assumption"]


def test_kept_at_measured_lengths_the_replay_misses(measured, monkeypatch):
    """The same replay with every GPU's factor 1 (kernels at their measured lengths, as before the
    contention was modelled): off by more than the tolerance, so the test above tells the two apart."""
    change, tol = measured
    read = contention.contention_of
    monkeypatch.setattr(contention, "contention_of",
                        lambda trace: dataclasses.replace(read(trace), factor={d: 1.0 for d in read(trace).factor}))
    p = Profile.open_ranks(STRAGGLER / "base").whatif([EDIT])
    assert p.contention == ""  # no factor above 1: nothing re-timed
    predicted = p.step_ns - p.replayed_step_ns
    assert abs(predicted - change) > tol, (predicted, change, tol)
