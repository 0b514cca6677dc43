"""`nsight-tui capture -- CMD` and `nsight_tui.capture.mark` without a GPU.

A stand-in `nsys` runs the command for real (with the environment nsys would pass on) and writes
a report; its `export` writes a small SQLite file. The user's scripts are real PyTorch loops on
the CPU, marked the two ways the README shows.
"""
from __future__ import annotations

import json
import sqlite3
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

from nsight_tui.capture import mark
from nsight_tui.capture.command import CommandCapture, default_stem
from nsight_tui.capture.errors import CaptureError
from nsight_tui.cli import main as nsight_main

torch = pytest.importorskip("torch")

FAKE_NSYS = textwrap.dedent('''\
    #!{python}
    import json, os, subprocess, sqlite3, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_NSYS_LOG"], "a") as f:
        f.write(json.dumps(args) + "\\n")
    if args == ["--version"]:
        print("NVIDIA Nsight Systems version 0000.0.0-fake"); sys.exit(0)
    verb, rest = args[0], args[1:]
    opts = dict(a[2:].split("=", 1) for a in rest if a.startswith("--") and "=" in a)
    if verb == "profile":
        i = 0
        while rest[i].startswith("--"):
            i += 1
        code = subprocess.run(rest[i:]).returncode  # the app inherits nsys's environment
        open(opts["output"], "w").write("report")
        sys.exit(code)
    if verb == "export":
        db = sqlite3.connect(opts["output"])
        db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?)", [(i, i + 1) for i in range(5)])
        db.commit(); db.close(); sys.exit(0)
    sys.exit(64)
''')

LOOP = textwrap.dedent('''\
    import sys, torch
    from nsight_tui.capture import mark
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    STYLE = sys.argv[1]
    if STYLE == "hooks":
        mark.hooks(model, optimizer, warmup=2)
    for i in range(6):
        if STYLE == "hooks":
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        else:
            with mark.step(i, warmup=2):
                with mark.phase("forward"):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                with mark.phase("backward"):
                    loss.backward()
                with mark.phase("optimizer"):
                    optimizer.step()
                    optimizer.zero_grad()
    if len(sys.argv) > 2:
        with mark.step(6, warmup=2):
            with mark.phase("forward"):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
''')


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FAKE_NSYS_LOG", str(tmp_path / "nsys_calls.jsonl"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    path = tmp_path / "bin" / "nsys"
    path.parent.mkdir()
    path.write_text(FAKE_NSYS.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def nsys_calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "nsys_calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("style", ["hooks", "context"])
def test_capture_a_marked_loop(tmp_path, fake_nsys, capsys, style):
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    out = tmp_path / "runs"
    code = nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(out), "--no-open",
                        "--", sys.executable, str(script), style])
    assert code == 0, capsys.readouterr()
    profile = nsys_calls(tmp_path)[0]
    # the options the tool reads best, then the command exactly as given
    assert profile[:3] == ["profile", "--trace=cuda,nvtx", "--sample=none"]
    assert "--cpuctxsw=none" in profile and "--cuda-memory-usage=true" in profile
    assert "--cuda-graph-trace=node" in profile
    assert not any(a.startswith("--pytorch") for a in profile)
    assert profile[-3:] == [sys.executable, str(script), style]
    run = json.loads((out / "train.run.json").read_text())
    assert run["command"] == [sys.executable, str(script), style]
    assert run["exit_status"] == 0 and run["status"] == "ok" and run["wall_seconds"] > 0
    assert run["export"] == "train.sqlite" and run["steps_file"] == "train.steps.json"
    with sqlite3.connect(f"file:{out / 'train.sqlite'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 5
    steps = json.loads((out / "train.steps.json").read_text())["steps"]
    assert [s["name"] for s in steps] == ["warmup_0", "warmup_1", "step_0", "step_1", "step_2", "step_3"]
    for s in steps:
        assert set(s["phases"]) == {"forward", "backward", "optimizer"}
        assert 0 < sum(s["phases"].values()) <= s["seconds"]
    assert not list(out.glob(".*partial"))


def test_a_failing_command_keeps_its_export_and_exit_status(tmp_path, fake_nsys, capsys):
    script = tmp_path / "train.py"
    script.write_text("import sys; sys.exit(3)\n")
    code = nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--no-open", "--name", "bad",
                        "--", sys.executable, str(script)])
    assert code == 3
    run = json.loads((tmp_path / "bad.run.json").read_text())
    assert run["exit_status"] == 3 and run["status"] == "failed" and run["steps_recorded"] == 0
    assert (tmp_path / "bad.sqlite").exists() and not (tmp_path / "bad.steps.json").exists()


