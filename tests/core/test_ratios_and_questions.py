"""Ratios and the questions report, against hand computations in SQL on real exports."""
from __future__ import annotations

import functools
import json
import sqlite3

import pytest

from conftest import SAMPLES, shared_trace
from helpers.cli import run_main
from nsight_tui.parsers import Options, Profile
from nsight_tui.parsers.analyses.questions import attention_flops
from nsight_tui.render.document import document
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.tables import markdown as table

# Sum of kernel durations in ranges named :name inside step_N iterations, launched from the
# range's own thread (the forward sub-ranges are all launched by the main thread).
# Range text is in `text` (nsys-native strings) or StringIds via `textId` (registered strings).
NVTX = "temp.nvtx"  # NVTX_EVENTS with its text resolved, made by _INDEXES below

KERNEL_TIME_IN = f"""
SELECT sum(k.end - k.start) FROM {NVTX} s
CROSS JOIN {NVTX} n ON s.globalTid = n.globalTid AND s.start <= n.start AND s.end >= n.end
CROSS JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON n.globalTid = r.globalTid AND n.start <= r.start AND n.end >= r.end
CROSS JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON r.correlationId = k.correlationId
WHERE n.text = :name AND s.text LIKE 'step\\_%' ESCAPE '\\' AND n.eventType = 59 AND s.eventType = 59
"""

# GEMM kernels by name, by hand: cuBLAS/CUTLASS GEMM names in these fp32 traces all say gemm.
GEMM_TIME_IN = KERNEL_TIME_IN.replace(
    "k.correlationId\n", "k.correlationId JOIN StringIds kn ON kn.id = k.demangledName\n"
) + " AND kn.value LIKE '%gemm%'"

# backward under the process rule: launched from the main thread inside backward, or from a
# thread with no range of its own while backward is open on the main thread.
BACKWARD_TIME = f"""
WITH main AS (SELECT globalTid AS g FROM {NVTX} WHERE text = 'backward' LIMIT 1),
bwd AS (SELECT n.start AS s, n.end AS e FROM {NVTX} n, main
        JOIN {NVTX} st ON st.globalTid = n.globalTid AND st.start <= n.start AND st.end >= n.end
        WHERE n.text = 'backward' AND n.globalTid = main.g AND st.text LIKE 'step\\_%' ESCAPE '\\')
SELECT sum(k.end - k.start) FROM main CROSS JOIN bwd
CROSS JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON bwd.s <= r.start
CROSS JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON r.correlationId = k.correlationId
WHERE (r.globalTid = main.g AND bwd.e >= r.end)
   OR (r.globalTid != main.g AND bwd.e >= r.start AND NOT EXISTS (
        SELECT 1 FROM NVTX_EVENTS o WHERE o.globalTid = r.globalTid AND o.start <= r.start AND o.end >= r.end))
"""

# The queries above run on an in-memory copy of the export with the indexes a reader would add
# (nsys's tables have none on these columns; the CROSS JOINs fix the order the indexes serve):
# the same sums, in tens of milliseconds instead of seconds per query on the larger traces.
_INDEXES = """
CREATE TEMP TABLE nvtx AS SELECT e.start, e.end, e.globalTid, e.eventType, coalesce(e.text, t.value) AS text
    FROM NVTX_EVENTS e LEFT JOIN StringIds t ON t.id = e.textId;
CREATE INDEX temp.nvtx_tid ON nvtx(globalTid, start);
CREATE INDEX nvtx_tid ON NVTX_EVENTS(globalTid, start);
CREATE INDEX runtime_tid ON CUPTI_ACTIVITY_KIND_RUNTIME(globalTid, start);
CREATE INDEX runtime_start ON CUPTI_ACTIVITY_KIND_RUNTIME(start);
"""


def report_of(trace, attribution="process", **options) -> dict:
    """The report's JSON document on `trace` (the front door's report, laid out by render)."""
    return document(Profile(trace, Options(attribution=attribution, **options)).report())


