"""`nsight-tui mcp` with an Nsight Compute report served beside its export (the real pair of
sample_traces/ncu/), driven by the MCP SDK's own client over stdio: `findings`/`report` with
`ncu` equal `report --ncu R -f json`, the `ncu` tool equals `nsight-tui ncu R [--trace T] -f json`
(each run as its own subprocess), and its figures equal what NVIDIA's `ncu_report` module reads
from the report in this test. Bad `ncu` arguments are one-line tool errors."""
from __future__ import annotations

import json
import os

import pytest

from helpers.ncu_pair import BF16_EXPORT_XZ, BF16_STEM, EXPORT_XZ, STEM, report_xz, unpack

pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")

from helpers.mcp_client import every_page, params, run_calls  # noqa: E402
from helpers import cli_process

EXPORT, REPORT = f"{STEM}.sqlite", f"{STEM}.ncu-rep"
BF16_EXPORT, BF16_REPORT = f"{BF16_STEM}.sqlite", f"{BF16_STEM}.ncu-rep"  # tensor-core GEMMs
NOT_A_REPORT = "notes.ncu-rep"  # a served file named like a report that is none


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The pair unpacked side by side; server and command line both run there, so both name the
    files alike (the JSON's `file` and `report` fields)."""
    where = tmp_path_factory.mktemp("mcp_ncu")
    unpack(report_xz(), where / REPORT)
    unpack(EXPORT_XZ, where / EXPORT)
    unpack(report_xz(BF16_STEM), where / BF16_REPORT)
    unpack(BF16_EXPORT_XZ, where / BF16_EXPORT)
    (where / NOT_A_REPORT).write_text("not an Nsight Compute report\n")
    return where


def cli_json(folder, *args: str) -> dict:
    proc = cli_process.run([*args, "-f", "json"], cwd=folder,
                           text=True, timeout=600, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


CALLS = {
    "files": ("list_files", {}),
    "findings": ("findings", {"path": EXPORT, "ncu": REPORT}),
    "findings_plain": ("findings", {"path": EXPORT}),
    "report_ncu": ("report", {"path": EXPORT, "ncu": REPORT, "sections": ["ncu"]}),
    every_page("kernels"): ("ncu", {"ncu": REPORT, "path": EXPORT}),
    "kernels_page": ("ncu", {"ncu": REPORT, "path": EXPORT, "offset": 10, "limit": 7}),
    every_page("names"): ("ncu", {"ncu": REPORT, "path": EXPORT, "by": "name"}),
    every_page("ranges"): ("ncu", {"ncu": REPORT, "path": EXPORT, "by": "range"}),
    every_page("ncu_findings"): ("ncu", {"ncu": REPORT, "path": EXPORT, "by": "findings"}),
    every_page("alone"): ("ncu", {"ncu": REPORT}),
    every_page("tensor"): ("ncu", {"ncu": BF16_REPORT, "path": BF16_EXPORT, "by": "tensor"}),
    every_page("tensor_fp32"): ("ncu", {"ncu": REPORT, "path": EXPORT, "by": "tensor"}),
    "whatif_occupancy": ("whatif", {"path": EXPORT, "edits": ["fix:occupancy-limited"], "ncu": REPORT}),
    # bad input: one-line tool errors
    "whatif_no_report": ("whatif", {"path": EXPORT, "edits": ["fix:occupancy-limited"]}),
    "missing": ("findings", {"path": EXPORT, "ncu": "elsewhere.ncu-rep"}),
    "export_as_ncu": ("ncu", {"ncu": EXPORT}),
    "ncu_as_path": ("findings", {"path": REPORT}),
    "not_a_report": ("ncu", {"ncu": NOT_A_REPORT}),
    "bad_by": ("ncu", {"ncu": REPORT, "by": "kernels"}),
    "range_alone": ("ncu", {"ncu": REPORT, "by": "range"}),
}


@pytest.fixture(scope="module")
def served(folder):
    import anyio

    return anyio.run(run_calls, params(EXPORT, REPORT, BF16_EXPORT, BF16_REPORT, NOT_A_REPORT, cwd=folder), CALLS)


@pytest.fixture(scope="module")
def report_json(folder):
    return cli_json(folder, "report", EXPORT, "--ncu", REPORT)


@pytest.fixture(scope="module")
def ncu_json(folder):
    return cli_json(folder, "ncu", REPORT, "--trace", EXPORT)


def test_lists_the_report_apart_from_the_exports(served):
    files = served.ok("files")
    assert [f["name"] for f in files["files"]] == [EXPORT, BF16_EXPORT]
    assert [r["name"] for r in files["ncu_reports"]] == [REPORT, BF16_REPORT, NOT_A_REPORT]


def test_findings_with_ncu_are_report_with_ncu(served, report_json):
    with_ncu, plain = served.ok("findings"), served.ok("findings_plain")
    # with the report the findings run past the answer's size (each occupancy-limited kernel a replayed
    # finding): the tool keeps the first, says how many it left out, and where to get them whole
    whole = report_json["findings"]
    cut = with_ncu.get("left_out", {}).get("lists", {}).get("findings")
    kept = len(with_ncu["findings"])
    assert cut is None or cut == f"{len(whole['findings']) - kept} of {len(whole['findings'])} items left out"
    assert with_ncu["findings"] == whole["findings"][:kept]
    assert {k: v for k, v in with_ncu.items() if k not in ("findings", "left_out")} == \
        {k: v for k, v in whole.items() if k != "findings"}
    ids = lambda doc: {f["id"] for f in doc["findings"] + doc.get("present_no_saving", [])}  # noqa: E731
    # the hardware's finding exists only with the report (the test could not pass without it)
    assert "occupancy-limited" in ids(with_ncu) and "occupancy-limited" not in ids(plain)
    assert served.ok("report_ncu") == {k: report_json[k] for k in ("file", "attribution", "ncu")}


def test_whatif_fix_occupancy_limited_with_the_report_is_the_command(served, folder):
    """fix:occupancy-limited reads the report (every kernel ncu found limited by occupancy, its edit);
    the tool with `ncu` answers as `whatif --ncu`, and without it says why in one line."""
    doc = served.ok("whatif_occupancy")
    cli = cli_json(folder, "whatif", EXPORT, "fix:occupancy-limited", "--ncu", REPORT)
    assert [e["edit"] for e in doc["edits"]] == [e["edit"] for e in cli["edits"]] and len(doc["edits"]) >= 5
    assert doc["predicted"] == cli["predicted"] and doc["saving_ns"] == cli["saving_ns"]
    assert "--ncu" in served.error("whatif_no_report")


def test_ncu_tool_is_the_ncu_command(served, ncu_json, folder):
    for key, table in (("kernels", "kernels"), ("names", "by_name"), ("ranges", "ranges"),
                       ("ncu_findings", "findings")):
        doc = served.ok(key)
        assert doc["table"]["rows"] == ncu_json[table], key
        assert doc["table"]["total"] == len(ncu_json[table])
        assert {k: v for k, v in doc.items() if k not in ("by", "table")} == \
            {k: v for k, v in ncu_json.items() if k not in ("kernels", "by_name", "ranges", "findings")}
    page = served.ok("kernels_page")
    n = page["table"]["returned"]  # at most the 7 asked, fewer where 7 would not fit in the answer
    assert 1 <= n <= 7 and page["table"]["rows"] == ncu_json["kernels"][10:10 + n]
    assert page["table"]["next_offset"] == 10 + n and (n == 7 or "offset=" in page["table"]["cut"])
    alone = served.ok("alone")
    assert alone["table"]["rows"] == cli_json(folder, "ncu", REPORT)["kernels"]
    assert alone["joined_kernels"] == 0


def test_ncu_tool_figures_are_nvidias_reading(served, folder):
    """Each kernel's figures against NVIDIA's reader, metric by metric, with the unit ncu gives."""
    import ncu_report

    ctx = ncu_report.load_report(str(folder / REPORT))
    rng = ctx.range_by_idx(0)
    rows = served.ok("kernels")["table"]["rows"]
    assert len(rows) == rng.num_actions() == served.ok("kernels")["joined_kernels"]
    to_ns = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}
    for i, row in enumerate(rows):
        act = rng.action_by_idx(i)
        dur = act.metric_by_name("gpu__time_duration.sum")
        assert row["duration_ns"] == pytest.approx(dur.value() * to_ns[dur.unit()], rel=1e-12)
        assert row["sm_throughput_pct"] == act.metric_by_name("sm__throughput.avg.pct_of_peak_sustained_elapsed").value()
        assert row["achieved_occupancy_pct"] == \
            act.metric_by_name("sm__warps_active.avg.pct_of_peak_sustained_active").value()
        assert row["theoretical_occupancy_pct"] == act.metric_by_name("sm__maximum_warps_per_active_cycle_pct").value()
        hz = act.metric_by_name("smsp__cycles_elapsed.avg.per_second").value()
        per = [act.metric_by_name(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed").value()
               for op in ("fadd", "fmul", "ffma")]
        assert row["fp32_flops_per_s"] == pytest.approx((per[0] + per[1] + 2 * per[2]) * hz, rel=1e-12)


def test_ncu_tool_tensor_table_is_nvidias_reading(served, folder):
    """by=tensor: the kernels whose tensor cores worked, their FLOPs and FLOP/s as NVIDIA's reader
    gives the raw counter (over gpu__time_duration); none on the fp32 pair (CUDA-core GEMMs)."""
    import ncu_report

    rng = ncu_report.load_report(str(folder / BF16_REPORT)).range_by_idx(0)
    want = {}
    for i in range(rng.num_actions()):
        act = rng.action_by_idx(i)
        ops = act.metric_by_name("sm__ops_path_tensor_src_bf16_dst_fp32.sum").value()
        if ops:
            want[i] = (ops, ops / (act.metric_by_name("gpu__time_duration.sum").value() * 1e-9))
    doc = served.ok("tensor")
    rows = doc["table"]["rows"]
    assert {r["index"]: r["tensor_flops"] for r in rows} == {i: w[0] for i, w in want.items()} and len(rows) == 7
    for r in rows:
        assert r["tensor_flops_per_s"] == pytest.approx(want[r["index"]][1], rel=1e-12)
        assert r["tensor_math"] == "bf16" and r["tensor_pct_of_peak"] == \
            pytest.approx(100 * r["tensor_flops_per_s"] / r["tensor_peak_flops_per_s"], rel=1e-12)
    assert doc["tensor_basis"]["tensor_flops"].startswith("measured")
    assert doc["tensor_basis"]["tensor_peak_flops_per_s"].startswith("datasheet")
    assert served.ok("tensor_fp32")["table"]["total"] == 0


@pytest.mark.parametrize("key, words", [
    ("missing", "elsewhere.ncu-rep: not served"),
    ("export_as_ncu", "an nsys export, not an Nsight Compute report"),
    ("ncu_as_path", "an Nsight Compute report, not an nsys export: pass it as `ncu`"),
    ("not_a_report", f"{NOT_A_REPORT}: not an Nsight Compute report"),
    ("bad_by", "by: Input should be 'kernel', 'name', 'range', 'tensor' or 'findings' (got 'kernels')"),
    ("range_alone", "by=range needs the export"),
])
def test_bad_ncu_arguments_are_one_line_errors(served, key, words):
    text = served.error(key)
    assert words in text and "\n" not in text.strip() and "Traceback" not in text


def test_whatif_on_a_served_folder_refuses_ncu_in_one_line(tmp_path):
    """A served folder of per-rank exports with `ncu`: the report was ignored without a word, the answer
    the replay without it; now one line saying why (a report profiles one process). Without `ncu` the
    folder still replays (its `rank_files` the folder's two exports)."""
    import anyio
    import shutil

    from conftest import SAMPLES

    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for f in sorted((SAMPLES / "ranks_small_ctx128_ddp2").glob("*.sqlite.xz")):
        shutil.copyfile(f, ranks / f.name)
    unpack(report_xz(), tmp_path / REPORT)
    calls = {"with_ncu": ("whatif", {"path": "ranks", "edits": ["speed:gemm=2"], "ncu": REPORT}),
             "without": ("whatif", {"path": "ranks", "edits": ["speed:gemm=2"]})}
    answers = anyio.run(run_calls, params("ranks", REPORT, cwd=tmp_path), calls)
    text = answers.error("with_ncu")
    assert "ncu is not taken with a folder of per-rank exports (ranks)" in text and "one process" in text
    assert "\n" not in text.strip() and "Traceback" not in text
    assert answers.ok("without")["rank_files"]["files"] == sorted(p.name for p in ranks.iterdir())
