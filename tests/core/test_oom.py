"""A run that ran out of GPU memory (sample_traces/memory/xl_ctx1024_b16.oom: GPT-2 XL, ctx 1024,
batch 16, manual attention, dead in its first forward), through parsers.analyses.oom, against SQL
over the export (the cudaMalloc row that returned 2, the memory events, the NVTX iterations), the
record the workload wrote beside it (`.oom.json`: its configuration, PyTorch's message) and the
hand formula of the tensor it tried to make (B·H·T² fp32 attention scores)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers.stripped import without_nvtx
from nsight_tui.parsers.analyses import sweep
from nsight_tui.parsers.analyses.oom import oom_facts
from nsight_tui.parsers.analyses.report import build
from nsight_tui.render.document import document
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.render.report import single_markdown

from conftest import SAMPLES

MEMORY = SAMPLES / "memory"
OOM = "xl_ctx1024_b16.oom"
RECORD = json.loads((MEMORY / f"{OOM}.json").read_text())


@pytest.fixture(scope="module")
def oom_export(async_trace) -> Path:
    return async_trace(MEMORY / f"{OOM}.sqlite.xz")


def _db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _failure(path: Path) -> tuple[int, int]:
    """(start, in use then) of the first cudaMalloc that returned cudaErrorMemoryAllocation (SQL)."""
    with _db(path) as db:
        (t,) = db.execute("""SELECT min(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                             WHERE s.value LIKE 'cudaMalloc%' AND r.returnValue = 2""").fetchone()
        (held,) = db.execute("""SELECT sum(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END)
                                FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE start <= ?""", (t,)).fetchone()
    return t, held


def test_the_failed_allocation_against_sql_and_the_record(oom_export):
    facts = oom_facts(range_model(load_trace(oom_export)))
    t, held = _failure(oom_export)
    with _db(oom_export) as db:
        (total,) = db.execute("SELECT max(totalMemory) FROM TARGET_INFO_GPU").fetchone()
        (finished,) = db.execute("""SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE e.eventType = 59 AND (coalesce(e.text, s.value) GLOB 'step_[0-9]*'
                 OR coalesce(e.text, s.value) GLOB 'warmup_[0-9]*') AND e.end < ?""", (t,)).fetchone()
    assert facts is not None
    assert (facts.t_ns, facts.return_value, facts.in_use_bytes, facts.total_bytes) == (t, 2, held, total)
    assert facts.path == RECORD["range"]
    assert facts.steps_finished == finished == 0
    # PyTorch's "Tried to allocate 1.56 GiB", and the tensor by hand: B·H·T² fp32 scores from the record's config
    c = RECORD["config"]
    scores = c["batch"] * c["n_heads"] * c["ctx"] ** 2 * 4
    assert facts.asked is not None and f"Tried to allocate {facts.asked.text}" in RECORD["message"]
    assert abs(facts.asked.bytes - scores) <= facts.asked.rounding_bytes < 0.01 * scores
    assert facts.tensor is not None and "attention scores" in facts.tensor and f"{c['batch']}×{c['n_heads']}" in facts.tensor
    ids = [f.id for f in facts.fixes]
    assert ids[:2] == ["oom-sdpa", "oom-batch"] and "oom-checkpointing" in ids  # manual attention, training forward
    assert "oom-expandable-segments" not in ids  # 14.31 MiB reserved but unallocated: no fragmentation


def test_no_allocation_failed_no_facts(async_trace):
    assert oom_facts(range_model(load_trace(async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")))) is None


def test_the_report_leads_with_it_and_finds_nothing_per_step(oom_export):
    report = build(load_trace(oom_export))
    answers = document(report)
    assert answers["oom"]["path"] == RECORD["range"]
    assert answers["findings"]["findings"] == [] and "before it finished a step" in answers["findings"]["not_run"]
    text = single_markdown(report)
    assert text.index("## Out of GPU memory") < text.index("## (a)")
    assert "1.56 GiB" in text and "attention scores" in text



def test_an_unannotated_oom_run_infers_no_steps_and_reads_the_record_beside_it(oom_export, tmp_path):
    path = without_nvtx(oom_export, tmp_path / f"{OOM}.sqlite")
    (tmp_path / f"{OOM}.json").write_text(json.dumps(RECORD))
    trace = load_trace(path)
    found = inference(trace)
    assert not found.found and "ran out of GPU memory" in found.reason  # its layers are no steps
    facts = oom_facts(range_model(trace))
    assert facts.steps_finished == 0 and facts.message == RECORD["message"] and facts.message_source == f"{OOM}.json"
    assert facts.path == ""  # no NVTX: where cannot be told by range
    assert "attention scores" in facts.tensor  # the record's config tells it


def test_a_sweep_marks_an_oom_export_without_its_record(oom_export, tmp_path):
    folder = tmp_path / "sweep"
    folder.mkdir()
    without_nvtx(oom_export, folder / "xl_ctx1024.sqlite")  # no record beside it: the export alone says so
    runs = sweep.analyse(sweep.discover(folder))
    assert [(r.path.name, r.status) for r in runs] == [("xl_ctx1024.sqlite", "oom")]
    assert "cudaMalloc" in runs[0].message


def test_a_dead_runs_findings_say_no_figure_per_step(async_trace):
    """The Qwen2 run out of memory in step_0 (thirdparty/oom_qwen2_b256): no step finished, so no
    findings, and no figure "per step" either: `cpu_wait_ms_per_step` said 92.5 ms beside `steps: 0`
    (the wait read over the iteration it died in), which an agent reads as the CPU's wait each step."""
    found = document(build(load_trace(async_trace(SAMPLES / "thirdparty" / "oom_qwen2_b256.oom.sqlite.xz"))))["findings"]
    assert found["steps"] == 0 and found["findings"] == [] and "before it finished a step" in found["not_run"]
    assert found["step_ns"] is None and found["cpu_wait_ms_per_step"] is None
