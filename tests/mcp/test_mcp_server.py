"""`nsight-tui mcp`, driven by the MCP SDK's own client over stdio (a real server process), its
answers compared with the command line's JSON (`report`, `stats`, `diff`, `ranks -f json`, each
run as its own subprocess: an independent path to the same figures).

One server answers the comparisons (module fixture); the refusals and paging run their own.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import ROOT
from helpers import cli_process
from helpers.xz_samples import plain

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")

from helpers.mcp_client import Answers, every_page, params, run_calls  # noqa: E402,F401

SMALL = "sample_traces/small_ctx128.sqlite"
FUSED = "sample_traces/small_ctx128_fused.sqlite.xz"
DDP = "sample_traces/small_ctx128_ddp2.sqlite.xz"  # the server reads a compressed export as it is
RANK_FOLDER = "sample_traces/ranks_small_ctx128_ddp2"
TOOLS = {"list_files", "summary", "range_tree", "range_kernels", "kernel_launches", "correlation", "idle_window",
         "findings", "roofline", "report", "ncu", "nsys_report", "diff", "ranks", "whatif"}
# every section of small_ctx128's `report -f json`
SECTIONS = ("file", "attribution", "main_threads", "config", "ranges", "warmup", "ratios", "ratio_basis", "timing",
            "gpu_idle", "memory", "oom", "gpu_metrics", "roofline", "occupancy", "findings", "backward_parts", "notes")
REPORTS = ("nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
           "cuda_gpu_mem_time_sum")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def cli_json(*args: str) -> dict:
    """`nsight-tui ARGS -f json` as a subprocess (cwd: the repository, as the server's)."""
    proc = cli_process.run([*args, "-f", "json"], cwd=ROOT,
                           text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- one server, every tool -----------------------------------------------------------------------
CALLS: dict[str, tuple[str, dict]] = {
    "files": ("list_files", {}),
    "summary": ("summary", {"path": SMALL}),
    every_page("tree"): ("range_tree", {"path": SMALL, "depth": 2}),
    "tree_under": ("range_tree", {"path": SMALL, "under": "step_N/forward", "depth": 1}),
    every_page("tree_nsys"): ("range_tree", {"path": SMALL, "depth": 2, "attribution": "nsys"}),
    "bwd_kernels": ("range_kernels", {"path": SMALL, "range": "step_N/backward", "limit": 5}),
    "fwd_kernels": ("range_kernels", {"path": SMALL, "range": "step_N/forward", "limit": 5}),
    every_page("all_kernels"): ("range_kernels", {"path": SMALL}),
    "idle_step": ("idle_window", {"path": SMALL, "range": "step_N"}),
    "idle_fwd": ("idle_window", {"path": SMALL, "range": "step_N/forward"}),
    "findings": ("findings", {"path": SMALL}),
    "roofline": ("roofline", {"path": SMALL}),
    "roofline_peaks": ("roofline", {"path": SMALL, "peak_tflops": 100.0, "peak_gbps": 2000.0}),
    "report": ("report", {"path": SMALL}),
    "report_all": ("report", {"path": SMALL, "sections": list(SECTIONS)}),
    "report_ratios": ("report", {"path": SMALL, "sections": ["ratios", "ratio_basis"]}),
    every_page("diff"): ("diff", {"a": SMALL, "b": FUSED, "range_depth": 16}),
    # the whole range tree fits beside one kernel row (beside a page of them it is cut, and says so)
    "diff_tree": ("diff", {"a": SMALL, "b": FUSED, "range_depth": 16, "kernels_limit": 1}),
    "ranks_file": ("ranks", {"path": DDP}),
    "whatif": ("whatif", {"path": SMALL, "edits": ["speed:gemm=2", f"kernels-from:{FUSED}"]}),
    "whatif_bad": ("whatif", {"path": SMALL, "edits": ["speed:no_such_kernel=2"]}),
    "whatif_ranks": ("whatif", {"path": RANK_FOLDER, "edits": ["speed:gemm=2"]}),
    "ranks_folder": ("ranks", {"path": RANK_FOLDER}),
    **{every_page(f"nsys_{r}"): ("nsys_report", {"path": SMALL, "report": r}) for r in REPORTS},
    **{every_page(f"nsys_{r}_nsys"): ("nsys_report", {"path": SMALL, "report": r, "attribution": "nsys"})
       for r in ("nvtx_gpu_proj_sum", "nvtx_kern_sum")},
}


@pytest.fixture(scope="module")
def served():
    import anyio

    tools: list = []

    # the calls that depend on earlier answers, in the same session: a kernel's launches, one
    # launch's correlation ID, a window of the timeline around it
    def top(a):
        return a.ok("bwd_kernels")["rows"][0]["name"]

    def first(a):
        return a.ok("launches")["rows"][0]

    follow = {
        "launches": lambda a: ("kernel_launches", {"path": SMALL, "kernel": top(a), "range": "step_N/backward",
                                                   "limit": 7}),
        every_page("launches_all"): lambda a: ("kernel_launches", {"path": SMALL, "kernel": top(a),
                                                                   "range": "step_N/backward"}),
        "corr": lambda a: ("correlation", {"path": SMALL, "corr_id": first(a)["corr_id"]}),
        "window": lambda a: ("idle_window", {"path": SMALL, "start_ns": first(a)["start_ns"] - 200_000,
                                             "end_ns": first(a)["start_ns"] + 200_000, "items_limit": 20})}
    answers = anyio.run(run_calls, params(SMALL, FUSED, DDP, RANK_FOLDER), {**CALLS, **follow}, tools)
    answers.tools = tools  # type: ignore[attr-defined]
    return answers


@pytest.fixture(scope="module")
def report_json():
    return cli_json("report", SMALL)


@pytest.fixture(scope="module")
def stats_json() -> dict[str, dict]:
    """`stats SMALL -r EVERY,REPORT -f json`, one process for the six: each report by its name."""
    return {r["report"]: r for r in cli_json("stats", SMALL, "-r", ",".join(REPORTS))["reports"]}


@pytest.fixture(scope="module")
def stats_nsys_json() -> dict[str, dict]:
    """The two reports the attributions differ in, `--attribution nsys`, one process."""
    reports = cli_json("stats", SMALL, "-r", "nvtx_gpu_proj_sum,nvtx_kern_sum", "--attribution", "nsys")["reports"]
    return {r["report"]: r for r in reports}


def test_lists_every_tool_read_only(served):
    names = {t.name for t in served.tools}
    assert names == TOOLS
    for t in served.tools:
        assert t.annotations is not None and t.annotations.read_only_hint, t.name
        assert t.description and t.input_schema["type"] == "object"
    files = served.ok("files")
    assert [f["name"] for f in files["files"]] == [SMALL, FUSED, DDP, f"{RANK_FOLDER}/small_ctx128_ddp2_rank0.sqlite.xz",
                                                   f"{RANK_FOLDER}/small_ctx128_ddp2_rank1.sqlite.xz"]
    assert files["folders"] == [RANK_FOLDER]


def test_summary_matches_stats_and_report(served, report_json, stats_json):
    s = served.ok("summary")
    kern = stats_json["cuda_gpu_kern_sum"]
    col = kern["columns"].index("Instances")
    assert s["counts"]["kernels"] == sum(r[col] for r in kern["rows"]) == 3899
    api = stats_json["cuda_api_sum"]
    assert s["counts"]["api_calls"] == sum(r[api["columns"].index("Num Calls")] for r in api["rows"])
    assert s["gpus"] == ["NVIDIA H200"] and s["attribution"] == "process"
    assert s["main_threads"] == report_json["main_threads"]
    assert s["config"] == report_json["config"]
    assert "python3 (492)" in s["main_thread"]


def test_range_tree_matches_report(served, report_json):
    rows = {r["path"]: r for r in served.ok("tree")["rows"]}
    assert served.ok("tree")["next_offset"] is None
    for path, key in (("step_N", "step"), ("step_N/forward", "forward"), ("step_N/backward", "backward"),
                      ("step_N/optimizer", "optimizer")):
        r, want = rows[path], report_json["ranges"][key]
        assert (r["instances"], r["cpu_ns"], r["busy_ns"], r["kernel_ns"], r["proj_ns"], r["kernels"]) == \
            (want["instances"], want["range_ns"], want["busy_ns"], want["kernel_ns"], want["proj_ns"], want["kernels"])
    assert rows["step_N/backward"]["share_of_parent"] == rows["step_N/backward"]["busy_ns"] / rows["step_N"]["busy_ns"]
    under = served.ok("tree_under")["rows"]
    assert under[0]["path"] == "step_N/forward" and all(r["path"].startswith("step_N/forward/") for r in under[1:])
    assert max(r["depth"] for r in under) == under[0]["depth"] + 1


def test_range_tree_nsys_attribution_matches_stats(served, stats_nsys_json):
    """Under nsys's rule backward holds only what the main thread launched itself: the same
    figure as nsys's own nvtx_gpu_proj_sum (autograd's kernels are elsewhere)."""
    proc = {r["path"]: r for r in served.ok("tree")["rows"]}
    nsys = {r["path"]: r for r in served.ok("tree_nsys")["rows"]}
    assert nsys["step_N/backward"]["kernels"] < proc["step_N/backward"]["kernels"]
    proj = served.ok("nsys_nvtx_gpu_proj_sum_nsys")
    cli = stats_nsys_json["nvtx_gpu_proj_sum"]
    assert proj["rows"] == cli["rows"] and proj["attribution"] == "nsys"


def test_range_kernels_match_report_top_kernels(served, report_json, stats_json):
    for key, name in (("bwd_kernels", "backward"), ("fwd_kernels", "forward")):
        doc = served.ok(key)
        got = [(k["name"], k["label"], k["total_ns"], k["instances"], k["family"]) for k in doc["rows"]]
        want = [(k["name"], k["short"], k["total_ns"], k["instances"], k["family"])
                for k in report_json["ranges"][name]["top_kernels"]]
        assert got == want
        assert doc["range"]["kernel_ns"] == report_json["ranges"][name]["kernel_ns"]
        assert any(r["label"] == "GPU busy / CPU time" for r in doc["ratios"])
    whole = served.ok("all_kernels")
    kern = stats_json["cuda_gpu_kern_sum"]
    names = kern["columns"].index("Name")
    total = kern["columns"].index("Total Time (ns)")
    stats = {r[names]: r[total] for r in kern["rows"]}
    ours = {r["name"]: r["total_ns"] for r in whole["rows"] if r["kind"] == "kernel"}
    assert ours == stats


def test_kernel_launches_add_up_and_page(served):
    top = served.ok("bwd_kernels")["rows"][0]
    page1, every = served.ok("launches"), served.ok("launches_all")
    assert every["total"] == top["instances"] and every["returned"] == top["instances"]
    assert sum(r["duration_ns"] for r in every["rows"]) == top["total_ns"] == every["total_ns"]
    assert page1["returned"] == 7 and page1["next_offset"] == 7 and page1["rows"] == every["rows"][:7]
    r = page1["rows"][0]
    assert r["api_name"].startswith("cudaLaunchKernel") and r["overhead_ns"] > 0 and r["queue_ns"] >= 0
    assert r["grid"] and r["block"]


def test_correlation_of_a_launch(served):
    launch = served.ok("launches")["rows"][0]
    c = served.ok("corr")
    assert c["corr_id"] == launch["corr_id"] and c["api_start_ns"] == launch["api_start_ns"]
    assert c["launch_overhead_ns"] == launch["overhead_ns"] and c["queue_delay_ns"] == launch["queue_ns"]
    assert [o["name"] for o in c["ops"]] == [served.ok("bwd_kernels")["rows"][0]["name"]]
    assert "backward" in c["attributed_to"]


def test_idle_window_matches_report(served, report_json):
    for key, phase in (("idle_step", "step"), ("idle_fwd", "forward")):
        doc = served.ok(key)
        want = report_json["gpu_idle"]["phases"][phase]
        assert {k: doc[k] for k in want} == want
    w = served.ok("window")
    dev = w["devices"][0]
    assert dev["busy_ns"] + dev["launch_bound_ns"] + dev["sync_bound_ns"] + dev["host_bound_ns"] == 400_000
    assert w["items"]["returned"] == 20 and w["items"]["total"] >= 20
    assert any(i["corr_id"] == served.ok("launches")["rows"][0]["corr_id"] for i in w["items"]["rows"]) \
        or w["items"]["next_offset"] is not None


def test_findings_roofline_report_are_report_json(served, report_json):
    assert tuple(report_json) == SECTIONS
    assert served.ok("report_all") == report_json
    sized = served.ok("report")  # the sections that fit, the others named with their size
    left = sized.pop("left_out")["sections"]
    assert sized == {k: v for k, v in report_json.items() if k in sized}
    assert set(sized) | set(left) == set(report_json) and not set(sized) & set(left)
    assert "findings" in sized and "occupancy" in left  # what to fix first, before the biggest table
    for k, chars in left.items():  # each said with its size: the agent asks for it knowing what comes
        assert chars >= len(json.dumps(report_json[k], separators=(",", ":"), ensure_ascii=False))
    assert served.ok("findings") == report_json["findings"]
    assert served.ok("roofline") == report_json["roofline"]
    assert served.ok("report_ratios") == {k: report_json[k] for k in ("file", "attribution", "ratios", "ratio_basis")}
    own = cli_json("report", SMALL, "--peak-tflops", "100", "--peak-gbps", "2000")["roofline"]
    assert served.ok("roofline_peaks") == own


def test_nsys_reports_match_stats(served, stats_json, stats_nsys_json):
    for name in REPORTS:
        doc = served.ok(f"nsys_{name}")
        cli = stats_json[name]
        assert doc["columns"] == cli["columns"] and doc["rows"] == cli["rows"], name
        assert doc["total"] == len(cli["rows"]) and doc["title"] == cli["title"]
    kern = served.ok("nsys_nvtx_kern_sum_nsys")
    assert kern["rows"] == stats_nsys_json["nvtx_kern_sum"]["rows"]


def test_diff_matches_cli(served):
    doc = served.ok("diff")
    cli = cli_json("diff", SMALL, FUSED)
    assert doc["step"] == cli["step"] and doc["config"] == cli["config"]
    tree = served.ok("diff_tree")
    assert "left_out" not in tree and tree["threads"] == cli["threads"]
    if doc["threads"] != cli["threads"]:
        assert all(k.startswith("threads") for k in doc["left_out"]["lists"]) and "range_depth" in doc["left_out"]["how"]
    kernels = doc["kernels"].pop("kernels")
    want = cli["kernels"].pop("kernels")
    assert doc["kernels"] == cli["kernels"]
    assert kernels["rows"] == want and kernels["total"] == len(want)


def test_whatif_matches_cli(served):
    assert served.ok("whatif") == cli_json("whatif", SMALL, "speed:gemm=2", f"kernels-from:{FUSED}")
    assert "no GPU op matches" in served.error("whatif_bad")
    # a served folder of per-rank exports: replayed as one trace, as `whatif FOLDER` does
    ranks = served.ok("whatif_ranks")
    assert ranks == cli_json("whatif", RANK_FOLDER, "speed:gemm=2")
    assert ranks["rank_files"]["files"] == ["small_ctx128_ddp2_rank0.sqlite.xz", "small_ctx128_ddp2_rank1.sqlite.xz"]


def test_ranks_match_cli(served):
    for key, path in (("ranks_file", DDP), ("ranks_folder", RANK_FOLDER)):
        doc = served.ok(key)
        assert doc.pop("attribution") == "process" and "either attribution" in doc.pop("attribution_help")
        assert doc == cli_json("ranks", path)


# -- refusals, paging, errors: servers of their own ------------------------------------------------
@pytest.mark.anyio
async def test_refuses_every_other_path(tmp_path):
    served_dir = tmp_path / "served"
    served_dir.mkdir()
    (served_dir / "a.sqlite").write_bytes(plain(ROOT / "sample_traces/small_ctx128_fwd.sqlite.xz").read_bytes())
    outside = tmp_path / "outside.sqlite"
    outside.write_bytes(plain(ROOT / "sample_traces/small_ctx128_fwd.sqlite.xz").read_bytes())
    (served_dir / "link.sqlite").symlink_to(outside)  # inside the served folder, pointing out of it
    (tmp_path / "to_served.sqlite").symlink_to(served_dir / "a.sqlite")  # outside, pointing in
    asked = {
        "other_sample": str(ROOT / FUSED),
        "dotdot": str(served_dir / ".." / "outside.sqlite"),
        "dotdot_in_name": "served/a.sqlite/../../outside.sqlite",
        "symlink_out": str(served_dir / "link.sqlite"),
        "symlink_in": str(tmp_path / "to_served.sqlite"),
        "etc": "/etc/passwd",
        "folder_itself": str(tmp_path),
        "nul": "served/a.sqlite\x00",
    }
    calls = {k: ("summary", {"path": v}) for k, v in asked.items()}
    calls["diff"] = ("diff", {"a": "served/a.sqlite", "b": str(outside)})
    calls["ranks"] = ("ranks", {"path": str(tmp_path)})
    calls["ok_relative"] = ("summary", {"path": "served/a.sqlite"})
    calls["ok_absolute_dotdot"] = ("summary", {"path": str(served_dir / ".." / "served" / "a.sqlite")})
    calls["files"] = ("list_files", {})
    answers = await run_calls(params("served", cwd=tmp_path), calls)
    for key in (*asked, "diff", "ranks"):
        text = answers.error(key)
        assert "not served" in text or "not a path" in text or "not a served folder" in text, (key, text)
        assert "Traceback" not in text
    assert answers.ok("ok_relative")["counts"]["kernels"] == answers.ok("ok_absolute_dotdot")["counts"]["kernels"]
    assert [f["name"] for f in answers.ok("files")["files"]] == ["served/a.sqlite"]  # the link is not a member


@pytest.mark.anyio
async def test_a_served_folders_whatif_reads_only_served_files(tmp_path):
    """`whatif` on a served folder read the folder anew, links out of it included (a rank 1 that
    list_files does not list was merged in), and its `kernels-from:` opened any path on the machine
    (/etc/passwd: "not an SQLite file"). Now the folder is its served exports alone (here rank 0's:
    replayed alone, its steps those SQL finds in it), and a twin is a served file or folder."""
    from helpers.step_sql import steps

    ranks = [ROOT / RANK_FOLDER / f"small_ctx128_ddp2_rank{r}.sqlite.xz" for r in (0, 1)]
    outside = tmp_path / "outside"
    for folder in ("served", "pair", "outside"):
        (tmp_path / folder).mkdir()
    for r, src in enumerate(ranks):
        (tmp_path / "pair" / f"run_rank{r}.sqlite").write_bytes(plain(src).read_bytes())
    (tmp_path / "served" / "run_rank0.sqlite").write_bytes(plain(ranks[0]).read_bytes())
    (outside / "run_rank1.sqlite").write_bytes(plain(ranks[1]).read_bytes())
    (tmp_path / "served" / "run_rank1.sqlite").symlink_to(outside / "run_rank1.sqlite")
    calls = {
        "linked": ("whatif", {"path": "served"}),
        "twin_outside": ("whatif", {"path": "pair", "edits": [f"kernels-from:{outside / 'run_rank1.sqlite'}"]}),
        "twin_etc": ("whatif", {"path": "pair", "edits": ["kernels-from:/etc/passwd"]}),
        "twin_folder": ("whatif", {"path": "pair", "edits": ["kernels-from:pair"]}),
    }
    answers = await run_calls(params("served", "pair", cwd=tmp_path), calls)
    alone = answers.ok("linked")
    assert alone["rank_files"] is None and alone["steps"] == len(steps(plain(ranks[0])))
    for key in ("twin_outside", "twin_etc"):
        assert "not served" in answers.error(key), key
    pair = answers.ok("twin_folder")
    assert pair["rank_files"]["files"] == ["run_rank0.sqlite", "run_rank1.sqlite"]
    assert pair["steps"] == sum(len(steps(plain(r))) for r in ranks)


@pytest.mark.anyio
async def test_paging_bounds_and_bad_requests():
    calls = {
        "zero": ("range_tree", {"limit": 0}),
        "negative": ("range_kernels", {"offset": -1}),
        "huge": ("range_kernels", {"limit": 100_000}),
        "past_end": ("range_kernels", {"offset": 10_000}),
        "last_page": ("range_tree", {"depth": 16, "offset": 5, "limit": 500}),
        "depth": ("range_tree", {"depth": 0}),
        "no_range": ("range_kernels", {"range": "step_N/nowhere"}),
        "no_kernel": ("kernel_launches", {"kernel": "no_such_kernel"}),
        "no_corr": ("correlation", {"corr_id": -5}),
        "no_report": ("nsys_report", {"report": "cuda_gpu_trace"}),
        "mode": ("summary", {"attribution": "thread"}),
        "window": ("idle_window", {"start_ns": 10, "end_ns": 5}),
        "section": ("report", {"sections": ["nope"]}),
        "peaks": ("roofline", {"peak_tflops": -1.0}),
        "types": ("range_tree", {"depth": "deep"}),
        "after": ("summary", {}),
    }
    answers = await run_calls(params("sample_traces/small_ctx128_fwd.sqlite.xz"), calls)
    for key in ("zero", "negative", "depth", "no_range", "no_kernel", "no_corr", "no_report", "mode", "window",
                "section", "peaks", "types"):
        assert "Traceback" not in answers.error(key), key
    huge = answers.ok("huge")
    assert huge["limit"] == 500 and huge["returned"] == min(500, huge["total"])
    past = answers.ok("past_end")
    assert past["rows"] == [] and past["next_offset"] is None
    last = answers.ok("last_page")
    assert last["returned"] == last["total"] - 5 and last["next_offset"] is None
    assert answers.ok("after")["counts"]["kernels"] > 0  # still serving after the errors


def test_stdout_carries_only_the_protocol(tmp_path):
    """Raw JSON-RPC over the pipes: every line on stdout is a protocol message, even while a
    trace loads and a tool fails; the logs, if any, are on stderr."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "summary", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "summary", "arguments": {"path": "/x"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "report", "arguments": {}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "nsight_tui", "mcp", "sample_traces/small_ctx128_fwd.sqlite.xz"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ})
    watchdog = threading.Timer(120, proc.kill)  # the deadline: a hung server fails the test, never hangs it
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
        proc.stdin.flush()
        lines, answered = [], set()
        while answered != {1, 2, 3, 4}:  # read until every request is answered (or the watchdog kills it)
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))  # any stray text on stdout fails here
            answered.add(lines[-1].get("id"))
        proc.stdin.close()
        proc.wait()
        stderr = proc.stderr.read()
    finally:
        watchdog.cancel()
        proc.kill()
    assert all(m.get("jsonrpc") == "2.0" for m in lines)
    by_id = {m.get("id"): m for m in lines}
    assert by_id[2]["result"]["isError"] is False
    assert by_id[3]["result"]["isError"] is True
    assert by_id[4]["result"]["structuredContent"]["findings"]
    assert "Traceback" not in stderr


def test_missing_sdk_is_one_line(tmp_path):
    fake = tmp_path / "mcp"  # an `mcp` that is not the SDK version 2 (as with mcp 1.x: no mcpserver)
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = cli_process.run(["mcp", SMALL], cwd=ROOT,
                           text=True, env=env, timeout=60)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["nsight-tui: the MCP server needs the mcp package, version 2: "
                                                "pip install 'nsight-tui[mcp]'"]


def test_bad_command_line_is_one_line():
    proc = cli_process.run(["mcp", "sample_traces/nope.sqlite"], cwd=ROOT, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip() == "nsight-tui: sample_traces/nope.sqlite: no such file or folder"


@pytest.mark.anyio
async def test_report_on_a_served_folder_is_the_sweep(tmp_path):
    """`report` on a served folder of captures: `report DIR -f json`'s tables and runs; a link in
    the folder leading out is not read."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name in ("small_ctx128.sqlite", "small_ctx128_fused.sqlite.xz"):
        (sweep / name.removesuffix(".xz")).write_bytes(plain(ROOT / "sample_traces" / name).read_bytes())
    calls = {"sweep": ("report", {"path": "sweep"}),
             "tables": ("report", {"path": "sweep", "sections": ["tables"]})}
    answers = await run_calls(params("sweep", cwd=tmp_path), calls)
    proc = cli_process.run(["report", "sweep", "-f", "json"], cwd=tmp_path, text=True, timeout=300, env={**os.environ})
    cli = json.loads(proc.stdout)
    doc = answers.ok("sweep")
    assert doc["tables"] == cli["tables"] and doc["folder"] == cli["folder"] == "sweep"
    assert doc["runs"] == [{k: v for k, v in r.items() if k != "answers"} for r in cli["runs"]]
    assert answers.ok("tables") == {"folder": "sweep", "attribution": "process", "tables": cli["tables"]}
    outside = tmp_path / "elsewhere.oom.json"
    outside.write_text("{}")
    (sweep / "medium_ctx128.oom.json").symlink_to(outside)
    refused = await run_calls(params("sweep", cwd=tmp_path), {"sweep": ("report", {"path": "sweep"})})
    assert "leads out of the served folder" in refused.error("sweep")
