"""One profiled kernel's figures, from the metrics Nsight Compute collected for it.

Each figure is one of ncu's own metrics, named for what it is, or ncu's own arithmetic on them:

- duration: `gpu__time_duration.sum` (ncu's replay, at the clocks ncu locks: base clocks by default,
  so it is not the duration nsys timed; both are shown, each saying whose it is).
- SM throughput and memory throughput, % of peak: the Speed Of Light section's
  `sm__throughput.avg.pct_of_peak_sustained_elapsed` and
  `gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed`.
- DRAM bytes and bandwidth: `dram__bytes.sum`, `dram__bytes.sum.per_second`. A report without the
  sum (sections that collect only the rate) gets its bytes from `dram__bytes_read.sum` +
  `dram__bytes_write.sum` where both were collected, else as rate x `gpu__time_duration.sum` (how ncu
  derives the rate from the sum); `dram_bytes_from` says which, and 0 is never read for absent.
- occupancy: achieved `sm__warps_active.avg.pct_of_peak_sustained_active`, theoretical
  `sm__maximum_warps_per_active_cycle_pct`; the limiter is the `launch__occupancy_limit_*` (blocks
  per SM each resource allows) that is lowest, ties broken as parsers.kernels.occupancy does.
- warp stalls: the WarpStateStats section's `smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`
  (warps stalled for that reason per issued instruction), largest first; `selected` (the warp that
  issued) is no stall and is left out.
- the measured roofline, as the SpeedOfLight_RooflineChart section computes its achieved point
  (its `AchievedWork` and `AchievedTraffic`): FLOP/s = (FADD + FMUL + 2 x FFMA thread instructions
  per cycle, `smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on.sum.per_cycle_elapsed`)
  x `smsp__cycles_elapsed.avg.per_second`, and likewise for fp64 (DADD, DMUL, DFMA); arithmetic
  intensity = FLOP/s / `dram__bytes.sum.per_second`. FLOPs = FLOP/s x the kernel's duration.
  Tensor-core math is not in this section's counters: parsers.kernels.ncu_tensor reads it from the
  hierarchical tensor roofline section (`tensor_*` figures); FLOPs and FLOP/s here are the sum of both.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nsight_tui.parsers.kernels.ncu_tensor import TensorFigures, tensor_figures
from nsight_tui.parsers.kernels.occupancy import LIMITERS
from nsight_tui.parsers.read.ncu_rep import NcuKernel, NcuRule

DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_BYTES = "dram__bytes.sum"
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
DRAM_READ_BYTES, DRAM_WRITE_BYTES = "dram__bytes_read.sum", "dram__bytes_write.sum"
# how dram_bytes was had, for the notes that say so
DRAM_MEASURED = DRAM_BYTES
DRAM_READ_WRITE = f"{DRAM_READ_BYTES} + {DRAM_WRITE_BYTES}"
DRAM_RATE_X_TIME = f"{DRAM_BYTES_PER_S} x {DURATION}"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
# launch__occupancy_limit_<x>, in the order of parsers.kernels.occupancy.LIMITERS
OCCUPANCY_LIMITS = {"warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks",
                    "registers": "launch__occupancy_limit_registers",
                    "shared memory": "launch__occupancy_limit_shared_mem"}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
NOT_A_STALL = ("selected",)
SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
SM_HZ = "smsp__cycles_elapsed.avg.per_second"
TOP_STALLS = 3

# the unit ncu gives a metric -> the factor to this module's units (ns, bytes, bytes/s)
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
_RATE = {f"{p}byte/{s}": f for p, f in (("", 1.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12))
         for s in ("s", "second")}


@dataclass(frozen=True)
class KernelFigures:
    duration_ns: float | None  # ncu's replay (its locked clocks), not nsys's timing
    sm_throughput_pct: float | None
    memory_throughput_pct: float | None
    dram_bytes: float | None
    dram_bytes_per_s: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    occupancy_limiter: str  # warps | blocks | registers | shared memory ("" when unknown)
    occupancy_limit_blocks: dict[str, float] = field(default_factory=dict)  # blocks/SM each resource allows
    stalls: list[tuple[str, float]] = field(default_factory=list)  # (reason, stalled warps per issued instr)
    fp32_flops_per_s: float | None = None
    fp64_flops_per_s: float | None = None
    rules: tuple[NcuRule, ...] = ()
    tensor: TensorFigures | None = None  # the tensor cores' work (None: no such counters in the report)
    dram_bytes_from: str = ""  # DRAM_MEASURED, DRAM_READ_WRITE or DRAM_RATE_X_TIME ("" when none)

    @property
    def tensor_flops_per_s(self) -> float | None:
        return None if self.tensor is None else self.tensor.tensor_flops_per_s

    @property
    def flops_per_s(self) -> float | None:
        """Measured FLOP/s: CUDA-core fp32 + fp64 (the roofline section) + tensor cores."""
        parts = [v for v in (self.fp32_flops_per_s, self.fp64_flops_per_s, self.tensor_flops_per_s) if v is not None]
        return sum(parts) if parts else None

    @property
    def flops(self) -> float | None:
        """FLOPs executed (CUDA-core fp32 + fp64 + tensor cores): ncu's achieved FLOP/s x its duration."""
        rate = self.flops_per_s
        return None if rate is None or self.duration_ns is None else rate * self.duration_ns * 1e-9

    @property
    def intensity_flops_per_byte(self) -> float | None:
        rate = self.flops_per_s
        if rate is None or not self.dram_bytes_per_s:
            return None
        return rate / self.dram_bytes_per_s


