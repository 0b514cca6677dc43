"""A decode loop inside an inferred iteration: a `generate()`-like call runs the model's forward once
for the prompt (prefill) and once per new token (decode), each a whole forward with every layer,
so inside the steady iteration a kernel recurs once per token at a steady spacing of at least the
layers' kernels. From it: time to the first token, per-token decode latency (median, p90) and
tokens/s, on the GPU clock (kernel starts), and how busy the GPU was while decoding (a launch-bound
decode leaves it idle between small kernels)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.inferred.kernel_kinds import BACKWARD
from nsight_tui.parsers.model.inferred.kernel_sequence import KernelSequence

TOLERANCE = 0.05  # a decode step's kernel count may differ from the median by this much
MIN_TOKENS = 4  # decode steps per call, at least
LAUNCH_BOUND_BUSY = 0.5  # the GPU busy less than this share of the decode: the host's launches set the pace


@dataclass(frozen=True)
class DecodeLoop:
    """Per-token figures over the steady calls (GPU clock, measured from kernel start times)."""

    calls: int  # steady calls measured
    tokens_per_call: int  # decode steps per call (the prefill's first token not counted)
    step_kernels: int  # kernels per decode step
    prefill_ns: int  # median over the calls: the call's first kernel start to the first decode step's start
    median_ns: int  # per-token decode latency, median over every decode step of the steady calls
    p90_ns: int
    mean_ns: int
    gpu_busy_share: float  # kernel time over the decode steps' span
    anchor: str  # the kernel that recurs once per token (its name)

    @property
    def tokens_per_s(self) -> float:
        """Per sequence: 1 s over the median per-token latency."""
        return 1e9 / self.median_ns if self.median_ns else 0.0

    @property
    def launch_bound(self) -> bool:
        return self.gpu_busy_share < LAUNCH_BOUND_BUSY

    BASIS = ("GPU clock: a decode step from one occurrence of the per-token kernel to the next; the prefill "
             "from the call's first kernel to the first decode step")


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


def find_decode(seq: KernelSequence, starts: np.ndarray, ends: np.ndarray, steady: list[bool],
                template: np.ndarray, op_names: list[str], layers) -> DecodeLoop | None:
    """The decode loop of an inference iteration (None: a training iteration, no layers to tell a token
    from a layer by, or no kernel recurring once per token)."""
    if not layers or any(BACKWARD.search(op_names[int(c)]) for c in set(template.tolist())):
        return None
    whole = layers[0][1] * layers[0][2]  # a token's step runs every layer
    found = token_anchor(template, whole)
    if found is None:
        return None
    anchor_code = int(template[found[0][0]])
    tokens: list[float] = []
    prefills: list[int] = []
    per_call: list[int] = []
    busy = span = 0
    for a, b, ok in zip(starts.tolist(), ends.tolist(), steady):
        if not ok:
            continue
        pos = a + np.flatnonzero(seq.codes[a:b] == anchor_code)
        gaps = np.diff(pos)
        whole_steps = np.flatnonzero(gaps >= 0.5 * found[1])
        if len(whole_steps) < MIN_TOKENS + 1:
            continue
        first = int(whole_steps[0])  # the prefill: the first whole forward; decode steps after it
        times = seq.gpu_start[pos].astype(np.int64)
        prefills.append(int(times[first + 1] - seq.gpu_start[a]))
        decode = np.diff(times[first + 1:])
        tokens += decode.tolist()
        per_call.append(len(decode))
        lo, hi = int(pos[first + 1]), int(pos[-1])
        busy += int((seq.gpu_end[lo:hi] - seq.gpu_start[lo:hi]).sum())
        span += int(times[-1] - times[first + 1])
    if not tokens:
        return None
    values = np.array(tokens, dtype=np.float64)
    return DecodeLoop(calls=len(per_call), tokens_per_call=int(np.median(per_call)), step_kernels=int(found[1]),
                      prefill_ns=int(np.median(prefills)), median_ns=int(np.median(values)),
                      p90_ns=int(np.percentile(values, 90)), mean_ns=int(values.mean()),
                      gpu_busy_share=busy / span if span else 0.0, anchor=op_names[anchor_code])
