"""The straggler's why (analyses.straggler_why) is said wherever the straggler is: `ranks`' Markdown
and JSON, the report's ranks section, the TUI's ranks lines."""
from __future__ import annotations

import json

from helpers.xz_samples import plain
from conftest import SAMPLES
from nsight_tui.cli import main
from nsight_tui.parsers import Profile
from nsight_tui.parsers.analyses.straggler_why import straggler_why
from nsight_tui.parsers.analyses.ranks import ranks_of_trace

DDP = plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz")


def test_the_straggler_says_why_in_every_output(capsys):
    profile = Profile.open(DDP)
    plain = ranks_of_trace(profile.trace)
    why = straggler_why(profile.trace, plain.ranks, plain.straggler)
    assert plain.straggler is not None and why is not None  # the two ranks of this export: one is late
    run = profile.ranks()
    assert run.straggler_why == why.verdict
    assert main(["ranks", str(DDP), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["straggler"]["why"] == why.verdict
    assert main(["ranks", str(DDP)]) == 0
    assert f"Why: {why.verdict}." in capsys.readouterr().out
    report = profile.report()
    assert report.ranks is not None and report.ranks.straggler_why == why.verdict
