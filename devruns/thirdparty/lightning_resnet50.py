"""Lightning + timm ResNet-50 (random init), small random images, channels-first (NCHW) as most
code leaves them, bf16-mixed. A Lightning Callback takes the Python clock around each training
batch (nsight_tui.capture.mark, nvtx=False: the trace stays unannotated; times in STEM.steps.json).
    python lightning_resnet50.py [--batch 32] [--size 128] [--warmup 3] [--steps 6] [--channels-last] [--accum K]
--accum: Trainer(accumulate_grad_batches=K): the Callback's clock then takes each micro-batch, as a user's would.
"""
import argparse

import torch

try:
    import lightning as L
except ImportError:  # the older name of the same package
    import pytorch_lightning as L

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--size", type=int, default=128)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--channels-last", action="store_true", help="the model's weights channels-last (NHWC): the twin")
p.add_argument("--accum", type=int, default=1, help="Trainer(accumulate_grad_batches=K)")
a = p.parse_args()

try:
    import timm

    net = timm.create_model("resnet50", pretrained=False, num_classes=100)
    source = f"timm {timm.__version__}"
except ImportError:
    import torchvision

    net = torchvision.models.resnet50(num_classes=100)
    source = f"torchvision {torchvision.__version__}"


if a.channels_last:
    net = net.to(memory_format=torch.channels_last)


class Classifier(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def training_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class StepClock(L.Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        mark.begin_step(batch_idx, warmup=a.warmup, nvtx=False)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        mark.end_step()


total = a.warmup + a.steps  # optimizer steps; the loader holds K batches for each
g = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(a.batch * a.accum * total, 3, a.size, a.size, generator=g),
                                      torch.randint(0, 100, (a.batch * a.accum * total,), generator=g))
loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=0)
layout = "channels_last" if a.channels_last else "channels_first"
mark.config(workload="Lightning + ResNet-50", model_source=source, lightning=L.__version__, batch_size=a.batch,
            image=a.size, precision="bf16-mixed", memory_format=layout, accumulation=a.accum, torch=torch.__version__)
trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=total, precision="bf16-mixed", logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    accumulate_grad_batches=a.accum, callbacks=[StepClock()])
trainer.fit(Classifier(net), loader)
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms")
