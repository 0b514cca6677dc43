"""The evidence table under a report's first finding says its durations in ms (the JSON's `..._ns`) and, for
the fp32-GEMM rule's per-kernel rows, over how many steps they are summed (a note under it): the fp32 GPT-2 capture with no NVTX
(sample_traces/thirdparty/small_ctx512_b8_async_nonvtx), each row's time its kernel's over the steady steps
the workload ran (its STEM.steps.json), the note that count; a row's ms the same kernel's time as SQL sums it
from the first steady step on (the export's last kernels are the last step's)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from nsight_tui.parsers import Profile
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.report import single_markdown

from conftest import SAMPLES

STEM = "small_ctx512_b8_async_nonvtx"


def test_the_fp32_gemm_evidence_is_in_ms_over_the_steps_it_sums(thirdparty):
    path = thirdparty(STEM)
    record = json.loads((SAMPLES / "thirdparty" / f"{STEM}.steps.json").read_text())
    steady = [s for s in record["steps"] if s["name"].startswith("step_")]
    page = single_markdown(Profile.open(path).report())
    assert "Evidence behind `fp32-gemm-without-tensor-cores`" in page
    table = page[page.index("Evidence behind `fp32-gemm-without-tensor-cores`"):].split("\n\n")[1].splitlines()
    assert table[0] == "| kernel | count | kernel ms |"
    assert f"_a row's count and time: over the {len(steady)} steady steps_" in page
    first = next(i for i in inference(load_trace(path)).iterations if i.name == steady[0]["name"])
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for line in table[2:]:
            name, count, ms = [c.strip() for c in line.strip("|").split("|")]
            name = name.replace("\\<", "<").replace("\\>", ">")
            n, total = db.execute("SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                  "JOIN StringIds s ON s.id = k.demangledName WHERE s.value = ? AND k.start >= ?",
                                  (name, first.start_ns)).fetchone()
            assert int(count) == n and float(ms.replace(",", "")) == pytest.approx(total / 1e6, abs=0.001)
