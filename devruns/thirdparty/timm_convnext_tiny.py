"""A plain PyTorch loop over timm's ConvNeXt-tiny (random init), bf16 autocast, channels-first
random images, marked around the loop's own lines with mark.step / mark.phase (the context-manager
form: step_N / forward / backward / optimizer ranges and the Python clock as step marks).
    python timm_convnext_tiny.py [--batch 32] [--size 160] [--warmup 3] [--steps 6]
"""
import argparse

import timm
import torch

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--size", type=int, default=160)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
a = p.parse_args()

model = timm.create_model("convnext_tiny", pretrained=False, num_classes=100).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(a.batch, 3, a.size, a.size, device="cuda")
y = torch.randint(0, 100, (a.batch,), device="cuda")
for i in range(a.warmup + a.steps):
    with mark.step(i, warmup=a.warmup):
        with mark.phase("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
        with mark.phase("backward"):
            loss.backward()
        with mark.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms", {k: round(v * 1e3, 2) for k, v in r["phases"].items()})
