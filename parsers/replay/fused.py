"""The `fuse:` edit's work (edits.py parses it): chains of kernels on one stream become one kernel each.

A chain is a longest run of at least two (or the edit's N) consecutive kernels on one stream that
the edit's patterns match (no other kernel of that stream between them; copies and memsets stay where they are), all
launched inside one instance of a range. Of each chain
the first kernel stays, launched by its own call, as the fused kernel; the others are gone as
`drop:` drops ops (no GPU time, the ops after them on their stream in order, the CPU time inside
the calls that launched only them gone).

Two things are not in the capture, so each is an assumption with a range (the plans low, mid, high):
- the fused kernel's duration. Each kernel of an elementwise chain is a pass over memory: it reads
  its inputs and writes its output. A fused kernel reads the chain's inputs once and writes its
  output once, so it takes about one pass: mid, the chain's longest kernel (its largest pass, the
  findings rule's own assumption); low, its shortest (a pass that reads one tensor and writes one,
  the least a fused kernel still does); high, the chain's whole time (a fused pass moves no more
  bytes than the chain did, at the rate the chain's passes ran).
- the host time between the chain's launches. Each kernel of an eager chain is usually an op of its
  own (PyTorch's dispatch, autograd's node for its derivative), and a compiler that fuses the ops
  (torch.compile) or one fused op takes their host time with them; but a chain on the GPU may also
  join kernels of unrelated ops (a bias gradient's sum, then another node's product), whose host
  time between stays. Mid and high: kept, only the launch calls go (as `drop:`: the code around
  them is not known to go with them); low: the host time between the chain's first and last launch
  calls on their thread is gone too (the first op's, before its launch, stays: the fused op's own).
  Other CUDA calls between them keep their time, and so do waits (a blocking call, a hand-over).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.replay.graph import Graph, calls_launching_only, inside_calls
from nsight_tui.parsers.replay.simulate import Plan


def chains(g: Graph, hit: np.ndarray, instance: np.ndarray, min_kernels: int = 2) -> list[np.ndarray]:
    """The chains (op positions, in stream order): each longest run of at least `min_kernels`
    consecutive kernels of one stream that `hit` (per op) marks, all launched inside one range
    instance (`instance`, per op; -1: none, never chained)."""
    kind = g.trace.ops["kind"].to_numpy()
    out: list[np.ndarray] = []
    for ops in g.streams:
        k = ops[kind[ops] == KERNEL]
        key = np.where(hit[k], instance[k], -1)
        if not (key >= 0).any():
            continue
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        ends = np.r_[starts[1:], len(k)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            if key[s] >= 0 and e - s >= max(min_kernels, 2):
                out.append(k[s:e])
    return out


@dataclass
class Fused:
    """What the edit did: counts and CPU time (ns, over the whole capture and inside the steps)."""

    chains: int
    kernels: int
    gpu_ns: int  # the chains' measured GPU time
    fused_ns: tuple[int, int, int]  # the fused kernels' time at low, mid, high
    calls: int  # launch calls gone
    call_ns: int  # CPU time inside them
    call_step_ns: int
    host_ns: int  # host time between a chain's launches (gone at low)
    host_step_ns: int
    split: int  # chains whose launches were on several threads: their host time kept


def _host_between(g: Graph, chain: np.ndarray, o_api: np.ndarray) -> np.ndarray:
    """The points of the host time between the chain's first and last launch calls on their thread
    (empty where a kernel has no launch call or the calls are on several threads)."""
    calls = o_api[chain]
    if (calls < 0).any():
        return np.zeros(0, np.int64)
    first, last = int(g.call_end_pt[calls[0]]), int(g.call_end_pt[calls[-1]])
    if first < 0 or last <= first or g.pt_thread[first] != g.pt_thread[last]:
        return np.zeros(0, np.int64)
    pts = np.arange(first + 1, last + 1)
    return pts[g.owner[pts] < 0]


def apply(g: Graph, plans: tuple[Plan, Plan, Plan], found: list[np.ndarray], in_steps: np.ndarray) -> Fused:
    """Each chain of `found` one kernel in each plan (low, mid, high: the module's assumptions at
    their ends and centre). `in_steps`: per CPU point, inside a steady-state step."""
    keep = np.array([c[0] for c in found], np.int64)
    gone = np.concatenate([c[1:] for c in found]) if found else np.zeros(0, np.int64)
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    gone_mask = np.zeros(g.n_ops, bool)
    gone_mask[gone] = True
    calls = calls_launching_only(g, gone_mask)
    inside = inside_calls(g, calls)  # the time inside those calls
    between = [_host_between(g, c, o_api) for c in found]
    split = sum(1 for c in found if (o_api[c] >= 0).all() and (g.call_end_pt[o_api[c]] >= 0).all()
                and len(np.unique(g.pt_thread[g.call_end_pt[o_api[c]]])) > 1)
    host = np.unique(np.concatenate(between)) if between else np.zeros(0, np.int64)
    host = host[[k not in g.handoffs and k not in g.blocks for k in host.tolist()]] if len(host) else host
    fused = []
    # low: the chain's lightest pass, mid: its largest, high: the whole chain's time
    for plan, pick in zip(plans, ("min", "max", "sum")):
        plan.op_dur[keep] = [int(getattr(plan.op_dur[c], pick)()) for c in found]
        fused.append(int(plan.op_dur[keep].sum()))
        plan.take_away(gone, inside, g.blocks)
    plans[0].delta_ns[host] = 0  # low: the host time between the launches gone with the ops
    return Fused(len(found), int(sum(len(c) for c in found)), int(sum(int(g.op_dur[c].sum()) for c in found)),
                 (fused[0], fused[1], fused[2]), len(calls), int(g.delta_ns[inside].sum()),
                 int(g.delta_ns[inside[in_steps[inside]]].sum()), int(g.delta_ns[host].sum()),
                 int(g.delta_ns[host[in_steps[host]]].sum()) if len(host) else 0, split)
