"""`nsight-tui mcp` as an agent meets it, through the MCP SDK's own client over stdio: every
tool's default answer fits a coding agent's tool-result cap (under 50,000 characters as the client
receives it: structured content + text, the text one compact copy), and says what it left out and
how to get it; fixed choices are enums in the tools' schemas; a bad argument is one plain line; the
field names say their unit; on an unannotated capture `step_N/backward` finds the inferred ranges.

The traces sized are the committed samples whose answers were the largest of the 30 measured
(sample_traces/*.sqlite, nonvtx/, thirdparty/): each tool's largest, plus every ../shared trace
when present.
"""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, SHARED

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")

from helpers.mcp_client import params  # noqa: E402
from helpers.xz_samples import plain  # noqa: E402

TOTAL_CHARS = 50_000  # a coding agent's tool-result cap is about 25k tokens

# the committed samples whose answers were the largest before answers were sized (each tool's
# largest: report/roofline/ranks on the DDP export, range_kernels and cuda_gpu_kern_sum on ResNet,
# nvtx_kern_sum on ViT, findings on Qwen2, range_tree with emit_nvtx, idle_window with autograd
# NVTX, kernel_launches on an unannotated capture) and the everyday one
SIZED = ("sample_traces/small_ctx128.sqlite", "sample_traces/small_ctx128_ddp2.sqlite.xz",
         "sample_traces/small_ctx128_emitnvtx.sqlite.xz", "sample_traces/small_ctx128_agnvtx.sqlite.xz",
         "sample_traces/thirdparty/lightning_resnet50_b32.sqlite.xz",
         "sample_traces/thirdparty/timm_vit_small_b64.sqlite.xz",
         "sample_traces/thirdparty/hf_trainer_qwen2_l4_b8_agnvtx.sqlite.xz",
         "sample_traces/nonvtx/small_ctx512_b8_async_nonvtx.sqlite.xz")
NONVTX = "sample_traces/nonvtx/small_ctx512_b8_async_nonvtx.sqlite.xz"
SMALL, FUSED = "sample_traces/small_ctx128.sqlite", "sample_traces/small_ctx128_fused.sqlite.xz"
REPORTS = ("nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
           "cuda_gpu_mem_time_sum")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def shared_traces() -> list[str]:
    return [str(p) for p in sorted(SHARED.glob("*.sqlite"))] if SHARED.exists() else []


def received(res) -> tuple[int, str, dict | None]:
    """What the client received: its size in characters (the structured content as the wire carries
    it, compact, plus the text), the text, the structured content."""
    text = "".join(getattr(c, "text", "") for c in res.content)
    doc = res.structured_content
    wire = json.dumps(doc, separators=(",", ":"), ensure_ascii=False) if doc is not None else ""
    return len(wire) + len(text), text, doc


async def default_answers(paths: list[str], pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple]:
    """(tool, trace) -> received(...) + (is_error,) for every tool called as an agent first calls
    it: the arguments it must give and no others (a kernel and a correlation ID from the answers
    before)."""
    import os

    from mcp import ClientSession, stdio_client

    out: dict[tuple[str, str], tuple] = {}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params(*paths), errlog=devnull) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()

                async def call(name: str, key: str, args: dict):
                    res = await s.call_tool(name, args)
                    out[(name, key)] = (*received(res), res.is_error)
                    return res.structured_content or {}

                await call("list_files", "-", {})
                for p in paths:
                    summary = await call("summary", p, {"path": p})
                    tree = await call("range_tree", p, {"path": p})
                    kernels = await call("range_kernels", p, {"path": p})
                    launches = await call("kernel_launches", p, {"path": p, "kernel": kernels["rows"][0]["name"]})
                    await call("correlation", p, {"path": p, "corr_id": launches["rows"][0]["corr_id"]})
                    steps = any(r["path"] in ("step_N", "inferred:step_N") for r in tree["rows"])
                    window = {"range": "step_N"} if steps else \
                        {"start_ns": summary["start_ns"], "end_ns": summary["start_ns"] + max(summary["span_ns"], 1)}
                    await call("idle_window", p, {"path": p, **window})
                    for name in ("findings", "roofline", "report", "ranks", "whatif"):
                        await call(name, p, {"path": p})
                    for r in REPORTS:
                        await call("nsys_report", f"{p}:{r}", {"path": p, "report": r})
                for a, b in pairs:
                    await call("diff", f"{a} vs {b}", {"a": a, "b": b})
    return out


