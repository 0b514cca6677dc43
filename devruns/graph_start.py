"""When does a CUDA graph's GPU work start: while `cudaGraphLaunch` still runs (the training steps'
graphs, the ViT's forward) or only after it returns (every transformers decode graph)? Synthetic
graphs one property apart (cut by a memset, a device copy or a host copy in the middle or every
50 nodes, too), each captured once with torch.cuda.graph, uploaded, then replayed
REPLAYS times with the GPU drained between replays (as a marked loop's step ends), each replay in
an NVTX range named after its graph. Run under nsys with --cuda-graph-trace=node; `--analyse
FILE.sqlite` prints, per graph, the median of its first node's start less the launch call's end
(negative: the GPU started before the call returned), the call's time, nodes and their mean gap,
and the first node's start as a share of the call.

    python graph_start.py [REPLAYS [GRAPH,...]]        (under nsys; default every graph)
    python graph_start.py --analyse FILE.sqlite
"""
from __future__ import annotations

import sqlite3
import statistics as st
import sys


NODE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMCPY")


def analyse(path: str) -> None:
    c = sqlite3.connect(path)
    ranges = c.execute("""select n.start, n.end, coalesce(n.text, s.value) from NVTX_EVENTS n
                          left join StringIds s on s.id = n.textId where n.eventType = 59""").fetchall()
    launches = c.execute("""select r.start, r.end, r.correlationId from CUPTI_ACTIVITY_KIND_RUNTIME r
                            join StringIds s on s.id = r.nameId where s.value like 'cudaGraphLaunch%'""").fetchall()
    tables = [t for (t,) in c.execute("select name from sqlite_master") if t in NODE_TABLES]
    ops_sql = " union all ".join(f"select start, end from {t} where correlationId = ?" for t in tables)
    by_name: dict[str, list[tuple[float, float, int, float]]] = {}
    for rs, re_, name in ranges:
        for a, b, corr in launches:
            if rs <= a and b <= re_:
                ops = sorted(c.execute(ops_sql, (corr,) * len(tables)).fetchall())
                if len(ops) < 2:
                    continue
                gaps = [ops[i + 1][0] - ops[i][1] for i in range(len(ops) - 1)]
                by_name.setdefault(name, []).append(((ops[0][0] - b) / 1e3, (b - a) / 1e3, len(ops), sum(gaps) / len(gaps)))
    print(f"{'graph':24s} {'replays':>7s} {'first - call end us':>20s} {'call us':>9s} {'nodes':>6s} {'mean gap ns':>11s}"
          f" {'first / call':>12s}")
    for name, rows in by_name.items():
        med = [st.median(r[i] for r in rows) for i in range(4)]
        print(f"{name:24s} {len(rows):7d} {med[0]:20.1f} {med[1]:9.1f} {med[2]:6.0f} {med[3]:11.0f}"
              f" {st.median((r[1] + r[0]) / r[1] for r in rows):12.3f}")


def main(replays: int) -> None:
    import torch

    dev = "cuda"
    x = torch.zeros(1024, device=dev)
    idx = torch.arange(0, 1024, 4, device=dev)
    a = torch.randn(512, 512, device=dev)
    big = torch.randn(4096, 4096, device=dev)
    tensors = [torch.zeros(4096, device=dev) for _ in range(48)]
    side = torch.cuda.Stream()

    def tiny(n: int):
        def f():
            for _ in range(n):
                x.add_(1)
        return f

    def gemm_first():
        big @ big
        tiny(300)()

    def gemms():
        y = a
        for _ in range(100):
            y = torch.relu(y @ a)

    def fork():
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        for _ in range(150):
            x.add_(1)
        with torch.cuda.stream(side):
            y = torch.zeros(1024, device=dev)
            for _ in range(150):
                y.add_(1)
        cur.wait_stream(side)

    def index():
        for _ in range(300):
            x.index_add_(0, idx, x[idx])

    def foreach_first():
        torch._foreach_add_(tensors, 1.0)
        tiny(300)()

    def foreach():
        for _ in range(100):
            torch._foreach_add_(tensors, 1.0)

    import ctypes

    with open("/proc/self/maps") as maps:  # the CUDA runtime torch loaded, for cudaMemsetAsync
        lib = sorted({line.split()[-1] for line in maps if "libcudart" in line} or {"libcudart.so"})[0]
    memset_async = ctypes.CDLL(lib).cudaMemsetAsync
    memset_async.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    scratch = torch.empty(256, device=dev)
    y = torch.empty_like(x)
    pinned = torch.zeros(1024).pin_memory()

    def memset():
        assert memset_async(scratch.data_ptr(), 0, 1024, torch.cuda.current_stream().cuda_stream) == 0

    def cut_by(between, every: int):
        def f():
            for i in range(300):
                if i and i % every == 0:
                    between()
                x.add_(1)
        return f

    bodies = {"tiny300": tiny(300), "tiny1000": tiny(1000), "gemm_first": gemm_first, "gemm100": gemms,
              "fork": fork, "index300": index, "foreach_first": foreach_first, "foreach100": foreach,
              "memset_mid": cut_by(memset, 150), "memset_every50": cut_by(memset, 50),
              "d2d_mid": cut_by(lambda: y.copy_(x), 150), "h2d_mid": cut_by(lambda: y.copy_(pinned, non_blocking=True), 150)}
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    bodies = {k: v for k, v in bodies.items() if only is None or k in only}
    graphs = {}
    for name, body in bodies.items():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                body()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            body()
        g.replay()
        torch.cuda.synchronize()
        graphs[name] = g
    # the same linear graph launched with the GPU busy (a long GEMM queued first), and on a side stream
    plan = [(n, n, None) for n in graphs]
    if "tiny300" in graphs:
        plan += [("tiny300_busy", "tiny300", "busy"), ("tiny300_side", "tiny300", "side")]
    for label, name, how in plan:
        g = graphs[name]
        for _ in range(replays):
            torch.cuda.nvtx.range_push(label)
            if how == "busy":
                big @ big
                g.replay()
            elif how == "side":
                with torch.cuda.stream(side):
                    g.replay()
            else:
                g.replay()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    print("graph_start done:", len(plan), "graphs,", replays, "replays each")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--analyse"]:
        analyse(sys.argv[2])
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
