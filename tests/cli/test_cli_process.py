"""The command-line tests' forked commands (tests/helpers/cli_process.py) end as a started
`python -m nsight_tui` ends: the same exit status, stdout and stderr, byte for byte, for a command
that works, one refused with one line, argparse's usage error and an unknown subcommand; and its
timeout is subprocess's (TimeoutExpired, the command killed)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers import cli_process

SMALL = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")
CASES = {
    "works": ["stats", SMALL, "-r", "nvtx_sum", "-f", "csv"],
    "missing file": ["report", SAMPLES / "no_such.sqlite"],
    "usage error": ["stats", SMALL, "--no-such-flag"],
    "unknown subcommand": ["statz"],
    "help": ["whatif", "--help"],
}


@pytest.mark.parametrize("case", CASES)
def test_a_forked_command_ends_as_a_started_one(case):
    args = [str(a) for a in CASES[case]]
    forked = cli_process.run(args, text=True, timeout=300)
    started = subprocess.run([sys.executable, "-m", "nsight_tui", *args], capture_output=True, text=True,
                             timeout=300, stdin=subprocess.DEVNULL)
    assert (forked.returncode, forked.stdout, forked.stderr) == (started.returncode, started.stdout, started.stderr)
    assert (started.returncode == 0) == (case in ("works", "help"))


def test_input_never_blocks_a_command_that_does_not_read_it_and_a_timeout_raises():
    # `-` is no file: the command refuses it without reading stdin, so the input must not block it
    done = cli_process.run(["stats", "-"], input="x" * 200_000, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    with pytest.raises(subprocess.TimeoutExpired):
        cli_process.run(["report", SMALL], timeout=0.001)