def test_an_oom_run_is_recorded_as_one(tmp_path, fake_nsys, capsys):
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    code = nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--no-open",
                        "--", sys.executable, str(script), "context", "1"])
    assert code == 4
    assert not (tmp_path / "train.sqlite").exists() and (tmp_path / "train.oom.sqlite").exists()
    oom = json.loads((tmp_path / "train.oom.json").read_text())
    assert oom["status"] == "oom" and oom["range"] == "step_4/forward" and "9.00 GiB" in oom["message"]
    record = json.loads((tmp_path / "train.steps.json").read_text())
    # the iteration that ran out is no step (the GPT-2 workload writes no step mark for it either)
    assert [s["name"] for s in record["steps"]][-1] == "step_3"
    assert [(s["name"], s["status"]) for s in record["failed_steps"]] == [("step_4", "oom")]
    assert record["config"]["oom"]["path"] == "step_4/forward"


def test_autograd_nvtx_on_request_and_no_clobber(tmp_path, fake_nsys, capsys):
    script = tmp_path / "infer.py"
    script.write_text("pass\n")
    args = ["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--no-open", "--autograd-nvtx",
            "--no-memory-usage", "--", sys.executable, str(script)]
    assert nsight_main(args) == 0
    profile = nsys_calls(tmp_path)[0]
    assert "--pytorch=autograd-nvtx" in profile and "--cuda-memory-usage=true" not in profile
    assert nsight_main(args) == 2
    assert "already exists" in capsys.readouterr().err


def test_workload_options_are_refused_with_a_command(tmp_path, capsys):
    code = nsight_main(["capture", "--model", "large", "--out", str(tmp_path), "--", "python", "x.py"])
    assert code != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--model" in err


def test_dry_run_prints_the_commands(tmp_path, fake_nsys, capsys):
    assert nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--dry-run",
                        "--", "python", "-m", "pkg.train", "--lr", "3"]) == 0
    out = capsys.readouterr().out
    assert ("profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node "
            "--cuda-memory-usage=true") in out
    assert "pkg.train.sqlite" in out and "python -m pkg.train --lr 3" in out
    assert [p.name for p in tmp_path.iterdir()] == ["bin"]  # nothing written


def test_graphs_traced_whole_on_request(tmp_path, fake_nsys, capsys):
    """`--graphs whole`: nsys's own graph tracing (one op a launch, read.load's ids.GRAPH) in the profile
    command instead of node by node; the GPT-2 workload refuses it in one line."""
    assert nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--dry-run", "--graphs", "whole",
                        "--", "python", "serve.py"]) == 0
    out = capsys.readouterr().out
    assert "--cuda-graph-trace=graph" in out and "--cuda-graph-trace=node" not in out
    assert nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--dry-run",
                        "--graphs", "whole"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--graphs" in err


@pytest.mark.parametrize("command, stem", [
    (["python", "train.py", "--x"], "train"), (["python3", "-m", "pkg.main"], "pkg.main"),
    (["./run.sh", "a"], "run.sh"), (["torchrun", "--nproc-per-node=2", "ddp.py"], "ddp")])
def test_default_stem(command, stem):
    assert default_stem(command) == stem


def test_bad_name_is_one_line(tmp_path):
    with pytest.raises(CaptureError, match="--name"):
        CommandCapture("nsys", tmp_path, "../x")


class Recorder:
    def __init__(self):
        self.events: list[tuple[str, str]] = []
        self.push = lambda name: self.events.append(("push", name))
        self.pop = lambda: self.events.append(("pop", ""))
        self.mark = lambda text: self.events.append(("mark", text))
        self.available = True


