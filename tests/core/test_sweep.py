"""A folder of captures: one table per question, rows model in size order, columns ctx,
OOM cells marked; cell values against SQL on the committed sample trace."""
from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from helpers import step_sql
from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers.cli import run_main


@pytest.fixture()
def sweep_dir(tmp_path):
    src = SAMPLES / "small_ctx128.sqlite"
    if not src.exists():
        pytest.skip("sample trace missing")
    shutil.copy(src, tmp_path / "small_ctx128.sqlite")
    shutil.copyfile(plain(SAMPLES / "small_ctx128_fwd.sqlite.xz"), tmp_path / "small_ctx128_fwd.sqlite")
    (tmp_path / "2.7B_ctx128.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    (tmp_path / "medium_ctx1024.oom.json").write_text(json.dumps({"status": "oom", "message": "CUDA out of memory"}))
    return tmp_path


def _report(folder, fmt):
    proc = run_main("report", folder, "-f", fmt)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_sweep_tables_rows_models_columns_ctx_with_oom(sweep_dir):
    data = json.loads(_report(sweep_dir, "json"))
    step = next(t for t in data["tables"] if t["title"] == "Step time, period / Python (ms)")
    assert step["columns"] == ["model", "ctx 128", "ctx 1024"]
    # size order, not alphabetical; a variant is a row of the same tables (every file in every table)
    assert [r[0] for r in step["rows"]] == ["small", "small [fwd]", "medium", "2.7B"]
    assert step["rows"][2] == ["medium", "", "OOM"]
    assert step["rows"][3] == ["2.7B", "OOM", ""]
    # the small/ctx128 cell, computed from the export by hand
    periods = [it.period for it in step_sql.steps(sweep_dir / "small_ctx128.sqlite")]  # the step is its period
    nvtx = sum(periods) / len(periods)
    con = sqlite3.connect(f"file:{sweep_dir / 'small_ctx128.sqlite'}?mode=ro", uri=True)
    marks = [json.loads(v[len("nsight-tui:step "):]) for (v,) in con.execute(
        "SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 34 AND s.value LIKE 'nsight-tui:step %'")]
    con.close()
    py = sum(m["seconds"] for m in marks if m["name"].startswith("step_")) / sum(
        1 for m in marks if m["name"].startswith("step_"))
    assert step["rows"][0][1] == f"{nvtx / 1e6:,.2f} / {py * 1e3:,.2f}"
    assert len(data["tables"]) == len({t["title"] for t in data["tables"]})  # one table per question
    assert all(t["notes"] == [] for t in data["tables"])  # every file placed by its name


def test_sweep_markdown_marks_oom(sweep_dir):
    text = _report(sweep_dir, "markdown")
    assert "| medium |  | OOM |" in text
    assert "### Backward / forward kernel time" in text


def test_every_file_has_a_row_in_every_table_and_the_table_says_why(sweep_dir):
    """A capture named neither {model}_ctx{N} nor carrying a config mark still gets a row (its file
    name, column `ctx ?`); one named oddly but with its config mark is placed by the mark."""
    src = sweep_dir / "small_ctx128.sqlite"
    odd = sweep_dir / "final run.sqlite"
    shutil.copy(src, odd)
    con = sqlite3.connect(odd)
    con.execute("DELETE FROM NVTX_EVENTS WHERE textId IN (SELECT id FROM StringIds WHERE value LIKE 'nsight-tui:config %')")
    con.commit()
    con.close()
    shutil.copyfile(plain(SAMPLES / "small_ctx128_fused.sqlite.xz"), sweep_dir / "attempt 2.sqlite")  # config: small, 128, fused
    data = json.loads(_report(sweep_dir, "json"))
    for t in data["tables"]:
        assert t["columns"] == ["model", "ctx 128", "ctx 1024", "ctx ?"]
        labels = [r[0] for r in t["rows"]]
        assert labels == ["small", "small [fused]", "small [fwd]", "medium", "2.7B", "final run.sqlite"], labels
        assert t["rows"][-1][1:3] == ["", ""] and t["rows"][-1][3] not in ("", "error")
        assert any(n.startswith("final run.sqlite: model and context length unknown") for n in t["notes"])
        assert any(n.startswith("attempt 2.sqlite: placed by its nsight-tui:config mark") for n in t["notes"])
    text = _report(sweep_dir, "markdown")
    assert "| final run.sqlite |" in text and "final run.sqlite: model and context length unknown" in text
