"""`report` on a capture without NVTX: the JSON carries the inferred iterations (start and
end each) and the layer count; the Markdown's sections are filled from the inferred ranges and say
they are inferred; a trace whose kernel sequence has no period says that nothing was inferred.
Truths: the capture's own records beside the export (Python step times, the model's config)."""
from __future__ import annotations

import json

from conftest import SAMPLES
from helpers.cli import run_main as run_cli
from helpers.shuffled import names_shuffled_copy

NONVTX = SAMPLES / "nonvtx"
STEM = "small_ctx512_b8_async_nonvtx"


def section(md: str, title: str) -> str:
    start = md.index(title)
    end = md.find("\n## ", start + 1)
    return md[start:end if end > 0 else len(md)]


def test_report_json_and_markdown_on_a_capture_without_nvtx(async_trace):
    path = async_trace(NONVTX / f"{STEM}.sqlite.xz")
    record = json.loads((NONVTX / f"{STEM}.steps.json").read_text())
    done = run_cli("report", path, "-f", "json")
    assert done.returncode == 0, done.stderr
    inferred = json.loads(done.stdout)["inferred"]
    assert inferred["layer_count"] == record["config"]["n_layers"]
    its = inferred["iterations"]
    assert len(its) == len(record["steps"])
    for got, want in list(zip(its, record["steps"]))[1:]:  # steady: within a few % of Python's time
        assert got["start_ns"] < got["end_ns"] and 0.99 <= (got["end_ns"] - got["start_ns"]) / 1e9 / want["seconds"] <= 1.05
    assert all(a["end_ns"] == b["start_ns"] for a, b in zip(its, its[1:]))  # back to back, in time order
    assert "basis" in inferred and "kernel sequence" in inferred["basis"]

    md = run_cli("report", path).stdout
    head = section(md, "## Iterations inferred from the kernel sequence")
    assert f"Layers: **{record['config']['n_layers']}** (inferred)" in head
    # the backward layer's stages, the forward's in reverse (the list test_inferred_ranges writes from the model)
    assert "One backward layer's stages in order (the forward's met in reverse): MLP down GEMM (grad) → " \
        "activation (grad) → MLP up GEMM (grad)" in head
    assert inferred["backward_stages"][-3:] == ["QKV GEMM (grad)", "layer norm (grad)", "residual add (grad)"]
    # the questions' sections hold rows, not bare headings
    for title, row in (("## (a)", "| forward |"), ("## (b)", "| cuBLAS gemm"), ("## (c)", "| Softmax |"),
                       ("## (d)", "| GEMM (matmul) |")):
        assert row in section(md, title), title
    assert "| backward |" in section(md, "## (a)") and "| optimizer |" in section(md, "## (a)")


def test_report_says_nothing_was_inferred_where_no_period_exists(async_trace, tmp_path):
    path = names_shuffled_copy(async_trace(NONVTX / f"{STEM}.sqlite.xz"), tmp_path / "no_period.sqlite")
    done = run_cli("report", path, "-f", "json")
    assert done.returncode == 0, done.stderr
    inferred = json.loads(done.stdout)["inferred"]
    assert inferred["iterations"] == [] and inferred["layer_count"] == 0 and "no period" in inferred["reason"]
    md = run_cli("report", path).stdout
    assert "none inferred" in section(md, "## Iterations inferred from the kernel sequence")


def test_the_captures_record_beside_the_export_gives_python_times_and_warmups(async_trace, tmp_path):
    # `capture --no-nvtx` keeps the config and Python step times in STEM.steps.json beside the export
    # (no marks in it): the report reads them as it reads an annotated capture's marks
    import shutil

    path = tmp_path / f"{STEM}.sqlite"
    shutil.copyfile(async_trace(NONVTX / f"{STEM}.sqlite.xz"), path)
    shutil.copyfile(NONVTX / f"{STEM}.steps.json", tmp_path / f"{STEM}.steps.json")
    record = json.loads((NONVTX / f"{STEM}.steps.json").read_text())
    answers = json.loads(run_cli("report", path, "-f", "json").stdout)
    assert [i["name"] for i in answers["inferred"]["iterations"]] == [s["name"] for s in record["steps"]]
    assert answers["config"]["n_layers"] == record["config"]["n_layers"]
    python = {row["step"]: row["python_ns"] for row in answers["timing"]["steps"]}
    want = {s["name"]: round(s["seconds"] * 1e9) for s in record["steps"] if s["name"].startswith("step_")}
    assert {k: round(v) for k, v in python.items()} == want
