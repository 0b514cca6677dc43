"""The launches an edit leaves onto an empty queue (parsers/replay/launch_cost.py): counted here op by
op in plain Python over the unchanged and the edited replay's timelines, against what `whatif` says;
the cost per launch it quotes equal to the committed evidence (devruns/empty_queue_stretches.log)."""
from __future__ import annotations

import json
import re
import statistics

import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.launch_cost import EMPTY_QUEUE_LAUNCH_NS
from nsight_tui.parsers.replay.predict import edited, graph_of, predict
from nsight_tui.parsers.replay.simulate import Plan

BASE = SAMPLES / "async" / "small_ctx512_b8_async.sqlite.xz"
TWIN = SAMPLES / "async" / "small_ctx512_tf32_b8_async.sqlite.xz"


def _counted(trace, edit: str) -> tuple[float, float]:
    """(emptied, filled) launches per step: per op launched inside a step, its stream's previous op
    ended before the launch call began (empty) on one timeline and not on the other."""
    ed = edited(trace, [edit_mod.parse(edit)], pace=False)
    g, (_, sr) = ed.graph, graph_of(trace)
    before_plan, after_plan = Plan.of(g), ed.mid_plan
    spans = [(s, e) for s, e, ok in zip(sr.start_ns.tolist(), sr.end_ns.tolist(), sr.is_step.tolist()) if ok]

    def states(plan, tl) -> dict[int, bool]:
        out: dict[int, bool] = {}
        for op in range(g.n_ops):
            pt = int(plan.op_launch_pt[op])
            if pt < 0 or not any(s <= g.pt_time[pt] < e for s, e in spans):
                continue
            prev = int(g.op_prev[op])
            empty = prev < 0 or int(tl.op_end_ns[prev]) <= int(tl.pt_ns[pt])
            out[pt] = out.get(pt, False) or empty
        return out

    was, now = states(before_plan, ed.unchanged.timeline), states(after_plan, ed.mid.timeline)
    n = sr.n_steps
    emptied = sum(1 for pt, e in now.items() if e and not was.get(pt, False)) / n
    filled = sum(1 for pt, e in was.items() if e and pt in now and not now[pt]) / n
    return emptied, filled


@pytest.mark.parametrize("base,edit", [(BASE, f"kernels-from:{TWIN}"), (BASE, "speed:gemm=2"),
                                       (SAMPLES / "findings" / "small_ctx128_nosync_item.sqlite.xz",
                                        "nosync:cudaStreamSynchronize")],
                         ids=["tf32", "gemm-x2", "nosync"])
def test_launches_whose_queue_the_edit_changes(base, edit):
    trace = load_trace(base)
    p = predict(trace, [edit])
    emptied, filled = _counted(load_trace(base), edit)
    assert p.queue is not None
    assert p.queue.emptied_per_step == pytest.approx(emptied) and p.queue.filled_per_step == pytest.approx(filled)
    net = emptied - filled
    assert p.queue.extra_cpu_ns == tuple(round(net * c) for c in EMPTY_QUEUE_LAUNCH_NS)


def test_faster_gemms_empty_queues_and_whatif_says_so():
    """TF32 on a GPU-bound async step: the GPU keeps up, many launches find an empty queue; said in
    Markdown and JSON, not in the predicted step."""
    md = cli_process.run(["whatif", str(BASE), f"kernels-from:{TWIN}"], text=True, cwd=ROOT, timeout=300)
    js = json.loads(cli_process.run(["whatif", str(BASE), f"kernels-from:{TWIN}", "-f", "json"], text=True,
                                    cwd=ROOT, timeout=300).stdout)
    q = js["launch_queue"]
    assert q["emptied_launches_per_step"] > 50 and q["in_prediction"] is False
    assert q["extra_cpu_ns_per_step"]["low"] < q["extra_cpu_ns_per_step"]["high"]
    assert "The launch queue: " in md.stdout and q["note"] in md.stdout.replace("\\", "")


def test_an_edit_that_moves_nothing_says_nothing():
    p = predict(load_trace(BASE), ["speed:gemm=1"])
    assert p.queue is not None and p.queue.emptied_per_step == 0 == p.queue.filled_per_step
    assert not p.queue.said


def test_the_quoted_cost_is_the_committed_evidence():
    """min, median, max over the threads' medians at positions empty in every TF32 step (threads with
    at least 20 such stretches) in devruns/empty_queue_stretches.log."""
    log = (ROOT / "devruns" / "empty_queue_stretches.log").read_text()
    found = [(int(n), float(d)) for n, d in re.findall(
        r"empty in every TF32 step: (\d+) stretches, TF32/fp32 median x[\d.]+, difference median ([+-][\d.]+) us", log)]
    us = sorted(d for n, d in found if n >= 20)
    assert len(us) >= 5
    assert EMPTY_QUEUE_LAUNCH_NS == (round(us[0] * 1e3), round(statistics.median(us) * 1e3), round(us[-1] * 1e3))


def test_a_range_of_cpu_time_taken_away_reads_low_to_high():
    """`nosync` on an async loop fills queues that were empty: the CPU time moves the other way, each
    end negative, and the JSON's low is the more negative one (a range's low <= its high), at the
    committed cost per launch (EMPTY_QUEUE_LAUNCH_NS, checked against the evidence above) times the
    launches counted op by op here."""
    base = SAMPLES / "async" / "small_ctx128_b1_async.sqlite.xz"
    emptied, filled = _counted(load_trace(base), "nosync")
    assert filled > emptied  # the other way: CPU time taken away
    ends = sorted(round((emptied - filled) * c) for c in EMPTY_QUEUE_LAUNCH_NS)
    js = json.loads(cli_process.run(["whatif", str(base), "nosync", "-f", "json"], text=True, cwd=ROOT,
                                    timeout=300).stdout)
    extra = js["launch_queue"]["extra_cpu_ns_per_step"]
    assert [extra["low"], extra["central"], extra["high"]] == ends
    assert extra["low"] <= extra["central"] <= extra["high"] < 0
