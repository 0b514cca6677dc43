"""The whatif tool as an agent meets it, through the MCP SDK's own client over stdio: its description
says what PATTERN and RANGE may be (every kernel family, where the range names and the finding ids
come from, `step`) and that a saving can be negative, so a first call can be right; a wrong edit is a
clean tool error that names what there is."""
from __future__ import annotations

import asyncio

import pytest

from conftest import ROOT

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")

from helpers.mcp_client import params, run_calls  # noqa: E402
from nsight_tui.parsers.kernels.families import FAMILY_KEYS  # noqa: E402

SMALL = "sample_traces/small_ctx128.sqlite"


@pytest.fixture(scope="module")
def session():
    tools: list = []
    answers = asyncio.run(run_calls(params(SMALL, cwd=ROOT), {
        "range": ("whatif", {"path": SMALL, "edits": ["speed:gemm@no_such_range=2"]}),
        "family": ("whatif", {"path": SMALL, "edits": ["speed:GEMM=2"]}),
    }, tools))
    return next(t for t in tools if t.name == "whatif"), answers


def test_the_description_says_what_patterns_and_ranges_may_be(session):
    said = session[0].description
    missing = [k for k in FAMILY_KEYS if k not in said]
    assert not missing, missing
    for words in ("range_tree", "findings tool", "`step`", "steady-state steps", "saving_ns` is negative",
                  "nohost:2ms", "speed:PATTERN@RANGE=K", "case-sensitive"):
        assert words in said, words


def test_a_wrong_edit_is_a_tool_error_naming_what_there_is(session):
    answers = session[1]
    assert "ranges there: warmup_N, forward" in answers.error("range")
    assert "did you mean the family 'gemm'?" in answers.error("family")
    assert "Traceback" not in answers.error("range") + answers.error("family")
