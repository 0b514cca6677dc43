"""`-q`/`--quiet`: no progress and no notes on stderr; the results (stdout, the files written) and
the errors stay, as ruff's and uv's `-q` do."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES
from helpers.cli import run_main
from helpers.xz_samples import plain

SAMPLE = SAMPLES / "small_ctx128.sqlite"
pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="sample trace missing")


def test_stats_says_its_notes_and_quiet_says_none(tmp_path: Path):
    loud = run_main("stats", SAMPLE, "-r", "nvtx_sum", "-o", tmp_path / "loud")
    assert loud.returncode == 0
    assert "attribution: process" in loud.stderr and "wrote " in loud.stderr and "note: " in loud.stderr
    for spelling in (["stats", "-q"], ["stats", "--quiet"], ["-q", "stats"]):  # before the subcommand too, as uv
        out = tmp_path / spelling[-1].strip("-")
        ran = run_main(*spelling, SAMPLE, "-r", "nvtx_sum", "-o", out)
        assert (ran.returncode, ran.stderr) == (0, ""), spelling
        assert Path(f"{out}_nvtx_sum.txt").read_text() == (tmp_path / "loud_nvtx_sum.txt").read_text()


def test_quiet_keeps_the_result_on_stdout_and_the_errors():
    loud = run_main("stats", SAMPLE, "-r", "cuda_gpu_kern_sum", "-f", "csv")
    quiet = run_main("stats", "-q", SAMPLE, "-r", "cuda_gpu_kern_sum", "-f", "csv")
    assert quiet.returncode == 0 and quiet.stderr == "" and loud.stderr != ""
    assert quiet.stdout == loud.stdout and quiet.stdout.count("\n") > 5
    missing = run_main("report", "-q", SAMPLES / "no_such.sqlite")
    assert missing.returncode == 2 and "no_such.sqlite" in missing.stderr


def test_report_on_a_folder_counts_its_progress_and_quiet_drops_it(tmp_path: Path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("small_ctx128.sqlite", "small_ctx128_fwd.sqlite.xz"):
        (folder / name.removesuffix(".xz")).symlink_to(plain(SAMPLES / name))
    loud = run_main("report", folder, "-f", "json")
    assert loud.returncode == 0
    assert [line for line in loud.stderr.splitlines() if line.startswith("analysing")] == [
        "analysing 1/2 small_ctx128.sqlite", "analysing 2/2 small_ctx128_fwd.sqlite"]
    quiet = run_main("report", "-q", folder, "-f", "json")
    assert (quiet.returncode, quiet.stderr) == (0, "") and quiet.stdout == loud.stdout


def test_help_lists_quiet_and_the_option_is_on_every_profile_command():
    for command in ("stats", "report", "diff", "ranks", "ncu", "whatif", "serve", "mcp", "open"):
        ran = run_main("help", command)
        assert "-q, --quiet" in ran.stdout, command


def test_quiet_silences_the_cache_note_below_the_command_line(tmp_path: Path):
    """A cache folder that cannot be written is a note, said from the core: quiet there too."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NSIGHT_TUI_CACHE_DIR": str(blocker / "cache")}
    env.pop("NSIGHT_TUI_NO_CACHE", None)
    command = [sys.executable, "-m", "nsight_tui", "stats", SAMPLE, "-r", "nvtx_sum"]
    loud = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert loud.returncode == 0 and "cache not used" in loud.stderr
    quiet = subprocess.run([*command, "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert (quiet.returncode, quiet.stderr) == (0, "") and quiet.stdout == loud.stdout