def check_sizes(answers: dict, may_fail: tuple[str, ...] = ()) -> None:
    """Every answer fits; an error is one line, and only from the tools in `may_fail` (a capture
    whose kernels have no launching call in the export, or no step to replay)."""
    assert answers
    for (tool, trace), (chars, text, doc, is_error) in answers.items():
        assert chars <= TOTAL_CHARS, (tool, trace, chars)
        if is_error:
            assert tool in may_fail and "\n" not in text.strip(), (tool, trace, text)
            continue
        # the text is the structured content once, compact: not a pretty-printed second copy
        assert text == json.dumps(doc, separators=(",", ":"), ensure_ascii=False), (tool, trace)


def test_every_default_answer_fits_an_agent():
    import anyio

    paths = [str(plain(ROOT / p)) for p in SIZED]
    answers = anyio.run(default_answers, [*paths, str(plain(ROOT / FUSED))], [(str(ROOT / SMALL), str(plain(ROOT / FUSED)))])
    check_sizes(answers)
    report = answers[("report", str(ROOT / SMALL))][2]
    # what did not fit is named with its size and the argument that brings it
    assert "findings" in report and report["left_out"]["sections"] and "sections" in report["left_out"]["how"]
    kernels = answers[("range_kernels", paths[SIZED.index("sample_traces/thirdparty/lightning_resnet50_b32.sqlite.xz")])][2]
    assert kernels["next_offset"] == kernels["returned"] < kernels["total"]
    assert f"offset={kernels['next_offset']}" in kernels["cut"]


def test_every_default_answer_fits_an_agent_on_shared_traces():
    import anyio

    shared = shared_traces()
    if not shared:
        pytest.skip(f"{SHARED} not present (../shared is only beside the team's checkouts)")
    pairs = [(a, b) for a, b in zip(shared, shared[1:])][:2]
    check_sizes(anyio.run(default_answers, shared, pairs), may_fail=("correlation", "whatif"))


@pytest.mark.anyio
async def test_pages_move_on_to_every_row():
    """A page cut to size says where the rest begin; following next_offset gives every row once,
    the same rows a page of the largest limit would hold."""
    from helpers.mcp_client import every_page, run_calls

    resnet = str(plain(ROOT / "sample_traces/thirdparty/lightning_resnet50_b32.sqlite.xz"))
    calls = {every_page("all"): ("range_kernels", {"path": resnet}),
             "first": ("range_kernels", {"path": resnet})}
    answers = await run_calls(params(resnet), calls)
    every, first = answers.ok("all"), answers.ok("first")
    assert every["pages"] > 1 and len(every["rows"]) == every["total"] == first["total"]
    assert every["rows"][:first["returned"]] == first["rows"]
    assert len({r["name"] for r in every["rows"]}) == every["total"]  # one row per kernel name, none twice


# -- schemas and argument errors ------------------------------------------------------------------
BAD = {
    "attribution": ("summary", {"attribution": "thread"}, ["attribution", "'process' or 'nsys'", "'thread'"]),
    "depth_type": ("range_tree", {"depth": "deep"}, ["depth", "integer", "'deep'"]),
    "by": ("ncu", {"ncu": "x.ncu-rep", "by": "kernels"}, ["by", "'kernel'", "'findings'", "'kernels'"]),
    "section": ("report", {"sections": ["ranges", "nope"]}, ["sections[1]", "'findings'", "'nope'"]),
    "nsys_report": ("nsys_report", {"report": "cuda_gpu_trace"}, ["report", "'cuda_api_sum'", "'cuda_gpu_trace'"]),
    "ranks_attribution": ("ranks", {"attribution": "nvtx"}, ["attribution", "'process' or 'nsys'"]),
    "missing": ("kernel_launches", {}, ["kernel", "required"]),
    "unknown": ("range_tree", {"limt": 5}, ["limt", "limit"]),
}


@pytest.mark.anyio
async def test_bad_arguments_are_one_plain_line():
    from helpers.mcp_client import run_calls

    calls = {k: (tool, args) for k, (tool, args, _) in BAD.items()}
    calls["after"] = ("summary", {})
    answers = await run_calls(params("sample_traces/small_ctx128_fwd.sqlite.xz"), calls)
    for key, (_, _, words) in BAD.items():
        text = answers.error(key)
        assert "\n" not in text.strip(), (key, text)
        assert "pydantic" not in text and "validation error for" not in text and "type=" not in text, (key, text)
        for w in words:
            assert w in text, (key, w, text)
    assert answers.ok("after")["counts"]["kernels"] > 0  # still serving


