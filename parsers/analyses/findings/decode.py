"""A decode loop against the memory floor its weights set (analyses.decode_weights)."""
from __future__ import annotations


from nsight_tui.parsers.analyses.decode_weights import decode_weights
from nsight_tui.parsers.analyses.findings.context import StepContext, to_ms
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.model import intervals


def memory_bound_decode(c: StepContext) -> Finding | None:
    """Each batch-1 token reads every weight once (matrix-vector products): its bytes over the HBM peak
    are the fastest a token can be. The saving: the decode kernels' time above that floor, per step
    (call): what kernels streaming the weights at peak would leave; it shortens the step only while the
    CPU waits for the GPU (a launch-bound decode: little)."""
    w = decode_weights(c.trace)
    if w is None:
        return None
    from nsight_tui.parsers.model.inferred import inference

    d = inference(c.trace).decode
    assert d is not None
    mb, floor_us, token_ms = w.weights_bytes / 1e6, w.floor_ns / 1e3, w.per_token_ns / 1e6
    if w.memory_bound:
        title = (f"Memory-bound decode: each token reads {mb:,.0f} MB of weights, {floor_us:,.0f} µs at the HBM peak, "
                 f"of {token_ms:,.2f} ms a token")
        fix = ("serve more sequences per decode step (the weights read once serve them all: continuous batching), "
               "quantise the weights (int8 / int4: a half / a quarter of the bytes), speculative decoding")
    else:
        title = (f"GEMV decode at {w.share_of_peak:.1%} of HBM bandwidth: {mb:,.0f} MB of weights a token take "
                 f"{floor_us:,.0f} µs at peak, a token {token_ms:,.2f} ms; memory is not the bound yet")
        fix = ("the launches first (CUDA graphs: a static KV cache with torch.compile), then fewer, larger kernels "
               "(fused QKV and gate/up projections); memory sets the floor only once the GPU runs the token's kernels "
               "back to back")
    above = max(w.kernel_ns_per_token - w.floor_ns, 0.0) * d.tokens_per_call
    pos = c.step_kernels
    ops = c.trace.ops
    start, end = ops["start"].to_numpy()[pos], ops["end"].to_numpy()[pos]
    return Finding(
        "memory-bound-decode", title, ["step_N"], to_ms(above),
        "the decode kernels' time per token above the weights' read at the HBM peak, times the decode steps per "
        "call (GPU clock, measured against the device's peak); it shortens the call only while the CPU waits for "
        "the GPU",
        fix,
        {"weights_bytes": w.weights_bytes, "weights_copies": w.copies, "hbm_bytes_per_s": w.bandwidth_bytes_per_s,
         "floor_ns_per_token": w.floor_ns, "per_token_ns": w.per_token_ns,
         "kernel_ns_per_token": w.kernel_ns_per_token, "share_of_hbm_peak": w.share_of_peak,
         "floor_over_kernel_time": w.kernel_share, "memory_bound": w.memory_bound,
         "tokens_per_call": d.tokens_per_call, "largest_weight_bytes": w.largest_bytes, "basis": w.BASIS},
        [], int(c.t0[0]), int(c.t1[0]), claim=intervals.union(start, end) if len(pos) else None,
        gpu_work=True)


__all__ = ["memory_bound_decode"]
