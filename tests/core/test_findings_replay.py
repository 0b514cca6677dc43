"""Findings' savings from the replay (parsers/analyses/findings/replayed.py) against the committed
twins (tests/helpers/replay_twins.py): on each pair whose base raises the finding the change answers,
the finding's replayed saving against the step saved on the workload's own Python clock (the
`*.steps.json` step marks, medians), within 20% of that change or 2% of the twin's step, whichever is
larger; the `fix:ID` edit and "all fixes together" through the front door."""
from __future__ import annotations


import numpy as np
import pytest

from conftest import ROOT, SAMPLES
from helpers.replay_twins import TWINS
from helpers.step_sql import python_steps
from helpers.twins_table import noise_ns
from helpers.xz_samples import plain

from nsight_tui.parsers import Profile
from nsight_tui.parsers.analyses.findings import findings
from nsight_tui.parsers.analyses.findings.replayed import NO_EDIT
from nsight_tui.parsers.analyses.findings.rules import answers
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.edits import EditError
from nsight_tui.render.findings import findings_json
from helpers import cli_process

# Pairs whose finding's replayed saving misses the twin (docs/whatif.md, "Findings on the replay"):
# strict, so a fix shows up as a pass to move.
KNOWN_MISSES = {
    "host sleep removed": "nohost at the rule's 1 ms removes every long pause; the twin kept 0.7 ms of Python there",
    "fp32 -> TF32 (async, H100)": "the two captures' CPU work differs by more than the tolerance",
    "fp32 -> TF32 large (async, H100)": "likewise: the TF32 capture's autograd thread did 83 ms of host work a step, 50",
    "fp32 -> TF32 (H100 repeat r3)": "the step the faster GEMMs leave is the CPU's, whose pace the twin ran at another: "
                                     "43.39 replayed at any share of the peak ratio, 35.43 measured",
    "pageable -> pinned input": "the pageable capture's autograd thread ran at 1.44x the pinned one's pace: 8.27 "
                                "replayed, 14.08 measured (12.44 at the twin's CPU pace)",
}
# Pairs whose change the rule does not see on the base (the twins table replays their edits as given)
NOT_RAISED = {
    "manual tanh GELU -> one kernel (ctx 512, GPU-bound, H100)": "the chain's kernels run 30-50 us there, over the "
                                                                  "rule's 20 us",
}
PAIRS = [t for t in TWINS if t.rule and t.rule not in NO_EDIT and t.name not in NOT_RAISED]


@pytest.mark.parametrize("twin", [t for t in TWINS if t.name in NOT_RAISED], ids=lambda t: t.name)
def test_a_pair_the_rule_does_not_see_is_one_it_does_not_raise(twin):
    assert twin.rule not in {f.id for f in findings(load_trace(plain(twin.base)), replay=False)}


@pytest.mark.parametrize("twin", [pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[t.name]))
                                  if t.name in KNOWN_MISSES else t for t in PAIRS], ids=lambda t: t.name)
def test_replayed_saving_against_the_twin_on_the_python_clock(twin):
    base, other = plain(twin.base), plain(twin.twin)
    saved_ms = float(np.median(python_steps(base)) - np.median(python_steps(other))) / 1e6
    tol_ms = max(0.2 * abs(saved_ms), 0.02 * float(np.median(python_steps(other))) / 1e6)
    f = next(f for f in findings(load_trace(base)) if f.id == twin.rule)
    assert f.replayed and f.edits and f.estimate_ms_per_step is not None, f.basis
    assert f.replay_low_ms_per_step <= f.saving_ms_per_step <= f.replay_high_ms_per_step
    # where one pair cannot tell its change from zero (tests/helpers/twins_table.py's noise: twice the
    # standard error of the difference of the two captures' mean steps), within that noise of it
    noise_ms = noise_ns(python_steps(base), python_steps(other)) / 1e6
    err = abs(f.saving_ms_per_step - saved_ms)
    assert err <= tol_ms or (abs(saved_ms) <= noise_ms and err <= noise_ms), (f.saving_ms_per_step, saved_ms, tol_ms)


