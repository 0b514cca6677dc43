"""`Options`: everything a user may set about how a profile is read, in one frozen value checked once.

The command line (`report`, `open`), the TUI's launch and the MCP server build one `Options`
and hand it to the front door (`parsers.api.Profile`); nothing below re-checks it. A value out
of range is an `OptionsError` naming the field, which a front end says with its own spelling
of the option (`--peak-tflops`, `peak_tflops`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from nsight_tui.parsers.exception import OptionsError
from nsight_tui.parsers.model.attribution import MODES

ATTENTION_DIMS = ("batch", "n_heads", "ctx", "d_head")


@dataclass(frozen=True)
class Options:
    """How to read one profile.

    attribution: whose ranges hold a GPU op (`process`: the main thread's ranges also hold what
        other threads launched while they were open; `nsys`: NVIDIA's launching-thread rule).
    main_thread: the thread (TID or name) whose ranges frame the iteration; None: chosen.
    flops_file: FLOPs and bytes per range path (JSON, `--flops`), read and checked once here.
    peak_tflops, peak_gbps: the roofline's roofs in TFLOP/s and GB/s (a GPU the peaks table lacks).
    batch, n_heads, ctx, d_head: attention dimensions for traces without capture metadata
        (the softmax/matmul FLOP ratio); None: from the trace's config mark.
    ncu_file: an Nsight Compute report of the same workload, joined to the trace's ranges.
    """

    attribution: str = "process"
    main_thread: str | None = None
    flops_file: str | None = None
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    batch: int | None = None
    n_heads: int | None = None
    ctx: int | None = None
    d_head: int | None = None
    ncu_file: str | None = None

    def __post_init__(self) -> None:
        if self.attribution not in MODES:
            raise OptionsError("attribution", f"must be one of {', '.join(MODES)}, not {self.attribution!r}")
        for name in ("peak_tflops", "peak_gbps"):
            value = getattr(self, name)
            if value is not None and not 0 < value < math.inf:
                raise OptionsError(name, f"must be a positive number, not {value}")
        for name in ATTENTION_DIMS:  # a count or a length: a zero divides, a negative is no shape
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise OptionsError(name, f"must be a positive whole number, not {value}")
        if self.flops_file:
            from nsight_tui.parsers.kernels.flop_counts import from_file

            from_file(self.flops_file)  # a bad file fails here, before any work (the roofline reads it again)

    @property
    def roofline(self) -> dict:
        """The roofline's options (analyses.roofline.build's keywords)."""
        return {"flops_file": self.flops_file, "peak_tflops": self.peak_tflops, "peak_gbps": self.peak_gbps}

    @property
    def dims(self) -> dict[str, int]:
        """The attention dimensions given (the rest come from the trace's config mark)."""
        return {k: v for k in ATTENTION_DIMS if (v := getattr(self, k)) is not None}
