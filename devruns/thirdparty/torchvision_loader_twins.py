"""torchvision's ResNet-18 trained from an input pipeline on the CPU (FakeData's random images through
RandomResizedCrop, a flip, ToTensor and Normalize, as an ImageNet loader does after decoding), the
batches loaded on the main thread (`--workers 0`) or by worker processes: the change the
host-bound-gap finding's fix names (`DataLoader(num_workers>0)`), held out for `whatif
fix:host-bound-gap` (docs/whatif.md, "Held out: a real input pipeline").

Each step fetches its batch inside its step range (the loader's time is the step's), copies it to the
GPU (pageable, `--pin` pinned and non-blocking) and runs forward, backward and SGD; nothing
synchronises inside the loop (`mark.step(sync=False)`: the Python clock is the CPU's, which the
pageable copy ties to the GPU's pace).
    python torchvision_loader_twins.py [--workers 0] [--batch 64] [--warmup 3] [--steps 12] [--pin]
                                       [--model resnet18] [--size 224] [--keep-batch]
--keep-batch: the loop holds each batch as a whole (`batch = next(it)`, its tensors read from it) until the
next one replaces it, as a loop that logs or reuses the batch does: the host copy of the last batch is let go
at the next fetch, not right after its copy to the GPU.
"""
import argparse

import torch
import torchvision
from torchvision import transforms as T

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (0: the main thread loads)")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--pin", action="store_true", help="pin_memory=True and non-blocking copies")
p.add_argument("--model", default="resnet18")
p.add_argument("--size", type=int, default=224, help="the crop's side in pixels")
p.add_argument("--keep-batch", action="store_true", help="hold each batch until the next one replaces it")
a = p.parse_args()

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
pipeline = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
n = a.batch * (a.warmup + a.steps)
data = torchvision.datasets.FakeData(n, (3, a.size + a.size // 7, a.size + a.size // 7), 100, pipeline)
loader = torch.utils.data.DataLoader(data, a.batch, shuffle=False, num_workers=a.workers, pin_memory=a.pin,
                                     drop_last=True, persistent_workers=a.workers > 0)
model = getattr(torchvision.models, a.model)(num_classes=100).cuda().to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
mark.config(workload=f"torchvision {a.model} training from a CPU input pipeline, {a.workers} loader workers",
            workers=a.workers, pin=a.pin, batch_size=a.batch, size=a.size, keep_batch=a.keep_batch,
            torch=torch.__version__,
            torchvision=torchvision.__version__)

batches = iter(loader)
for i in range(a.warmup + a.steps):
    with mark.step(i, warmup=a.warmup, sync=False):
        if a.keep_batch:
            batch = next(batches)
            x = batch[0].cuda(non_blocking=a.pin).to(memory_format=torch.channels_last)
            y = batch[1].cuda(non_blocking=a.pin)
        else:
            x, y = next(batches)
            x = x.cuda(non_blocking=a.pin).to(memory_format=torch.channels_last)
            y = y.cuda(non_blocking=a.pin)
        with mark.phase("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with mark.phase("backward"):
            loss.backward()
        with mark.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
torch.cuda.synchronize()
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms")
