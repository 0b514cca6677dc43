"""What bounds a decode loop (a generate()-like call inferred in the trace, model.inferred.decode):
at batch 1 each new token runs every weight matrix as a matrix-vector product (GEMV), which reads
the whole matrix from HBM to do 2 FLOPs per weight, so the fastest a token can be is the weights'
bytes over the memory bandwidth. Against that floor: the measured per-token time and the GPU's
kernel time per token. Near the floor the decode is memory-bound (batch more sequences per step,
quantise the weights); far above it, the launches or the kernels' own inefficiency bound it.

The weights' bytes: the bytes copied host-to-device before the first call (a model loaded and
moved to the GPU copies its weights; nothing else that large goes before the first forward). An
upper bound of what one token reads: the input embedding is read one row per token. The bandwidth:
the export's TARGET_INFO_GPU.memoryBandwidth (the device's peak as the driver reports it)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.target_info import gpu_memory_bandwidth

HTOD = 1  # CUPTI copyKind: host to device
MEMORY_BOUND = 0.5  # the weights' read at peak is at least this share of the GPU's kernel time per token


@dataclass(frozen=True)
class DecodeWeights:
    weights_bytes: int  # host-to-device bytes copied before the first call
    copies: int
    bandwidth_bytes_per_s: float  # the device's HBM peak (TARGET_INFO_GPU.memoryBandwidth)
    per_token_ns: int  # the decode's median per-token latency (GPU clock)
    kernel_ns_per_token: float  # the GPU's kernel time per decode step (mean)
    device: int
    largest_bytes: int = 0  # the largest of those copies: the largest weight matrix (a model's head, often)

    @property
    def floor_ns(self) -> float:
        """Reading every weight once at the HBM peak: the fastest a batch-1 token can be."""
        return self.weights_bytes / self.bandwidth_bytes_per_s * 1e9

    @property
    def share_of_peak(self) -> float:
        """The weights' bytes per token over the per-token time, as a share of the HBM peak."""
        return self.floor_ns / self.per_token_ns if self.per_token_ns else 0.0

    @property
    def kernel_share(self) -> float:
        """The floor over the GPU's kernel time per token: near 1, the kernels stream the weights at peak."""
        return self.floor_ns / self.kernel_ns_per_token if self.kernel_ns_per_token else 0.0

    @property
    def memory_bound(self) -> bool:
        return self.kernel_share >= MEMORY_BOUND and self.kernel_ns_per_token >= 0.5 * self.per_token_ns

    BASIS = ("weights: the host-to-device bytes copied before the first call (an upper bound of a token's read: the "
             "input embedding is read one row per token); HBM peak: the export's TARGET_INFO_GPU.memoryBandwidth; "
             "floor: weights / peak; per token: the decode's median (GPU clock); kernel time per token: the decode "
             "steps' kernel time over their count")


def decode_weights(trace: Trace) -> DecodeWeights | None:
    """None where no decode loop is inferred, the export has no copies or no bandwidth, or nothing was
    copied to the device before the first call."""
    found = inference(trace)
    d = found.decode
    if d is None or not found.iterations:
        return None
    ops = trace.ops
    kernels = np.flatnonzero(ops["kind"].to_numpy() == KERNEL)
    if not len(kernels):
        return None
    device = int(np.bincount(ops["device"].to_numpy()[kernels].astype(np.int64)).argmax())
    bandwidth = gpu_memory_bandwidth(trace)
    rows = trace.memcpy_calls(device)
    if not bandwidth or not rows:
        return None
    first = found.iterations[0].start_ns
    sizes = [r[2] for r in rows if r[3] == HTOD and r[0] < first]
    if not sizes:
        return None
    return DecodeWeights(int(sum(sizes)), len(sizes), float(bandwidth), d.median_ns, d.gpu_busy_share * d.mean_ns,
                         device, int(max(sizes)))