def test_every_rule_has_an_edit_or_says_why_it_has_none():
    from nsight_tui.parsers.analyses.findings import RULE_IDS
    from nsight_tui.parsers.analyses.findings.replayed import EDITS
    assert set(EDITS) | set(NO_EDIT) == set(RULE_IDS) and not set(EDITS) & set(NO_EDIT)


def test_every_finding_names_its_edit_and_fix_id_replays_it():
    path = SAMPLES / "small_ctx128.sqlite"
    found = findings(load_trace(path))
    assert found
    for f in found:
        assert f.edits or f.id in NO_EDIT, f.id
        assert f.estimate_ms_per_step is not None
    # ranked by the (replayed) saving
    assert [f.saving_ms_per_step for f in found] == sorted((f.saving_ms_per_step for f in found), reverse=True)
    prof = Profile.open(path)
    for f in (f for f in found if f.replayed):
        p = prof.whatif([f"fix:{f.id}"])
        assert p.saving_ns / 1e6 == pytest.approx(f.saving_ms_per_step, abs=1e-6)
        assert p.edits[0].edit.endswith(f"(fix:{f.id})")


def test_all_fixes_together_is_one_replay():
    path = SAMPLES / "small_ctx128.sqlite"
    doc = findings_json(answers(load_trace(path)))
    shown = {f["id"]: f for f in doc["findings"]}
    replayed = [i for i, f in shown.items() if f["replayed"]]
    assert len(replayed) >= 2
    together = Profile.open(path).whatif([f"fix:{i}" for i in replayed]).saving_ns / 1e6
    rest = sum(f["saving_ms_per_step"] for f in shown.values() if not f["replayed"])
    assert doc["combined_saving_ms_per_step"] == pytest.approx(together + rest, abs=1e-6)
    assert doc["combined_basis"].startswith("one replay with")