@functools.cache
def _reference(path) -> sqlite3.Connection:
    """An in-memory copy of the export (read-only open; nothing written beside it) with _INDEXES."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con = sqlite3.connect(":memory:")
    try:
        source.backup(con)
    finally:
        source.close()
    con.executescript(_INDEXES)
    for kind in ("KERNEL", "MEMCPY", "MEMSET"):
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (f"CUPTI_ACTIVITY_KIND_{kind}",)).fetchone():
            con.execute(f"CREATE INDEX {kind.lower()}_correlation ON CUPTI_ACTIVITY_KIND_{kind}(correlationId)")
    return con


def _sql(path, query, **params):
    return _reference(path).execute(query, params).fetchone()[0]


def _trace(name):
    if name == "sample":
        path = SAMPLES / "small_ctx128.sqlite"  # carries its config: dims come from the trace
        return path, None
    return shared_trace(name), {"batch": 4, "n_heads": 25, "ctx": 256, "d_head": 64}


@pytest.mark.parametrize("name", ["sample", "xl_ctx256"])
def test_ratios_match_hand_computation(name):
    path, dims = _trace(name)
    a = report_of(load_trace(path), "process", **(dims or {}))
    fwd = _sql(path, KERNEL_TIME_IN, name="forward")
    bwd = _sql(path, BACKWARD_TIME)
    assert a["ranges"]["forward"]["kernel_ns"] == fwd
    assert a["ranges"]["backward"]["kernel_ns"] == bwd
    assert a["ratios"]["backward_over_forward"] == pytest.approx(bwd / fwd, rel=1e-12)
    softmax = _sql(path, KERNEL_TIME_IN, name="computing_softmax")
    # the matmuls: the GEMM kernels of the two ranges (the score range's scaling/masking are no matmul)
    scores = _sql(path, GEMM_TIME_IN, name="computing_attention_scores")
    final = _sql(path, GEMM_TIME_IN, name="final_matmul")
    assert scores < _sql(path, KERNEL_TIME_IN, name="computing_attention_scores")  # it holds more than GEMMs
    assert a["ratios"]["softmax_over_matmul_runtime"] == pytest.approx(softmax / (scores + final), rel=1e-12)
    # 5·B·H·T² / (2·2·B·H·T²·d_head) = 5 / (4·64): d_head is 64 in both (768/12, 1600/25)
    assert a["ratios"]["softmax_over_matmul_flops"] == pytest.approx(5 / 256)
    # GEMM share of forward: GEMM kernel time over all GPU op time (kernels + memcpy/memset)
    gemm = _sql(path, GEMM_TIME_IN, name="forward")
    ops = fwd + sum(_sql(path, KERNEL_TIME_IN.replace("CUPTI_ACTIVITY_KIND_KERNEL", t), name="forward") or 0
                    for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    assert a["ratios"]["gemm_share_forward"] == pytest.approx(gemm / ops, abs=1e-6)
    # 3 steady-state steps and 2 warmups, reported apart
    assert a["ranges"]["step"]["instances"] == 3 and a["warmup"]["step"]["instances"] == 2
    assert 1.0 < a["ratios"]["backward_over_forward"] < 3.0  # a training step, as expected for fp32 GPT-2


def test_attention_flops_by_hand():
    f = attention_flops(batch=2, heads=3, ctx=8, d_head=4)
    assert f["scores"] == 2 * 2 * 3 * 64 * 4 == f["final_matmul"]
    assert f["softmax"] == 5 * 2 * 3 * 64


def test_family_shares_sum_to_one_and_gemm_dominates_fp32_forward():
    a = report_of(load_trace(shared_trace("xl_ctx256")), "process")
    for name in ("forward", "backward", "step"):
        assert sum(a["ranges"][name]["families"].values()) == pytest.approx(1.0, abs=1e-5)  # 6-digit JSON shares
    assert a["ratios"]["gemm_share_forward"] > 0.8


@pytest.mark.parametrize("name", ["sample", "small_ctx128_threads"])
def test_report_json_cli_has_the_promised_keys(name):
    path = SAMPLES / "small_ctx128.sqlite" if name == "sample" else shared_trace(name)
    proc = run_main("report", path, "-f", "json")
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


def test_flop_ratio_from_given_flops_without_dimensions(tmp_path):
    """A trace without a config mark and no dims on the command line: the FLOP ratio comes from
    `--flops` when it names the three attention ranges (it printed – before)."""
    import json

    path = shared_trace("xl_ctx256")
    flops = {"ranges": {"step_N/forward/scaled_dot_product_attention/computing_attention_scores": {"flops": 8e9},
                        "step_N/forward/scaled_dot_product_attention/computing_softmax": {"flops": 1e9},
                        "step_N/forward/scaled_dot_product_attention/final_matmul": {"flops": 2e9}}}
    f = tmp_path / "flops.json"
    f.write_text(json.dumps(flops))
    bare = report_of(load_trace(path), "process")
    assert bare["ratios"]["softmax_over_matmul_flops"] is None
    a = report_of(load_trace(path), "process", flops_file=str(f))
    assert a["ratios"]["softmax_over_matmul_flops"] == pytest.approx(1e9 / (8e9 + 2e9))
