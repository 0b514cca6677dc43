"""`pin` where the batches come from DataLoader worker processes (parsers/replay/edits.py `_pin_loader`,
replay/pinned.py `batch_pauses`): the committed capture of torchvision's ResNet-18 fed by 12 workers,
pageable batches copied blocking (sample_traces/replay/loader_pin), against its pinned twin's clock
(`pin_memory=True`, non-blocking copies, captured back to back; its steps.json beside). The fix's
pin-memory thread takes each batch's receipt and release off the training thread, as well as the
copy: the replay without that part saves half of what the twin measured."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.export_sql import sql_rows
from helpers.step_sql import python_steps
from helpers.xz_samples import plain

from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import pinned
from nsight_tui.parsers.replay.predict import predict

FOLDER = SAMPLES / "replay" / "loader_pin"
BASE = FOLDER / "loader_w12.sqlite.xz"
TWIN_CLOCK = FOLDER / "loader_w12_pin.steps.json"
MIB = 1 << 20


def _steps_ns(side: Path) -> list[float]:
    return [s["seconds"] * 1e9 for s in json.loads(side.read_text())["steps"] if s["name"].startswith("step_")]


def _change_and_tolerance_ms() -> tuple[float, float]:
    """The twin less the base on the workload's own clock (medians), and the issue's tolerance: 20% of
    the change or 2% of the twin's step, the larger."""
    base = python_steps(plain(BASE))
    assert base == pytest.approx(_steps_ns(BASE.with_name("loader_w12.steps.json")))  # the export's marks, its clock
    twin = _steps_ns(TWIN_CLOCK)
    change = (float(np.median(twin)) - float(np.median(base))) / 1e6
    return change, max(0.2 * abs(change), 0.02 * float(np.median(twin)) / 1e6)


def test_the_export_names_the_loaders_workers():
    names = [n for (n,) in sql_rows(plain(BASE), "SELECT name FROM PROCESSES")]
    assert pinned.loader_workers(load_trace(BASE)) == names.count("pt_data_worker") == 12


def test_pin_against_the_pinned_twins_clock():
    """The replayed change within the issue's tolerance of the twin's; without the DataLoader's part
    (the copies alone from pinned memory) it is not: the test can fail."""
    change, tol = _change_and_tolerance_ms()
    trace = load_trace(BASE)
    p = predict(trace, ["pin"])
    saved = (p.step_ns - p.replayed_step_ns) / 1e6
    assert abs(saved - change) <= tol, (saved, change, tol)
    assert p.low_ns <= p.step_ns <= p.high_ns
    # the high end keeps the pauses (were they the loop's own): the copies alone, which miss the twin
    alone = (p.high_ns - p.replayed_step_ns) / 1e6
    assert abs(alone - change) > tol, (alone, change, tol)
    assert "12 DataLoader worker processes" in p.edits[0].changed


def test_the_pauses_taken_are_next_to_the_batch_copies():
    """In SQL: per steady step, the training thread's CUDA calls in order; around the batch's pageable
    host-to-device copy (1 MiB or more), the last gap of 1 ms or more between two calls before it
    and the first after it, inside the step. What the edit says it took out of the step lies between
    the gaps after the copies alone and both together (a gap before may be the thread resuming after
    another thread's work, which is no host work of its own)."""
    path = plain(BASE)
    steps = sql_rows(path, """SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                          WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' AND e.eventType = 59 ORDER BY e.start""")
    tid = steps[0][2]
    calls = sql_rows(path, """SELECT r.start, r.end, coalesce(m.bytes, 0), coalesce(m.srcKind, -1), coalesce(m.copyKind, -1)
                          FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN CUPTI_ACTIVITY_KIND_MEMCPY m
                          ON m.correlationId = r.correlationId AND m.globalPid >> 24 = r.globalTid >> 24
                          WHERE r.globalTid = ? ORDER BY r.start""", tid)
    starts = np.array([c[0] for c in calls])
    # the gap before call i: its start less the previous call's end on the thread (the first: none)
    gaps = np.concatenate([[0], starts[1:] - np.array([c[1] for c in calls[:-1]])])
    before = after = 0
    for start, end, _ in steps:
        inside = np.flatnonzero((starts >= start) & (starts <= end))
        batch = [i for i in inside if calls[i][2] >= MIB and calls[i][3] == 0 and calls[i][4] == 1]
        assert len(batch) == 1  # one batch a step
        k = batch[0]
        long = [i for i in inside if gaps[i] >= 1_000_000]
        before += next((gaps[i] for i in reversed(long) if i <= k), 0)  # the last one at or before the copy's call
        after += next((gaps[i] for i in long if i > k), 0)
    p = predict(load_trace(BASE), ["pin"])
    said = p.edits[0].changed
    taken_ms = float(re.search(r"\(([\d.]+) ms a step of \d+ pauses of 1 ms or more", said).group(1))
    n = len(steps)
    assert after / n / 1e6 - 0.01 <= taken_ms <= (before + after) / n / 1e6 + 0.01, (taken_ms, before / n / 1e6, after / n / 1e6)
    assert after / n / 1e6 > 3  # the batch's release: milliseconds a step, not a rounding
