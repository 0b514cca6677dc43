"""`report` has a section of its own for backward by forward part: in JSON the numbers of
parsers.backward_parts (checked independently in tests/core/test_backward_parts.py), in
Markdown the same numbers in ms; a trace without a mapping says how to get one."""
from __future__ import annotations

import json

from conftest import SAMPLES
from helpers.cli import run_main as run_cli


def test_report_json_and_markdown_section():
    path = SAMPLES / "small_ctx128_agnvtx.sqlite.xz"  # the front door reads the compressed export as it is
    done = run_cli("report", path, "-f", "json")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["backward_parts"]
    assert entry["method"] == "seq" and entry["iterations"] == 2
    forward = entry["parts"][0]
    assert forward["part"] == "forward"
    # the forward row holds everything mapped; what was not is listed with its reason
    assert forward["backward_kernel_ns"] + sum(u["kernel_ns"] for u in entry["unmapped"]) == entry["backward_kernel_ns"]
    md = run_cli("report", path).stdout
    section = md[md.index("## Backward by forward part"):md.index("## Ratios")]
    for part in entry["parts"]:
        line = next(ln for ln in section.splitlines() if ln.startswith(f"| {part['part']} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] == f"{part['forward_kernel_ns'] / 1e6:,.3f}"
        assert cells[2] == f"{part['backward_kernel_ns'] / 1e6:,.3f}"
        assert cells[3] == f"{part['backward_kernel_ns'] / part['forward_kernel_ns']:.2f}x"
    for u in entry["unmapped"]:
        assert f"not mapped: {u['reason']}" in section


def test_report_without_mapping_says_how_to_get_one():
    md = run_cli("report", SAMPLES / "small_ctx128.sqlite").stdout
    assert "No backward-to-forward mapping" in md and "--autograd-nvtx" in md
