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
    def __init__(self) -> None:
        import nvtx  # imported here: the viewer side never needs it

        self._nvtx = nvtx

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self._nvtx.push_range(message=name)
        try:
            yield
        finally:
            self._nvtx.pop_range()

    def mark(self, message: str) -> None:
        self._nvtx.mark(message=message)

    def start(self, name: str) -> object:
        return self._nvtx.start_range(message=name)

    def end(self, handle: object) -> None:
        self._nvtx.end_range(handle)




def config_message(config: dict) -> str:
    return conventions.mark_text(conventions.CONFIG, config)


def step_message(name: str, seconds: float, phases: dict[str, float]) -> str:
    return conventions.mark_text(conventions.STEP, {"name": name, "seconds": seconds, "phases": phases})


def flops_message(row: dict) -> str:
    """`row`: {"path", "instances", "flops", "bytes", "ops": {op: [calls, flops, bytes]}, "formulas"}."""
    return conventions.mark_text(conventions.FLOPS, row)
