"""The capture runner without a GPU: nsys discovery, the commands, missing tools, OOM records, no clobber.

Where a profiler is needed, a stand-in `nsys` executable written to tmp_path plays it: `profile`
writes the status file the workload would have written (or really runs the workload on the CPU)
and a report file; `export` writes a real SQLite file with a kernel table.
"""
from __future__ import annotations

import contextlib
import io
import json
import shlex
import sqlite3
import stat
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

from nsight_tui.cli import capture as capture_cli
from nsight_tui.capture import nsys as nsys_module
from nsight_tui.capture.errors import CaptureError
from nsight_tui.capture.nsys import export_command, find_nsys, profile_command
from nsight_tui.capture.runner import CaptureConfig, CaptureResult, Runner
from nsight_tui.cli import main as nsight_main

FAKE_NSYS = textwrap.dedent('''\
    #!{python}
    """Stand-in for nsys: enough of profile/export/--version for the runner."""
    import json, os, subprocess, sqlite3, sys
    args = sys.argv[1:]
    log = os.environ.get("FAKE_NSYS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(args) + "\\n")
    if args == ["--version"]:
        print("NVIDIA Nsight Systems version 0000.0.0-fake")
        sys.exit(0)
    verb, rest = args[0], args[1:]
    options = [a for a in rest if a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in options if "=" in a)
    if verb == "profile":
        i = 0
        while i < len(rest) and rest[i].startswith("--"):
            i += 1
        app = rest[i:]
        status = app[app.index("--status-file") + 1]
        model = app[app.index("--model") + 1]
        report = opts["output"]
        assert report.endswith(".nsys-rep") and not os.path.exists(report)
        base = report[:-len(".nsys-rep")]
        if os.environ.get("FAKE_NSYS_QDSTRM_ONLY"):
            open(base + ".qdstrm", "w").close()
            sys.exit(1)
        if model in os.environ.get("FAKE_NSYS_OOM", "").split(","):
            with open(status, "w") as f:
                json.dump({{"status": "oom", "message": "CUDA out of memory. Tried to allocate 9.00 GiB"}}, f)
            open(base + ".nsys-rep", "w").close()
            sys.exit(3)
        if os.environ.get("FAKE_NSYS_RUN_APP"):
            code = subprocess.run(app + ["--device", "cpu"]).returncode
        else:
            with open(status, "w") as f:
                json.dump({{"status": "ok", "steps": [{{"name": "step_0", "seconds": 0.25, "phases": {{}}}}]}}, f)
            code = 0
        open(base + ".nsys-rep", "w").write("report")
        sys.exit(code)
    if verb == "export":
        assert opts["type"] == "sqlite" and os.path.exists(rest[-1])
        out = opts["output"]
        assert not os.path.exists(out)
        db = sqlite3.connect(out)
        db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?)", [(i, i + 1) for i in range(7)])
        db.commit()
        db.close()
        sys.exit(0)
    sys.exit(64)
''')


def make_executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def install_fake_nsys(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_NSYS_LOG", str(folder / "nsys_calls.jsonl"))
    for var in ("FAKE_NSYS_OOM", "FAKE_NSYS_RUN_APP", "FAKE_NSYS_QDSTRM_ONLY"):
        monkeypatch.delenv(var, raising=False)
    return make_executable(folder / "bin" / "nsys", FAKE_NSYS.format(python=sys.executable))


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch) -> Path:
    return install_fake_nsys(tmp_path, monkeypatch)


def nsys_calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "nsys_calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def kernel_rows(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


# ---------------------------------------------------------------- discovery


