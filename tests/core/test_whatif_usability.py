"""whatif as a newcomer or an agent meets it: an edit that names nothing says what there is to name
(the ranges, the blocking calls, the kernel families, the edit kinds), and a twin that cannot be
paired step for step says so rather than answering with the unchanged step."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import SAMPLES, shared_trace
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.edits import EditError, parse
from nsight_tui.parsers.replay.predict import predict

SMALL = SAMPLES / "small_ctx128.sqlite"  # GPT-2, steps step_0..2, forward/backward/optimizer inside


@pytest.fixture(scope="module")
def small():
    return load_trace(SMALL)


def test_a_range_that_names_nothing_lists_the_ranges_there(small):
    with pytest.raises(EditError) as err:
        predict(small, ["nosync:no_such_range"])
    said = str(err.value)
    assert "no NVTX range named 'no_such_range'" in said
    # the names there, numbered ones once, and what `step` is
    assert "forward" in said and "optimizer" in said and "step_N" in said and "step_1" not in said
    assert "`step` the steady-state steps" in said and "\n" not in said


def test_nosync_of_a_call_name_that_blocks_nowhere_lists_the_blocking_calls(small):
    """nosync:CALL where CALL names no blocking call was read as a range: 'no NVTX range named
    cudaStreamSync' left the user to guess what CALL may be."""
    with pytest.raises(EditError) as err:
        predict(small, ["nosync:cudaStreamSync"])
    said = str(err.value)
    assert said.startswith("nosync:cudaStreamSync: 'cudaStreamSync' names no blocking CUDA call")
    assert "cudaStreamSynchronize x" in said and "cudaDeviceSynchronize x" in said and "ranges there:" in said


def test_nosync_of_a_call_that_blocks_only_outside_the_steps_says_so(small):
    """This capture's cudaStreamSynchronize calls all block in its warm-up: before, 'no blocking CUDA
    call inside 'cudaStreamSynchronize'', as if the call were a range."""
    with pytest.raises(EditError, match=r"none of the [\d,]+ blocking cudaStreamSynchronize calls is inside a "
                                        r"steady-state step"):
        predict(small, ["nosync:cudaStreamSynchronize"])


def test_a_pattern_that_matches_nothing_names_the_families(small):
    with pytest.raises(EditError) as err:
        predict(small, ["speed:GEMM=2"])
    said = str(err.value)
    assert "did you mean the family 'gemm'?" in said and "its families: gemm," in said
    # a pattern that names ops, none of them inside RANGE: the range is what is wrong, not the family
    with pytest.raises(EditError) as err:
        predict(small, ["speed:optimizer@forward=2"])
    assert "its families" not in str(err.value)


@pytest.mark.parametrize("text, kind", [("sped:gemm=2", "speed"), ("NOSYNC", "nosync"), ("kernels_from:x", "kernels-from")])
def test_a_misspelled_edit_kind_is_guessed(text, kind):
    with pytest.raises(EditError, match=f"did you mean '{kind}'"):
        parse(text)


def _renamed_steps(tmp_path: Path, name: str, sql: str) -> Path:
    path = tmp_path / f"{name}.sqlite"
    shutil.copyfile(SMALL, path)
    with sqlite3.connect(path) as db:
        db.execute(sql)
    return path


def test_a_twin_without_this_captures_step_names_is_refused(small, tmp_path):
    """Kernels are paired step by step by the steps' names: a twin whose steps are named otherwise
    paired nothing, and the answer was the unchanged step said as a prediction."""
    twin = _renamed_steps(tmp_path, "renamed", "UPDATE StringIds SET value = replace(value, 'step_', 'iter_step_') "
                                               "WHERE value LIKE 'step_%'")
    with pytest.raises(EditError, match="none of small_ctx128.sqlite's steps .* has an iteration of the same name"):
        predict(small, [f"kernels-from:{twin}"])


