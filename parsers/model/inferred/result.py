"""What was inferred from one trace's kernel sequence."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from nsight_tui.parsers.model.inferred.decode import DecodeLoop


@dataclass(frozen=True)
class InferredIteration:
    name: str  # the range's text: warmup_N (leading iterations unlike the steady one) or step_N
    start_ns: int  # GPU clock: its first kernel's start
    end_ns: int  # the next iteration's first kernel's start; the last: its last kernel's end
    kernels: int


@dataclass
class Inference:
    """What was inferred from one trace's kernel sequence (empty `iterations`: nothing; `reason`)."""

    iterations: list[InferredIteration] = field(default_factory=list)
    layer_count: int = 0
    layer_stages: list[str] = field(default_factory=list)  # one forward layer's stages, in order
    backward_stages: list[str] = field(default_factory=list)  # one backward layer's, in order (`... (grad)`)
    period_kernels: int = 0
    basis: str = ""
    reason: str = ""
    ranges: pd.DataFrame | None = field(default=None, repr=False)  # the rows added to trace.ranges

    inside: bool = False  # the export's own iteration ranges, with the parts inferred inside them
    decode: DecodeLoop | None = None  # an inference iteration's decode loop (a generate()-like call)
    micro_batches: int = 1  # forward/backward pairs an iteration (gradient accumulation), one optimizer step
    # the capture's record one entry an iteration where it clocked each micro-batch (micro.regrouped); None: as it is
    record: list[dict] | None = field(default=None, repr=False)

    @property
    def found(self) -> bool:
        return self.ranges is not None and len(self.ranges) > 0