def test_find_nsys_precedence(tmp_path):
    script = "#!/bin/sh\nexit 0\n"
    explicit = make_executable(tmp_path / "explicit" / "nsys", script)
    from_env = make_executable(tmp_path / "env" / "nsys", script)
    on_path = make_executable(tmp_path / "path" / "nsys", script)
    old = make_executable(tmp_path / "opt/nvidia/nsight-systems/2024.9.1/bin/nsys", script)
    new = make_executable(tmp_path / "opt/nvidia/nsight-systems/2024.10.1/bin/nsys", script)
    compute = make_executable(tmp_path / "opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys", script)
    globs = [str(tmp_path / "opt/nvidia/nsight-systems/*/bin/nsys"),
             str(tmp_path / "opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys")]
    env = {"NSYS": str(from_env), "PATH": str(on_path.parent)}

    assert find_nsys(str(explicit), env, globs) == explicit
    assert find_nsys(None, env, globs) == from_env
    assert find_nsys(None, {"PATH": str(on_path.parent)}, globs) == on_path
    # 2024.10 is newer than 2024.9: versions compare as numbers, not text
    assert find_nsys(None, {"PATH": str(tmp_path / "empty")}, globs) == new
    new.unlink()
    old.unlink()
    assert find_nsys(None, {"PATH": ""}, globs) == compute


def test_named_nsys_that_does_not_work_is_an_error(tmp_path):
    not_executable = tmp_path / "nsys"
    not_executable.write_text("")
    with pytest.raises(CaptureError, match="--nsys"):
        find_nsys(str(not_executable), {"PATH": ""}, [])
    with pytest.raises(CaptureError, match=r"\$NSYS"):
        find_nsys(None, {"NSYS": str(tmp_path / "missing"), "PATH": ""}, [])


def test_no_nsys_anywhere(tmp_path):
    with pytest.raises(CaptureError, match="not found") as err:
        find_nsys(None, {"PATH": str(tmp_path)}, [str(tmp_path / "opt/*/nsys")])
    assert "\n" not in str(err.value) and "--nsys" in str(err.value)


# ---------------------------------------------------------------- commands


def test_profile_and_export_commands():
    app = ["python3", "-m", "nsight_tui.capture.workload", "--model", "small"]
    assert profile_command("/x/nsys", "out/.w/small_ctx128.nsys-rep", app) == [
        "/x/nsys", "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
        "--output=out/.w/small_ctx128.nsys-rep", "--force-overwrite=false", *app]
    assert export_command("/x/nsys", "r.nsys-rep", "o.sqlite") == [
        "/x/nsys", "export", "--type=sqlite", "--output=o.sqlite", "--force-overwrite=false", "r.nsys-rep"]


@pytest.mark.parametrize("config, stem", [
    (CaptureConfig("large", 512), "large_ctx512"),
    (CaptureConfig("small", 128, mode="forward"), "small_ctx128_fwd"),
    (CaptureConfig("small", 128, dtype="bf16", attention="fused"), "small_ctx128_bf16_fused"),
    (CaptureConfig("medium", 1024, mode="forward", batch=8), "medium_ctx1024_fwd_b8"),
])
def test_output_names(config, stem):
    assert config.stem == stem


def test_runner_commands_carry_the_configuration(tmp_path):
    runner = Runner("/x/nsys", tmp_path, python="/py")
    profile, export = runner.commands(CaptureConfig("medium", 256, mode="forward", dtype="bf16",
                                                    attention="fused", batch=2, steps=5, warmup=1), tmp_path / "w")
    app = profile[profile.index("/py"):]
    assert app == ["/py", "-m", "nsight_tui.capture.workload", "--model", "medium", "--ctx", "256", "--mode", "forward",
                   "--dtype", "bf16", "--attention", "fused", "--batch", "2", "--steps", "5", "--warmup", "1",
                   "--status-file", str(tmp_path / "w" / "status.json")]
    report = tmp_path / "w" / "medium_ctx256_fwd_bf16_fused_b2.nsys-rep"
    assert f"--output={report}" in profile
    assert export[-1] == str(report)
    assert export[3] == f"--output={tmp_path / 'w' / 'medium_ctx256_fwd_bf16_fused_b2.sqlite'}"