@pytest.mark.anyio
async def test_fixed_choices_are_enums_in_the_schemas():
    from helpers.mcp_client import run_calls

    tools: list = []
    await run_calls(params("sample_traces/small_ctx128_fwd.sqlite.xz"), {}, tools)
    schemas = {t.name: t.input_schema for t in tools}

    def enum(tool: str, arg: str) -> list:
        prop = schemas[tool]["properties"][arg]
        prop = next((p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"), prop)  # X | None
        prop = prop.get("items", prop)  # list[X]
        return prop["enum"]

    for tool, schema in schemas.items():
        if "attribution" in schema["properties"]:
            assert enum(tool, "attribution") == ["process", "nsys"], tool
    # every tool reading ranges takes attribution, ranks included (docs/agents-and-browser.md)
    assert {t for t, s in schemas.items() if "attribution" not in s["properties"]} == {"list_files", "whatif"}
    assert enum("ncu", "by") == ["kernel", "name", "range", "tensor", "findings"]
    assert enum("nsys_report", "report") == list(REPORTS)
    assert {"findings", "ranges", "roofline", "gpu_idle", "tables"} <= set(enum("report", "sections"))


# -- field names -----------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_field_names_say_their_unit_and_the_long_name_comes_once():
    from helpers.mcp_client import run_calls

    def first_launch(a):
        return a.ok("launches")["rows"][0]

    calls = {"kernels": ("range_kernels", {"range": "step_N/backward", "limit": 5}),
             "tree": ("range_tree", {"depth": 1}),
             # each a function of the answers before it, asked in the same session
             "launches": lambda a: ("kernel_launches", {"kernel": a.ok("kernels")["rows"][0]["name"], "limit": 3}),
             "corr": lambda a: ("correlation", {"corr_id": first_launch(a)["corr_id"]}),
             "window": lambda a: ("idle_window", {"start_ns": first_launch(a)["start_ns"],
                                                  "end_ns": first_launch(a)["start_ns"] + 100_000,
                                                  "items_limit": 5})}
    answers = await run_calls(params(SMALL), calls)
    launch = first_launch(answers)
    assert {"start_ns", "duration_ns", "corr_id", "api_start_ns"} <= set(launch)
    assert not {"start", "duration", "corr", "api_start"} & set(launch)
    corr = answers.ok("corr")
    assert corr["corr_id"] == launch["corr_id"] and "corr" not in corr
    assert {"start_ns", "duration_ns"} <= set(corr["ops"][0]) and "short" not in corr["ops"][0]
    item = answers.ok("window")["items"]["rows"][0]
    assert {"start_ns", "duration_ns", "corr_id", "lead_ns"} <= set(item)
    for row in answers.ok("kernels")["rows"]:  # the long name once per row: no field repeats it
        assert "short" not in row
        assert [k for k, v in row.items() if isinstance(v, str) and row["name"] in v] == ["name"], row


# -- attribution and paths -----------------------------------------------------------------------
@pytest.mark.anyio
async def test_ranks_takes_attribution():
    from helpers.mcp_client import run_calls

    calls = {"process": ("ranks", {"path": "sample_traces/small_ctx128_ddp2.sqlite.xz"}),
             "nsys": ("ranks", {"path": "sample_traces/small_ctx128_ddp2.sqlite.xz", "attribution": "nsys"})}
    answers = await run_calls(params("sample_traces/small_ctx128_ddp2.sqlite.xz"), calls)
    process, nsys = answers.ok("process"), answers.ok("nsys")
    assert process.pop("attribution") == "process" and nsys.pop("attribution") == "nsys"
    assert process == nsys and len(process["ranks"]) == 2  # a rank's GPU work is its process's either way


@pytest.mark.anyio
async def test_annotated_paths_find_the_inferred_ranges():
    """An unannotated capture's ranges are inferred (`inferred:step_N/inferred:backward`): the path
    an agent knows from annotated captures finds them, with the same figures."""
    from helpers.mcp_client import run_calls

    path = str(plain(ROOT / NONVTX))
    tagged = "inferred:step_N/inferred:backward"
    calls = {"short": ("range_kernels", {"path": path, "range": "step_N/backward", "limit": 5}),
             "tagged": ("range_kernels", {"path": path, "range": tagged, "limit": 5}),
             "idle": ("idle_window", {"path": path, "range": "step_N"}),
             "idle_tagged": ("idle_window", {"path": path, "range": "inferred:step_N"}),
             "under": ("range_tree", {"path": path, "under": "step_N", "depth": 1}),
             "tree": ("range_tree", {"path": path, "depth": 2}),
             "nowhere": ("range_kernels", {"path": path, "range": "step_N/nowhere"})}
    answers = await run_calls(params(path), calls)
    short, full = answers.ok("short"), answers.ok("tagged")
    assert short["scope"] == tagged and short == full
    tree = {r["path"]: r for r in answers.ok("tree")["rows"]}
    assert short["range"]["kernels"] == tree[tagged]["kernels"] > 0
    assert answers.ok("idle") == answers.ok("idle_tagged")
    assert answers.ok("under")["rows"][0]["path"] == "inferred:step_N"
    assert "no range at path 'step_N/nowhere'" in answers.error("nowhere")
