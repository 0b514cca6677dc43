"""`workers:N`: the host work a nohost edit takes off the steps, run by N loader workers beside them:
the step no shorter than that work per step / N. Checked on a committed capture whose removed work
is known by hand (a 5 ms sleep planted at each step's start: `nohost:-5ms` removes 5 ms a step,
the steps counted in SQL) and against the nohost edit's own total; the loader twins that check the
prediction against a real DataLoader are docs/whatif.md's ("Held out: a real input pipeline")."""
from __future__ import annotations

import json
import re

import pytest

from conftest import FINDINGS
from helpers.cli import run_main
from helpers.step_sql import steps
from helpers.xz_samples import plain

SLEEP = FINDINGS / "small_ctx128_host-sleep.sqlite.xz"


def _whatif(*edits) -> dict:
    done = run_main("whatif", SLEEP, *edits, "-f", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _per_step_ms(changed: str) -> float:
    return float(re.search(r"removed, ([\d.,]+) ms a step", changed).group(1).replace(",", ""))


def test_the_work_the_workers_take_is_what_nohost_removed_per_step():
    n_steps = len(steps(plain(SLEEP)))
    d = _whatif("nohost:-5ms", "workers:1")
    nohost, workers = d["edits"]
    assert _per_step_ms(workers["changed"]) == pytest.approx(5.0, abs=0.005)  # the planted sleep, once a step
    total = float(re.search(r"\(([\d.,]+) ms in all\)", nohost["changed"]).group(1).replace(",", ""))
    assert total == pytest.approx(5.0 * n_steps, abs=0.005)
    # 5 ms a step in one worker is less than the step: the workers keep up and the prediction is nohost's
    alone = _whatif("nohost:-5ms")
    assert d["predicted"]["step_ns"] == alone["predicted"]["step_ns"] and d["predicted"]["clock"] != "workers"


def test_too_few_workers_set_the_step_at_their_pace_and_hold_it():
    alone = _whatif("nohost")
    per_step = _per_step_ms(_whatif("nohost", "workers:4096")["edits"][1]["changed"]) * 1e6
    assert per_step > alone["predicted"]["step_ns"]  # one worker cannot keep up with the step nohost leaves
    one = _whatif("nohost", "workers:1")
    assert one["predicted"]["clock"] == "workers"
    waits = [h for h in one["holds_step"] if h["what"].startswith("loader workers")]
    assert len(waits) == 1 and waits[0]["kind"] == "workers"  # the step waits for their next batch
    # what holds the step adds up to the workers' pace: one batch every per_step / 1
    assert sum(h["ns"] for h in one["holds_step"]) == pytest.approx(per_step, abs=0.01e6)
    assert one["predicted"]["step_ns"] > alone["predicted"]["step_ns"]
    many = _whatif("nohost", "workers:4096")
    assert many["predicted"]["step_ns"] == alone["predicted"]["step_ns"]  # enough workers: nohost's step
    assert not any(h["what"].startswith("loader workers") for h in many["holds_step"])


@pytest.mark.parametrize("edits,words", [
    (["workers:2"], "moves the host work a nohost edit removes"),
    (["nohost", "workers:0"], "workers:N takes a whole number"),
    (["nohost", "workers:two"], "workers:N takes a whole number"),
    (["nohost", "workers:1e3"], "workers:N takes a whole number"),
])
def test_workers_without_the_work_or_a_count_is_one_line(edits, words):
    done = run_main("whatif", SLEEP, *edits)
    assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_taking_host_work_off_says_how_many_workers_keep_up():
    # without workers:N the answer says how many, each doing a step's share, deliver a batch a step
    d = _whatif("nohost:-5ms")
    assert d["moved_host_ns_per_step"] == pytest.approx(5e6, abs=1)
    assert d["workers_to_keep_up"] == -(-d["moved_host_ns_per_step"] // d["predicted"]["step_ns"]) == 1
    md = run_main("whatif", SLEEP, "nohost:-5ms").stdout
    assert "Workers: were the host work taken off the steps (5.00 ms a step) a data loader's, 1 loader worker or more" in md
    # were it the wait for N workers already there: each delivers a batch every N measured steps
    assert d["workers_factor_if_waiting"] == pytest.approx(
        d["baseline"]["measured_step_ns"] / d["predicted"]["step_ns"], abs=1e-3)
    # with workers:N said, the answer is the replay's, not a count
    assert _whatif("nohost:-5ms", "workers:2")["workers_to_keep_up"] is None
    assert _whatif("speed:gemm=2")["moved_host_ns_per_step"] is None
