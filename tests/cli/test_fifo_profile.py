"""A FIFO (or device, socket) named as the profile: one line and exit 2 from every command that
opens a profile, before anything opens it. Opening a FIFO for reading waits for a writer, so a
command that opens it first (the per-user cache reading the file's identity, a probe of its last
page) never answers: the timeout below is that failure. The cache is on here, as users run it."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers import cli_process

GOOD = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")
LINE = "not a regular file (a pipe, device or socket); give the .sqlite export itself"


def run_with_cache(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "NSIGHT_TUI_NO_CACHE"}
    env["NSIGHT_TUI_CACHE_DIR"] = str(tmp_path / "cache")
    return cli_process.run(args, text=True,
                           timeout=90, stdin=subprocess.DEVNULL, env=env)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "trace.sqlite"
    os.mkfifo(path)
    return path


COMMANDS = {
    "stats": lambda f: ["stats", f],
    "report": lambda f: ["report", f],
    "diff_a": lambda f: ["diff", f, GOOD],
    "diff_b": lambda f: ["diff", GOOD, f],
    "ranks": lambda f: ["ranks", f],
    "ranks_two": lambda f: ["ranks", GOOD, f],
    "tui": lambda f: [f],
    "tui_diff_a": lambda f: ["--diff", f, GOOD],
    "tui_diff_b": lambda f: ["--diff", GOOD, f],
    "tui_two": lambda f: [GOOD, f],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_fifo_is_refused_in_one_line(tmp_path, fifo, name):
    proc = run_with_cache(tmp_path, *COMMANDS[name](fifo))  # TimeoutExpired: something opened the FIFO
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"nsight-tui: {fifo}: {LINE}"]
    assert proc.stdout == ""


def test_diff_refuses_b_before_reading_a(tmp_path, fifo):
    """B a FIFO: refused before A is loaded, so A's cache bundle is never written."""
    proc = run_with_cache(tmp_path, "diff", GOOD, fifo)
    assert proc.returncode == 2
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


def test_a_character_device_is_refused_too(tmp_path):
    proc = run_with_cache(tmp_path, "stats", "/dev/zero")  # reads forever if opened
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"nsight-tui: /dev/zero: {LINE}"]
