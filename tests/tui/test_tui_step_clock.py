"""The TUI's step figures on workloads nobody here wrote (sample_traces/thirdparty), against truths
that share no code with nsight_tui: the Python clock each workload took (STEM.steps.json, read here
as JSON) and SQL over the export (the failed allocation of an out-of-memory run).

- A Lightning loop's clock is taken inside the step (its batch hooks): the step's own time, not its
  period; where the loop's time between steps is a visible share of the period the tree's step row,
  `p` and `?` say both, which clock and what each covers, within 80 columns.
- A run that ran out of memory in its first step finished none: the tree, the crumb and `p` say it
  died, and nothing is divided per step."""
from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest

from conftest import SAMPLES

THIRD = SAMPLES / "thirdparty"
RESNET, QWEN, OOM = "lightning_resnet50_b32", "hf_trainer_qwen2_l4_b8", "oom_qwen2_b256.oom"


@pytest.fixture(scope="module")
def captured(thirdparty):
    """STEM -> the export with its records beside it, as the capture left them (conftest.thirdparty)."""
    return thirdparty


def python_step_ms(stem: str) -> float:
    steps = json.loads((THIRD / f"{stem}.steps.json").read_text())["steps"]
    seconds = [s["seconds"] for s in steps if re.fullmatch(r"step_\d+", s["name"])]
    return 1e3 * sum(seconds) / len(seconds)


def _ms(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, (pattern, text)
    return float(m.group(1))


def test_a_loop_clocked_inside_the_step_shows_own_time_and_time_between(captured, tui):
    path = captured(RESNET)
    python = python_step_ms(RESNET)  # Lightning's on_train_batch_start/end: 39.82 ms

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            await ui.until(lambda: "between (ms/step)" in ui.text(), "the step row's period, own and between")
            line = next(s for s in ui.text().splitlines() if "between (ms/step)" in s)
            assert len(line.rstrip()) <= 80 and "inferred:step_N" in line
            period = _ms(r"period ([0-9.]+) =", line)
            own = _ms(r"own ([0-9.]+) \+", line)
            between = _ms(r"\+ ([0-9.]+) between", line)
            assert period == pytest.approx(own + between, abs=0.002)
            # the own time reads like the workload's clock; the period, the next batch's fetch in it, does not
            assert own == pytest.approx(python, rel=0.05)
            assert period > 1.1 * python and between > 0.05 * period
            await ui.press("p")
            await ui.until(lambda: "Python's clock" in ui.flat_text(), "the pace view's note")
            text, flat = ui.text(), ui.flat_text()
            assert all(len(s.rstrip()) <= 80 for s in text.splitlines())
            header = next(s for s in text.splitlines() if "Iteration" in s)
            assert "Own" in header and "Period" in header
            assert f"Python's clock {python:.3f} ms reads own: taken inside the step" in flat
            assert "start to next start)" in flat and "(start to its work's end)" in flat
            assert f"own {own:.3f}" in flat and f"{between:.3f} between steps" in flat
            help_line = ui.app.session.header().steps
            assert "on the capture's clock" in help_line and f"period {period:.3f} ms/step" in help_line

    asyncio.run(body())


def test_a_loop_with_little_between_steps_shows_the_period_alone(captured, tui):
    # HF Trainer: its clock reads the period (the loop's 0.35 ms between steps is under 2% of it)
    path = captured(QWEN)

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            await ui.until(lambda: ui.app.session.steps() is not None, "the steps")
            assert "between (ms/step)" not in ui.text() and ui.app.session.header().steps == ""
            await ui.press("p")
            await ui.until(lambda: "median period" in ui.flat_text(), "the pace view's note")
            assert "Own" not in next(s for s in ui.text().splitlines() if "Iteration" in s)

    asyncio.run(body())


def _failed_allocation_in(path: Path) -> tuple[str, int]:
    """SQL: the NVTX range open around the first cudaErrorMemoryAllocation, and how many ranges named
    step_N / warmup_N there are."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        t = db.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE returnValue = 2").fetchone()[0]
        named = "(SELECT e.start, e.end, COALESCE(e.text, s.value) AS name FROM NVTX_EVENTS e " \
                "LEFT JOIN StringIds s ON s.id = e.textId)"
        name = db.execute(f"SELECT name FROM {named} WHERE start <= ? AND end >= ? AND name GLOB 'step_*' "
                          "ORDER BY start LIMIT 1", (t, t)).fetchone()[0]
        n = db.execute(f"SELECT COUNT(*) FROM {named} WHERE name GLOB 'step_[0-9]*' "
                       "OR name GLOB 'warmup_[0-9]*'").fetchone()[0]
    return name, n


def test_an_out_of_memory_run_has_no_step_the_iteration_it_died_in_says_so(captured, tui):
    path = captured(OOM)
    died, iterations = _failed_allocation_in(path)
    assert iterations == 1  # the run died in its only iteration: no step finished

    async def body():
        async with tui(path, size=(80, 24)) as ui:
            await ui.until(lambda: "died (OOM)" in ui.text(), "the iteration marked died")
            text, flat = ui.text(), ui.flat_text()
            assert all(len(s.rstrip()) <= 80 for s in text.splitlines())
            assert f"{died} ✗ died (OOM)" in text
            assert f"no step finished: {died} died (out of GPU memory)" in flat
            assert "per step" not in flat and "÷1" not in flat and "median" not in flat
            assert ui.app.session.steps() is None
            assert "Kern/step" not in text and "Kernels" in text  # totals, not a step's figures
            await ui.press("p")
            await ui.until(lambda: "nothing to pace" in ui.flat_text(), "the pace view's note")
            flat = ui.flat_text()
            assert f"no step finished: {died} died (out of GPU memory): nothing to pace" in flat
            assert "1 steps" not in flat and "median period" not in flat
            await ui.press("F")
            await ui.until(lambda: "what to fix first · no step finished: the run ran out of GPU memory"
                           in ui.flat_text(), "the findings' scope")

    asyncio.run(body())
