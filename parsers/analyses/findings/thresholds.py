"""Every threshold the rules use, with the reason for its value."""
from __future__ import annotations

from dataclasses import dataclass

from nsight_tui.parsers.replay.straggler import STRAGGLES_MIN_SHARE


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    reason: str


THRESHOLDS: dict[str, Threshold] = {
    "host_gap_min_ns": Threshold(1_000_000, "ns", "a host-bound stretch this long is one piece of Python/data work, "
                                 "not the 10-100 µs of framework dispatch between launch bursts"),
    "launch_min_share": Threshold(0.10, "of the step", "below a tenth of the step, CUDA graphs or a larger batch "
                                  "are not worth their complexity"),
    "optimizer_kernels_min": Threshold(200, "kernels per step", "foreach/fused optimizers launch tens of kernels per "
                                       "step; a per-parameter loop launches ~5-10 per parameter tensor (GPT-2 small: "
                                       "148 tensors, ~1,100 kernels)"),
    "fp32_gemm_min_share": Threshold(0.10, "of the step's GPU busy time", "fp32 GEMMs under a tenth of the GPU's "
                                     "work cannot move the step much"),
    "pageable_min_bytes": Threshold(1 << 20, "bytes per step", "smaller copies (a loss scalar from .item()) cost "
                                    "latency, not bandwidth: sync-stall covers them"),
    "pinned_gbps": Threshold(40.0, "GB/s", "what pinned host<->device copies reach over PCIe Gen4/Gen5 x16 "
                             "(measured 47 GB/s on the H200 of sample_traces/findings)"),
    # the value the `straggler` edit reads too, where it is defined (replay.straggler: the replay may not import
    # the findings), to say when no rank straggles by the finding's measure
    "comm_min_share": Threshold(STRAGGLES_MIN_SHARE, "of the step", "a few percent of exposed communication is the "
                                "usual tail of the last bucket"),
    "warmup_slow_ratio": Threshold(1.5, "x the median step", "a step this much slower than the median is "
                                   "compiling, autotuning or allocating, not steady state"),
    "occupancy_min_share": Threshold(0.02, "of the steps' GPU busy time", "a kernel name under 2% of the GPU's work "
                                     "cannot move the step by more than a fraction of that even at ncu's full "
                                     "estimated speedup"),
    "occupancy_low_pct": Threshold(50.0, "% theoretical occupancy", "below half the SM's warps the launch "
                                   "configuration (registers, shared memory, block size) caps the latency the "
                                   "scheduler can hide; at or above it, more warps rarely help"),
    "chain_kernel_max_ns": Threshold(20_000, "ns per kernel", "a kernel this short spends a sizeable share of its "
                                     "time on fixed costs (launch, ramp-up, tail: a few µs each) and on one read and "
                                     "write of its tensor; longer ones are single large passes"),
    "chain_min_kernels": Threshold(3, "kernels in a row", "two kernels in a row are one intermediate tensor; three "
                                   "or more is the pattern torch.compile's fusion removes with a gain worth naming"),
    "layout_min_share": Threshold(0.05, "of the steps' kernel time", "a conv net in NCHW converts every "
                                  "convolution's input and output (14% of the kernel time of a channels-first "
                                  "ResNet-50 in bf16); a few percent is the odd permute a model does on purpose"),
    "min_saving_ms": Threshold(0.0, "ms per step", "rules fire whenever their cause is present; the saving "
                               "ranks them"),
}


def threshold(key: str) -> float:
    return THRESHOLDS[key].value
