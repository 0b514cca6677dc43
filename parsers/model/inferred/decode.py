"""A decode loop inside an inferred iteration: a `generate()`-like call runs the model's forward once
for the prompt (prefill) and once per new token (decode). A decode step is told one of two ways:

- replayed as a CUDA graph (a static cache, `torch.compile(mode="reduce-overhead")`): one graph launch
  per token, every replay launching the same kernels under one launch call;
- eager: each step a whole forward with every layer, so inside the steady iteration a kernel recurs
  once per token at a steady spacing of at least the layers' kernels.

From it: time to the first token, per-token decode latency (median, p90) and tokens/s, on the GPU
clock (kernel starts), and how busy the GPU was while decoding (a launch-bound decode leaves it idle
between small kernels). The call itself begins after the previous call's last decode step and the
kernels that close it (the last token's sampling: the kernels that follow every step), so an
iteration is one call, prefill first, whatever pause the host took inside it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import BACKWARD
from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence

TOLERANCE = 0.05  # a decode step's kernel count may differ from the median by this much
MIN_TOKENS = 4  # decode steps per call, at least
MIN_GRAPH_KERNELS = 8  # a graph launch holding fewer kernels is no model forward
LAUNCH_BOUND_BUSY = 0.5  # the GPU busy less than this share of the decode: the host's launches set the pace
TAIL_ALIKE = 0.8  # the kernels closing a call match a step's own at least this share (a name or two differ)


@dataclass(frozen=True)
class DecodeLoop:
    """Per-token figures over the steady calls (GPU clock, measured from kernel start times)."""

    calls: int  # steady calls measured
    tokens_per_call: int  # decode steps per call (the prefill's first token not counted)
    step_kernels: int  # kernels per decode step
    prefill_ns: int  # median over the calls: the call's first kernel start to its first token (basis says where that is)
    median_ns: int  # per-token decode latency, median over every decode step of the steady calls
    p90_ns: int
    mean_ns: int
    gpu_busy_share: float  # kernel time over the decode steps' span
    anchor: str  # the kernel that recurs once per token (its name), or the graph replay's first kernel
    graph: bool = False  # each decode step one CUDA graph replay

    @property
    def tokens_per_s(self) -> float:
        """Per sequence: 1 s over the median per-token latency."""
        return 1e9 / self.median_ns if self.median_ns else 0.0

    @property
    def launch_bound(self) -> bool:
        return self.gpu_busy_share < LAUNCH_BOUND_BUSY

    @property
    def basis(self) -> str:
        if self.graph:
            return ("GPU clock: one CUDA graph replay per token: a decode step from the end of one token's sampling (the "
                    "kernels that follow every replay alike) to the next's, its host's set-up and its replay between; "
                    "the prefill (time to the first token) from the call's first kernel to the end of the prefill's own "
                    "token sampling")
        return ("GPU clock: a decode step from one occurrence of the per-token kernel to the next; the prefill (time to "
                "the first token) from the call's first kernel to the first decode step's, the host's set-up of that "
                "step included")


@dataclass(frozen=True)
class StepMark:
    """How a decode step is told: a CUDA graph replay of `size` kernels beginning with `code`, or the
    kernel `code` recurring every `spacing` kernels."""

    code: int
    spacing: int
    graph: bool


def token_anchor(codes: np.ndarray, min_period: int) -> tuple[np.ndarray, int] | None:
    """Positions of the name that recurs once per token: at a steady spacing (every gap but the first
    within TOLERANCE of their median) of at least `min_period` kernels (a whole forward, not a layer),
    over most of the call; the shortest such spacing (one token, not every few)."""
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    best: tuple[np.ndarray, int] | None = None
    for group in np.split(order, cuts):
        if len(group) < MIN_TOKENS + 1:
            continue
        steady = np.diff(group)[1:]
        median = int(np.median(steady))
        if median < min_period or np.any(np.abs(steady - median) > TOLERANCE * median):
            continue
        if median * len(group) < len(codes) // 2:
            continue
        if best is None or median < best[1] or (median == best[1] and len(group) > len(best[0])):
            best = (group, median)
    return best


def graph_replays(seq: KernelSequence, a: int, b: int) -> tuple[np.ndarray, int] | None:
    """The first kernel of each replay of the decode step's CUDA graph in [a, b) and the replay's kernel
    count: launch calls holding MIN_GRAPH_KERNELS kernels or more, of the most common count, the same
    kernels each; None where fewer than MIN_TOKENS + 1 such replays."""
    calls = seq.call[a:b]
    if not len(calls) or (calls < 0).any():
        return None
    _, first, counts = np.unique(calls, return_index=True, return_counts=True)
    big = counts >= MIN_GRAPH_KERNELS
    if big.sum() < MIN_TOKENS + 1:
        return None
    sizes, times = np.unique(counts[big], return_counts=True)
    size = int(sizes[np.argmax(times)])
    pos = np.sort(a + first[big & (counts == size)])
    if len(pos) < MIN_TOKENS + 1:
        return None
    names = np.stack([seq.codes[p:p + size] for p in pos.tolist()])
    alike = (names == names[len(names) // 2]).all(axis=1)
    pos = pos[alike]
    return (pos, size) if len(pos) >= MIN_TOKENS + 1 else None


def graph_steps(seq: KernelSequence, a: int, b: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The decode steps of the call [a, b) where each token is one CUDA graph replay: each step's first kernel
    (the host's set-up of its replay, after the previous token's sampling) and the last kernel of each token's
    sampling, the prefill's first: (firsts, lasts), len(lasts) = len(firsts) + 1. A token's sampling is the
    kernels after its replay alike to those after the call's last replay (the last token's: argmax, the
    stopping check); the prefill's is the window of the kernels before the first replay most alike them, at
    least TAIL_ALIKE. None where either is not found: the steps are then their replays alone.

    A static cache's first replay waits on the host's set-up of the decode (11 ms on the committed Llama, past
    its first token's sampling at 19 ms): the token is out at its sampling, as the workload's own clock says
    (its StoppingCriteria's first call, 21.6 ms from the call's start on the host)."""
    found = graph_replays(seq, a, b)
    if found is None:
        return None
    pos, size = found
    length = min(call_start(seq, pos), b) - (int(pos[-1]) + size)
    first = int(pos[0])
    if length <= 0 or first - a < length:
        return None
    tail = seq.codes[int(pos[-1]) + size:int(pos[-1]) + size + length]
    share = (np.lib.stride_tricks.sliding_window_view(seq.codes[a:first], length) == tail).mean(axis=1)
    if share.max() < TAIL_ALIKE:
        return None
    prefill_last = a + int(np.flatnonzero(share == share.max())[-1]) + length - 1
    lasts = np.minimum(pos + size + length - 1, b - 1)
    return np.r_[prefill_last + 1, lasts[:-1] + 1].astype(np.int64), np.r_[prefill_last, lasts].astype(np.int64)


