"""A conv net's tensors converted between NCHW and NHWC around every convolution (analyses.layout)."""
from __future__ import annotations

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.analyses.layout import layout_share
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.model import intervals


def channels_last_layout(c: StepContext) -> Finding | None:
    """The layout transposes' GPU time per step, where they are a visible share of the kernels: what
    channels_last removes (cuDNN's tensor-core convolutions read NHWC; NCHW tensors are converted
    before and after each)."""
    share = layout_share(c.model)
    if not share.steps or (share.share_of_kernels or 0.0) < threshold("layout_min_share"):
        return None
    pos = c.step_kernels
    codes = c.trace.ops["name"].to_numpy()[pos]
    mine = pos[name_families(c.trace)[codes] == "layout"] if len(pos) else pos
    if len(mine) == 0:
        return None
    ops = c.trace.ops
    start, end = ops["start"].to_numpy()[mine], ops["end"].to_numpy()[mine]
    first = int(np.argmax(end - start))
    top_name, _ = share.top[0] if share.top else ("", 0.0)
    return Finding(
        "channels-last-layout", "NCHW<->NHWC layout transposes around the convolutions (channels_last removes them)",
        ["step_N"], to_ms(share.layout_ns),
        "the layout transposes' GPU time per step (GPU clock, measured), which channels_last removes; it shortens "
        "the step only while the CPU waits for the GPU",
        "model = model.to(memory_format=torch.channels_last) and each input batch "
        "x.to(memory_format=torch.channels_last), with bf16/fp16 autocast (cuDNN's tensor-core convolutions "
        "read NHWC)",
        {"layout_ms_per_step": share.layout_ns / 1e6, "share_of_kernels": share.share_of_kernels,
         "layout_kernels_per_step": share.layout_kernels, "convolution_ms_per_step": share.convolution_ns / 1e6,
         "top_kernel": top_name},
        [{"kernel": n, "ns_per_step": round(t)} for n, t in share.top],
        int(start[first]), int(end[first]), claim=intervals.union(start, end), gpu_work=True)
