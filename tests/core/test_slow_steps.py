"""analyses.slow_steps: which steps are slow, their pattern, and what the export shows differs in
them, checked against SQL over a real export. The windows are small_ctx128's iterations, warm-ups
included (warmup_0 is the slow one: its first calls load modules and allocate), so the leading
pattern and its evidence come from a real capture; the pattern arithmetic is checked on its own."""
from __future__ import annotations

import sqlite3
import statistics

import pytest

from conftest import SAMPLES
from nsight_tui.parsers.analyses import slow_steps as ss
from nsight_tui.parsers.read.load import load_trace

PATH = SAMPLES / "small_ctx128.sqlite"


def sql(query: str, *args):
    con = sqlite3.connect(f"file:{PATH}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def windows() -> list[tuple[int, int]]:
    return [(a, b) for a, b in sql("""SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
        WHERE coalesce(e.text, s.value) GLOB 'step_[0-9]*' OR coalesce(e.text, s.value) GLOB 'warmup_[0-9]*'
        ORDER BY e.start""")]


def test_a_slow_first_iteration_is_warm_up_with_its_evidence():
    w = windows()
    (device,) = sql("SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId ORDER BY count(*) DESC LIMIT 1")[0]
    trace = load_trace(PATH)
    r = ss.slow_steps(trace, [a for a, _ in w], [b for _, b in w], device)
    durations = [b - a for a, b in w]
    med = statistics.median(durations)
    slow = [i for i, d in enumerate(durations) if d > ss.SLOW_RATIO * med]
    assert r is not None and r.slow == slow == [0] and r.median_step_ns == med
    assert r.pattern == ss.LEADING and "warm-up" in r.title
    assert r.excess_ns == durations[0] - med
    typical = [i for i in range(len(w)) if i not in slow]
    # kernels launched per window, from SQL
    kernels = [sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ? AND start >= ? AND start < ?",
                   device, a, b)[0][0] for a, b in w]
    k_slow, k_typ = kernels[0], statistics.median([kernels[i] for i in typical])
    listed = {d.what: d for d in r.differs}
    if abs(k_slow - k_typ) > ss.DIFFERS_SHARE * k_typ:
        assert (listed["kernels launched"].slow, listed["kernels launched"].typical) == (k_slow, k_typ)
    # the CUDA calls whose time grew most in the slow window, from SQL: each call's time clipped to the window
    per_name: dict[str, list[float]] = {}
    for i, (a, b) in enumerate(w):
        for name, t in sql("""SELECT s.value, sum(min(r.end, ?) - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                JOIN StringIds s ON s.id = r.nameId WHERE r.start >= ? AND r.start < ? GROUP BY s.value""", b, a, b):
            per_name.setdefault(name, [0.0] * len(w))[i] = float(t)
    grew = {n: (v[0], statistics.median([v[i] for i in typical])) for n, v in per_name.items()}
    grew = {n: st for n, st in grew.items() if st[0] - st[1] >= ss.DIFFERS_MIN_NS
            and st[0] - st[1] > ss.DIFFERS_SHARE * max(st[1], 1.0)}
    top = sorted(grew, key=lambda n: -(grew[n][0] - grew[n][1]))[: ss.TOP_CALLS]
    calls = [d for d in r.differs if d.what not in ("kernels launched", "GPU busy")]
    assert [d.what for d in calls] == top and top
    for d in calls:
        assert (d.slow, d.typical) == pytest.approx(grew[d.what])
    assert r.evidence.startswith("slow steps vs the typical one: ") and top[0] in r.evidence


@pytest.mark.parametrize("slow, steps, want", [
    ([0, 1], 20, (ss.LEADING, None)),
    ([18, 19], 20, (ss.TRAILING, None)),
    ([3, 7, 11, 15], 20, (ss.PERIODIC, 4)),
    ([4, 9, 14, 19], 20, (ss.PERIODIC, 5)),
    ([3, 7], 20, (ss.SCATTERED, None)),  # two are no period
    ([3, 8, 11], 20, (ss.SCATTERED, None)),
])
def test_patterns(slow, steps, want):
    assert ss.pattern_of(slow, steps) == want


def test_a_periodic_stall_is_not_called_compilation():
    r = ss.SlowSteps(64, 10e6, list(range(3, 64, 4)), [30_000_000] * 16, ss.PERIODIC, 4)
    assert r.title == "every 4th step is slow (16 of 64): a periodic stall, not warm-up"
    assert "compil" not in r.title and "autotun" not in r.title
    assert "the extra time is on the CPU outside CUDA" in r.evidence  # nothing recorded differs


@pytest.mark.parametrize("period,words", [(2, "every other step"), (3, "every 3rd step"), (11, "every 11th step"),
                                          (21, "every 21st step"), (22, "every 22nd step")])
def test_a_periodic_stall_reads_as_english(period, words):
    r = ss.SlowSteps(64, 10e6, list(range(period - 1, 64, period)), [30_000_000] * len(range(period - 1, 64, period)),
                     ss.PERIODIC, period)
    assert r.title.startswith(f"{words} is slow (")
