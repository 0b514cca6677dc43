"""The report's `occupancy` section as JSON (from parsers.kernels.occupancy's `OccupancyReport`):
per GPU its per-SM limits, per kernel name its theoretical occupancy and every launch configuration."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.kernels.occupancy import ConfigOccupancy, GpuLimits, KernelOccupancy, OccupancyReport


def occupancy_json(r: OccupancyReport) -> dict:
    """The JSON under "occupancy"."""
    return {"what": r.what, "method": r.method, "scope": r.scope, "note": r.note,
            "gpus": [gpu_json(g) for g in r.gpus], "kernels": [kernel_json(k) for k in r.kernels]}


def gpu_json(g: GpuLimits) -> dict:
    """One GPU's per-SM limits (shared memory in bytes), and which the export gave."""
    return {"device": g.device, "name": g.name, "compute_capability": f"{g.cc[0]}.{g.cc[1]}",
            "max_warps_per_sm": g.limits.max_warps, "max_blocks_per_sm": g.limits.max_blocks,
            "registers_per_sm": g.limits.regs_per_sm, "shared_memory_per_sm_bytes": g.limits.smem_per_sm,
            "shared_memory_allocation_unit_bytes": g.limits.smem_unit,
            "reserved_shared_memory_per_block_bytes": g.limits.reserved_smem,
            "limits_from_export": list(g.from_export)}


def kernel_json(k: KernelOccupancy) -> dict:
    return {"name": k.name, "total_ns": k.total_ns, "launches": k.launches,
            "theoretical_occupancy_pct": k.theoretical_occupancy_pct, "occupancy_limiter": k.occupancy_limiter,
            "configs": [config_json(c) for c in k.configs]}


def config_json(c: ConfigOccupancy) -> dict:
    return asdict(c)
