"""The straggler through the MCP server, as an agent meets it (the SDK's own client over stdio): a
served folder of per-rank exports, whatif `straggler` and `fix:straggler` on it, one rank's export
refused in one line, and a tool that reads one export given the folder told so (it said "not served
(it resolves outside the served profiles)" of the folder the server served)."""
from __future__ import annotations

import asyncio

import pytest

from conftest import ROOT

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")

from helpers.mcp_client import params, run_calls  # noqa: E402

FOLDER = "sample_traces/replay/straggler/base"
RANK0 = f"{FOLDER}/small_ctx512_b8_ddp2_rank0.sqlite.xz"


@pytest.fixture(scope="module")
def answers():
    return asyncio.run(run_calls(params(FOLDER, cwd=ROOT), {
        "edit": ("whatif", {"path": FOLDER, "edits": ["straggler"]}),
        "fix": ("whatif", {"path": FOLDER, "edits": ["fix:straggler"]}),
        "one_rank": ("whatif", {"path": RANK0, "edits": ["straggler"]}),
        "findings": ("findings", {"path": FOLDER}),
        "findings_ncu": ("findings", {"path": FOLDER, "ncu": RANK0}),
        "summary": ("summary", {"path": FOLDER}),
    }))


def test_the_straggler_on_a_served_folder_saves_the_sleep(answers):
    edit, fix = answers.ok("edit"), answers.ok("fix")
    assert edit["saving_ns"] > 3e6 and fix["saving_ns"] == edit["saving_ns"]
    assert edit["rank_files"]["files"] == ["small_ctx512_b8_ddp2_rank0.sqlite.xz", "small_ctx512_b8_ddp2_rank1.sqlite.xz"]


def test_one_ranks_export_is_refused_saying_why(answers):
    text = answers.error("one_rank")
    assert "no collective shared by two ranks" in text and "Traceback" not in text


def test_a_tool_of_one_export_given_the_served_folder_says_so(answers):
    text = answers.error("summary")
    assert "not served" not in text, text
    assert "a served folder" in text and "whatif" in text and "findings" in text, text


def test_findings_on_the_served_folder_are_the_ranks_as_one(answers):
    """The findings of the two ranks read as one trace: the straggler among them, naming rank 1 (the one
    that sleeps), its saving the straggler edit's replay, as whatif fix:straggler says it."""
    found = {f["id"]: f for f in answers.ok("findings")["findings"]}
    assert "straggler" in found, list(found)
    assert found["straggler"]["evidence"]["straggler_rank"] == 1
    assert found["straggler"]["saving_ms_per_step"] * 1e6 == pytest.approx(answers.ok("fix")["saving_ns"], rel=1e-6)
    assert "ncu is not taken with a folder" in answers.error("findings_ncu")
