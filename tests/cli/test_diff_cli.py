"""`nsight-tui diff A B`: the three formats carry B − A as each file's own SQL gives it; `-o`
writes atomically and never over a file (an input least of all); `--fail-slower` gates CI;
bad input is one line."""
from __future__ import annotations

import csv
import hashlib
import io
import json

from helpers import diff_sql as sql
import pytest
from helpers import step_sql
from helpers.cli import run_main
from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers import cli_process

MANUAL = SAMPLES / "small_ctx128.sqlite"
FUSED = plain(SAMPLES / "small_ctx128_fused.sqlite.xz")
STEPS = "step_[0-9]*"


def run_cli(*args):
    return cli_process.run(["diff", *map(str, args)],
                           text=True, timeout=300)


def step_mean(path) -> float:
    """The mean step period (tests/helpers/step_sql.py): what diff's step change is over."""
    its = step_sql.steps(path)
    return sum(it.period for it in its) / len(its)


def one_line_error(proc, *needles, code=2):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("nsight-tui: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def output_of(*args):
    """The command's output, run in this process (what it prints, not how a process ends)."""
    return run_main("diff", *args)


@pytest.fixture(scope="module")
def as_json():
    proc = output_of(MANUAL, FUSED, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_step_and_removed_ranges(as_json):
    step = as_json["step"]
    assert step["step_ns"]["a"] == step_mean(MANUAL) and step["step_ns"]["b"] == step_mean(FUSED)
    assert step["step_ns"]["delta"] == step_mean(FUSED) - step_mean(MANUAL)
    (thread,) = as_json["threads"]

    def find(nodes, path):
        for n in nodes:
            if n["path"] == path:
                return n
            hit = find(n["children"], path)
            if hit:
                return hit

    softmax = find(thread["ranges"], "step_N/forward/scaled_dot_product_attention/computing_softmax")
    assert softmax["status"] == "removed" and softmax["cpu_ns"]["b"] is None
    inst = sql.ranges(MANUAL, "computing_softmax")
    assert softmax["cpu_ns"]["a"] == sum(e - s for _, s, e in inst) / len(sql.ranges(MANUAL, STEPS, "*"))
    added = {k["name"] for k in as_json["kernels"]["kernels"] if k["status"] == "added"}
    assert any("fmha_cutlassF" in n for n in added) and any("fmha_cutlassB" in n for n in added)


def test_csv_is_one_tidy_table():
    proc = output_of(MANUAL, FUSED, "-f", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    step = next(r for r in rows if r["section"] == "step" and r["metric"] == "step_ns")
    assert float(step["delta"]) == step_mean(FUSED) - step_mean(MANUAL)
    removed = {r["name"] for r in rows if r["section"] == "range" and r["status"] == "removed"}
    assert "step_N/forward/scaled_dot_product_attention/computing_softmax" in removed
    assert {r["section"] for r in rows} >= {"config", "step", "waterfall", "range", "kernel", "family"}


def test_markdown_default_says_the_step_delta_and_what_changed():
    proc = output_of(MANUAL, FUSED)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    delta_ms = (step_mean(FUSED) - step_mean(MANUAL)) / 1e6
    assert f"Δ {delta_ms:+,.3f} ms" in out
    assert "| step_N/forward/scaled_dot_product_attention/computing_softmax | removed |" in out
    assert "fmha_cutlassF_f32_aligned_64x64_rf_sm80 | Fused attention | added |" in out
    assert "| attention | manual | fused | ≠ |" in out
    assert "Step Δ by phase and family" in out


def test_output_file_atomic_and_no_clobber(tmp_path):
    out = tmp_path / "diff.md"
    proc = run_cli(MANUAL, FUSED, "-o", out)
    assert proc.returncode == 0 and out.read_text().startswith("# nsight-tui diff")
    before = out.read_bytes()
    # kept, with an exit status of its own: a script tells "rerun with --force" from a usage error (2)
    one_line_error(run_cli(MANUAL, FUSED, "-o", out, "-f", "json"), "exists", code=73)
    assert out.read_bytes() == before
    assert run_cli(MANUAL, FUSED, "-o", out, "-f", "json", "--force").returncode == 0
    assert json.loads(out.read_text())["b"] == str(FUSED)
    assert [p.name for p in tmp_path.iterdir()] == ["diff.md"]  # no temp file left behind


def test_never_writes_over_an_input(tmp_path):
    copy = tmp_path / "a.sqlite"
    copy.write_bytes(MANUAL.read_bytes())
    digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    one_line_error(run_cli(copy, FUSED, "-o", copy, "--force"), "input")
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("a,b", [(MANUAL, FUSED), (FUSED, MANUAL)], ids=["manual-to-fused", "fused-to-manual"])
def test_fail_slower_gate(a, b):
    slower = 100 * (step_mean(b) - step_mean(a)) / step_mean(a)
    below, above = (slower - 0.05, slower + 0.05) if slower > 0 else (0.0, 0.0)
    proc = run_cli(a, b, "--fail-slower", f"{max(below, 0):.4f}", "-f", "json")
    if slower > 0:
        assert proc.returncode == 1, proc.stderr
        assert f"{slower:.2f}% slower" in proc.stderr
        assert json.loads(proc.stdout)["step"]["slower_pct"] == pytest.approx(slower, rel=1e-12)
        assert run_cli(a, b, "--fail-slower", f"{above:.4f}").returncode == 0
    else:  # B is faster: never fails, whatever the limit
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args,said", [(("--fail-slower", "nan"), "expects a percentage"),
                                       (("--fail-slower", "inf"), "expects a percentage"),
                                       (("--fail-slower", "-1"), "expects a percentage"),
                                       (("--top", "-1"), "expects a number of rows")])
def test_bad_number_is_one_line(args, said):
    """nan and inf passed every gate (no step is nan percent slower), a negative --top cut the last row."""
    one_line_error(run_cli(MANUAL, FUSED, *args), said)


def test_fail_slower_needs_steps(tmp_path):
    from conftest import shared_trace

    one_line_error(run_cli(MANUAL, shared_trace("mock"), "--fail-slower", "5"), "step_N")


@pytest.mark.parametrize("which", ["a", "b"])
def test_bad_input_either_side(tmp_path, which):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database\n")
    args = (bad, FUSED) if which == "a" else (MANUAL, bad)
    one_line_error(run_cli(*args), "not an SQLite file", str(bad))
    one_line_error(run_cli(*(tmp_path / "none.sqlite" if x is bad else x for x in args)), "no such file")


def test_fail_slower_gates_on_inferred_iterations_too(async_trace):
    """A run without NVTX has steps all the same (inferred from its kernel sequence): the gate
    works on it, as its help says. Truth: the workloads' own Python step times (the NVTX twin's
    `nsight-tui:step` marks, the unannotated run's STEM.steps.json), median of the steady steps;
    the limits sit at half and twice the slowdown they give."""
    nonvtx = SAMPLES / "nonvtx"
    fast = async_trace(nonvtx / "small_ctx512_bf16_b8_async_nonvtx.sqlite.xz")
    slow = async_trace(nonvtx / "small_ctx512_b8_async_twin.sqlite.xz")
    marks = json.loads((nonvtx / "small_ctx512_bf16_b8_async_nonvtx.steps.json").read_text())["steps"]
    fast_steps = sorted(m["seconds"] for m in marks if m["name"].startswith("step_"))
    fast_s = fast_steps[len(fast_steps) // 2]
    slow_steps = sorted(step_sql.python_steps(slow))
    slow_s = slow_steps[len(slow_steps) // 2] / 1e9
    slower = 100 * (slow_s - fast_s) / fast_s
    assert slower > 20  # bf16 against fp32 on the CUDA cores: the gate has something to see
    proc = run_cli(fast, slow, "--fail-slower", f"{slower / 2:.2f}")
    assert proc.returncode == 1 and "slower than A's" in proc.stderr, proc.stderr
    assert run_cli(fast, slow, "--fail-slower", f"{slower * 2:.2f}").returncode == 0
    assert run_cli(slow, fast, "--fail-slower", "0").returncode == 0  # B faster: never fails
