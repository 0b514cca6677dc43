"""`kernels-from` keeps the twin's GPU time: a kernel the twin runs where this capture has nothing
unmatched in the same gap of the alignment (a fused kernel the alignment placed a few same-named
kernels away from those it replaces) gives its time to the nearest run of this capture's unmatched
kernels, so each iteration replays with the twin's GPU time; device-to-device copies are matched
with the kernels, so a copy the twin does not make is gone (docs/whatif.md, "Held out: attention")."""
from __future__ import annotations

import sqlite3

import numpy as np

from conftest import SAMPLES
from helpers.xz_samples import plain

from nsight_tui.parsers.kernels.families import device_work_ops
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.predict import graph_of

MANUAL, FUSED = SAMPLES / "small_ctx128.sqlite", SAMPLES / "small_ctx128_fused.sqlite.xz"

# per iteration (an NVTX warmup_N or step_N range, to the next one's start): the GPU time of the kernels
# and device-to-device copies whose launch call started in it
PER_ITERATION_SQL = """
WITH it AS (SELECT t.value name, n.start s, lead(n.start) OVER (ORDER BY n.start) e
            FROM NVTX_EVENTS n JOIN StringIds t ON t.id = n.textId
            WHERE t.value LIKE 'step!_%' ESCAPE '!' OR t.value LIKE 'warmup!_%' ESCAPE '!'),
work AS (SELECT correlationId c, globalPid gp, end - start d FROM CUPTI_ACTIVITY_KIND_KERNEL
         UNION ALL SELECT correlationId, globalPid, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (8, 13))
SELECT it.name, sum(w.d) FROM it
JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.start >= it.s AND (it.e IS NULL OR a.start < it.e)
JOIN work w ON w.c = a.correlationId AND w.gp >> 24 = a.globalTid >> 24
GROUP BY it.name"""


def test_each_iteration_replays_with_the_twins_gpu_time():
    """Manual attention given the fused capture's kernels: per iteration, the replayed kernels' and
    device copies' GPU time is the twin's, by SQL over the twin (to rounding, a nanosecond an op);
    before, the fused kernels the alignment set apart were lost (0.55 ms an iteration here), and the
    manual side's copies of its scores kept their time."""
    twin = plain(FUSED)
    trace = load_trace(MANUAL)
    g, sr = graph_of(trace)
    ed = edit_mod.apply(g, sr, [edit_mod.parse(f"kernels-from:{twin}")], load=load_trace)
    with sqlite3.connect(f"{twin.resolve().as_uri()}?mode=ro", uri=True) as con:
        want = dict(con.execute(PER_ITERATION_SQL).fetchall())
    o_api, launched, pids = edit_mod._op_launches(g)
    at = edit_mod._iteration_of(sr, np.where(o_api >= 0, launched, 0), pids)
    kernel = device_work_ops(trace) & (o_api >= 0)
    n_kernels = {}
    for i, name in enumerate(sr.names):
        mine = kernel & (at == i)
        n_kernels[name] = int(mine.sum())
        got = int(ed.mid.op_dur[mine].sum())
        assert abs(got - want[name]) <= n_kernels[name], (name, got, want[name])
    assert set(n_kernels) == set(want) and len(want) >= 4
