"""NVTX annotation seam: the workload talks to an Annotator, the real one is the `nvtx` package.

Ranges and marks go to NVTX's default domain, where nsight-tui's parsers look for them.
Without a profiler attached the `nvtx` calls cost next to nothing, so the same code runs in tests.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Protocol

from nsight_tui.parsers.read import conventions

CONFIG_MARK = conventions.mark_prefix(conventions.CONFIG)
STEP_MARK = conventions.mark_prefix(conventions.STEP)
# One per NVTX range path: the FLOPs and bytes counted at capture (capture.counting).
FLOPS_MARK = conventions.mark_prefix(conventions.FLOPS)


class Annotator(Protocol):
    def range(self, name: str) -> contextlib.AbstractContextManager: ...

    def mark(self, message: str) -> None: ...

    # A range that begins and ends in different callbacks (the backward hooks, on PyTorch's
    # autograd thread): start/end with a handle, not push/pop, because PyTorch's own op ranges
    # (--pytorch=autograd-nvtx, emit_nvtx) push and pop on the same thread in between, and a
    # pop closes whichever range the thread pushed last.
    def start(self, name: str) -> object: ...

    def end(self, handle: object) -> None: ...


class NullAnnotator:
    """For building the model outside a profiled run (nothing is recorded)."""

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        yield

    def mark(self, message: str) -> None:
        pass

    def start(self, name: str) -> object:
        return None

    def end(self, handle: object) -> None:
        pass


class NvtxAnnotator:
    """The `nvtx` package's ranges and marks, or PyTorch's own bindings to the same NVTX calls where
    the package is not installed (the default domain either way: the trace reads the same).
    ImportError where neither is there."""

    def __init__(self) -> None:
        try:
            import nvtx  # imported here: the viewer side never needs it
        except ImportError:
            self._push, self._pop, self._mark, self._start, self._end = _torch_nvtx()
            return
        self._push = lambda name: nvtx.push_range(message=name)
        self._pop = nvtx.pop_range
        self._mark = lambda message: nvtx.mark(message=message)
        self._start = lambda name: nvtx.start_range(message=name)
        self._end = nvtx.end_range

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self._push(name)
        try:
            yield
        finally:
            self._pop()

    def mark(self, message: str) -> None:
        self._mark(message)

    def start(self, name: str) -> object:
        return self._start(name)

    def end(self, handle: object) -> None:
        self._end(handle)


def _torch_nvtx() -> tuple:
    """torch.cuda.nvtx's push, pop, mark, start and end; ImportError without a CUDA build of torch."""
    import torch

    if not torch.cuda.is_available():
        raise ImportError("neither the nvtx package nor a CUDA build of PyTorch")
    n = torch.cuda.nvtx
    return n.range_push, n.range_pop, n.mark, n.range_start, n.range_end




class PathTracking:
    """Wraps an Annotator and keeps the stack of push/pop ranges open on the calling thread; when an
    exception leaves a range, the deepest path open then is `failed_path` (the range that ran out
    of memory, for the OOM mark and record)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.stack: list[str] = []
        self.failed_path: str | None = None

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        try:
            with self.inner.range(name):
                yield
        except BaseException:
            if self.failed_path is None:
                self.failed_path = "/".join(self.stack)
            raise
        finally:
            self.stack.pop()

    def mark(self, message: str) -> None:
        self.inner.mark(message)

    def start(self, name: str) -> object:
        return self.inner.start(name)

    def end(self, handle: object) -> None:
        self.inner.end(handle)


def config_message(config: dict) -> str:
    return conventions.mark_text(conventions.CONFIG, config)


def step_message(name: str, seconds: float, phases: dict[str, float], memory: dict | None = None) -> str:
    value: dict = {"name": name, "seconds": seconds, "phases": phases}
    if memory:
        value[conventions.STEP_MEMORY] = memory
    return conventions.mark_text(conventions.STEP, value)


def oom_message(path: str | None, message: str) -> str:
    return conventions.mark_text(conventions.OOM, {"path": path, "message": message})


def flops_message(row: dict) -> str:
    """`row`: {"path", "instances", "flops", "bytes", "ops": {op: [calls, flops, bytes]}, "formulas"}."""
    return conventions.mark_text(conventions.FLOPS, row)
