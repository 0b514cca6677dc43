"""Does a launch onto an empty queue cost the CPU more? Read off an every-other-step TF32 capture
(`capture --plant-every 2 fp32-gemm`, committed in sample_traces/replay/interleaved), no GPU needed.

The replay's `kernels-from:{self}` pairs each fp32 (planted) step's kernels with the TF32 step before
it (parsers/replay/stretches.py): a stretch is a thread's host time from one same-named launch to the
next, and an unchanged stretch (no changed kernel launched inside it on either side) is the same
framework work in both. Here each unchanged stretch's TF32 time against its fp32 time, split by the
queue at its closing launch in the measured captures: empty (the stream's previous op had ended
before the launch call began) or not. The fp32 side nearly always lags (its GEMMs are long), so the
split is by the TF32 side, and by launch position across the TF32 steps: a position whose queue is
empty in every TF32 step (no selection: its state does not depend on that step's timing), in some
(there a slow stretch lets the GPU drain, so "empty" also selects the slow ones), or in none.

    PYTHONPATH=$PWD python3 devruns/empty_queue_stretches.py \
        sample_traces/replay/interleaved/h100_24steps/small_ctx512_b8_async_fp32-gemm-every2.sqlite.xz
"""
from __future__ import annotations

import sys

import numpy as np

from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits, stretches
from nsight_tui.parsers.replay.pace import own_time
from nsight_tui.parsers.replay.predict import graph_of


def planted(name: str) -> bool:
    return name.startswith("step_") and int(name.split("_")[1]) % 2 == 1


def empty_at(gr, op: np.ndarray) -> np.ndarray:
    prev = gr.op_prev[op]
    return (prev < 0) | (gr.op_end[np.maximum(prev, 0)] <= gr.pt_time[gr.op_launch_pt[op]])


def main(path: str) -> None:
    trace = load_trace(path)
    g, sr = graph_of(trace)
    seen: dict = {}
    carry = stretches.carry

    def spy(g_, twin, anchors, inside, iteration, twin_iteration, ignore=None, twin_pace=False):
        seen.update(twin=twin, anchors=anchors, iteration=iteration, twin_iteration=twin_iteration)
        return carry(g_, twin, anchors, inside, iteration, twin_iteration, ignore, twin_pace)

    stretches.carry = spy  # the anchors exactly as kernels-from pairs them
    before = {n: f"step_{int(n.split('_')[1]) - 1}" for n in sr.names if planted(n)}
    edits.apply(g, sr, [edits.parse(f"kernels-from:{path}")], lambda _p: trace, twin_iterations=before)
    stretches.carry = carry
    b, anchors, it_a, it_b = seen["twin"], seen["anchors"], seen["iteration"], seen["twin_iteration"]
    a_pt, b_pt = g.op_launch_pt[anchors[:, 0]], b.op_launch_pt[anchors[:, 1]]
    ok = (a_pt >= 0) & (b_pt >= 0)
    anc, a_pt, b_pt = anchors[ok], a_pt[ok], b_pt[ok]
    order = np.argsort(a_pt, kind="stable")
    anc, a_pt, b_pt = anc[order], a_pt[order], b_pt[order]

    def counts(gr, pts):
        other = np.zeros(len(gr.pt_time), np.int64)
        np.add.at(other, gr.op_launch_pt[gr.op_launch_pt >= 0], 1)
        other[pts] -= 1
        return np.concatenate([[0], np.cumsum(other)])

    n_a, n_b = counts(g, a_pt), counts(b, b_pt)
    own_a = np.concatenate([[0], np.cumsum(np.where(own_time(g), g.delta_ns, 0))])
    own_b = np.concatenate([[0], np.cumsum(np.where(own_time(b), b.delta_ns, 0))])
    starts = np.concatenate([[0], np.cumsum(~g.pt_is_end)])
    is_planted = np.array([planted(n) for n in sr.names])
    n_steps = int(is_planted.sum())
    print(path.rsplit("/", 1)[-1], f"({n_steps} fp32 steps, each against the TF32 step before it)")
    for ti in range(len(g.thread_gtids)):
        m = g.pt_thread[a_pt] == ti
        pa, pb, an = a_pt[m], b_pt[m], anc[m]
        if len(pa) < 2:
            continue
        lo_a, hi_a = g.call_end_pt[g.pt_call[pa[:-1]]] + 1, pa[1:]
        lo_b, hi_b = b.call_end_pt[b.pt_call[pb[:-1]]] + 1, pb[1:]
        t_a, t_b = own_a[hi_a + 1] - own_a[lo_a], own_b[hi_b + 1] - own_b[lo_b]
        it = it_a[hi_a]
        same = ((lo_a <= hi_a) & (lo_b <= hi_b) & (b.pt_thread[pb[:-1]] == b.pt_thread[pb[1:]])
                & (it_a[hi_a] - it_a[pa[:-1]] == it_b[hi_b] - it_b[pb[:-1]])
                & ((n_a[hi_a] - n_a[lo_a]) == 0) & ((n_b[hi_b] - n_b[lo_b]) == 0) & (t_a > 0) & (t_b > 0)
                & (it >= 0) & is_planted[np.maximum(it, 0)] & ~empty_at(g, an[1:, 0]))
        # the closing launch's position: call starts on this thread since its iteration's first point
        lo_t, hi_t = g.thread_slices[ti]
        first = {k: lo_t + int(np.argmax(it_a[lo_t:hi_t] == k)) for k in np.unique(it[same]).tolist()}
        pos = np.array([starts[p] - starts[first[k]] if k in first else -1 for p, k in zip(hi_a.tolist(), it.tolist())])
        empty = empty_at(b, an[1:, 1])
        sel = np.flatnonzero(same)
        share = {p: empty[sel][pos[sel] == p].mean() for p in np.unique(pos[sel]).tolist()}
        f = np.array([share[p] for p in pos[sel]])
        e = empty[sel]
        name = trace.thread_label(g.thread_gtids[ti])
        for label, mask in (("empty in every TF32 step", f == 1), ("empty in some, here empty", (f > 0) & (f < 1) & e),
                            ("empty in some, here not", (f > 0) & (f < 1) & ~e), ("empty in none", f == 0)):
            ta, tb = t_a[sel][mask], t_b[sel][mask]
            if len(ta) < 5:
                continue
            print(f"  {name}: {label}: {len(ta)} stretches, TF32/fp32 median x{np.median(tb / ta):.3f}, "
                  f"difference median {np.median(tb - ta) / 1e3:+.2f} us, {(tb - ta).sum() / n_steps / 1e6:+.3f} ms a step")


if __name__ == "__main__":
    main(sys.argv[1])