def test_a_stem_with_a_dot_keeps_its_name(tmp_path):
    profile, export = Runner("/x/nsys", tmp_path).commands(CaptureConfig("2.7B", 128), tmp_path)
    assert f"--output={tmp_path / '2.7B_ctx128.nsys-rep'}" in profile
    assert export[3] == f"--output={tmp_path / '2.7B_ctx128.sqlite'}"


def test_dry_run_prints_commands_and_runs_nothing(tmp_path, fake_nsys, capsys):
    out = tmp_path / "out"
    code = nsight_main(["capture", "--dry-run", "--nsys", str(fake_nsys), "--sweep", "--models", "small,medium",
                        "--ctxs", "128,256", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert text.count(f"{fake_nsys} profile --trace=cuda,nvtx --sample=none --cpuctxsw=none") == 4
    assert text.count(f"{fake_nsys} export --type=sqlite") == 4
    for stem in ("small_ctx128", "small_ctx256", "medium_ctx128", "medium_ctx256"):
        assert f"{out / stem}.sqlite" in text
    assert nsys_calls(tmp_path) == [] and not out.exists()


# ---------------------------------------------------------------- missing tools


def run_cli(argv, capsys):
    code = nsight_main(["capture", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_without_nsys(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nsys_module, "DEFAULT_GLOBS", ())
    code, out, err = run_cli(["--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "nsys (Nsight Systems) not found" in err and "Traceback" not in err


def test_cli_without_torch(tmp_path, fake_nsys, capsys):
    # A real interpreter with no torch in reach: a bare virtual environment.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    code, out, err = run_cli(["--nsys", str(fake_nsys), "--python", str(python), "--out", str(tmp_path / "o")],
                             capsys)
    assert code == 2
    assert err.count("\n") == 1 and "PyTorch is not installed" in err and "pip install torch" in err
    assert not (tmp_path / "o").exists()


def test_cli_without_cuda(tmp_path, fake_nsys, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, out, err = run_cli(["--nsys", str(fake_nsys), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "no CUDA GPU" in err
    assert [c for c in nsys_calls(tmp_path) if c[0] == "profile"] == []


def test_probe_does_not_ask_for_nvtx(tmp_path):
    # An interpreter that has "torch" but no nvtx: a venv whose only package is a stub torch. The
    # workload writes its ranges through PyTorch's NVTX bindings without the package: what is missing
    # here is CUDA, and the one line says that.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "torch.py").write_text("__version__ = '0.0'\nclass cuda:\n    is_available = staticmethod(lambda: False)\n")
    with pytest.raises(CaptureError, match="no CUDA GPU") as got:
        capture_cli.probe_python(str(venv / "bin" / "python"))
    assert "nvtx" not in str(got.value)


# ---------------------------------------------------------------- capture, OOM, clobbering


def test_sweep_records_oom_and_goes_on(tmp_path, fake_nsys, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_OOM", "medium")
    out = tmp_path / "out"
    runner = Runner(fake_nsys, out, echo=lambda line: None, extra_metadata={"device": "NVIDIA H200"})
    configs = [CaptureConfig("medium", 128), CaptureConfig("small", 128), CaptureConfig("small", 256)]
    results = runner.sweep(configs)

    assert [r.status for r in results] == ["oom", "ok", "ok"]
    record = json.loads((out / "medium_ctx128.oom.json").read_text())
    assert record == {"status": "oom",
                      "config": {"model": "medium", "d_model": 1024, "n_layers": 24, "n_heads": 16,
                                 "vocab": 10000, "batch": 4, "ctx": 128, "dtype": "fp32", "mode": "train",
                                 "attention": "manual", "steps": 3, "warmup": 2, "device": "NVIDIA H200"},
                      "message": "CUDA out of memory. Tried to allocate 9.00 GiB",
                      "export": "medium_ctx128.oom.sqlite"}
    assert not (out / "medium_ctx128.sqlite").exists()
    # the report nsys wrote for the run that ran out is exported beside the record,
    # and a sweep reads that run through its record, not as a run of its own
    assert (out / "medium_ctx128.oom.sqlite").exists()
    from nsight_tui.parsers.analyses.sweep import discover
    assert sorted((r.path.name, r.status) for r in discover(out)) == [
        ("medium_ctx128.oom.json", "oom"), ("small_ctx128.sqlite", "ok"), ("small_ctx256.sqlite", "ok")]
    assert kernel_rows(out / "small_ctx128.sqlite") == 7 and kernel_rows(out / "small_ctx256.sqlite") == 7
    assert results[1].details["kernels"] == 7 and results[1].details["median_step_s"] == 0.25
    # no work folders or temp files left behind; the OOM'd config's export only as STEM.oom.sqlite
    assert sorted(p.name for p in out.iterdir()) == ["medium_ctx128.oom.json", "medium_ctx128.oom.sqlite",
                                                     "small_ctx128.sqlite", "small_ctx256.sqlite"]
    verbs = [c[0] for c in nsys_calls(tmp_path)]
    assert verbs == ["profile", "export", "profile", "export", "profile", "export"]


def test_cli_sweep_with_oom_exits_zero_single_oom_exits_four(tmp_path, fake_nsys, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_NSYS_OOM", "xl")
    monkeypatch.setattr(capture_cli, "probe_python", lambda python: {"torch": "x", "device": "GPU", "cuda": True,
                                                                      "nvtx": True})
    # The probe is stood in for, so the interpreter is too: the CLI counts FLOPs by default, and
    # this one's count pass fails at once, as the real workload's does on a machine without CUDA.
    python = make_executable(tmp_path / "bin" / "python", "#!/bin/sh\nexit 1\n")
    out = tmp_path / "out"
    code, text, err = run_cli(["--nsys", str(fake_nsys), "--python", str(python), "--sweep", "--models", "small,xl",
                               "--out", str(out)], capsys)
    assert code == 0, err
    assert "summary:" in text and "oom" in text
    assert f"$ {fake_nsys} profile --trace=cuda,nvtx" in text  # the exact commands are shown
    # the count pass runs first, and its failure costs only the counts
    assert text.count(f"$ {python} -m nsight_tui.capture.workload") == 2
    assert text.count("FLOP counting failed (see above): capturing without counts") == 2
    code, text, err = run_cli(["--nsys", str(fake_nsys), "--python", str(python), "--model", "xl", "--ctx", "256",
                               "--out", str(out)], capsys)
    assert code == 4
    assert (out / "xl_ctx256.oom.json").exists()


def test_existing_output_is_never_clobbered(tmp_path, fake_nsys, capsys):
    out = tmp_path / "out"
    out.mkdir()
    existing = out / "small_ctx128.sqlite"
    existing.write_text("the user's earlier trace")
    code, text, err = run_cli(["--nsys", str(fake_nsys), "--out", str(out)], capsys)
    assert code == 2 and "already exists" in err and "--force" in err
    assert existing.read_text() == "the user's earlier trace"
    assert nsys_calls(tmp_path) == []

    runner = Runner(fake_nsys, out, echo=lambda line: None)
    with pytest.raises(CaptureError, match="already there"):
        runner.sweep([CaptureConfig("small", 256), CaptureConfig("small", 128)])
    assert not (out / "small_ctx256.sqlite").exists()  # refused before running anything

    results = runner.sweep([CaptureConfig("small", 256), CaptureConfig("small", 128)], skip_existing=True)
    assert [r.status for r in results] == ["ok", "skipped"]
    assert existing.read_text() == "the user's earlier trace"

    forced = Runner(fake_nsys, out, force=True, echo=lambda line: None)
    assert forced.capture(CaptureConfig("small", 128)).status == "ok"
    assert kernel_rows(existing) == 7


def test_oom_record_is_also_protected(tmp_path, fake_nsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "small_ctx128.oom.json").write_text("{}")
    with pytest.raises(CaptureError, match="small_ctx128.oom.json"):
        Runner(fake_nsys, out, echo=lambda line: None).capture(CaptureConfig("small", 128))
    # once it fits (with --force), the stale OOM record goes
    assert Runner(fake_nsys, out, force=True, echo=lambda line: None).capture(CaptureConfig("small", 128)).status == "ok"
    assert sorted(p.name for p in out.iterdir()) == ["small_ctx128.sqlite"]


def test_importer_failure_is_explained(tmp_path, fake_nsys, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_QDSTRM_ONLY", "1")
    result = Runner(fake_nsys, tmp_path / "out", echo=lambda line: None).capture(CaptureConfig("small", 128))
    assert result.status == "failed" and "libdw.so.1" in result.message
    assert list((tmp_path / "out").iterdir()) == []


@dataclass
class RealCapture:
    nsys: Path
    out_dir: Path
    result: CaptureResult
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def real_capture(tmp_path_factory) -> RealCapture:
    """One capture whose workload children really run (tiny, on the CPU) under the stand-in:
    the FLOP count pass in a process of its own, then the profiled child. The tests below read
    what it printed and wrote; each workload child costs seconds of torch start-up."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("real_capture")
    with pytest.MonkeyPatch.context() as mp:
        nsys = install_fake_nsys(folder, mp)
        mp.setenv("FAKE_NSYS_RUN_APP", "1")
        mp.chdir(folder)  # the child must not depend on the caller's directory
        stdout, stderr = io.StringIO(), io.StringIO()  # the runner's lines and its children's, piped through
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            runner = Runner(nsys, folder / "out", count_flops=True, count_device="cpu")
            result = runner.capture(CaptureConfig("tiny", 16, batch=2, steps=2, warmup=1))
    return RealCapture(nsys, folder / "out", result, stdout.getvalue(), stderr.getvalue())


def test_real_workload_child_under_the_stand_in(real_capture):
    # The runner's child really runs: module found via PYTHONPATH, status file written and read back.
    result, printed = real_capture.result, real_capture.stdout
    assert result.status == "ok", result.message
    assert "[3/3] step_1" in printed and "$ " + shlex.join([str(real_capture.nsys), "profile"]) in printed
    assert result.details["median_step_s"] > 0
    assert (real_capture.out_dir / "tiny_ctx16_b2.sqlite").exists()


def test_keep_rep_never_replaces_an_existing_report(tmp_path, fake_nsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "small_ctx128.nsys-rep").write_text("precious")
    runner = Runner(fake_nsys, out, keep_report=True, echo=lambda line: None)
    with pytest.raises(CaptureError, match="small_ctx128.nsys-rep"):
        runner.capture(CaptureConfig("small", 128))
    assert (out / "small_ctx128.nsys-rep").read_text() == "precious"
    assert not (out / "small_ctx128.sqlite").exists()


def test_out_folder_that_is_a_file_is_one_clear_error(tmp_path, fake_nsys):
    blocker = tmp_path / "out"
    blocker.write_text("a file")
    with pytest.raises(CaptureError, match="cannot create the output folder"):
        Runner(fake_nsys, blocker, echo=lambda line: None).capture(CaptureConfig("small", 128))


def test_backward_annotation_options_reach_nsys_and_the_workload(tmp_path):
    agnvtx = CaptureConfig("small", 128, op_ranges="autograd-nvtx", backward_ranges=True)
    assert agnvtx.stem == "small_ctx128_agnvtx_bwdranges"
    profile, _ = Runner("/x/nsys", tmp_path, python="/py").commands(agnvtx, tmp_path / "w")
    # nsys's own switch for PyTorch's ranges, before the application starts
    assert profile.index("--pytorch=autograd-nvtx") < profile.index("/py")
    app = profile[profile.index("/py"):]
    assert app[app.index("--op-ranges"):app.index("--status-file")] == ["--op-ranges", "autograd-nvtx",
                                                                       "--backward-ranges"]
    emit = CaptureConfig("small", 128, op_ranges="emit-nvtx")
    assert emit.stem == "small_ctx128_emitnvtx"
    profile, _ = Runner("/x/nsys", tmp_path, python="/py").commands(emit, tmp_path / "w")
    assert not any(a.startswith("--pytorch") for a in profile)
    assert profile[profile.index("--op-ranges") + 1] == "emit-nvtx"
    assert emit.metadata()["op_ranges"] == "emit-nvtx" and "op_ranges" not in CaptureConfig("small", 128).metadata()


def test_cli_autograd_nvtx_and_emit_nvtx_exclude_each_other(capsys):
    from nsight_tui.cli import main

    with pytest.raises(SystemExit):
        main(["capture", "--autograd-nvtx", "--emit-nvtx", "--dry-run"])
    assert "not allowed with" in capsys.readouterr().err
def test_counting_runs_before_the_profiled_child(real_capture):
    # The count pass is its own process before `nsys profile`; the profiled child gets its file.
    assert real_capture.result.status == "ok", real_capture.result.message
    out = real_capture.stdout
    count_at, profile_at = out.index("--count-out"), out.index(shlex.join([str(real_capture.nsys), "profile"]))
    assert count_at < out.index("counted one iteration") < profile_at
    assert "--counts-in" in out[profile_at:] and "ignoring the counts" not in real_capture.stderr


def test_profile_records_gpu_memory_by_default(tmp_path):
    # nsys --cuda-memory-usage=true unless --no-memory-usage
    from nsight_tui.capture.nsys import MEMORY_USAGE

    config = CaptureConfig("small", 128)
    profile, _ = Runner("nsys", tmp_path).commands(config, tmp_path)
    assert MEMORY_USAGE == "--cuda-memory-usage=true" and MEMORY_USAGE in profile
    assert profile.index(MEMORY_USAGE) < profile.index("-m")  # an nsys option, before the app
    profile, _ = Runner("nsys", tmp_path, memory_usage=False).commands(config, tmp_path)
    assert MEMORY_USAGE not in profile


def test_no_nvtx_capture_keeps_its_step_times_beside_the_export(tmp_path, fake_nsys, monkeypatch):
    # the workload child really runs (CPU, tiny) with --no-nvtx; its status file's step
    # times come back as STEM.steps.json beside STEM.sqlite, the export's only clock truth.
    pytest.importorskip("torch")
    monkeypatch.setenv("FAKE_NSYS_RUN_APP", "1")
    out = tmp_path / "out"
    config = CaptureConfig("tiny", 16, batch=2, steps=2, warmup=1, phase_sync=False, range_sync=False, nvtx=False)
    assert config.stem == "tiny_ctx16_b2_async_nonvtx"
    result = Runner(fake_nsys, out, echo=lambda line: None).capture(config)
    assert result.status == "ok", result.message
    profile = nsys_calls(tmp_path)[0]
    assert "--no-nvtx" in profile
    sidecar = json.loads((out / "tiny_ctx16_b2_async_nonvtx.steps.json").read_text())
    assert [s["name"] for s in sidecar["steps"]] == ["warmup_0", "step_0", "step_1"]
    assert all(s["seconds"] > 0 for s in sidecar["steps"])
    assert sidecar["config"]["nvtx"] is False and sidecar["config"]["n_layers"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["tiny_ctx16_b2_async_nonvtx.sqlite",
                                                     "tiny_ctx16_b2_async_nonvtx.steps.json"]
    # a second run will not clobber the sidecar either
    with pytest.raises(CaptureError, match="already exists"):
        Runner(fake_nsys, out, echo=lambda line: None).capture(config)


def test_cli_no_nvtx_refuses_op_ranges(tmp_path, capsys):
    code = nsight_main(["capture", "--no-nvtx", "--emit-nvtx", "--dry-run", "--out", str(tmp_path)])
    assert code != 0 and "--no-nvtx" in capsys.readouterr().err


def test_autograd_shapes_and_gpu_metrics_reach_nsys(tmp_path):
    """`--autograd-shapes` is nsys's --pytorch=autograd-shapes-nvtx (output _agshapes);
    `--gpu-metrics [HZ]` samples the GPU at HZ (a runner option: the output name is unchanged)."""
    shapes = CaptureConfig("small", 128, op_ranges="autograd-shapes-nvtx")
    assert shapes.stem == "small_ctx128_agshapes" and shapes.metadata()["op_ranges"] == "autograd-shapes-nvtx"
    profile, _ = Runner("/x/nsys", tmp_path, python="/py", gpu_metrics_hz=1000).commands(shapes, tmp_path / "w")
    app_at = profile.index("/py")
    for option in ("--pytorch=autograd-shapes-nvtx", "--gpu-metrics-devices=all", "--gpu-metrics-frequency=1000"):
        assert profile.index(option) < app_at
    assert profile[profile.index("--op-ranges", app_at) + 1] == "autograd-shapes-nvtx"
    plain, _ = Runner("/x/nsys", tmp_path, python="/py").commands(CaptureConfig("small", 128), tmp_path / "w")
    assert not any(a.startswith(("--gpu-metrics", "--pytorch")) for a in plain)


def test_cli_gpu_metrics_default_rate_and_bad_rate(capsys, tmp_path):
    from nsight_tui.cli import main

    assert main(["capture", "--gpu-metrics", "--autograd-shapes", "--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--gpu-metrics-devices=all --gpu-metrics-frequency=2000" in out and "--pytorch=autograd-shapes-nvtx" in out
    assert "small_ctx128_agshapes.sqlite" in out
    assert main(["capture", "--gpu-metrics", "500", "--dry-run", "--out", str(tmp_path)]) == 0
    assert "--gpu-metrics-frequency=500 " in capsys.readouterr().out
    code = main(["capture", "--gpu-metrics", "-5", "--dry-run", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and len(err.strip().splitlines()) == 1 and "--gpu-metrics -5" in err
    with pytest.raises(SystemExit):
        main(["capture", "--autograd-shapes", "--emit-nvtx", "--dry-run"])
    assert "not allowed with" in capsys.readouterr().err


def test_a_bare_run_goes_beside_the_export_and_never_clobbers(tmp_path, fake_nsys, monkeypatch):
    """`--bare-run`: the workload really runs alone (tiny, on the CPU) before the stand-in profiles
    it, never under nsys (nsys is called to profile and export only); its step times land beside
    the export in STEM.bare.json. An old record is refused without --force; a forced capture without
    --bare-run removes it (it would describe another run)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("FAKE_NSYS_RUN_APP", "1")
    out = tmp_path / "out"
    config = CaptureConfig("tiny", 16, batch=2, steps=2, warmup=1)
    lines: list[str] = []
    result = Runner(fake_nsys, out, echo=lines.append, bare_run=True, bare_device="cpu").capture(config)
    assert result.status == "ok", result.message
    record = json.loads((out / "tiny_ctx16_b2.bare.json").read_text())
    assert [s["name"] for s in record["steps"]] == ["warmup_0", "step_0", "step_1"]
    assert all(s["seconds"] > 0 for s in record["steps"]) and record["config"]["model"] == "tiny"
    assert [call[0] for call in nsys_calls(tmp_path)] == ["profile", "export"]
    bare = next(line for line in lines if "--status-file" in line and "bare_status.json" in line)
    assert str(fake_nsys) not in bare and bare.startswith("$ ")

    again = Runner(fake_nsys, out, echo=lambda line: None)
    (out / "tiny_ctx16_b2.sqlite").unlink()  # only the record is left: still not to be clobbered
    with pytest.raises(CaptureError, match="tiny_ctx16_b2.bare.json already exists"):
        again.capture(config)
    monkeypatch.delenv("FAKE_NSYS_RUN_APP")
    assert Runner(fake_nsys, out, force=True, echo=lambda line: None).capture(config).status == "ok"
    assert not (out / "tiny_ctx16_b2.bare.json").exists()
