"""What a copy from pinned memory costs, read from the capture for the `pin` edit (replay.edits):
which copies are host<->device from pageable or pinned memory (the export's copyKind and
srcKind/dstKind, through read.memcpy's rows), the rate a pinned copy of a direction moves at, and
what an asynchronous copy's call costs the CPU. Where this capture holds no such figure, a stated
one (PINNED_GBPS, ENQUEUE_NS) and the sentence that says so."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.read.ids import MEMCPY, api_display_name
from nsight_tui.parsers.replay.graph import Graph, host_points


HTOD, DTOH = 1, 2  # the export's copyKind (ENUM_CUDA_MEMCPY_OPER)
PAGEABLE, PINNED = 0, 1  # its srcKind/dstKind (ENUM_CUDA_MEM_KIND)


@dataclass
class Copies:
    """Per op: the copy's bytes, direction (HTOD, DTOH, another copyKind, -1 not a copy or not
    read) and whether its host side is pageable or pinned (read.memcpy's rows, matched to the ops by
    device, start and end)."""

    nbytes: np.ndarray
    direction: np.ndarray
    pageable: np.ndarray
    pinned: np.ndarray
    unread: bool = False  # the export has copies but not their kinds (a column missing)


def copies(trace) -> Copies:
    n = len(trace.ops)
    out = Copies(np.zeros(n, np.int64), np.full(n, -1, np.int64), np.zeros(n, bool), np.zeros(n, bool))
    o_kind = trace.ops["kind"].to_numpy()
    mem = np.flatnonzero(o_kind == MEMCPY)
    if len(mem) == 0:
        return out
    o_dev = trace.ops["device"].to_numpy(np.int64)
    o_start, o_end = trace.ops["start"].to_numpy(np.int64), trace.ops["end"].to_numpy(np.int64)
    for dev in np.unique(o_dev[mem]).tolist():
        rows = trace.memcpy_calls(int(dev))
        if not rows:
            out.unread |= rows is None
            continue
        at = {(int(r[0]), int(r[1])): r for r in rows}
        for o in mem[o_dev[mem] == dev].tolist():
            r = at.get((int(o_start[o]), int(o_end[o])))
            if r is None:
                continue
            kind, src, dst = int(r[3]), int(r[4]), int(r[5])
            host = src if kind == HTOD else dst if kind == DTOH else -1
            out.nbytes[o], out.direction[o] = int(r[2]), kind
            out.pageable[o], out.pinned[o] = host == PAGEABLE, host == PINNED
    return out


# Pinned host<->device copy rates (GB/s = bytes per ns), low, central, high, where the capture has no
# pinned copy of the direction of PIN_MIN_BYTES or more: PCIe Gen4 x16's practical rate (about 80% of
# its 31.5 GB/s a direction), the committed pinned-input capture's rate (sample_traces/findings/
# small_ctx128_pinned-input, H200 on PCIe Gen5: six 64 MiB host-to-device copies, 402,653,184 bytes in
# 8.62 ms of copies, 46.7 GB/s; 37.8..55.4 one by one) and PCIe Gen5 x16's raw rate a direction
# (32 GT/s x 16 lanes x 128/130 / 8). A Grace superchip's NVLink-C2C (450 GB/s a direction) is not assumed.
PINNED_GBPS = (25.0, 46.7, 63.0)
# A copy at least this large moves at the link's rate (a smaller one costs its latency, microseconds).
PIN_MIN_BYTES = 1 << 20
# What an asynchronous copy's call costs the CPU where the capture has no asynchronous copy call that
# returned before its copy: the committed pinned-input capture's 64 MiB pinned cudaMemcpyAsync calls
# returned in 23..25 us (H200, step by step; 27 us on average over its six).
ENQUEUE_NS = 24_000


def rates(c: Copies, g: Graph, direction: int) -> tuple[tuple[float, float, float], str]:
    """The rate (bytes per ns) a pinned copy of `direction` moves at here: this capture's own pinned
    copies of that direction of PIN_MIN_BYTES or more (slowest, median, fastest), else PINNED_GBPS;
    and the sentence that says which."""
    name = {HTOD: "host-to-device", DTOH: "device-to-host"}[direction]
    mine = np.flatnonzero(c.pinned & (c.direction == direction) & (c.nbytes >= PIN_MIN_BYTES) & (g.op_dur > 0))
    if len(mine):
        rate = c.nbytes[mine] / g.op_dur[mine]
        lo, mid, hi = float(rate.min()), float(np.median(rate)), float(rate.max())
        return (lo, mid, hi), (f"{name} copies from pinned memory at {lo:.1f}..{hi:.1f} GB/s, {mid:.1f} central "
                               f"(this capture's {len(mine):,} pinned {name} copies of 1 MiB or more: slowest, "
                               "median, fastest)")
    lo, mid, hi = PINNED_GBPS
    return PINNED_GBPS, (f"{name} copies from pinned memory at {lo:g}..{hi:g} GB/s, {mid:g} central (this capture "
                         "has no pinned one of 1 MiB or more: PCIe Gen4 x16's practical rate, the committed "
                         "pinned-input capture's measured host-to-device rate on an H200, PCIe Gen5 x16's raw rate)")


def enqueue_ns(g: Graph, c: Copies) -> tuple[int, str]:
    """The CPU cost of an asynchronous copy's call: the median call of this capture's asynchronous
    copies (a `...Async` call of a copy that is not a pageable host one, returning before its copy
    ended), else ENQUEUE_NS; and the sentence that says which."""
    api = g.trace.api
    o_api = g.trace.ops["api"].to_numpy(np.int64)
    mem = (g.trace.ops["kind"].to_numpy() == MEMCPY) & (o_api >= 0) & ~c.pageable
    if mem.any() and len(api):
        calls = o_api[mem]
        names = np.array([api_display_name(g.trace.api_names[k]) for k in api["name"].to_numpy()[calls]], dtype=object)
        a_start, a_end = api["start"].to_numpy(np.int64)[calls], api["end"].to_numpy(np.int64)[calls]
        ok = np.array(["Async" in n for n in names], dtype=bool) & (a_end < g.op_end[mem])
        if ok.any():
            ns = int(np.median(a_end[ok] - a_start[ok]))
            return ns, f"{ns / 1e3:.1f} us (the median of this capture's {int(ok.sum()):,} asynchronous copy calls)"
    return ENQUEUE_NS, (f"{ENQUEUE_NS / 1e3:.0f} us (no asynchronous copy call here: the committed pinned-input "
                        "capture's pinned cudaMemcpyAsync)")



# PyTorch names a DataLoader's worker processes so (torch.utils.data's worker loop sets it); nsys lists
# every process of the machine, these among them
LOADER_WORKER = "pt_data_worker"


def loader_workers(trace) -> int:
    """How many DataLoader worker processes the export names: their batches reach the training
    process through shared memory."""
    return sum(1 for _, name in trace.processes.values() if name == LOADER_WORKER)


def batch_pauses(g: Graph, calls: np.ndarray, iteration: np.ndarray, at_least_ns: int) -> dict[int, int]:
    """Around each host-to-device copy call of a batch from DataLoader workers (`calls`, on their
    threads; `iteration` per CPU point): the calling thread's nearest host pause of `at_least_ns` or
    more before the call (the batch's receipt from the workers: `next()` unpickling it, mapping its
    shared memory; where the loop holds the batch, the last one's release too) and after it (the batch
    let go where the loop drops it: its shared memory unmapped), each within the call's iteration and
    not past another of `calls`. -> {CPU point whose host time (delta_ns) is the pause: the most the
    batch's handling can take}: the receipt and the release each touch the batch's pages once, as its
    staging copy did, so two passes of the copy call's length; a longer pause holds a wait for workers
    that do not keep up."""
    host = host_points(g) & (g.delta_ns >= at_least_ns) & (iteration >= 0)
    order = np.argsort(g.call_start_pt[calls], kind="stable")
    starts, ends = g.call_start_pt[calls][order], g.call_end_pt[calls][order]
    spans = g.pt_time[ends] - g.pt_time[starts]
    cand = np.flatnonzero(host)
    out: dict[int, int] = {}

    def take(point: int, k: int) -> None:
        out[point] = max(out.get(point, 0), 2 * int(spans[k]))

    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        ti, it = int(g.pt_thread[s]), int(iteration[s])
        first, last = g.thread_slices[ti][0], g.thread_slices[ti][1] - 1
        lo = max(first, int(ends[k - 1]) + 1 if k and g.pt_thread[ends[k - 1]] == ti else first)
        hi = int(starts[k + 1]) if k + 1 < len(starts) and g.pt_thread[starts[k + 1]] == ti else last
        i = np.searchsorted(cand, s, side="right") - 1  # the last pause at or before the call's start
        if i >= 0 and cand[i] >= lo and iteration[cand[i]] == it:
            take(int(cand[i]), k)
        j = np.searchsorted(cand, e, side="right")  # the first pause after the call's end
        if j < len(cand) and cand[j] <= hi and iteration[cand[j]] == it:
            take(int(cand[j]), k)
    return out
