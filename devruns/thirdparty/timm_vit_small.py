"""A plain PyTorch loop over timm's ViT-small (random init), bf16 autocast, random images, marked
with the two lines of nsight_tui.capture.mark.hooks: step_N / forward / backward / optimizer
ranges and the Python clock as step marks (an annotated third-party run).
    python timm_vit_small.py [--model vit_small_patch16_224] [--batch 64] [--warmup 3] [--steps 6]
"""
import argparse

import timm
import torch

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--model", default="vit_small_patch16_224")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
a = p.parse_args()

model = timm.create_model(a.model, pretrained=False, num_classes=100).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
size = model.default_cfg.get("input_size", (3, 224, 224))[-1]
x = torch.randn(a.batch, 3, size, size, device="cuda")
y = torch.randint(0, 100, (a.batch,), device="cuda")
mark.hooks(model, optimizer, warmup=a.warmup)
for _ in range(a.warmup + a.steps):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms", {k: round(v * 1e3, 2) for k, v in r["phases"].items()})
