"""Theoretical occupancy of every kernel launch, from the nsys export alone.

What it is: the warps a launch configuration lets one SM hold at once, as a share of the most
the SM can hold. It is an *estimate from the launch configuration* (registers per thread,
static + dynamic shared memory, block size, the shared-memory carve-out the driver chose), not
a measurement: achieved occupancy (Nsight Compute's `sm__warps_active`) is lower whenever the
grid is short, blocks finish unevenly or the scheduler cannot fill the SM.

The method is NVIDIA's CUDA Occupancy Calculator (the spreadsheet shipped with the toolkit, and
the same formulas in the toolkit's `cuda_occupancy.h`, `cudaOccMaxActiveBlocksPerMultiprocessor`),
which Nsight Compute's "Occupancy" section reports as `launch__occupancy_limit_*` and
`sm__maximum_warps_per_active_cycle_pct`. For one launch configuration:

    warps/block        = ceil(threads/block / warp size)
    by warps           = floor(max warps/SM / warps/block)
    by blocks          = max blocks/SM
    registers/warp     = ceil(registers/thread * warp size, register allocation unit = 256)
    by registers       = floor(floor(registers/SM / sub-partitions / registers/warp) * sub-partitions
                               / warps/block)              (registers are allocated per warp in
                                                            each of the SM's 4 sub-partitions)
    shared/block       = ceil(static + dynamic + driver-reserved/block, allocation unit)
    by shared memory   = floor(shared memory per SM (the carve-out in force) / shared/block)
    active blocks/SM   = min of the four;  occupancy = active blocks * warps/block / max warps/SM
    limiter            = the limit that gives the minimum (ties: warps, blocks, registers, shared
                         memory: when the SM's own maximum is reached, nothing the kernel does helps)

The per-SM limits come from the export's TARGET_INFO_GPU where it has them (maxWarpsPerSm,
maxBlocksPerSm, maxRegistersPerSm, maxShmemPerSm, maxShmemPerBlockOptin, threadsPerWarp) and from
the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability" table for the
rest (`LIMITS`, by computeMajor.computeMinor). The shared memory per SM in force is the
carve-out the driver set for the launch (CUPTI's `sharedMemoryExecuted`, the figure Nsight
Compute shows as "Shared Memory Configuration Size"), else the SM's maximum.

Not modelled: thread-block clusters (CC 9.0+; the export does not record the cluster shape) and
the partitioned global caching of CC 5.2/6.x GPUs (not in `LIMITS`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.load import GPU_TABLE, KERNEL_TABLE, LAUNCH_COLUMNS

WHAT = "theoretical (from launch configuration)"  # every place occupancy shows says so

# Limiter codes, in the order ties are broken (the first wins).
LIMITERS = ("warps", "blocks", "registers", "shared memory")
WARPS, BLOCKS, REGISTERS, SHARED = range(4)
UNLIMITED = 1 << 30


@dataclass(frozen=True)
class CcLimits:
    """Per-SM limits of one compute capability (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"; allocation units from the Occupancy Calculator)."""

    max_warps: int  # maximum resident warps per SM
    max_blocks: int  # maximum resident blocks per SM
    smem_per_sm: int  # maximum shared memory per SM (bytes)
    smem_per_block: int  # maximum shared memory per block, opted in (bytes)
    smem_unit: int  # shared memory allocation unit (bytes)
    reserved_smem: int  # shared memory the driver reserves per block (bytes; 1 KB from CC 8.0)
    regs_per_sm: int = 65536  # 32-bit registers per SM
    regs_per_block: int = 65536  # maximum registers per block
    reg_unit: int = 256  # register allocation unit (registers), allocated per warp
    max_regs_per_thread: int = 255
    sub_partitions: int = 4  # SM sub-partitions registers are allocated in (4 from Volta on)
    warp_size: int = 32


KB = 1024
LIMITS: dict[tuple[int, int], CcLimits] = {
    (7, 0): CcLimits(64, 32, 96 * KB, 96 * KB, 256, 0),  # V100
    (7, 2): CcLimits(64, 32, 96 * KB, 96 * KB, 256, 0),  # Xavier
    (7, 5): CcLimits(32, 16, 64 * KB, 64 * KB, 256, 0),  # Turing
    (8, 0): CcLimits(64, 32, 164 * KB, 163 * KB, 128, KB),  # A100
    (8, 6): CcLimits(48, 16, 100 * KB, 99 * KB, 128, KB),  # GA10x (RTX 30, A10, A40)
    (8, 7): CcLimits(48, 16, 164 * KB, 163 * KB, 128, KB),  # Orin
    (8, 9): CcLimits(48, 24, 100 * KB, 99 * KB, 128, KB),  # Ada (L4, L40S, RTX 40)
    (9, 0): CcLimits(64, 32, 228 * KB, 227 * KB, 128, KB),  # H100, H200
    (10, 0): CcLimits(64, 32, 228 * KB, 227 * KB, 128, KB),  # B200, GB200
    (12, 0): CcLimits(48, 32, 100 * KB, 99 * KB, 128, KB),  # RTX 50
}

# TARGET_INFO_GPU column -> the CcLimits field it gives (the export's figure wins over the table)
FROM_EXPORT = {"maxWarpsPerSm": "max_warps", "maxBlocksPerSm": "max_blocks", "maxRegistersPerSm": "regs_per_sm",
               "maxRegistersPerBlock": "regs_per_block", "maxShmemPerSm": "smem_per_sm",
               "maxShmemPerBlockOptin": "smem_per_block", "threadsPerWarp": "warp_size"}


@dataclass(frozen=True)
class GpuLimits:
    """One GPU's limits: `limits` by its compute capability, with the export's own figures."""

    device: int
    name: str
    cc: tuple[int, int]
    limits: CcLimits
    from_export: tuple[str, ...] = ()  # the TARGET_INFO_GPU columns the limits took from the export


def limits_for(cc: tuple[int, int], exported: dict | None = None) -> CcLimits | None:
    """The table's limits for `cc` with the export's figures (`FROM_EXPORT` keys) over them;
    None for a compute capability the table does not know."""
    base = LIMITS.get(cc)
    if base is None:
        return None
    given = {FROM_EXPORT[k]: int(v) for k, v in (exported or {}).items()
             if k in FROM_EXPORT and v is not None and int(v) > 0}
    return CcLimits(**{**base.__dict__, **given})


def _ceil_to(x: np.ndarray, unit: int) -> np.ndarray:
    return -(-x // unit) * unit


def blocks_per_sm(lim: CcLimits, regs: np.ndarray, smem_static: np.ndarray, smem_dynamic: np.ndarray,
                  threads: np.ndarray, smem_config: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The Occupancy Calculator over arrays of launch configurations (one element each).

    `smem_config`: the shared memory per SM in force for each (the carve-out; 0 or absent: the
    SM's maximum). Returns blocks/SM by each limit (`by_warps`, `by_blocks`, `by_registers`,
    `by_shared`), `blocks`, `warps` (active warps/SM), `occupancy` (0..1) and `limiter` (index
    into LIMITERS)."""
    regs = np.asarray(regs, dtype=np.int64)
    threads = np.maximum(np.asarray(threads, dtype=np.int64), 1)
    n = len(threads)
    warps_per_block = -(-threads // lim.warp_size)
    by_warps = lim.max_warps // warps_per_block
    by_blocks = np.full(n, lim.max_blocks, dtype=np.int64)
    # Registers: per warp, rounded up to the allocation unit; each sub-partition holds the warps
    # its quarter of the register file fits.
    regs_per_warp = _ceil_to(regs * lim.warp_size, lim.reg_unit)
    per_partition = np.where(regs_per_warp > 0,
                             (lim.regs_per_sm // lim.sub_partitions) // np.maximum(regs_per_warp, 1), UNLIMITED)
    by_registers = np.where(regs_per_warp > 0, per_partition * lim.sub_partitions // warps_per_block, UNLIMITED)
    # Shared memory: the block's static + dynamic + what the driver reserves per block, rounded
    # up to the allocation unit, against the carve-out in force.
    used = np.asarray(smem_static, dtype=np.int64) + np.asarray(smem_dynamic, dtype=np.int64)
    per_block = _ceil_to(used + lim.reserved_smem, lim.smem_unit)
    config = np.full(n, lim.smem_per_sm, dtype=np.int64) if smem_config is None else \
        np.asarray(smem_config, dtype=np.int64)
    # No carve-out recorded, or one smaller than a block the launch ran with: the SM's maximum.
    config = np.where((config <= 0) | (config < per_block), lim.smem_per_sm, config)
    by_shared = np.where(per_block > 0, config // np.maximum(per_block, 1), UNLIMITED)
    stack = np.stack([by_warps, by_blocks, by_registers, by_shared])
    blocks = stack.min(axis=0)
    limiter = stack.argmin(axis=0)  # the first minimum: ties go to warps, blocks, registers, shared
    warps = blocks * warps_per_block
    return {"by_warps": by_warps, "by_blocks": by_blocks, "by_registers": by_registers, "by_shared": by_shared,
            "blocks": blocks, "warps": warps, "warps_per_block": warps_per_block,
            "occupancy": warps / lim.max_warps, "limiter": limiter}


# -- a trace ---------------------------------------------------------------------------------
CONFIG_COLUMNS = list(LAUNCH_COLUMNS)
CONFIG_KEYS = ["device", "name", "regs", "smem_static", "smem_dynamic", "threads", "smem_config"]


@dataclass
class Occupancy:
    """A trace's theoretical occupancy: one row of `configs` per distinct (device, kernel name,
    registers/thread, static and dynamic shared memory, threads/block, carve-out), and for each
    op position of the trace its row there (-1: not a kernel, or a GPU whose limits are unknown)."""

    configs: pd.DataFrame  # CONFIG_KEYS + by_*, blocks, warps, max_warps, occupancy_pct, limiter
    op_config: np.ndarray
    gpus: dict[int, GpuLimits] = field(default_factory=dict)
    note: str = ""  # why some or all kernels have no figure

    @property
    def empty(self) -> bool:
        return self.configs.empty


def _gpu_limits(trace) -> tuple[dict[int, GpuLimits], str]:
    if not trace.schema.has(GPU_TABLE, "computeMajor"):
        return {}, "the export has no GPU description (TARGET_INFO_GPU with compute capability)"
    out: dict[int, GpuLimits] = {}
    unknown = []
    for i, row in enumerate(trace.target_gpus(["id", "name", "computeMajor", "computeMinor", *FROM_EXPORT])):
        major, minor = (-1 if row.get(c) is None else int(row[c]) for c in ("computeMajor", "computeMinor"))
        given = {c: int(row[c]) for c in FROM_EXPORT if row.get(c) is not None}
        lim = limits_for((major, minor), given)
        name = str(row.get("name") or "")
        if lim is None:
            unknown.append(f"{name or 'GPU'} (compute capability {major}.{minor})")
            continue
        dev = int(row["id"] or 0) if "id" in row else i
        out[dev] = GpuLimits(dev, name, (major, minor), lim, tuple(c for c in given if given[c] > 0))
    note = f"no per-SM limits known for {', '.join(unknown)}" if unknown else ""
    return out, note


def _config_codes(frame: pd.DataFrame) -> np.ndarray:
    """A code per row, equal for equal CONFIG_KEYS, numbered in order of first appearance:
    each column factorised on its own, the codes combined (mixed radix, re-factorised whenever
    the product would grow past 2^62) and factorised once more."""
    combined = np.zeros(len(frame), dtype=np.int64)
    size = 1
    for key in CONFIG_KEYS:
        col, uniq = pd.factorize(frame[key].to_numpy())
        if size * max(len(uniq), 1) >= 1 << 62:
            combined, distinct = pd.factorize(combined)
            size = max(len(distinct), 1)
        combined = combined * max(len(uniq), 1) + col
        size *= max(len(uniq), 1)
    return pd.factorize(combined)[0].astype(np.int64)


def trace_occupancy(trace) -> Occupancy:
    """The theoretical occupancy of every kernel of `trace` (a read.load.Trace), grouped by
    launch configuration first (a million launches are a few hundred configurations). Kept in
    `trace.derived`."""
    kept = trace.derived.get("occupancy")
    if kept is not None:
        return kept
    occ = _compute(trace)
    trace.derived["occupancy"] = occ
    return occ


def _empty(n_ops: int, note: str, gpus=None) -> Occupancy:
    return Occupancy(pd.DataFrame(columns=[*CONFIG_KEYS, "occupancy_pct", "limiter"]),
                     np.full(n_ops, -1, dtype=np.int64), gpus or {}, note)


def _compute(trace) -> Occupancy:
    ops = trace.ops
    n_ops = len(ops)
    schema = trace.schema
    missing = [c for c in CONFIG_COLUMNS if not schema.has(KERNEL_TABLE, c)]
    if missing:
        return _empty(n_ops, f"the export's kernels lack {', '.join(missing)}: no launch configuration")
    gpus, note = _gpu_limits(trace)
    if not gpus:
        return _empty(n_ops, note or "no GPU with known per-SM limits")
    config = trace.launch_configs()  # read from the export (each rank's own, for per-rank files merged)
    kpos = config.index.to_numpy()
    frame = pd.DataFrame({"device": ops["device"].to_numpy()[kpos].astype(np.int64),
                          "name": ops["name"].to_numpy()[kpos].astype(np.int64),
                          **{c: config[c].to_numpy() for c in config.columns}})
    known = frame["device"].isin(list(gpus)).to_numpy()
    if not known.all():
        note = note or "kernels on a GPU the export does not describe have no figure"
    frame, kpos = frame[known], kpos[known]
    codes = _config_codes(frame)  # numbered in order of first appearance, as np.unique's first indices
    configs = frame.iloc[np.unique(codes, return_index=True)[1]].reset_index(drop=True) if len(frame) else \
        frame.iloc[:0].reset_index(drop=True)
    parts = []
    for dev, rows in configs.groupby("device").groups.items():
        lim = gpus[int(dev)].limits
        sub = configs.loc[rows]
        res = blocks_per_sm(lim, sub["regs"].to_numpy(), sub["smem_static"].to_numpy(),
                            sub["smem_dynamic"].to_numpy(), sub["threads"].to_numpy(), sub["smem_config"].to_numpy())
        parts.append(pd.DataFrame({
            "by_warps": res["by_warps"], "by_blocks": res["by_blocks"], "by_registers": res["by_registers"],
            "by_shared": res["by_shared"], "blocks": res["blocks"], "warps": res["warps"],
            "max_warps": lim.max_warps, "occupancy_pct": 100.0 * res["occupancy"],
            "limiter": [LIMITERS[i] for i in res["limiter"]]}, index=rows))
    if parts:
        configs = configs.join(pd.concat(parts))
    op_config = np.full(n_ops, -1, dtype=np.int64)
    op_config[kpos] = codes
    return Occupancy(configs, op_config, gpus, note)


def _config_use(trace, positions: np.ndarray | None) -> tuple[Occupancy, np.ndarray, np.ndarray, np.ndarray]:
    """Per launch configuration among `positions` (None: every op): its launches and GPU time (ns),
    and the configurations launched at all."""
    occ = trace_occupancy(trace)
    ops = trace.ops
    pos = np.arange(len(ops)) if positions is None else np.asarray(positions, dtype=np.int64)
    cfg = occ.op_config[pos]
    pos, cfg = pos[cfg >= 0], cfg[cfg >= 0]
    dur = ops["end"].to_numpy()[pos] - ops["start"].to_numpy()[pos]  # only these: a highlight asks for one name's
    counts = np.bincount(cfg, minlength=len(occ.configs))
    times = np.bincount(cfg, weights=dur, minlength=len(occ.configs))
    return occ, counts, times, np.flatnonzero(counts)


def name_configs(trace, positions: np.ndarray | None = None) -> pd.DataFrame:
    """Every (kernel name, launch configuration) among `positions` (None: the whole trace):
    the configuration's figures with its launches and GPU time, most time first."""
    occ, counts, times, used = _config_use(trace, positions)
    if not len(used):
        return occ.configs.iloc[:0].assign(launches=0, total_ns=0, kernel="")
    out = occ.configs.iloc[used].copy()
    out["launches"] = counts[used]
    out["total_ns"] = times[used].astype(np.int64)
    out["kernel"] = [trace.op_names[int(c)] for c in out["name"]]
    return out.sort_values(["total_ns", "launches"], ascending=False, kind="stable").reset_index(drop=True)


def by_kernel_name(trace, positions: np.ndarray | None = None) -> pd.DataFrame:
    """Per kernel name among `positions`: the theoretical occupancy % and limiter of its launch
    configuration with the most GPU time (`configs`: how many configurations it ran with,
    `occupancy_min_pct`/`occupancy_max_pct` over them). Index: the name."""
    # name_configs' rows (most time first, then most launches, ties in configuration order), in
    # numpy: the report asks once per phase, and the DataFrame it builds cost ~10 ms a call
    occ, counts, times, used = _config_use(trace, positions)
    if not len(used):
        return pd.DataFrame(columns=["occupancy_pct", "limiter", "configs", "occupancy_min_pct", "occupancy_max_pct"])
    used = used[np.lexsort((-counts[used], -times[used].astype(np.int64)))]  # stable: ties keep their order
    # grouped by the name's code in numpy (pandas grouping the name strings cost ~50 ms a call): rows
    # are most time first, so a name's first row is its top configuration
    codes = occ.configs["name"].to_numpy()[used]
    pct = occ.configs["occupancy_pct"].to_numpy(dtype=np.float64)[used]
    uniq, first_row, group = np.unique(codes, return_index=True, return_inverse=True)
    configs = np.bincount(group, minlength=len(uniq))
    low = np.full(len(uniq), np.inf)
    high = np.full(len(uniq), -np.inf)
    np.minimum.at(low, group, pct)
    np.maximum.at(high, group, pct)
    rows = np.sort(first_row)  # most time first
    at = group[rows]
    names = np.array([trace.op_names[int(c)] for c in codes[rows]], dtype=object)
    return pd.DataFrame({"occupancy_pct": pct[rows], "limiter": occ.configs["limiter"].to_numpy()[used][rows],
                         "configs": configs[at], "occupancy_min_pct": low[at], "occupancy_max_pct": high[at]},
                        index=pd.Index(names, name="kernel"))


# -- what `report` says ----------------------------------------------------------------------
METHOD = ("NVIDIA's CUDA Occupancy Calculator over each launch's registers/thread, static + dynamic shared "
          "memory, threads/block and the shared-memory carve-out in force (CUPTI sharedMemoryExecuted); "
          "per-SM limits from the export's TARGET_INFO_GPU and the CUDA C++ Programming Guide's table per "
          "compute capability. An estimate, not a measurement: achieved occupancy needs Nsight Compute.")


def _pct(v) -> float:
    return round(float(v), 3)


@dataclass(frozen=True)
class BlocksPerSm:
    """The blocks one SM can hold, by each limit (None: the limit does not bind)."""

    warps: int
    registers: int | None
    shared_memory: int | None
    blocks: int


@dataclass(frozen=True)
class ConfigOccupancy:
    """One launch configuration of a kernel name: its resources, launches and GPU time (ns), and
    its theoretical occupancy (% of the SM's warps) with the limit that sets it."""

    device: int
    registers_per_thread: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    threads_per_block: int
    shared_carveout_bytes: int
    launches: int
    total_ns: int
    blocks_per_sm_by: BlocksPerSm
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    theoretical_occupancy_pct: float
    occupancy_limiter: str


@dataclass(frozen=True)
class KernelOccupancy:
    """One kernel name (as nsys stores it): the figure and limiter of its configuration with the
    most GPU time (configs[0]), and every configuration, most GPU time first."""

    name: str
    total_ns: int
    launches: int
    theoretical_occupancy_pct: float
    occupancy_limiter: str
    configs: list[ConfigOccupancy]


@dataclass(frozen=True)
class OccupancyReport:
    """The report's `occupancy` section: what the figure is and how it is computed, over which
    launches (scope), why some kernels have none (note), each GPU's per-SM limits and the kernels,
    most GPU time first (render.occupancy lays it out)."""

    what: str
    method: str
    scope: str
    note: str
    gpus: list[GpuLimits]
    kernels: list[KernelOccupancy]


def answers(trace) -> OccupancyReport:
    """The report's `occupancy` section: per kernel name (as nsys stores it, most GPU time
    first) the configuration with the most GPU time's figure and limiter, and every configuration."""
    occ = trace_occupancy(trace)
    kernels: list[KernelOccupancy] = []
    out = OccupancyReport(what=WHAT, method=METHOD, scope="every kernel launch of the trace", note=occ.note,
                          gpus=list(occ.gpus.values()), kernels=kernels)
    per = name_configs(trace)
    if per.empty:
        return out
    totals = per.groupby("kernel", sort=False)["total_ns"].sum().sort_values(ascending=False, kind="stable")
    groups = dict(list(per.groupby("kernel", sort=False)))
    for name, total in totals.items():
        rows = groups[name]
        top = rows.iloc[0]
        kernels.append(KernelOccupancy(
            name=name, total_ns=int(total), launches=int(rows["launches"].sum()),
            theoretical_occupancy_pct=_pct(top["occupancy_pct"]), occupancy_limiter=top["limiter"],
            configs=[ConfigOccupancy(
                device=int(r.device), registers_per_thread=int(r.regs), static_shared_bytes=int(r.smem_static),
                dynamic_shared_bytes=int(r.smem_dynamic), threads_per_block=int(r.threads),
                shared_carveout_bytes=int(r.smem_config), launches=int(r.launches), total_ns=int(r.total_ns),
                blocks_per_sm_by=BlocksPerSm(warps=int(r.by_warps), registers=_cap(r.by_registers),
                                             shared_memory=_cap(r.by_shared), blocks=int(r.by_blocks)),
                active_blocks_per_sm=int(r.blocks), active_warps_per_sm=int(r.warps),
                max_warps_per_sm=int(r.max_warps), theoretical_occupancy_pct=_pct(r.occupancy_pct),
                occupancy_limiter=r.limiter) for r in rows.itertuples()],
        ))
    return out


def _cap(v) -> int | None:
    """A limit that does not bind (no registers, no shared memory): None."""
    return None if int(v) >= UNLIMITED else int(v)
