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


def test_a_finding_not_replayed_says_why_before_the_agent_asks_its_fix():
    """An agent asks `whatif` with fix:ID for each finding the findings tool lists. host-bound-gap on
    the bf16 capture without NVTX names `nohost:1ms`, which has nothing to act on there: its saving is
    the rule's estimate (`replayed` false) and fix:host-bound-gap is a tool error. The finding says the
    error's reason beforehand, in `not_replayed`, and the findings tool's description says where."""
    bf16 = "sample_traces/nonvtx/small_ctx512_bf16_b8_async_nonvtx.sqlite.xz"
    tools: list = []
    answers = asyncio.run(run_calls(params("sample_traces/nonvtx", cwd=ROOT), {
        # the bare file name, as an agent shortens what list_files lists: refused, the name to pass said
        "bare": ("findings", {"path": "small_ctx512_bf16_b8_async_nonvtx.sqlite.xz"}),
        "findings": ("findings", {"path": bf16}),
        "fix": ("whatif", {"path": bf16, "edits": ["fix:host-bound-gap"]}),
    }, tools))
    assert answers.error("bare").endswith(f"; did you mean {bf16!r}?")
    gap = next(f for f in answers.ok("findings")["findings"] if f["id"] == "host-bound-gap")
    assert gap["replayed"] is False and gap["edits"] == ["nohost:1ms"]
    refused = answers.error("fix")
    # the same reason, said with the edit refused (`nohost:1ms: ...`; the whatif tool adds the fix it came from)
    edit, _, why = gap["not_replayed"].partition(": ")
    assert edit == "nohost:1ms" and why and f"{edit} (fix:host-bound-gap): {why}" in refused and "Traceback" not in refused
    assert "not_replayed" in next(t for t in tools if t.name == "findings").description


def test_a_run_dead_before_its_first_step_has_nothing_to_replay_whatever_the_edit():
    """The Qwen2 run out of GPU memory in step_0 (the report: no step time to speak of). The whatif
    tool answered a prediction for the iteration it died in, and `fix:oom-batch` (one of the fixes its
    report names) "no finding 'oom-batch' (found: host-bound-gap, launch-bound, elementwise-chain)",
    findings the findings tool does not list. Each is now the one line that says why, before any fix
    is looked up."""
    oom = "sample_traces/thirdparty/oom_qwen2_b256.oom.sqlite.xz"
    answers = asyncio.run(run_calls(params(oom, cwd=ROOT), {
        "findings": ("findings", {"path": oom}),
        "plain": ("whatif", {"path": oom}),
        "speed": ("whatif", {"path": oom, "edits": ["speed:gemm=2"]}),
        "oom_fix": ("whatif", {"path": oom, "edits": ["fix:oom-batch"]}),
        "rule_fix": ("whatif", {"path": oom, "edits": ["fix:host-bound-gap"]}),
    }))
    assert answers.ok("findings")["findings"] == []
    for key in ("plain", "speed", "oom_fix", "rule_fix"):
        said = answers.error(key)
        assert "ran out of GPU memory in step_0 before it finished a step: no step to replay" in said, said
        assert "\n" not in said and "Traceback" not in said and "no finding" not in said
