"""Data-parallel capture: torchrun starts one workload process per rank (here on the CPU, gloo)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

pytest.importorskip("torch")

from nsight_tui.capture import ddp  # noqa: E402
from nsight_tui.parsers.read.conventions import output_stem  # noqa: E402


def test_environment_says_which_rank():
    assert not ddp.from_environment({}).active
    d = ddp.from_environment({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert (d.rank, d.local_rank, d.world_size, d.active) == (1, 1, 2, True)
    assert d.metadata() == {"rank": 1, "local_rank": 1, "world_size": 2}
    assert output_stem("small", 128, processes=2) == "small_ctx128_ddp2"
    assert output_stem("small", 128) == "small_ctx128"


def test_two_ranks_train_under_torchrun_on_the_cpu(tmp_path):
    status = tmp_path / "status.json"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         "-m", "nsight_tui.capture.workload", "--model", "tiny", "--ctx", "16", "--batch", "2", "--steps", "1",
         "--warmup", "0", "--device", "cpu", "--status-file", str(status)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(status.read_text())
    assert report["status"] == "ok" and [s["name"] for s in report["steps"]] == ["step_0"]
    # one rank speaks for the run: the step line is printed once, not once per rank
    assert done.stdout.count("step_0:") == 1
