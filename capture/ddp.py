"""Data-parallel training for the workload: one process per GPU, started by torchrun.

The workload calls `setup()` first; outside torchrun (no WORLD_SIZE > 1) it does nothing and the
single-GPU path is unchanged. Under torchrun each process takes the GPU of its LOCAL_RANK, joins
an NCCL process group and wraps the model in DistributedDataParallel, whose gradient all-reduce
runs during `backward` — what the ranks view measures as communication against compute.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def metadata(self) -> dict:
        """Keys for the config mark: the parsers number ranks from these (parsers/analyses/ranks.py)."""
        return {"rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size} if self.active else {}


def from_environment(env: dict | None = None) -> Distributed:
    env = dict(os.environ if env is None else env)
    world = int(env.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return Distributed()
    return Distributed(int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), world)


def setup(dist_info: Distributed, device_kind: str):
    """Join the process group; return the torch device this process uses."""
    import torch

    if not dist_info.active:
        return torch.device(device_kind)
    import torch.distributed as dist

    if device_kind == "cuda":
        torch.cuda.set_device(dist_info.local_rank)
        device = torch.device("cuda", dist_info.local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def wrap(model, dist_info: Distributed, device, **options):
    """DistributedDataParallel around the model (`options` pass on, e.g. bucket_cap_mb)."""
    if not dist_info.active:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None, **options)


def teardown(dist_info: Distributed) -> None:
    if dist_info.active:
        import torch.distributed as dist

        dist.destroy_process_group()