def test_hooks_give_the_workloads_ranges_and_marks(monkeypatch):
    clock = mark.StepClock()
    recorder = Recorder()
    clock._nvtx = recorder  # type: ignore[assignment]
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hooks = clock.hooks(model, optimizer, warmup=1)
    for _ in range(2):
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
    hooks.remove()
    model(torch.randn(3, 4)).sum().backward()  # after remove(): nothing more is marked
    ranges = [(kind, name) for kind, name in recorder.events if kind != "mark"]
    one = [("push", "forward"), ("pop", ""), ("push", "backward"), ("pop", ""), ("push", "optimizer"), ("pop", "")]
    assert ranges == [("push", "warmup_0"), *one, ("pop", ""), ("push", "step_0"), *one, ("pop", "")]
    marks = [json.loads(text.split(" ", 1)[1]) for kind, text in recorder.events if kind == "mark"]
    assert [m["name"] for m in marks] == ["warmup_0", "step_0"]
    assert all(text.startswith("nsight-tui:step ") for kind, text in recorder.events if kind == "mark")
    assert [r["name"] for r in clock.records] == ["warmup_0", "step_0"]
    assert torch.autograd.backward is hooks._original_backward


def test_without_nvtx_only_the_python_clock_is_kept(tmp_path, monkeypatch):
    clock = mark.StepClock()
    recorder = Recorder()
    clock._nvtx = recorder  # type: ignore[assignment]
    with clock.step(0, nvtx=False):
        with clock.phase("forward"):
            pass
    clock.record("generate_0", 0.5, tokens_s=[0.1, 0.01])
    assert recorder.events == []
    saved = json.loads(clock.save(tmp_path / "x.steps.json").read_text())
    assert [s["name"] for s in saved["steps"]] == ["step_0", "generate_0"]
    assert saved["steps"][1]["tokens_s"] == [0.1, 0.01]
    monkeypatch.delenv(mark.STEPS_FILE_ENV, raising=False)
    assert clock.save() is None  # no file named: nothing written


def test_step_names():
    assert [mark.iteration_name(i, 2) for i in range(4)] == ["warmup_0", "warmup_1", "step_0", "step_1"]
    with pytest.raises(ValueError):
        mark.iteration_name(-1)


def test_an_oom_under_hooks_is_found_at_exit(tmp_path, fake_nsys, capsys):
    """The hooks see no exception: the step left open at exit, with the uncaught error Python kept
    (sys.last_value), is the out-of-memory record."""
    script = tmp_path / "big.py"
    script.write_text(textwrap.dedent('''\
        import torch
        from nsight_tui.capture import mark

        class Big(torch.nn.Module):
            def forward(self, x):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")

        model = Big()
        mark.hooks(model, None)
        model(torch.zeros(1))
    '''))
    code = nsight_main(["capture", "--nsys", str(fake_nsys), "--out", str(tmp_path), "--no-open",
                        "--", sys.executable, str(script)])
    assert code == 4
    oom = json.loads((tmp_path / "big.oom.json").read_text())
    assert oom["range"] == "step_0/forward" and "4.00 GiB" in oom["message"]
    assert json.loads((tmp_path / "big.steps.json").read_text())["steps"] == []


def test_a_failed_step_writes_the_oom_mark_and_no_step_mark():
    clock = mark.StepClock()
    recorder = Recorder()
    clock._nvtx = recorder  # type: ignore[assignment]
    with pytest.raises(torch.OutOfMemoryError):
        with clock.step(0):
            with clock.phase("backward"):
                raise torch.OutOfMemoryError("CUDA out of memory")
    marks = [text for kind, text in recorder.events if kind == "mark"]
    assert len(marks) == 1 and marks[0].startswith("nsight-tui:oom ")
    assert json.loads(marks[0].split(" ", 1)[1]) == {"path": "step_0/backward", "message": "CUDA out of memory"}
    assert clock.records == [] and clock.failed[0]["status"] == "oom"
    pushes = [n for kind, n in recorder.events if kind == "push"]
    pops = [n for kind, n in recorder.events if kind == "pop"]
    assert pushes == ["step_0", "backward"] and len(pops) == 2  # every range closed
