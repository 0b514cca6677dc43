"""A straggler replayed (docs/whatif.md, "A straggler"): GPT-2 small under DDP on two H200s, one export
per rank (sample_traces/replay/straggler), a 5 ms host sleep at the start of rank 1's steps alone, so
rank 0 waits for rank 1 in every all-reduce, and its twin without the sleep, captured back to back.
The change is measured on rank 0's own step clock (its `nsight-tui:step` marks, read with SQL); the
prediction is `whatif BASE_FOLDER nohost:-5ms`, the two ranks replayed as one, and `straggler` (the rank
that arrives last at the collectives without what it runs longer than the others: its pauses found
here by SQL too). Rank 0's NCCL kernels spin through its backward while they wait, and the backward's
kernels run slower beside them: kept at their measured lengths (no contention factor), the replay
missed the change by most of it."""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import statistics

import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.step_sql import python_steps, steps
from helpers.xz_samples import plain
from nsight_tui.parsers.api import Profile
from nsight_tui.parsers.read.rank_merge import load_export
from nsight_tui.parsers.replay import contention, edits, straggler
from nsight_tui.parsers.replay.predict import graph_of

STRAGGLER = SAMPLES / "replay" / "straggler"
UNEVEN = SAMPLES / "replay" / "straggler_uneven"  # rank 1's batch 12 where rank 0's is 8; the twin both at 8
EDIT = "nohost:-5ms"


def _rank0_step_ns(folder) -> float:
    return statistics.median(python_steps(plain(next(folder.glob("*rank0.sqlite*")))))


def _change(pair) -> tuple[float, float]:
    """The change on rank 0's clock and the issue's tolerance (20% of it or 2% of the twin's step), ns."""
    base, twin = _rank0_step_ns(pair / "base"), _rank0_step_ns(pair / "twin")
    return twin - base, max(0.2 * abs(twin - base), 0.02 * twin)


@pytest.fixture(scope="module")
def measured():
    return _change(STRAGGLER)


def test_the_sleep_on_one_rank_slows_the_other(measured):
    change, _ = measured
    assert change < -3e6  # rank 0 never sleeps, yet its step lost milliseconds to rank 1's pause


