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
SLEEP = "sample_traces/findings/small_ctx128_host-sleep.sqlite.xz"  # a 5 ms sleep planted at each step's start


@pytest.fixture(scope="module")
def session():
    tools: list = []
    answers = asyncio.run(run_calls(params(SMALL, SLEEP, cwd=ROOT), {
        "range": ("whatif", {"path": SMALL, "edits": ["speed:gemm@no_such_range=2"]}),
        "family": ("whatif", {"path": SMALL, "edits": ["speed:GEMM=2"]}),
        "moved": ("whatif", {"path": SLEEP, "edits": ["nohost:-5ms"]}),
        "one_worker": ("whatif", {"path": SLEEP, "edits": ["nohost", "workers:1"]}),
        "attention": ("whatif", {"path": SMALL, "edits": ["attention"]}),
        "attention_fix": ("whatif", {"path": SMALL, "edits": ["fix:unfused-attention"]}),
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


def test_an_agent_asks_how_many_loader_workers_keep_up_and_what_fewer_give(session):
    # the planted sleep, 5 ms a step, taken off: one worker keeps up; all of the pauses' host work
    # in one worker is more than the step the rest leaves, so the worker sets the step
    answers = session[1]
    moved = answers.ok("moved")
    assert moved["moved_host_ns_per_step"] == pytest.approx(5e6, abs=1) and moved["workers_to_keep_up"] == 1
    one = answers.ok("one_worker")
    assert one["predicted"]["clock"] == "workers" and one["workers_to_keep_up"] is None
    assert any(h["kind"] == "workers" for h in one["holds_step"])
    assert "workers:N" in session[0].description


def test_an_agent_fuses_the_attention_by_name_or_by_the_findings_fix(session):
    """`attention` and `fix:unfused-attention` are the same replay through the real MCP client: a saving
    with a range, the assumption said."""
    answers = session[1]
    plain, fix = answers.ok("attention"), answers.ok("attention_fix")
    assert plain["saving_ns"] > 0 and plain["predicted"]["step_ns"] == fix["predicted"]["step_ns"]
    assert plain["predicted"]["low_ns"] < plain["predicted"]["high_ns"]
    assert "one op on the CPU" in plain["edits"][0]["assumption"]
    assert "attention[:RANGE]" in session[0].description
