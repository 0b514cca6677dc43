"""Ratios and the questions report, against hand computations in SQL on real exports."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from conftest import shared_trace
from parsers.analysis import attention_flops, questions
from parsers.load import load_trace
from parsers.markdown import table

# Sum of kernel durations in ranges named :name inside step_N iterations, launched from the
# range's own thread (the forward sub-ranges are all launched by the main thread).
KERNEL_TIME_IN = """
SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start AND n.end >= r.end
JOIN NVTX_EVENTS s ON s.globalTid = n.globalTid AND s.start <= n.start AND s.end >= n.end
WHERE n.text = :name AND s.text LIKE 'step\\_%' ESCAPE '\\' AND n.eventType = 59 AND s.eventType = 59
"""

# backward under the process rule: launched from the main thread inside backward, or from a
# thread with no range of its own while backward is open on the main thread.
BACKWARD_TIME = """
WITH main AS (SELECT globalTid AS g FROM NVTX_EVENTS WHERE text = 'backward' LIMIT 1),
bwd AS (SELECT n.start AS s, n.end AS e FROM NVTX_EVENTS n, main
        JOIN NVTX_EVENTS st ON st.globalTid = n.globalTid AND st.start <= n.start AND st.end >= n.end
        WHERE n.text = 'backward' AND n.globalTid = main.g AND st.text LIKE 'step\\_%' ESCAPE '\\')
SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId, main
JOIN bwd ON bwd.s <= r.start AND (
     (r.globalTid = main.g AND bwd.e >= r.end)
  OR (r.globalTid != main.g AND bwd.e >= r.start AND NOT EXISTS (
        SELECT 1 FROM NVTX_EVENTS o WHERE o.globalTid = r.globalTid AND o.start <= r.start AND o.end >= r.end)))
"""


def _sql(path, query, **params):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query, params).fetchone()[0]
    finally:
        con.close()


def test_ratios_match_hand_computation_xl():
    path = shared_trace("xl_ctx256")
    a = questions(load_trace(path), "process", dims={"batch": 4, "n_heads": 25, "ctx": 256, "d_head": 64})
    fwd = _sql(path, KERNEL_TIME_IN, name="forward")
    bwd = _sql(path, BACKWARD_TIME)
    assert a["ranges"]["forward"]["kernel_ns"] == fwd
    assert a["ranges"]["backward"]["kernel_ns"] == bwd
    assert a["ratios"]["backward_over_forward"] == pytest.approx(bwd / fwd, rel=1e-12)
    softmax = _sql(path, KERNEL_TIME_IN, name="computing_softmax")
    scores = _sql(path, KERNEL_TIME_IN, name="computing_attention_scores")
    final = _sql(path, KERNEL_TIME_IN, name="final_matmul")
    assert a["ratios"]["softmax_over_matmul_runtime"] == pytest.approx(softmax / (scores + final), rel=1e-12)
    # 5·B·H·T² / (2·2·B·H·T²·d_head) = 5 / (4·64)
    assert a["ratios"]["softmax_over_matmul_flops"] == pytest.approx(5 / 256)
    # 3 steady-state steps and 2 warmups, reported apart
    assert a["ranges"]["step"]["instances"] == 3 and a["warmup"]["step"]["instances"] == 2
    assert 1.0 < a["ratios"]["backward_over_forward"] < 3.0  # a training step, as expected for fp32 GPT-2


def test_attention_flops_by_hand():
    f = attention_flops(batch=2, heads=3, ctx=8, d_head=4)
    assert f["scores"] == 2 * 2 * 3 * 64 * 4 == f["final_matmul"]
    assert f["softmax"] == 5 * 2 * 3 * 64


def test_family_shares_sum_to_one_and_gemm_dominates_fp32_forward():
    a = questions(load_trace(shared_trace("xl_ctx256")), "process")
    for name in ("forward", "backward", "step"):
        assert sum(a["ranges"][name]["families"].values()) == pytest.approx(1.0, abs=1e-5)  # 6-digit JSON shares
    assert a["ratios"]["gemm_share_forward"] > 0.8


def test_report_json_cli_has_the_promised_keys():
    path = shared_trace("small_ctx128_threads")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "report", str(path), "-f", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    fwd = data["ranges"]["forward"]
    for key in ("instances", "range_ns", "proj_ns", "kernel_ns", "kernels", "top_kernels", "families"):
        assert key in fwd
    assert {"name", "total_ns", "instances", "family"} <= set(fwd["top_kernels"][0])
    for key in ("backward_over_forward", "gemm_share_forward", "gemm_share_step", "optimizer_share_step",
                "softmax_over_matmul_runtime", "softmax_over_matmul_flops"):
        assert key in data["ratios"]
    assert data["attribution"] == "process"
    # process-wide: backward has its thousands of kernels (autograd thread)
    assert data["ranges"]["backward"]["kernels"] > 1000


def test_markdown_table_escapes_pipes_and_aligns_numbers():
    text = table(["name", "ms"], [["a|b", "1.5"], ["c", "12.0"]])
    lines = text.splitlines()
    assert lines[0] == "| name | ms |"
    assert lines[1] == "|---|---:|"
    assert lines[2] == "| a\\|b | 1.5 |"