def step_mark(seq: KernelSequence, a: int, b: int, template: np.ndarray, op_names: list[str], layers) -> StepMark | None:
    """How the decode steps of the iteration [a, b) (its name codes `template`) are told; None: a
    training iteration, or no decode loop."""
    if any(BACKWARD.search(op_names[int(c)]) for c in set(template.tolist())):
        return None
    replays = graph_replays(seq, a, b)
    if replays is not None:
        return StepMark(int(seq.codes[replays[0][0]]), replays[1], graph=True)
    if not layers:
        return None  # no layers to tell a token from a layer by
    found = token_anchor(template, layers[0].end - layers[0].first)  # a token's step runs every layer
    if found is None:
        return None
    return StepMark(int(template[found[0][0]]), found[1], graph=False)


def decode_steps(seq: KernelSequence, a: int, b: int, mark: StepMark) -> np.ndarray:
    """The positions where each decode step of the call [a, b) begins (the prefill not one of them)."""
    if mark.graph:
        steps = graph_steps(seq, a, b)
        if steps is not None:
            return steps[0]
        found = graph_replays(seq, a, b)
        return found[0] if found is not None else np.zeros(0, dtype=np.int64)
    pos = a + np.flatnonzero(seq.codes[a:b] == mark.code)
    whole = np.flatnonzero(np.diff(pos) >= 0.5 * mark.spacing)
    if len(whole) < MIN_TOKENS + 1:
        return np.zeros(0, dtype=np.int64)
    return pos[int(whole[0]) + 1:]  # the first whole forward is the prefill; the decode steps after it


def call_start(seq: KernelSequence, steps: np.ndarray) -> int:
    """Where the next call begins: after the last decode step and the kernels that close it, those
    that follow the step before it too (its sampling), kernel by kernel, at least TAIL_ALIKE alike."""
    last, prev = int(steps[-1]), int(steps[-2])
    length = min(last - prev, len(seq.codes) - last)
    same = seq.codes[last:last + length] == seq.codes[prev:prev + length]
    share = np.cumsum(same) / np.arange(1, length + 1)
    ok = np.flatnonzero(same & (share >= TAIL_ALIKE))
    return last + (int(ok[-1]) + 1 if len(ok) else 0)


def find_decode(seq: KernelSequence, starts: np.ndarray, ends: np.ndarray, steady: list[bool],
                mark: StepMark | None, op_names: list[str]) -> DecodeLoop | None:
    """The decode loop of the inference iterations (None: no step mark, or too few decode steps)."""
    if mark is None:
        return None
    tokens: list[float] = []
    prefills: list[int] = []
    per_call: list[int] = []
    busy = span = 0
    for a, b, ok in zip(starts.tolist(), ends.tolist(), steady):
        if not ok:
            continue
        steps = graph_steps(seq, a, b) if mark.graph else None
        pos = steps[0] if steps is not None else decode_steps(seq, a, b, mark)
        if len(pos) < MIN_TOKENS:
            continue
        # a graphed token from one token's sampling's end to the next's (the prefill's first); else from
        # each decode step's first kernel, a graph's last replay to the call's last kernel's end
        times = (seq.gpu_end[steps[1]] if steps is not None else seq.gpu_start[pos]).astype(np.int64)
        prefills.append(int(times[0] - seq.gpu_start[a]))
        if steps is None and mark.graph:
            times = np.append(times, int(seq.gpu_end[a:b].max()))
        decode = np.diff(times)
        tokens += decode.tolist()
        per_call.append(len(decode))
        lo, hi = int(pos[0]), int(pos[-1]) if not mark.graph else b
        busy += int((seq.gpu_end[lo:hi] - seq.gpu_start[lo:hi]).sum())
        span += int(times[-1] - times[0])
    if not tokens:
        return None
    values = np.array(tokens, dtype=np.float64)
    return DecodeLoop(calls=len(per_call), tokens_per_call=int(np.median(per_call)), step_kernels=int(mark.spacing),
                      prefill_ns=int(np.median(prefills)), median_ns=int(np.median(values)),
                      p90_ns=int(np.percentile(values, 90)), mean_ns=int(values.mean()),
                      gpu_busy_share=busy / span if span else 0.0, anchor=op_names[mark.code], graph=mark.graph)
