"""`diff` between an NVTX-annotated run and one whose ranges are inferred from the kernel sequence
steps, forward/backward/optimizer and the attention parts meet, against truths that share
no code with nsight_tui:

- the two runs' own Python step times (the twin's `nsight-tui:step` marks, tests/helpers/step_sql.py; the
  --no-nvtx run's STEM.steps.json) for the step's change;
- SQL over each export for the phases' and the attention parts' GPU op time: on the twin, the ops whose launch call starts
  inside its forward/backward/optimizer NVTX ranges within a step_N range; on the unannotated run, the
  same places in launch order (the two runs launch the identical op sequence, checked op by op by
  name), so its phase sums come from its own durations with the twin's NVTX as the phase boundaries.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsight_tui.parsers.analyses.diff import BOTH, diff_runs
from nsight_tui.parsers.read.conventions import PHASES
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.diff import as_json, markdown

from conftest import SAMPLES
from helpers.step_sql import python_steps

NONVTX = SAMPLES / "nonvtx"
ANNOTATED, INFERRED = "small_ctx512_b8_async_twin", "small_ctx512_b8_async_nonvtx"

# Every GPU op with the start of its launch call, in launch order; kernels by demangled name,
# copies and fills by kind (the two runs' orders are compared name by name)
_OPS = """
SELECT r.start, o.start, o.end, o.name FROM (
  SELECT correlationId AS corr, globalPid >> 24 AS pid, start, end,
         (SELECT value FROM StringIds WHERE id = demangledName) AS name FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT correlationId, globalPid >> 24, start, end, 'memcpy ' || copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY
  UNION ALL SELECT correlationId, globalPid >> 24, start, end, 'memset' FROM CUPTI_ACTIVITY_KIND_MEMSET) o
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.corr AND (r.globalTid >> 24) = o.pid
ORDER BY r.start, o.start"""
_RANGES = """SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
WHERE e.eventType = 59 AND coalesce(e.text, s.value) GLOB ? ORDER BY e.start"""


def _rows(path: Path, sql: str, *args) -> list[tuple]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def pair(async_trace, tmp_path_factory):
    """The twin, and the --no-nvtx run with its STEM.steps.json beside it as the capture left it (its
    2 warm-ups named so; without it the second warm-up, launching the steady kernels, is a step)."""
    folder = tmp_path_factory.mktemp("nonvtx_pair")
    inferred = folder / f"{INFERRED}.sqlite"
    shutil.copyfile(async_trace(NONVTX / f"{INFERRED}.sqlite.xz"), inferred)
    shutil.copyfile(NONVTX / f"{INFERRED}.steps.json", folder / f"{INFERRED}.steps.json")
    return async_trace(NONVTX / f"{ANNOTATED}.sqlite.xz"), inferred


def _inside(launch: np.ndarray, spans: list[tuple]) -> np.ndarray:
    hit = np.zeros(len(launch), dtype=bool)
    for s, e in spans:
        hit |= (launch >= s) & (launch <= e)
    return hit


def phase_truth(annotated: Path, inferred: Path) -> dict[str, tuple[float, float]]:
    """Per phase: (annotated, unannotated) GPU op time per step, ns, by SQL (module docstring)."""
    a_ops, b_ops = _rows(annotated, _OPS), _rows(inferred, _OPS)
    assert [o[3] for o in a_ops] == [o[3] for o in b_ops]  # the same program: the same ops in the same order
    launch = np.array([o[0] for o in a_ops])
    steps = _rows(annotated, _RANGES, "step_[0-9]*")
    in_step = _inside(launch, steps)
    a_dur = np.array([o[2] - o[1] for o in a_ops])
    b_dur = np.array([o[2] - o[1] for o in b_ops])
    out = {}
    for phase in PHASES:
        mine = in_step & _inside(launch, _rows(annotated, _RANGES, phase))
        out[phase] = (a_dur[mine].sum() / len(steps), b_dur[mine].sum() / len(steps))
    return out


@pytest.mark.parametrize("order", ["annotated first", "inferred first"])
def test_the_step_change_matches_the_runs_python_step_times(pair, order):
    annotated, inferred = pair
    a, b = (annotated, inferred) if order == "annotated first" else (inferred, annotated)
    d = diff_runs(load_trace(a), load_trace(b))
    assert d.step is not None and d.step.a_steps == d.step.b_steps == 4
    python = {annotated: np.mean(python_steps(annotated)),
              inferred: np.mean([s["seconds"] * 1e9 for s in json.loads((NONVTX / f"{INFERRED}.steps.json").read_text())
                                 ["steps"] if s["name"].startswith("step_")])}
    want = 100.0 * (python[b] / python[a] - 1)
    assert d.step.slower_pct == pytest.approx(want, abs=2.0)
    side = "B" if order == "annotated first" else "A"
    assert any(n.startswith(f"{side}'s ranges") and "inferred, not annotated" in n for n in d.notes)


@pytest.mark.parametrize("order", ["annotated first", "inferred first"])
def test_phase_rows_match_sql_over_each_export(pair, order):
    annotated, inferred = pair
    truth = phase_truth(annotated, inferred)
    a, b = (annotated, inferred) if order == "annotated first" else (inferred, annotated)
    d = diff_runs(load_trace(a), load_trace(b))
    rows = {p.phase: p.op_ns for p in d.step.phases}
    for phase in PHASES:
        want_a, want_b = truth[phase] if order == "annotated first" else truth[phase][::-1]
        assert rows[phase].a == pytest.approx(want_a, rel=1e-3), phase
        assert rows[phase].b == pytest.approx(want_b, rel=1e-3), phase
        # and the merged range of the phase is on both sides
        node = d.find(("step_N", phase))
        assert node is not None and node.status == BOTH


def part_truth(annotated: Path, inferred: Path, text: str) -> tuple[float, float, float]:
    """(annotated, unannotated kernel time, kernels) per step of the kernels launched inside the
    twin's NVTX ranges named `text` within its step_N ranges (SQL; the same places in the
    unannotated run)."""
    a_ops, b_ops = _rows(annotated, _OPS), _rows(inferred, _OPS)
    launch = np.array([o[0] for o in a_ops])
    kernel = np.array([not o[3].startswith(("memcpy ", "memset")) for o in a_ops])
    steps = _rows(annotated, _RANGES, "step_[0-9]*")
    mine = kernel & _inside(launch, steps) & _inside(launch, _rows(annotated, _RANGES, text))
    a_dur = np.array([o[2] - o[1] for o in a_ops])
    b_dur = np.array([o[2] - o[1] for o in b_ops])
    return a_dur[mine].sum() / len(steps), b_dur[mine].sum() / len(steps), mine.sum() / len(steps)


# The twin's ranges an inferred run has under another parent: the manual attention's parts (under
# scaled_dot_product_attention there, under each inferred layer here) and the embedding backward's
# sorts (directly under backward there, under the inferred `embedding backward` here)
# (the inferred stages named for what they do: attention scores, softmax, x V)
BY_ROLE = {"computing_attention_scores": "step_N/forward/layer_N/attention scores",
           "computing_softmax": "step_N/forward/layer_N/attention softmax",
           "final_matmul": "step_N/forward/layer_N/attention x V",
           "cub::DeviceRadixSort": "step_N/backward/embedding backward/cub::DeviceRadixSort"}


def test_annotated_parts_meet_the_inferred_ranges_of_the_same_role(pair):
    annotated, inferred = pair
    d = diff_runs(load_trace(annotated), load_trace(inferred))
    for text, path in BY_ROLE.items():
        node = d.find(path)
        assert node is not None and node.status == BOTH, path
        assert node.role_match.startswith("A's ")  # the twin's own place is said
        want_a, want_b, kernels = part_truth(annotated, inferred, text)
        assert node.kernels.a == pytest.approx(kernels) and node.kernels.b == pytest.approx(kernels)
        assert node.kernel_ns.a == pytest.approx(want_a, rel=1e-3), path
        assert node.kernel_ns.b == pytest.approx(want_b, rel=1e-3), path
    # a matched range leaves its own place: nothing counted twice
    assert d.find("step_N/forward/scaled_dot_product_attention/computing_softmax") is None
    assert d.find("step_N/backward/cub::DeviceRadixSort") is None
    text = markdown(d)
    assert "step_N/forward/layer_N/attention softmax (= A's scaled_dot_product_attention/computing_softmax)" in text
    assert "matched by role" in text
    step = next(r for r in as_json(d)["threads"][0]["ranges"] if r["path"] == "step_N")
    forward = next(c for c in step["children"] if c["name"] == "forward")
    layer = next(c for c in forward["children"] if c["name"] == "layer_N")
    assert {c["name"]: c.get("role_match") for c in layer["children"]}["attention softmax"] == \
        "A's scaled_dot_product_attention/computing_softmax"
    # a range only one side has is structure the other did not name, not a contributor to the step's Δ
    assert all(r.status == BOTH for r in d.step.top_ranges)


def _cut_inside_last_step(source: Path, target: Path) -> Path:
    """A copy that stops inside its last step (every kernel launched after the last loss kernel
    deleted), as a capture cut short leaves it."""
    shutil.copyfile(source, target)
    con = sqlite3.connect(target)
    (cut,) = con.execute("""SELECT max(r.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
        JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nll_loss_forward%'""").fetchone()
    con.execute("""DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (
        SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start > ?)""", (cut,))
    con.commit()
    con.close()
    return target


@pytest.mark.parametrize("gate", [5.0])
def test_a_run_cut_inside_its_last_step_diffs_as_its_python_clock_says(pair, tmp_path, gate):
    """The unannotated run cut short (its partial last step left out, its record beside it) against
    its annotated twin: the step's change within 2 points of the two runs' Python step times over the
    steps each has whole, so a CI gate of `gate`% passes as the workload's clock says it should."""
    annotated, inferred = pair
    cut = _cut_inside_last_step(inferred, tmp_path / f"{INFERRED}.sqlite")
    shutil.copyfile(NONVTX / f"{INFERRED}.steps.json", tmp_path / f"{INFERRED}.steps.json")
    d = diff_runs(load_trace(annotated), load_trace(cut))
    python_steps_b = [s["seconds"] * 1e9 for s in json.loads((NONVTX / f"{INFERRED}.steps.json").read_text())["steps"]
                      if s["name"].startswith("step_")][:-1]  # the last one is cut
    assert d.step is not None and d.step.b_steps == len(python_steps_b) == 3
    want = 100.0 * (np.mean(python_steps_b) / np.mean(python_steps(annotated)) - 1)
    assert d.step.slower_pct == pytest.approx(want, abs=2.0)
    assert (d.step.slower_pct > gate) == (want > gate)
