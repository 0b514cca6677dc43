"""Does the CPU's work around a kernel launch cost more when the GPU is idle than when it is busy?

The same sequence, timed on the CPU (perf_counter_ns), in alternating rounds: N launches of a tiny
elementwise kernel (`x.add_(1)`), and the same N each after a fixed piece of Python work (no CUDA),
with the GPU kept busy for the whole round (a spin kernel, torch.cuda._sleep, queued just before)
or idle (the same spin kernel, a few cycles long, finished before the round starts). Same process,
same minute, rounds alternating: the difference is the GPU's state, not the CPU's pace.
    python3 devruns/idle_launch.py [ROUNDS]"""
from __future__ import annotations

import statistics
import sys
import time

import torch

N = 200
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()


def work() -> int:  # about a few microseconds of pure Python, no CUDA call
    s = 0
    for i in range(40):
        s += i * i
    return s


def launches() -> int:
    t = time.perf_counter_ns()
    for _ in range(N):
        x.add_(1.0)
    return time.perf_counter_ns() - t


def launches_and_work() -> int:
    t = time.perf_counter_ns()
    for _ in range(N):
        work()
        x.add_(1.0)
    return time.perf_counter_ns() - t


def pure_work() -> int:
    t = time.perf_counter_ns()
    for _ in range(N):
        work()
    return time.perf_counter_ns() - t


out: dict[tuple[str, str], list[int]] = {}
for r in range(ROUNDS):
    for what, fn in (("launches", launches), ("launches+work", launches_and_work), ("work only", pure_work)):
        busy = (r + (what == "launches+work")) % 2 == 1
        torch.cuda.synchronize()
        torch.cuda._sleep(20_000_000 if busy else 10)  # ~10 ms of spinning covers the round (~2-4 ms)
        if not busy:
            torch.cuda.synchronize()
        ns = fn()
        out.setdefault((what, "busy" if busy else "idle"), []).append(ns)
torch.cuda.synchronize()
for what in ("launches", "launches+work", "work only"):
    idle, busy = (statistics.median(out[(what, s)]) / N / 1e3 for s in ("idle", "busy"))
    q = [statistics.quantiles([v / N / 1e3 for v in out[(what, s)]], n=4) for s in ("idle", "busy")]
    print(f"{what:14s} per item: idle {idle:.3f} us (IQR {q[0][0]:.2f}-{q[0][2]:.2f}), busy {busy:.3f} us "
          f"(IQR {q[1][0]:.2f}-{q[1][2]:.2f}), idle/busy {idle / busy:.3f}; rounds {len(out[(what, 'idle')])} each")
