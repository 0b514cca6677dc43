"""timm's ViT (random init) trained under DDP by a plain loop, one process per GPU (torchrun): the
per-rank twins of a model nobody here wrote (docs/whatif.md, "A straggler beyond GPT-2"), captured by
`WORKLOAD="python3 devruns/thirdparty/timm_vit_ddp.py" devruns/gpu_ddp_rank_twins.sh`.
  --sleep-ms MS  a pause at each step's start, inside its range, before its work (time.sleep: the next
           batch, logging); with --sleep-rank R on rank R alone, a straggler the others wait for in
           their all-reduces;
  --uneven-rank R  rank R's batch 1.5x the others' (its uneven share of the data: a straggler of the same
           kernels, longer);
  --tf32   TF32 matmuls and convolutions (else fp32: PyTorch's default).
Each step marked as the GPT-2 workload marks its own (nsight_tui.capture.mark: step_N ranges, forward,
backward and optimizer phases, the Python step clock read after the step's synchronise).
    torchrun --nproc-per-node=2 timm_vit_ddp.py [--model vit_small_patch16_224] [--batch 32] [--warmup 3]
             [--steps 6] [--tf32] [--sleep-ms MS [--sleep-rank R]] [--uneven-rank R]
"""
import argparse
import os
import time

import timm
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--model", default="vit_small_patch16_224")
p.add_argument("--batch", type=int, default=32)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--tf32", action="store_true", help="TF32 matmuls and convolutions")
p.add_argument("--sleep-ms", type=float, default=0.0, help="a pause at each step's start (time.sleep)")
p.add_argument("--sleep-rank", type=int, default=None, help="the pause on this rank alone (a straggler)")
p.add_argument("--uneven-rank", type=int, default=None, help="this rank's batch 1.5x the others'")
a = p.parse_args()

dist.init_process_group("nccl")
rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
torch.backends.cuda.matmul.allow_tf32 = a.tf32
torch.backends.cudnn.allow_tf32 = a.tf32
torch.manual_seed(0)
model = DistributedDataParallel(timm.create_model(a.model, pretrained=False, num_classes=100).cuda(), device_ids=[local])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
size = model.module.default_cfg.get("input_size", (3, 224, 224))[-1]
batch = a.batch * 3 // 2 if a.uneven_rank == rank else a.batch
x = torch.randn(batch, 3, size, size, device="cuda")
y = torch.randint(0, 100, (batch,), device="cuda")
sleeps = a.sleep_ms > 0 and (a.sleep_rank is None or a.sleep_rank == rank)
mark.config(workload=f"timm {a.model} training under DDP, " + ("TF32" if a.tf32 else "fp32"), rank=rank,
            world_size=dist.get_world_size(), batch_size=batch, sleep_ms=a.sleep_ms if sleeps else 0.0,
            torch=torch.__version__, timm=timm.__version__)

for i in range(a.warmup + a.steps):
    with mark.step(i, warmup=a.warmup):
        if sleeps:
            time.sleep(a.sleep_ms / 1e3)
        optimizer.zero_grad(set_to_none=True)
        with mark.phase("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with mark.phase("backward"):
            loss.backward()
        with mark.phase("optimizer"):
            optimizer.step()
if rank == 0:
    for r in mark.clock.records:
        print(r["name"], f"{r['seconds'] * 1e3:.2f} ms")
dist.destroy_process_group()
