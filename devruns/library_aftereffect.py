"""Does the framework's host work run slower right after a TF32 GEMM call than after an fp32 one?

In the every-other-step captures (docs/whatif.md) the TF32 steps ran the framework's unchanged work
between two GEMMs 5-10% slower than the fp32 steps beside them, and the program alone showed it too
(the backward's Python clock +1.5 ms a step). Here the question alone, timed on the CPU
(perf_counter_ns) in one process, arms in alternating rounds (the same minute's CPU for all):
    fp32   F.linear at PyTorch's "highest" precision (cuBLAS's fp32 path), then the framework's work
    tf32   the same GEMM at "high" (cuBLAS's TF32 kernels and their host path), then the same work
    none   no GEMM, then the same work
the framework's work being 125 small elementwise and reduction ops on a small tensor (their dispatch
and launch: what a stretch between two GEMMs holds). `sync` mode waits for the GPU after the GEMM,
untimed, so the work is launched onto an idle GPU in every arm; `queued` mode does not (the GEMM
still running behind the work's launches, as in a step). Prints per arm the median GEMM call and
work times, and each arm's work over fp32's with its noise (2 standard errors of the median ratio,
from the median absolute deviation).
    python3 devruns/library_aftereffect.py [ROUNDS]"""
from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn.functional as F

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
dev = torch.device("cuda")
x = torch.randn(4096, 768, device=dev)  # GPT-2 small, ctx 512 batch 8: the MLP's first GEMM
w = torch.randn(3072, 768, device=dev)
b = torch.randn(3072, device=dev)
a = torch.randn(64, 64, device=dev)
c = torch.randn(64, 64, device=dev)


def work() -> torch.Tensor:
    t = a
    for _ in range(25):
        t = F.gelu(t)
        t = t + c
        t = t * 0.5
        t = t - t.mean(dim=-1, keepdim=True)
    return t


def arm(kind: str, sync: bool) -> tuple[int, int]:
    if kind != "none":
        torch.set_float32_matmul_precision("highest" if kind == "fp32" else "high")
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    if kind != "none":
        F.linear(x, w, b)
    t1 = time.perf_counter_ns()
    if sync:
        torch.cuda.synchronize()
    t2 = time.perf_counter_ns()
    work()
    t3 = time.perf_counter_ns()
    torch.cuda.synchronize()
    return t1 - t0, t3 - t2


def noise(r: list[float]) -> float:
    med = statistics.median(r)
    mad = statistics.median(abs(v - med) for v in r)
    return 2 * 1.2533 * 1.4826 * mad / len(r) ** 0.5


for kind in ("fp32", "tf32", "none"):  # warm every path (cuBLAS heuristics, lazy module loads)
    for _ in range(20):
        arm(kind, True)
for sync in (True, False):
    got: dict[str, list[tuple[int, int]]] = {"fp32": [], "tf32": [], "none": []}
    order = ["fp32", "tf32", "none"]
    for i in range(ROUNDS):
        for kind in order[i % 3:] + order[:i % 3]:  # each arm first, second and third in turn
            got[kind].append(arm(kind, sync))
    mode = "sync" if sync else "queued"
    base = [wk for _, wk in got["fp32"]]
    for kind, v in got.items():
        ratio = [wk / f for (_, wk), f in zip(v, base)]
        print(f"{mode:6s} {kind:4s} GEMM call {statistics.median(g for g, _ in v) / 1e3:7.1f} us, "
              f"work {statistics.median(wk for _, wk in v) / 1e3:7.1f} us, work / fp32's "
              f"x{statistics.median(ratio):.4f} +- {noise(ratio):.4f}  ({len(v)} rounds)", flush=True)