def test_a_twin_lacking_some_steps_says_which_keep_their_durations(small, tmp_path):
    """A twin of fewer steps (twin_small_ctx128 has one) leaves the others as captured, and the median
    over the steps counts them: the answer says so."""
    twin = _renamed_steps(tmp_path, "partial", "UPDATE StringIds SET value = 'step_9' WHERE value = 'step_2'")
    changed = predict(small, [f"kernels-from:{twin}"]).edits[0].changed
    assert "kernels of 1 of this capture's steps (step_2) keep their own durations" in changed
    assert "its steps: step_0, step_1, step_9" in changed


def test_steps_marked_for_a_process_are_walked_on_its_cuda_thread():
    """h100_2gpu_1s (two ranks, emit_nvtx): its steps are framed for each process, on no thread that
    made a CUDA call, and the walk found nothing: 'What holds the step' was an empty table. Now the
    process's thread with the most CUDA calls, both ranks' CPU and GPU on the path, the shares the
    whole window."""
    trace = load_trace(shared_trace("h100_2gpu_1s"))
    p = predict(trace, [])
    kinds = {h.kind for h in p.holders}
    assert {"cpu-host", "gpu"} <= kinds, p.holders
    assert sum(h.share for h in p.holders) == pytest.approx(1, abs=0.02)
    assert {"111", "112"} <= {w for h in p.holders for w in ("111", "112") if f"({w})" in h.what}


def test_kernels_from_says_how_many_pairs_share_a_name(small):
    # the figure that tells a twin of this program from another program's capture: the kernels and
    # device-to-device copies paired iteration by iteration, and of them those of the same name and kind in
    # both (a capture paired with itself pairs every kernel and device copy of the export, SQL's counts,
    # each with its namesake)
    import re

    p = predict(small, [f"kernels-from:{SMALL}"])
    said = p.edits[0].changed
    m = re.search(r"([\d,]+) kernels and device copies take their twin's duration .*?; ([\d,]+) of them "
                  r"named alike in both\)", said)
    assert m, said
    matched, alike = (int(x.replace(",", "")) for x in m.groups())
    con = sqlite3.connect(f"file:{SMALL}?mode=ro", uri=True)
    kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]  # warm-ups paired too
    copies = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (8, 13)").fetchone()[0]
    con.close()
    assert copies > 0 and matched == kernels + copies and alike == kernels + copies


def test_steps_marked_for_a_process_move_with_the_edits(tmp_path):
    """Steps framed for a process, on no thread that made a CUDA call (h100_2gpu_1s's and mfu_2gpu_before's
    emit_nvtx steps), kept their measured instants in every replay: each edit saved exactly 0.00 ms.
    The host-sleep capture (a 5 ms sleep planted at each step's start) with its step_N and warmup_N
    ranges moved onto its process's thread-less id must predict what the capture framed on its main
    thread predicts, and the planted sleep's 5 ms."""
    import lzma

    framed = tmp_path / "host-sleep.sqlite"
    framed.write_bytes(lzma.decompress((SAMPLES / "findings" / "small_ctx128_host-sleep.sqlite.xz").read_bytes()))
    moved = tmp_path / "host-sleep_process.sqlite"
    shutil.copyfile(framed, moved)
    with sqlite3.connect(moved) as db:
        text = "coalesce(text, (SELECT value FROM StringIds WHERE id = textId))"
        n = db.execute(f"UPDATE NVTX_EVENTS SET globalTid = globalTid - (globalTid % 16777216) "
                       f"WHERE {text} GLOB 'step_[0-9]*' OR {text} GLOB 'warmup_[0-9]*'").rowcount
    assert n >= 4
    a, b = load_trace(framed), load_trace(moved)
    for edits in (["nohost:-5ms"], ["graph"]):
        on_thread, on_process = predict(a, edits), predict(b, edits)
        assert on_process.saving_ns > 0, edits
        assert on_process.step_ns == on_thread.step_ns and on_process.clocks_ns == on_thread.clocks_ns, edits
    assert predict(b, ["nohost:-5ms"]).saving_ns == pytest.approx(5e6, rel=0.02)


