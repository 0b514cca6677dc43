"""Every third-party workload (sample_traces/thirdparty) and every no-NVTX sample (sample_traces/nonvtx)
against the workload's own Python clock, read here from STEM.steps.json as plain JSON: as many steps as the
workload ran (no partial step), each steady step within 5% of its Python time, and a generate() run's median
per-token decode within 15% of the median of its per-token gaps. The step figure is the one the report puts
beside the Python clock (timing's `python_clock_covers`: the step's own time where the clock was taken inside
the loop, else its period); devruns/thirdparty_table.py prints the table that sample_traces/thirdparty/README.md
holds."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nsight_tui.parsers.analyses.questions import timing
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace

from conftest import SAMPLES

CASES = [(folder, p.name[: -len(".steps.json")]) for folder in ("thirdparty", "nonvtx")
         for p in sorted((SAMPLES / folder).glob("*.steps.json"))
         if (SAMPLES / folder / p.name.replace(".steps.json", ".sqlite.xz")).exists()]


@pytest.fixture(scope="module")
def exported(async_trace, tmp_path_factory):
    root = tmp_path_factory.mktemp("table")

    def get(folder: str, stem: str) -> Path:
        target = root / folder / f"{stem}.sqlite"
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(async_trace(SAMPLES / folder / f"{stem}.sqlite.xz"), target)
            shutil.copyfile(SAMPLES / folder / f"{stem}.steps.json", target.with_name(f"{stem}.steps.json"))
        return target
    return get


def test_the_set_is_the_one_the_readme_lists():
    assert len(CASES) == 16 and ("thirdparty", "hf_generate_llama_static") in CASES


@pytest.mark.parametrize("folder,stem", CASES, ids=[f"{f}/{s}" for f, s in CASES])
def test_each_steady_step_within_5_percent_of_the_workloads_python_clock(exported, folder, stem):
    record = json.loads((SAMPLES / folder / f"{stem}.steps.json").read_text())
    python = {s["name"]: s["seconds"] * 1e9 for s in record["steps"] if s["name"].startswith("step_")}
    trace = load_trace(exported(folder, stem))
    t = timing(trace, range_model(trace))
    assert [r.step for r in t.steps] == list(python)  # every step the workload ran, none partial
    key = "own_ns" if t.python_clock_covers == "own" else "period_ns"
    for r in t.steps:
        assert getattr(r, key) == pytest.approx(python[r.step], rel=0.05), (r.step, key, getattr(r, key), python[r.step])
    tokens = [x for s in record["steps"] if s["name"].startswith("step_") for x in s.get("decode_token_s", [])]
    d = inference(trace).decode
    assert (d is not None) == bool(tokens)
    if tokens:
        assert d.median_ns == pytest.approx(np.median(tokens) * 1e9, rel=0.15)