def test_a_fix_no_finding_names_is_one_line_and_exit_2():
    with pytest.raises(EditError):
        Profile.open(SAMPLES / "small_ctx128.sqlite").whatif(["fix:no-such-finding"])
    run = cli_process.run(["whatif", str(SAMPLES / "small_ctx128.sqlite"),
                          "fix:no-such-finding"], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and run.stdout == "" and len(run.stderr.strip().splitlines()) == 1


def test_all_fixes_together_never_exceed_the_step(async_trace, monkeypatch):
    """A launch-bound conv net (Lightning ResNet-50, NCHW): the graph replay leaves the step GPU-bound,
    and a finding the replay cannot express (here the pageable copies, their `pin` taken away for the
    test: every finding on this capture has its edit) was estimated on the whole step: together they
    may claim at most what the replay leaves, never more than the step itself."""
    from nsight_tui.parsers.analyses.findings import answers, replayed

    path = async_trace(SAMPLES / "thirdparty" / "lightning_resnet50_b32.sqlite.xz")
    every = findings_json(answers(load_trace(path)))
    assert all(f["replayed"] for f in every["findings"]) and "plus the estimates" not in every["combined_basis"]
    monkeypatch.delitem(replayed.EDITS, "pageable-memcpy")
    monkeypatch.setitem(replayed.NO_EDIT, "pageable-memcpy", "taken away for the test")
    doc = findings_json(answers(load_trace(path)))
    step_ms = doc["step_ns"] / 1e6
    assert [f["id"] for f in doc["findings"] if not f["replayed"]] == ["pageable-memcpy"]  # an estimate: the cap can bite
    assert "plus the estimates of pageable-memcpy" in doc["combined_basis"]
    assert doc["combined_saving_ms_per_step"] <= step_ms
    # the findings alone overlap: their sum claims more than the one replay of every fix
    assert sum(f["saving_ms_per_step"] for f in doc["findings"]) > doc["combined_saving_ms_per_step"]
    # the layout transposes' fix is replayed: dropped with their launch calls (tests/core/test_replay_drop.py)
    layout = next(f for f in doc["findings"] if f["id"] == "channels-last-layout")
    assert layout["replayed"] and layout["edits"] == ["drop:layout@step"]


def test_all_fixes_together_leave_a_loader_bound_step_its_kernels(async_trace):
    """A ResNet-18 whose DataLoader has too few workers (sample_traces/loader): every other step is slow, and
    slow for host time outside CUDA alone (warmup-in-window, an estimate) which is the loader's wait the replayed
    `nohost` already takes (host-bound-gap). Together the fixes cannot leave less than the step's own kernels
    (SQL: the union of its kernels' time inside the steps, per step); the estimate added on top claimed the whole
    step (69.86 of 69.86 ms)."""
    import sqlite3

    from nsight_tui.parsers.analyses.findings import answers

    path = async_trace(SAMPLES / "loader" / "torchvision_resnet18_w2_b32.sqlite.xz")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        steps = sorted(con.execute("""SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*'""").fetchall())
        kernels = sorted(con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
    busy, reach = 0, 0
    for b, e in kernels:  # union of kernel time inside the steps
        lo = max(b, reach)
        if e > lo and any(s0 <= b < s1 for s0, s1 in steps):
            busy += e - lo
        reach = max(reach, e)
    kernels_ms = busy / len(steps) / 1e6
    doc = findings_json(answers(load_trace(path)))
    step_ms = doc["step_ns"] / 1e6
    slow = next(f for f in doc["findings"] if f["id"] == "warmup-in-window")
    assert not slow["replayed"] and slow["evidence"]["host_only"]
    assert "host-bound-gap" in {f["id"] for f in doc["findings"] if f["replayed"]}
    assert 0 < doc["combined_saving_ms_per_step"] <= step_ms - kernels_ms
    assert "warmup-in-window not added" in doc["combined_basis"]


def test_a_long_edit_is_named_by_its_fix_id_in_the_report():
    """The elementwise-chain rule's fuse patterns (kilobytes of kernel-name globs on a third-party
    trainer) made the basis, fix and "together" cells walls of text: sentences name them `fix:ID`,
    which `whatif TRACE fix:ID` spells out; JSON keeps every edit under `edits`."""
    from nsight_tui.parsers.analyses.findings.result import EDIT_WORDS_MAX

    path = SAMPLES / "thirdparty" / "hf_trainer_qwen2_l4_b8.sqlite.xz"
    doc = findings_json(answers(load_trace(path)))
    chain = next(f for f in doc["findings"] if f["id"] == "elementwise-chain")
    assert chain["replayed"] and len(" ".join(chain["edits"])) > EDIT_WORDS_MAX
    kinds = {e.partition(":")[0] for e in chain["edits"]}
    assert kinds == {"fuse"}
    assert f"`fix:elementwise-chain ({len(chain['edits'])} fuse edits)`" in chain["basis"]
    assert not any(e in chain["basis"] or e in doc["combined_basis"] for e in chain["edits"])
    short = next(f for f in doc["findings"] if f["replayed"] and len(" ".join(f["edits"])) <= EDIT_WORDS_MAX)
    assert f"`{' '.join(short['edits'])}`" in short["basis"]  # a short one is said as it is
    run = cli_process.run(["report", str(path)], text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0 and max(len(cell) for line in run.stdout.splitlines()
                                       for cell in line.split(" | ")) < 1500


def test_a_chain_in_a_range_whose_name_has_a_comma_replays(async_trace):
    """Lightning's ResNet-50 (no NVTX inside the step) has elementwise chains in the inferred stage
    "later blocks, head and loss": the fix's edit carried that name after its `@`, where a comma ends
    the range, and `whatif fix:elementwise-chain` answered "bad edit 'fuse:...@later blocks, head and
    loss,3+,<20us'", an edit the user never wrote (the finding silently fell back to the rule's
    estimate, and `w` on it in the TUI refused). The range is now a glob its name matches."""
    path = async_trace(SAMPLES / "thirdparty" / "lightning_resnet50_b32.sqlite.xz")
    chain = next(f for f in findings(load_trace(path)) if f.id == "elementwise-chain")
    assert not chain.not_replayed, chain.not_replayed
    assert any(e.endswith("@later blocks? head and loss,3+,<20us") for e in chain.edits), chain.edits
    p = Profile.open(path).whatif(["fix:elementwise-chain"])
    assert "launched inside one 'later blocks? head and loss' range" in p.edits[0].changed
