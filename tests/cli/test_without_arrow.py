"""Without pyarrow and adbc-driver-sqlite (both optional at run time): the SQLite export is read
by Python's sqlite3 with the same output, bad rows left out alike, and nsys's columnar folders
are refused in one line that says what to install. The CLI runs with tests/without_arrow first
on PYTHONPATH, whose sitecustomize makes both imports fail (`PYTHONPATH=tests/without_arrow
python -m pytest tests/core tests/cli` runs the whole of both suites that way)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SAMPLES, mutated_copy
from helpers import cli_process

HIDE = str(Path(__file__).resolve().parents[1] / "without_arrow")
REPORTS = "nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum,cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum"


def run_cli(*args, hide: bool):
    env = dict(os.environ)
    if hide:
        env["PYTHONPATH"] = os.pathsep.join([HIDE, *filter(None, [env.get("PYTHONPATH")])])
    return cli_process.run(args, text=True,
                           timeout=300, stdin=subprocess.DEVNULL, env=env)


def test_the_hiding_works():
    probe = subprocess.run([sys.executable, "-c", "import pyarrow"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": HIDE})
    assert probe.returncode != 0 and "hidden by tests/without_arrow" in probe.stderr


def test_stats_identical_without_the_native_reader(tmp_path):
    path = mutated_copy(tmp_path, "bad", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'x' WHERE rowid = 5",
                        src=SAMPLES / "small_ctx128.sqlite")
    for target in (SAMPLES / "small_ctx128.sqlite", path):
        without = run_cli("stats", target, "-f", "csv", "-r", REPORTS, hide=True)
        with_it = run_cli("stats", target, "-f", "csv", "-r", REPORTS, hide=False)
        assert without.returncode == with_it.returncode == 0, without.stderr + with_it.stderr
        assert without.stdout == with_it.stdout and without.stdout
        assert without.stderr == with_it.stderr  # the same notes (the bad row left out by both)
    assert "note: left out 1 of" in without.stderr


def test_columnar_folder_without_pyarrow_is_one_line():
    proc = run_cli("stats", SAMPLES / "twin_small_ctx128_pqtdir", hide=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs pyarrow (pip install pyarrow)" in lines[0], proc.stderr
