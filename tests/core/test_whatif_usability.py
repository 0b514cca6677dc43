"""whatif as a newcomer or an agent meets it: an edit that names nothing says what there is to name
(the ranges, the blocking calls, the kernel families, the edit kinds)."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
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