def test_the_findings_step_and_whatifs_measured_step_each_say_their_statistic():
    """An agent reads the findings' step_ns and whatif's measured_step_ns of one capture and finds two
    figures (on hf_trainer_qwen2_l4_b8: 22.54 and 22.06 ms). Each is said: the findings' step_basis,
    the mean over the steady steps; whatif, their median. Both against the SQL step periods."""
    import numpy as np

    from helpers.step_sql import steps
    from nsight_tui.parsers import Profile
    from nsight_tui.render.findings import findings_json
    from nsight_tui.render.whatif import whatif_markdown

    periods = np.array([it.period for it in steps(SMALL)], dtype=np.float64)
    profile = Profile.open(SMALL)
    doc = findings_json(profile.report().findings)
    assert doc["step_ns"] == pytest.approx(periods.mean(), abs=1)
    assert doc["step_basis"].endswith("the mean over the steady-state steps")
    p = profile.whatif([])
    assert p.measured_step_ns == pytest.approx(np.median(periods), abs=1)
    assert f"median of {len(periods)} steady-state steps: measured" in whatif_markdown(p)


def test_a_finding_fix_refused_names_its_edit_and_the_finding():
    """`whatif fix:host-bound-gap` where its edit has nothing to act on (no pause of 1 ms with the GPU
    idle in the bf16 capture without NVTX): one line on stderr that names the edit and the finding it
    came from, not the edit's reason alone."""
    from helpers import cli_process

    path = SAMPLES / "nonvtx" / "small_ctx512_bf16_b8_async_nonvtx.sqlite.xz"
    done = cli_process.run(["whatif", str(path), "fix:host-bound-gap"], text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "nsight-tui: nohost:1ms (fix:host-bound-gap): no host time between CUDA calls while the GPU was idle, "
        "inside the steps, each at least 1ms"]


def test_a_capture_without_steps_says_how_to_name_them(tmp_path):
    """An export without step_N ranges whose kernels show no period either (here small_ctx128 with its
    NVTX gone and 12 kernels left): whatif said "no steady-state step (step_N range) to replay", with
    neither why none was inferred nor how to give it steps."""
    from conftest import mutated_copy
    from nsight_tui.parsers.replay.predict import NoSteps

    path = mutated_copy(tmp_path, "no_steps", "DELETE FROM NVTX_EVENTS",
                        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > 12", src=SMALL)
    with pytest.raises(NoSteps) as err:
        predict(load_trace(path), ["speed:gemm=2"])
    said = str(err.value)
    assert "no NVTX range step_N names an iteration, and none was inferred from the kernel sequence (fewer than" in said
    assert "name each iteration step_0, step_1, ... with an NVTX range (torch.cuda.nvtx.range_push" in said
    assert "\n" not in said


@pytest.mark.parametrize("edit", ["nohost:5", "nohost:-5"])
def test_a_duration_without_its_unit_says_so(small, edit):
    """`nohost:5` was read as a range and answered "no NVTX range named '5'"."""
    with pytest.raises(EditError) as err:
        predict(small, [edit])
    said = str(err.value)
    assert "has no unit" in said and "5ms" in said and "no NVTX range" not in said


def test_a_twin_that_is_not_there_is_said_once(small, tmp_path):
    """`kernels-from:` a missing file said "kernels-from:X: kernels-from: cannot read X: X: no such file"."""
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(EditError) as err:
        predict(small, [f"kernels-from:{missing}"])
    said = str(err.value)
    assert said.count("kernels-from") == 1 and "no such file" in said and said.count("missing.sqlite") <= 2


def test_drop_says_its_gpu_time_is_the_captures_and_its_cpu_time_a_step(small):
    """`drop:` said "46.42 ms of GPU time" beside "1.408 ms a step": a total over the capture beside a
    figure a step, the first not said to be one."""
    said = predict(small, ["drop:*gemm*"]).edits[0].changed
    assert "ms of GPU time over the capture" in said and "a step over the 3 steady steps" in said