def _scaled(k: NcuKernel, name: str, units: dict[str, float]) -> float | None:
    value = k.metric(name)
    if value is None:
        return None
    return value * units.get(k.units.get(name, ""), 1.0)


def _flops_per_s(k: NcuKernel, add: str, mul: str, fma: str) -> float | None:
    """The roofline section's achieved work: (ADD + MUL + 2 x FMA per cycle) x SM cycles per second."""
    per_cycle = [k.metric(SASS.format(op)) for op in (add, mul, fma)]
    hz = k.metric(SM_HZ)
    if hz is None or any(v is None for v in per_cycle):
        return None
    a, m, f = per_cycle
    return (a + m + 2.0 * f) * hz  # type: ignore[operator]


def dram_bytes(k: NcuKernel, duration_ns: float | None, rate: float | None) -> tuple[float | None, str]:
    """The kernel's DRAM bytes and how they were had: ncu's sum; else its read and write sums;
    else its rate x its duration (ncu's rate is the sum over the same duration)."""
    total = _scaled(k, DRAM_BYTES, _BYTES)
    if total is not None:
        return total, DRAM_MEASURED
    read, write = _scaled(k, DRAM_READ_BYTES, _BYTES), _scaled(k, DRAM_WRITE_BYTES, _BYTES)
    if read is not None and write is not None:
        return read + write, DRAM_READ_WRITE
    if rate is not None and duration_ns is not None:
        return rate * duration_ns * 1e-9, DRAM_RATE_X_TIME
    return None, ""


def limiter(limits: dict[str, float]) -> str:
    """The resource allowing the fewest blocks per SM (ties: LIMITERS' order, as occupancy.py)."""
    known = [(v, LIMITERS.index(n), n) for n, v in limits.items()]
    return min(known)[2] if known else ""


def figures(k: NcuKernel) -> KernelFigures:
    limits = {n: k.metrics[m] for n, m in OCCUPANCY_LIMITS.items() if m in k.metrics}
    stalls = [(name[len(STALL_PREFIX): -len(STALL_SUFFIX)], v) for name, v in k.metrics.items()
              if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX)]
    stalls = sorted((s for s in stalls if s[0] not in NOT_A_STALL), key=lambda s: -s[1])[:TOP_STALLS]
    duration_ns, rate = _scaled(k, DURATION, _TIME_NS), _scaled(k, DRAM_BYTES_PER_S, _RATE)
    dram, dram_from = dram_bytes(k, duration_ns, rate)
    return KernelFigures(
        duration_ns=duration_ns,
        sm_throughput_pct=k.metric(SM_THROUGHPUT),
        memory_throughput_pct=k.metric(MEMORY_THROUGHPUT),
        dram_bytes=dram,
        dram_bytes_per_s=rate,
        achieved_occupancy_pct=k.metric(ACHIEVED_OCCUPANCY),
        theoretical_occupancy_pct=k.metric(THEORETICAL_OCCUPANCY),
        occupancy_limiter=limiter(limits),
        occupancy_limit_blocks=limits,
        stalls=stalls,
        fp32_flops_per_s=_flops_per_s(k, "fadd", "fmul", "ffma"),
        fp64_flops_per_s=_flops_per_s(k, "dadd", "dmul", "dfma"),
        rules=k.rules,
        tensor=tensor_figures(k),
        dram_bytes_from=dram_from,
    )