def test_the_ranks_replayed_as_one_keep_rank_0s_step():
    """Identity on the merged folder: the unchanged replay's step within 3% of rank 0's step ranges'
    period (start to the next step's start, SQL on its own export)."""
    want = statistics.median(it.period for it in steps(plain(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank0.sqlite.xz"))
                             if it.period)
    got = Profile.open_ranks(STRAGGLER / "base").whatif([]).replayed_step_ns
    assert abs(got - want) <= 0.03 * want, (got, want)


def _whatif(path, edit: str) -> dict:
    run = cli_process.run(["whatif", str(path), edit, "-f", "json"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("edit", [EDIT, "straggler"])
def test_the_straggler_removed_is_predicted_within_tolerance(measured, edit):
    change, tol = measured
    d = _whatif(STRAGGLER / "base", edit)
    predicted = d["predicted"]["step_ns"] - d["baseline"]["replayed_step_ns"]
    assert abs(predicted - change) <= tol, (predicted, change, tol)
    assert "GPU 0 x" in d["contention_assumption"]


# Per step_N range, the main thread's CUDA calls in it (globalTid's tid = its pid) and the host time
# before each: its start less the end of the thread's call before it
MAIN_GAPS = """
WITH c AS (SELECT r.start, r.globalTid, r.start - lag(r."end") OVER (PARTITION BY r.globalTid ORDER BY r.start) AS gap
           FROM CUPTI_ACTIVITY_KIND_RUNTIME r),
st AS (SELECT e.start, e."end", coalesce(e.text, s.value) AS name FROM NVTX_EVENTS e LEFT JOIN StringIds s
       ON s.id = e.textId WHERE e.eventType = 59 AND coalesce(e.text, s.value) GLOB 'step_[0-9]*')
SELECT st.name, c.gap FROM c JOIN st ON c.start >= st.start AND c.start < st."end"
WHERE (c.globalTid / 16777216) % 16777216 = c.globalTid % 16777216 ORDER BY c.start"""


def _main_gaps(path) -> dict[str, list[int]]:
    con = sqlite3.connect(f"{plain(path).resolve().as_uri()}?mode=ro", uri=True)
    out: dict[str, list[int]] = {}
    for name, gap in con.execute(MAIN_GAPS):
        out.setdefault(name, []).append(gap)
    con.close()
    return out


def test_the_straggler_edit_takes_the_pauses_sql_finds():
    """The straggler's main thread against rank 0's, call by call in each step (the same calls on both):
    the host time before a call at least 1 ms longer on rank 1 is its own pause; the edit takes exactly
    those, step by step (on the capture's own graph; `whatif` replays the typical step's)."""
    mine = _main_gaps(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank1.sqlite.xz")
    theirs = _main_gaps(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank0.sqlite.xz")
    assert mine.keys() == theirs.keys() and all(len(mine[k]) == len(theirs[k]) for k in mine)
    by_sql = {k: sum(a - b for a, b in zip(mine[k], theirs[k]) if a - b >= 1_000_000) for k in mine}
    assert all(4e6 < v < 7e6 for v in by_sql.values())  # the planted 5 ms, found by the pairing alone

    g, sr = graph_of(load_export(STRAGGLER / "base"))
    ev = straggler.even_out(g, sr, edits.LOOP_PAUSE_MIN_NS)
    assert ev is not None
    main = next(t for t, gtid in enumerate(g.thread_gtids) if (gtid >> 24) % (1 << 24) == gtid % (1 << 24) == ev.pid)
    a, b = g.thread_slices[main]
    took, t = g.delta_ns[a:b] - ev.delta_ns[a:b], g.pt_time[a:b]
    by_edit = {k: int(took[(t >= s0) & (t < s1)].sum()) for k, (s0, s1) in straggler.rank_steps(sr, ev.pid).items()}
    assert by_edit == by_sql


def test_the_straggler_edit_names_the_rank_the_finding_names():
    """The edit's words name the straggler as the finding and `ranks` do, rank 1 (its file's suffix), with its
    process, pid and GPU beside, as SQL reads them off rank 1's own export (the process with kernels)."""
    rank1 = plain(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank1.sqlite.xz")
    (pid, device), = sql_rows(rank1, "SELECT DISTINCT globalPid / 16777216 % 16777216, deviceId "
                                     "FROM CUPTI_ACTIVITY_KIND_KERNEL")
    (name,), = sql_rows(rank1, "SELECT name FROM PROCESSES WHERE pid = ?", pid)
    changed = _whatif(STRAGGLER / "base", "straggler")["edits"][0]["changed"]
    assert changed.startswith(f"the straggler, rank 1 ({name}, pid {pid}, GPU {device}), its collectives starting "), changed


NCCL_STARTS = """
SELECT k.globalPid / 16777216 % 16777216, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
WHERE s.value LIKE 'nccl%' ORDER BY k.start"""


def test_no_rank_straggles_where_the_finding_does_not_fire():
    """The committed one-export DDP pair (ctx 128, nothing planted): the finding is not raised, so the edit says no
    rank straggles by its measure, naming the latest rank (rank 1) and its lateness as SQL has it (each process's
    k-th NCCL kernel's start behind the earlier one's, mean), under 5% of the step, and still replays (asked to).
    The same on the committed per-rank folder; not on the planted sleep, where the finding fires."""
    from nsight_tui.parsers.analyses.findings.rules import findings
    from nsight_tui.parsers.read.load import load_trace

    one = SAMPLES / "small_ctx128_ddp2.sqlite.xz"
    assert "straggler" not in {f.id for f in findings(load_trace(one))}
    starts: dict[int, list[int]] = {}
    for pid, start in sql_rows(plain(one), NCCL_STARTS):
        starts.setdefault(pid, []).append(start)
    pids = sorted(starts)
    late = {p: statistics.mean(s - min(s, *t) for s, *t in zip(starts[p], *(starts[o] for o in pids if o != p)))
            for p in pids}
    latest = max(late, key=late.get)
    d = _whatif(one, "straggler")
    changed = d["edits"][0]["changed"]
    assert changed.startswith(f"no rank straggles by the straggler finding's measure: the latest, rank 1 (python3, pid "
                              f"{latest}, GPU 1), arrives {late[latest] / 1e6:,.2f} ms behind the first rank"), changed
    assert "under the finding's 5% of the step" in changed and "evened out anyway" in changed
    assert d["saving_ns"] < 0.01 * d["baseline"]["replayed_step_ns"]
    folder = _whatif(SAMPLES / "ranks_small_ctx128_ddp2", "straggler")["edits"][0]["changed"]
    assert folder.startswith("no rank straggles by the straggler finding's measure: the latest, rank 0 ("), folder
    planted = _whatif(STRAGGLER / "base", "straggler")["edits"][0]["changed"]
    assert planted.startswith("the straggler, rank 1 (") and "no rank straggles" not in planted


def test_ranks_in_step_have_no_straggler_to_save():
    """The committed one-export DDP capture (two H100s, nothing planted): the rank that arrives last
    has no pause and no kernel the other does not, so the edit's central saving is under 1% of the step
    (taking the shorter of the two ranks' every stretch would have given each rank's jitter away)."""
    d = _whatif(SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz", "straggler")
    saving = d["baseline"]["replayed_step_ns"] - d["predicted"]["step_ns"]
    assert abs(saving) < 0.01 * d["baseline"]["replayed_step_ns"]


@pytest.mark.parametrize("text", ["straggler:1", "straggler:"])
def test_the_straggler_edit_takes_no_argument(text):
    with pytest.raises(edits.EditError, match="takes no argument"):
        edits.parse(text)


@pytest.mark.parametrize("given", [["straggler", "straggler"], ["straggler", "fix:straggler"], ["straggler:"]])
def test_the_straggler_edit_is_given_once_or_refused(given):
    """`straggler` twice (or beside its finding's fix, the same edit) would list and apply it twice, and
    `straggler:` is an argument given empty: each refused in one line, no replay."""
    run = cli_process.run(["whatif", str(STRAGGLER / "base"), *given], text=True, cwd=ROOT, timeout=600)
    said = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(said) == 1 and "Traceback" not in run.stderr and not run.stdout, run.stderr
    assert ("takes no argument" if given == ["straggler:"] else "straggler given twice") in said[0]


def test_one_rank_has_no_straggler():
    run = cli_process.run(["whatif", str(SAMPLES / "small_ctx128.sqlite"), "straggler"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "no collective shared by two ranks" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_a_folder_of_one_ranks_export_is_said_to_hold_one_rank(tmp_path):
    """A folder holding rank 0's export alone (one process with kernels, SQL says): the refusal says the folder
    holds one rank's export only, not to give a folder of per-rank exports, which it was."""
    rank0 = STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank0.sqlite.xz"
    assert len(sql_rows(plain(rank0), "SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL")) == 1
    (tmp_path / rank0.name).symlink_to(rank0.resolve())
    run = cli_process.run(["whatif", str(tmp_path), "straggler"], text=True, cwd=ROOT, timeout=600)
    said = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(said) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"the folder holds one rank's export only, {rank0.name}" in said[0] and "a folder of" not in said[0]


def test_kept_at_measured_lengths_the_replay_misses(measured, monkeypatch):
    """The same replay with every GPU's factor 1 (kernels at their measured lengths, as before the
    contention was modelled): off by more than the tolerance, so the test above tells the two apart."""
    change, tol = measured
    read = contention.contention_of
    monkeypatch.setattr(contention, "contention_of",
                        lambda trace: dataclasses.replace(read(trace), factor={d: 1.0 for d in read(trace).factor}))
    p = Profile.open_ranks(STRAGGLER / "base").whatif([EDIT])
    assert p.contention == ""  # no factor above 1: nothing re-timed
    predicted = p.step_ns - p.replayed_step_ns
    assert abs(predicted - change) > tol, (predicted, change, tol)


@pytest.fixture(scope="module")
def found():
    from nsight_tui.parsers.analyses.findings.rules import findings

    return {f.id: f for f in findings(load_export(STRAGGLER / "base"))}


def test_the_straggler_finding_names_rank_1_and_its_replayed_saving(found, measured):
    """The finding on the slow capture alone: rank 1 by its file's suffix, its pauses as the SQL pairing
    finds them (the mean over the steps), and its saving the replay of its fix, within tolerance of the
    change measured on the twin."""
    change, tol = measured
    f = found["straggler"]
    assert f.evidence["straggler_rank"] == 1 and f.edits == ["straggler"] and f.replayed
    assert "rank 1" in f.title and not f.basis.startswith("pid")  # every rank's, not rank 0's steps
    mine = _main_gaps(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank1.sqlite.xz")
    theirs = _main_gaps(STRAGGLER / "base" / "small_ctx512_b8_ddp2_rank0.sqlite.xz")
    by_sql = sum(a - b for k in mine for a, b in zip(mine[k], theirs[k]) if a - b >= 1_000_000) / len(mine)
    assert f.evidence["pause_ns_per_step"] >= by_sql  # the main thread's, and any other thread's pauses
    assert abs(-f.saving_ms_per_step * 1e6 - change) <= tol


def test_no_straggler_finding_where_the_ranks_keep_pace():
    from nsight_tui.parsers.analyses.findings.rules import findings
    from nsight_tui.parsers.read.load import load_trace

    assert "straggler" not in {f.id for f in findings(load_trace(SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz"))}


def test_fix_straggler_replays_the_edit(measured):
    d = _whatif(STRAGGLER / "base", "fix:straggler")
    assert [e["edit"] for e in d["edits"]] == ["straggler (fix:straggler)"]


def test_an_uneven_batch_is_evened_within_tolerance():
    """A straggler of the same kernels, longer: the straggler's kernels at the others' time at the same
    place, read alone (the others' ran beside collectives spinning for the straggler), within tolerance
    of the twin where both ranks run the smaller batch."""
    change, tol = _change(UNEVEN)
    assert change < -20e6  # a third of the step, from one rank's larger batch
    d = _whatif(UNEVEN / "base", "straggler")
    predicted = d["predicted"]["step_ns"] - d["baseline"]["replayed_step_ns"]
    assert abs(predicted - change) <= tol, (predicted, change, tol)


def test_the_others_kernels_at_their_contended_length_miss_it(monkeypatch):
    """Without the contention factor (every GPU's 1: the others' kernels at the length they ran beside the
    spinning collectives) the same edit misses by more than the tolerance."""
    change, tol = _change(UNEVEN)
    read = contention.contention_of
    monkeypatch.setattr(contention, "contention_of",
                        lambda trace: dataclasses.replace(read(trace), factor={d: 1.0 for d in read(trace).factor}))
    p = Profile.open_ranks(UNEVEN / "base").whatif(["straggler"])
    assert abs(p.step_ns - p.replayed_step_ns - change) > tol


ITEM = SAMPLES / "replay" / "straggler_item"  # loss.item() after each forward on rank 1 alone (the base alone)

STEP_SYNCS = """
SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
JOIN (SELECT e.start AS a, e."end" AS b FROM NVTX_EVENTS e LEFT JOIN StringIds t ON t.id = e.textId
      WHERE e.eventType = 59 AND coalesce(e.text, t.value) GLOB 'step_[0-9]*') st ON r.start >= st.a AND r.start < st.b
WHERE s.value LIKE 'cudaStreamSynchronize%'"""


def test_a_sync_of_the_stragglers_own_no_longer_waits():
    """A blocking call the straggler makes where the other rank makes none (a `.item()` of rank 1's own)
    no longer waits: the calls SQL finds inside rank 1's steps and not rank 0's are the ones the edit
    unblocks, and it predicts what `nosync:cudaStreamSynchronize` (told which call) predicts, to 0.1 ms
    (beside the syncs it evens a few kernels)."""
    syncs = {r: len(sql_rows(plain(ITEM / f"small_ctx512_b8_ddp2_rank{r}.sqlite.xz"), STEP_SYNCS)) for r in (0, 1)}
    assert syncs[0] == 0 and syncs[1] > 0
    g, sr = graph_of(load_export(ITEM))
    ev = straggler.even_out(g, sr, edits.LOOP_PAUSE_MIN_NS)
    assert ev is not None and len(ev.unblocked) == syncs[1]
    names = {g.trace.api_names[g.trace.api["name"].to_numpy()[g.blocks[k].call]] for k in ev.unblocked}
    assert all(n.startswith("cudaStreamSynchronize") for n in names)
    from nsight_tui.parsers.analyses.findings.rules import findings

    f = {x.id: x for x in findings(load_export(ITEM))}["straggler"]  # its waits raise it; the replay says how little
    assert f.evidence["own_syncs"] == syncs[1] and f.saving_ms_per_step < f.estimate_ms_per_step
    evened, told = (_whatif(ITEM, e) for e in ("straggler", "nosync:cudaStreamSynchronize"))
    assert abs(evened["predicted"]["step_ns"] - told["predicted"]["step_ns"]) <= 0.1e6
