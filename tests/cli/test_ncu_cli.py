"""`nsight-tui ncu` and `report --ncu` on the real pair (sample_traces/ncu/), against NVIDIA's
reading of the report (the ncu_report module's dump made on the GPU machine), and their bad input."""
from __future__ import annotations

import json

import pytest

from helpers.ncu_pair import EXPORT_XZ, ROOT, STEM, oracle_kernels, report_xz, reports_read_once, unpack
from nsight_tui.cli import main
from helpers import cli_process


@pytest.fixture(scope="module", autouse=True)
def _each_report_read_once():
    yield from reports_read_once()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_cli")
    return unpack(report_xz(), folder / f"{STEM}.ncu-rep"), unpack(EXPORT_XZ, folder / f"{STEM}.sqlite")


def cli(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ncu_json_with_the_trace_joins_every_kernel(files, capsys):
    report, export = files
    code, out, err = cli(["ncu", str(report), "--trace", str(export), "-f", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    oracle = oracle_kernels()
    assert doc["profiled_kernels"] == doc["joined_kernels"] == len(oracle)
    assert [k["duration_ns"] for k in doc["kernels"]] == [o["metrics"]["gpu__time_duration.sum"][0] for o in oracle]
    assert [k["achieved_occupancy_pct"] for k in doc["kernels"]] == \
        [o["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"][0] for o in oracle]
    assert {k["range"].split("/")[1] for k in doc["kernels"]} == {"forward", "backward", "optimizer"}
    assert {"achieved_occupancy_pct", "theoretical_occupancy_pct", "sm_throughput_pct", "memory_throughput_pct",
            "dram_bytes", "dram_bytes_per_s", "stalls", "rules", "flops_per_s", "export_theoretical_occupancy_pct",
            "nsys_duration_ns"} <= set(doc["kernels"][0])
    assert [p["range"] for p in doc["ranges"][:4]] == ["step_1", "step_1/backward", "step_1/forward", "step_1/optimizer"]


def test_ncu_without_a_trace_uses_ncu_stacks(files, capsys):
    report, _ = files
    code, out, err = cli(["ncu", str(report), "-f", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    stackless = sum(1 for o in oracle_kernels() if not o["nvtx"].get("<default domain>"))
    assert sum(k["range"] == "(no NVTX stack in ncu)" for k in doc["kernels"]) == stackless > 0
    assert doc["joined_kernels"] == 0


@pytest.mark.parametrize("view, header", [("kernel", "occupancy theor./achieved % (limiter)"),
                                          ("name", "ncu µs (mean)"), ("range", "measured GFLOP/s (ncu time)")])
def test_text_views_say_whose_figures(files, capsys, view, header):
    report, export = files
    code, out, err = cli(["ncu", str(report), "--trace", str(export), "--by", view], capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert header.split()[0] in flat and "264 of 264 profiled kernels joined" in flat
    assert "not nsys's timing" in flat


def test_report_with_ncu(files, capsys):
    report, export = files
    code, out, err = cli(["report", str(export), "--ncu", str(report), "-f", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ncu"]["joined_kernels"] == 264 and "occupancy" in doc
    # the occupancy-limited kernels are in the findings' ranking (each its fix's replay), or apart with
    # nothing to gain; the same kernel names as the ncu section's own (per range) list
    ranked = [f for f in doc["findings"]["findings"] if f["id"] == "occupancy-limited"]
    apart = [f for f in doc["findings"]["present_no_saving"] if f["id"] == "occupancy-limited"]
    assert {f["evidence"]["kernel"] for f in ranked + apart} == {f["name"] for f in doc["ncu"]["findings"]}
    assert all(f["replayed"] and f["edits"][0].startswith("speed:") for f in ranked)
    code, out, err = cli(["report", str(export), "--ncu", str(report)], capsys)
    assert code == 0 and "## Below the kernel: Nsight Compute, joined to the NVTX tree" in out
    assert f"`occupancy-limited` ×{len(apart)} kernel names" in out if len(apart) > 1 else "`occupancy-limited`" in out
    code, out, err = cli(["report", str(export), "-f", "json"], capsys)
    assert "occupancy-limited" not in {f["id"] for f in json.loads(out)["findings"]["present_no_saving"]}


def test_bad_input_is_one_line(tmp_path, files, capsys):
    pytest.importorskip("ncu_report")
    report, export = files
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"\x00not a report")
    for argv, message in ((["ncu", str(bad)], "no profiled kernel"),
                          (["ncu", str(tmp_path / "absent.ncu-rep")], "no such file"),
                          (["ncu", str(report), "--by", "range"], "give --trace"),
                          (["ncu", str(report), "--by", "findings"], "give --trace"),
                          (["report", str(tmp_path), "--ncu", str(report)], "one export, not a folder"),
                          (["ncu", str(report), "--trace", str(export), "-o", str(export)], "")):
        code, out, err = cli(argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert message in err and "Traceback" not in err


def test_without_the_reader_installed_says_how_to_get_it(tmp_path):
    """A Python where `import ncu_report` fails: one line naming the extra."""
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "ncu_report.py").write_text("raise ImportError('not installed')\n")
    (tmp_path / "x.ncu-rep").write_bytes(b"x")
    done = cli_process.run(["ncu", str(tmp_path / "x.ncu-rep")], text=True, env={"PYTHONPATH": str(stub), "PATH": ""}, timeout=120,
                           cwd=ROOT)  # `-m` puts the checkout first on the path: this tree's package
    assert done.returncode == 2 and done.stdout == ""
    assert "pip install 'nsight-tui[ncu]'" in done.stderr and done.stderr.count("\n") == 1


def test_range_text_folds_paths_between_names_not_inside_them(files, capsys):
    """`--by range` as text: a range path too long for its column folds after a `/`, so every
    range name of the JSON's paths is whole on one line (it read `computing` / `_attention_scores`)."""
    report, export = files
    code, out, err = cli(["ncu", str(report), "--trace", str(export), "-f", "json"], capsys)
    assert code == 0, err
    paths = [p["range"] for p in json.loads(out)["ranges"]]
    code, text, err = cli(["ncu", str(report), "--trace", str(export), "--by", "range"], capsys)
    assert code == 0, err
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    width = len(lines[rule].split()[0])  # the range column's
    pieces = [line[:width].strip() for line in lines[rule + 1:]]
    names_on_a_line = {name for piece in pieces for name in piece.rstrip("/").split("/")}
    folded = [p for p in paths if len(p) > width]
    assert folded  # some path is longer than its column: the case under test
    for path in folded:
        for name in path.split("/"):
            assert name in names_on_a_line, name


def test_a_long_word_is_still_cut_at_the_width():
    from nsight_tui.render.text_table import _fold

    assert _fold("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]
    assert _fold("step_1/forward/scaled_dot_product_attention", 20) == ["step_1/forward/", "scaled_dot_product_a",
                                                                       "ttention"]
    assert "".join(_fold("x/" * 1000, 7)) == "x/" * 1000
