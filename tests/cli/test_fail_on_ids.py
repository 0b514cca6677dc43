"""`report --fail-on` is a CI gate: an id no rule can find must fail the command (exit 2, the ids
listed), before any work, instead of passing silently."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain
from nsight_tui.cli import main
from nsight_tui.parsers.analyses.findings import RULES

TRACE = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")


@pytest.mark.parametrize("wanted", ["sync-memcpi", "sync-memcpy,launchbound", " , "])
def test_an_unknown_id_fails_listing_the_ids(wanted, capsys):
    assert main(["report", str(TRACE), "--fail-on", wanted]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("nsight-tui: --fail-on: no finding is called")
    for rule_id in RULES:  # every id a rule can report is offered
        assert rule_id in captured.err


def test_known_ids_and_any_run_the_report(capsys):
    first = main(["report", str(TRACE), "--fail-on", "sync-memcpy,launch-bound"])
    assert first in (0, 1)
    assert main(["report", str(TRACE), "--fail-on", "any"]) in (0, 1)
    assert "no finding is called" not in capsys.readouterr().err
