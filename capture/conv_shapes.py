"""A small convolutional net under nsys, for FLOPs from op shapes on convolutions.

The GPT-2 workload has no convolution; this one has a strided conv and a transposed one. Before
its steps it counts one training iteration with PyTorch's own FlopCounterMode and records the
total, per op, as an NVTX mark `conv-flops {...}`: the truth the shapes' FLOPs are tested against.
`--emit` wraps the steps in `torch.autograd.profiler.emit_nvtx(record_shapes=True)` (run it under
nsys without --pytorch) to record the same op shapes PyTorch's way rather than nsys's.

    nsys profile --trace=cuda,nvtx --pytorch=autograd-shapes-nvtx python3 -m nsight_tui.capture.conv_shapes
"""
from __future__ import annotations

import argparse
import contextlib
import json

MARK = "conv-flops "


def main() -> None:
    import nvtx
    import torch
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--emit", action="store_true", help="emit_nvtx(record_shapes=True) around the steps")
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 32 * 32, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (8,), device="cuda")

    def step() -> None:
        with nvtx.annotate("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with nvtx.annotate("backward"):
            loss.backward()
        with nvtx.annotate("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    nvtx.mark(message=MARK + json.dumps({"per_step_flops": int(counter.get_total_flops()), "by_op": by_op}))
    print("FlopCounterMode, one step:", counter.get_total_flops(), by_op, flush=True)
    torch.cuda.synchronize()
    emit = torch.autograd.profiler.emit_nvtx(record_shapes=True) if args.emit else contextlib.nullcontext()
    with emit:
        for i in range(args.steps):
            with nvtx.annotate(f"step_{i}"):
                step()
                torch.cuda.synchronize()


if __name__ == "__main__":
    main()
