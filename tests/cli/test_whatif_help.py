"""`nsight-tui whatif --help` names every form an EDIT takes and what PATTERN and RANGE may be: the
help said nohost[:RANGE] only (nohost:2ms and nohost:-5ms were in the docs alone) and left PATTERN
and RANGE unexplained."""
from __future__ import annotations

from conftest import ROOT
from helpers import cli_process


def test_the_edit_help_says_each_form_and_its_words():
    run = cli_process.run(["whatif", "--help"], text=True, cwd=ROOT, timeout=120)
    said = " ".join(run.stdout.split())  # argparse wraps at the terminal's width
    assert run.returncode == 0, run.stderr
    # K's sense: a newcomer cannot tell speed:gemm=2 (twice as fast) from a duration twice as long
    for words in ("speed:PATTERN[@RANGE]=K (K times faster, below 1 slower;",
                  "nohost[:RANGE|DURATION]", "nohost:-5ms", "fix:FINDING_ID (a finding's id", "PATTERN: a kernel family",
                  "RANGE: an NVTX range name or glob", "`step` (the default) the steady-state steps"):
        assert words in said, words


def test_without_a_trace_the_error_asks_for_the_trace_alone():
    """No edit is the unchanged replay, yet `nsight-tui whatif` alone said "the following arguments
    are required: trace, EDIT" (argparse's reading of a `*` positional without a default)."""
    run = cli_process.run(["whatif"], text=True, cwd=ROOT, timeout=120)
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 2 and last.endswith("the following arguments are required: trace"), run.stderr


def test_options_may_come_between_the_trace_and_the_edits():
    """`whatif TRACE -f json speed:gemm=2` (the order `report TRACE -f json` is typed in) said
    "unrecognized arguments: speed:gemm=2": argparse took no edit before the first option and
    refused the rest. Options now go anywhere; the edits keep their order."""
    import json

    from conftest import SAMPLES

    run = cli_process.run(["whatif", str(SAMPLES / "small_ctx128.sqlite"), "-f", "json", "speed:gemm=2", "-q",
                           "nosync"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [e["edit"] for e in json.loads(run.stdout)["edits"]] == ["speed:gemm=2", "nosync"]


def test_an_ncu_report_that_is_not_there_is_said_even_when_no_fix_reads_it():
    """`--ncu` is read by fix:occupancy-limited only; a mistyped path beside other edits was ignored
    in silence (exit 0), so the user took the answer for one that had read it."""
    from conftest import SAMPLES

    run = cli_process.run(["whatif", str(SAMPLES / "small_ctx128.sqlite"), "--ncu", "no_such_report.ncu-rep"],
                          text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and not run.stdout, run.stdout
    assert run.stderr.strip() == "nsight-tui: no_such_report.ncu-rep: no such file (--ncu)"
