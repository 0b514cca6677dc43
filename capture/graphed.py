"""The `cuda-graph` plant: the whole training step captured once into a CUDA graph and replayed.

PyTorch's whole-network capture (torch.cuda.graphs docs): warm up eagerly on a side stream (so
the allocator and cuBLAS have settled), set the gradients to None, capture forward + backward +
AdamW(capturable=True) once, replay. The replay runs the same kernels as the eager `capturable`
twin with one cudaGraphLaunch per step instead of ~700 launches, so the step time the twins
differ by is the launch overhead the `launch-bound` rule estimates. The first replay (it uploads
the graph) happens inside the capture's own range, outside the measured steps.

Imported only inside the workload process (needs torch and CUDA).
"""
from __future__ import annotations

import contextlib

CAPTURE_RANGE = "cuda_graph_capture"  # not an iteration: the parsers' steady state skips it


class GraphedStep:
    def __init__(self, torch):
        self.torch = torch
        self.side = torch.cuda.Stream()
        self.graph = None

    def warmup(self):
        """Context for the eager warmup iterations: on the side stream, joined back after."""
        @contextlib.contextmanager
        def on_side():
            self.side.wait_stream(self.torch.cuda.current_stream())
            with self.torch.cuda.stream(self.side):
                yield
            self.torch.cuda.current_stream().wait_stream(self.side)
        return on_side()

    def capture(self, step, optimizer, annotator, sync) -> None:
        """Capture `step()` (forward, backward, optimizer.step(); no zero_grad: the captured
        backward writes the gradients where the capture allocated them), then replay it once."""
        torch = self.torch
        optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with annotator.range(CAPTURE_RANGE):
            with torch.cuda.graph(graph):
                step()
            graph.replay()
            sync()
        self.graph = graph

    def replay(self) -> None:
        assert self.graph is not None, "capture first"
        self.graph.replay()
