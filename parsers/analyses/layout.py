"""Layout transposes per step: how much of a conv net's step goes to turning tensors between NCHW
and NHWC (cuDNN's nchwToNhwcKernel / nhwcToNchwKernel, the `layout` kernel family) rather than
to the convolutions themselves. A contiguous (NCHW) fp32 or bf16 model feeding NHWC kernels pays
this on every convolution, forward and backward; `model.to(memory_format=torch.channels_last)`
(with the input) removes most of it. The figures the layout finding reads."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read.ids import KERNEL

LAYOUT, CONVOLUTION = "layout", "convolution"
TOP = 5  # the transposes named, the costliest first


@dataclass(frozen=True)
class LayoutShare:
    """GPU time of layout transposes, per step (over the steady `step_N` iterations, annotated or
    inferred) or, where the capture has none, over the whole capture (`steps` 0)."""

    steps: int  # the steps measured; 0: the whole capture is the basis
    layout_ns: float  # GPU kernel time of layout transposes, per step (GPU clock, measured)
    layout_kernels: float  # their launches, per step
    convolution_ns: float  # GPU kernel time of convolutions, per step
    kernel_ns: float  # GPU time of every kernel, per step
    step_ns: float | None  # the mean step period (start to the next step's start); None: no steps
    top: list[tuple[str, float]] = field(default_factory=list)  # (kernel name, ns per step), at most TOP

    @property
    def share_of_step(self) -> float | None:
        """Layout transposes over the step period (None without steps)."""
        return self.layout_ns / self.step_ns if self.step_ns else None

    @property
    def share_of_kernels(self) -> float | None:
        """Layout transposes over all kernel time."""
        return self.layout_ns / self.kernel_ns if self.kernel_ns else None

    @property
    def over_convolution(self) -> float | None:
        """Layout transposes per unit of convolution time (how much the layout adds to the convs)."""
        return self.layout_ns / self.convolution_ns if self.convolution_ns else None


def layout_share(model: RangeModel) -> LayoutShare:
    """The layout transposes' GPU time per steady step (every `step_N`; the whole capture without)."""
    taken = steps_of(model)
    steps = taken.steady
    if len(steps):
        pos = model.ops_of(steps)
        times = taken.times(steps)
        n, step_ns = len(steps), times.mean_period_ns()
    else:
        pos = np.arange(len(model.trace.ops), dtype=np.int64)
        n, step_ns = 0, None
    ops = model.trace.ops
    pos = pos[ops["kind"].to_numpy()[pos] == KERNEL]
    codes = ops["name"].to_numpy()[pos]
    dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[pos].astype(np.int64)
    fam = families.name_families(model.trace)[codes] if len(codes) else np.zeros(0, dtype=object)
    per = max(n, 1)
    layout = fam == LAYOUT
    per_name = np.zeros(len(model.trace.op_names), dtype=np.int64)
    np.add.at(per_name, codes[layout], dur[layout])
    top = [(model.trace.op_names[int(c)], per_name[c] / per) for c in np.argsort(-per_name, kind="stable")[:TOP]
           if per_name[c] > 0]
    return LayoutShare(steps=n, layout_ns=float(dur[layout].sum()) / per, layout_kernels=float(layout.sum()) / per,
                       convolution_ns=float(dur[fam == CONVOLUTION].sum()) / per, kernel_ns=float(dur.sum()) / per,
                       step_ns=step_ns, top=top)
