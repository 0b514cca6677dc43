"""`capture --ncu`: the ncu command line it builds (checked on a CPU with --dry-run), its refusals,
finding ncu, and the workload's cudaProfilerStart/Stop bracket around the chosen step."""
from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from nsight_tui.capture.errors import CaptureError
from nsight_tui.capture.ncu import SECTIONS, find_ncu
from nsight_tui.capture.workload import _Workload
from nsight_tui.cli import main as nsight_main


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run(argv, capsys):
    code = nsight_main(["capture", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def commands(out: str) -> list[list[str]]:
    return [shlex.split(line.strip()[2:]) for line in out.splitlines() if line.strip().startswith("$ ")]


def test_dry_run_prints_the_ncu_command_after_the_nsys_pair(tmp_path, capsys):
    nsys, ncu = executable(tmp_path / "bin" / "nsys"), executable(tmp_path / "bin" / "ncu")
    out_dir = tmp_path / "out"
    code, out, err = run(["--ncu", "--model", "small4", "--nsys", str(nsys), "--ncu-path", str(ncu), "--ncu-kernels",
                          "300", "--out", str(out_dir), "--dry-run"], capsys)
    assert code == 0, err
    count, profile, export, ncu_cmd = commands(out)
    assert profile[:2] == [str(nsys), "profile"] and export[:2] == [str(nsys), "export"]
    assert ncu_cmd[0] == str(ncu)
    # every thread's kernels between cudaProfilerStart and Stop, NVTX recorded, a bounded count
    assert ncu_cmd[1:5] == ["--profile-from-start", "off", "--nvtx", "-c"] and ncu_cmd[5] == "300"
    assert [ncu_cmd[i + 1] for i, a in enumerate(ncu_cmd) if a == "--section"] == list(SECTIONS)
    report = ncu_cmd[ncu_cmd.index("--export") + 1]
    assert report.endswith("small4_ctx128.ncu-rep")
    # the same workload, with the same step bracketed, under both tools
    app_nsys = profile[profile.index("-m"):]
    app_ncu = ncu_cmd[ncu_cmd.index("-m"):]
    for app in (app_nsys, app_ncu, count):
        assert app[app.index("--profile-step") + 1] == "step_1"
    strip = lambda app: app[:app.index("--status-file")]  # noqa: E731 - each run has its own status file
    assert strip(app_nsys) == strip(app_ncu)
    assert f"{out_dir / 'small4_ctx128'}.ncu-rep" in out
    assert not out_dir.exists()


@pytest.mark.parametrize("argv, message", [
    (["--ncu", "--ncu-step", "step_9"], "--ncu-step step_9 is not one of this run's iterations"),
    (["--ncu", "--ncu-step", "warmup_5", "--warmup", "2"], "is not one of this run's iterations"),
    (["--ncu", "--ncu-kernels", "0"], "--ncu-kernels must be at least 1"),
    (["--ncu", "--ddp", "2"], "--ncu profiles one process"),
])
def test_refusals_are_one_line(argv, message, tmp_path, capsys):
    code, out, err = run([*argv, "--dry-run", "--out", str(tmp_path / "o")], capsys)
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and message in err


def test_find_ncu_order_and_errors(tmp_path):
    mine = executable(tmp_path / "a" / "ncu")
    other = executable(tmp_path / "b" / "ncu")
    assert find_ncu(str(mine), env={"NCU": str(other)}) == mine
    assert find_ncu(None, env={"NCU": str(other), "PATH": str(mine.parent)}) == other
    assert find_ncu(None, env={"PATH": str(mine.parent)}, globs=()) == mine
    with pytest.raises(CaptureError, match="--ncu-path .* is not an executable"):
        find_ncu(str(tmp_path / "absent"), env={})
    with pytest.raises(CaptureError, match="ncu \\(Nsight Compute\\) not found"):
        find_ncu(None, env={"PATH": str(tmp_path / "empty")}, globs=())


class _Stub:
    """What `_Workload.profiled` touches: CUDA or not, synchronise, torch.cuda.profiler."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.calls: list[str] = []
        stub = self

        class Profiler:
            @staticmethod
            def start():
                stub.calls.append("start")

            @staticmethod
            def stop():
                stub.calls.append("stop")

        self.torch = type("torch", (), {"cuda": type("cuda", (), {"profiler": Profiler})})

    def sync(self):
        self.calls.append("sync")


@pytest.mark.parametrize("cuda, on, expected", [
    (True, True, ["sync", "start", "step", "sync", "stop"]),
    (True, False, ["step"]),
    (False, True, ["step"]),  # a CPU run has no CUDA profiler to start
])
def test_the_profiled_step_is_bracketed_by_profiler_start_and_stop(cuda, on, expected):
    stub = _Stub(cuda)
    with _Workload.profiled(stub, on):  # type: ignore[arg-type]
        stub.calls.append("step")
    assert stub.calls == expected


def test_stop_is_called_when_the_step_fails():
    stub = _Stub(True)
    with pytest.raises(RuntimeError):
        with _Workload.profiled(stub, True):  # type: ignore[arg-type]
            raise RuntimeError("out of memory")
    assert stub.calls[-1] == "stop"
