"""`kernels-from:` a capture's own file is no change: every kernel takes the duration it had, every
collective its own transfer, and the CPU time between launches is as it was. The prediction is the
unchanged replay, at the central value and both ends of the range. The cuBLAS memsets and device
copies between the kernels once made some stretches of host time count as changed. Those stretches then took
the capture's time as it ran in place of the typical step's, and a capture replayed against itself
predicted 0.02 ms a step (0.6 ms at the range's end), a DDP export 0.06 (0.84)."""
from __future__ import annotations

import pytest

from conftest import SAMPLES
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.predict import predict

CAPTURES = [
    SAMPLES / "async" / "small_ctx512_b8_async.sqlite.xz",  # one process, memsets among its GEMMs
    SAMPLES / "async" / "small_ctx512_b8_ddp2_async.sqlite.xz",  # two ranks coupled by their all-reduces
]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_a_capture_as_its_own_twin_predicts_its_unchanged_step(path):
    trace = load_trace(path)
    unchanged = predict(trace, [])
    p = predict(trace, [f"kernels-from:{path}"])
    assert (p.step_ns, p.low_ns, p.high_ns) == (unchanged.replayed_step_ns,) * 3
