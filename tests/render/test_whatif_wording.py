"""whatif's sentences read as what they mean: a step the edits lengthen is a cost, not a negative
saving; two clocks a hair apart are one pace, not a CPU running ahead of a GPU it starves."""
from __future__ import annotations

from types import SimpleNamespace

from nsight_tui.render.whatif import clock_clause, saving_words, whatif_lines


def _p(step_ns: int, replayed_ns: int, clocks_ns=(0, None)) -> SimpleNamespace:
    return SimpleNamespace(step_ns=step_ns, replayed_step_ns=replayed_ns, saving_ns=replayed_ns - step_ns,
                           clocks_ns=clocks_ns, unlike_median_ns=None, workers_floor_ns=None, moved_host_ns=0,
                           workers_to_keep_up=None, workers_factor_if_waiting=None)


def test_a_longer_step_is_said_as_a_cost():
    assert saving_words(_p(32_660_000, 27_140_000)) == ("costs 5.52 ms more per step (20.3% longer than the "
                                                        "unchanged replay)")
    assert saving_words(_p(20_000_000, 25_000_000)) == "saves 5.00 ms per step (20.0%)"


def test_the_tuis_saving_line_says_a_longer_step():
    p = SimpleNamespace(**vars(_p(32_660_000, 27_140_000, (32_660_000, 32_640_000))), measured_step_ns=27_120_000,
                        steps=3, identity_error=0.0, low_ns=32_660_000, high_ns=32_660_000, edits_range_ns=None,
                        pace_range_ns=None, assumptions=[], cpu_assumption="", edits=[], holders=[],
                        baseline_holders=[], queue=None, profiler=None, rank_files=None,
                        baseline_clocks_ns=(27_120_000, 27_100_000), contention="", steps_per_rank=(3,),
                        idle=SimpleNamespace(idle_ns=0, launch_starved_ns=0, sync_blocked_ns=0, dependency_ns=0))
    saving = dict(whatif_lines(p))["saving"]
    assert saving.startswith("none: the step 5.52 ms longer") and "-5.52" not in saving


def test_clocks_a_hair_apart_are_not_a_cpu_running_ahead():
    # small_ctx128_fused with speed:gemm=2: the GPU's clock 0.05 ms longer of 27.14, the GPU idle half the step
    close = clock_clause(_p(27_140_000, 27_140_000, (27_090_000, 27_140_000)))
    assert "runs ahead" not in close and "within 1% of each other" in close
    far = clock_clause(_p(30_000_000, 40_000_000, (20_000_000, 30_000_000)))
    assert far.endswith("so the CPU runs ahead of its GPU work")
