"""What the GPU can do: dense peak FLOP/s per math path and memory bandwidth, per model.

Every row cites NVIDIA's datasheet (or architecture whitepaper for GeForce cards). Datasheets
print tensor-core figures *with 2:4 sparsity* (marked with an asterisk) for A100 and later;
the dense figure, which training GEMMs get, is half of that, and that is what this table
holds. Math paths:

* `fp32`: FP32 FMA on the CUDA cores (the "FP32" line): fp32 GEMMs without TF32, and every
  non-GEMM kernel.
* `tf32`: TF32 tensor cores (fp32 GEMMs with `allow_tf32` / `--tf32`).
* `bf16`: BF16/FP16 tensor cores with FP32 accumulation (GeForce cards run FP32 accumulation
  at half their FP16-accumulate rate; their whitepapers list both: the FP32-accumulate one is here).
* `fp8`: FP8 tensor cores (Hopper, Ada, Blackwell).

The GPU comes from the export's TARGET_INFO_GPU name (`NVIDIA H200`, `NVIDIA H100 80GB HBM3`,
`NVIDIA A100-SXM4-80GB`, `Tesla V100-SXM2-32GB`, ...).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MATH_PATHS = ("fp32", "tf32", "bf16", "fp8")
MATH_PATH_WORDS = {
    "fp32": "FP32 on CUDA cores",
    "tf32": "TF32 tensor cores",
    "bf16": "BF16/FP16 tensor cores",
    "fp8": "FP8 tensor cores",
}


@dataclass(frozen=True)
class GpuPeaks:
    name: str  # our name for the row
    tflops: dict[str, float]  # math path -> dense peak TFLOP/s (absent: the GPU has no such path)
    bandwidth_gbps: float  # memory bandwidth, GB/s (10^9 bytes/s)
    source: str  # the datasheet the figures come from
    match: str = field(default="", repr=False)  # regex over the TARGET_INFO_GPU name

    def flops_per_s(self, path: str) -> float | None:
        t = self.tflops.get(path)
        return None if t is None else t * 1e12

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9

    def ridge(self, path: str) -> float | None:
        """FLOP per byte where the compute roof of `path` meets the memory roof."""
        f = self.flops_per_s(path)
        return None if f is None or not self.bandwidth_gbps else f / self.bytes_per_s


_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100 = "https://www.nvidia.com/en-us/data-center/h100/ (NVIDIA H100 Tensor Core GPU datasheet)"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/ (NVIDIA H200 Tensor Core GPU datasheet)"

# Sparse datasheet figures are halved here; the comment on each row gives the datasheet's own.
GPUS: tuple[GpuPeaks, ...] = (
    # Tesla V100: FP32 15.7 / 14 TFLOPS, Tensor (FP16, FP32 accumulate) 125 / 112, HBM2 900 GB/s;
    # no TF32, BF16 or FP8 (Volta tensor cores are FP16 only: listed under bf16 as "FP16/BF16").
    GpuPeaks("V100 SXM2", {"fp32": 15.7, "bf16": 125.0}, 900.0,
             "NVIDIA Tesla V100 datasheet, https://www.nvidia.com/en-us/data-center/v100/",
             r"V100.*SXM|V100-SXM|V100S?$|V100 32GB|V100-32GB"),
    GpuPeaks("V100 PCIe", {"fp32": 14.0, "bf16": 112.0}, 900.0,
             "NVIDIA Tesla V100 datasheet, https://www.nvidia.com/en-us/data-center/v100/", r"V100.*PCI"),
    # A100: FP32 19.5, TF32 156 (312*), BF16 312 (624*); HBM2 1,555 GB/s (40GB), HBM2e 2,039 GB/s
    # (80GB SXM), 1,935 GB/s (80GB PCIe).
    GpuPeaks("A100 40GB", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}, 1555.0, "NVIDIA A100 datasheet, " + _A100,
             r"A100.*40GB|A100-(SXM4|PCIE)-40GB"),
    GpuPeaks("A100 80GB PCIe", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}, 1935.0,
             "NVIDIA A100 datasheet, " + _A100, r"A100.*80GB.*PCIe|A100-PCIE-80GB"),
    GpuPeaks("A100 80GB SXM", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}, 2039.0,
             "NVIDIA A100 datasheet, " + _A100, r"A100.*80GB|A100-SXM4-80GB|A100 80GB"),
    # A10: FP32 31.2, TF32 62.5 (125*), BF16 125 (250*), GDDR6 600 GB/s.
    GpuPeaks("A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0}, 600.0,
             "NVIDIA A10 datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/", r"\bA10$"),
    # L4: FP32 30.3, TF32 120*, BF16 242*, FP8 485*, GDDR6 300 GB/s.
    GpuPeaks("L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp8": 242.5}, 300.0,
             "NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/", r"\bL4$"),
    # L40S: FP32 91.6, TF32 183 (366*), BF16 362.05 (733*), FP8 733 (1,466*), GDDR6 864 GB/s.
    GpuPeaks("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp8": 733.0}, 864.0,
             "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/", r"\bL40S\b"),
    # RTX 3090 (GA102 whitepaper, appendix table): FP32 35.6, TF32 tensor 35.6 (71*), FP16/BF16
    # tensor with FP32 accumulate 71 (142*), GDDR6X 936 GB/s.
    GpuPeaks("RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0}, 936.0,
             "NVIDIA Ampere GA102 GPU Architecture whitepaper, "
             "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
             r"RTX 3090(?! Ti)"),
    # RTX 4090 (Ada whitepaper, appendix table): FP32 82.6, TF32 82.6 (165.2*), FP16/BF16 with FP32
    # accumulate 165.2 (330.4*), FP8 with FP32 accumulate 330.3 (660.6*), GDDR6X 1,008 GB/s.
    GpuPeaks("RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp8": 330.3}, 1008.0,
             "NVIDIA Ada GPU Architecture whitepaper, "
             "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
             r"RTX 4090(?! D)"),
    # H100 PCIe: FP32 51, TF32 756*, BF16 1,513*, FP8 3,026*, HBM2e 2,000 GB/s.
    GpuPeaks("H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp8": 1513.0}, 2000.0,
             "NVIDIA H100 datasheet, " + _H100, r"H100.*PCIe"),
    # H100 NVL: FP32 60, TF32 835*, BF16 1,671*, FP8 3,341*, HBM3 3,900 GB/s.
    GpuPeaks("H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp8": 1670.5}, 3900.0,
             "NVIDIA H100 datasheet, " + _H100, r"H100.*NVL"),
    # H100 SXM: FP32 67, TF32 989*, BF16 1,979*, FP8 3,958*, HBM3 3,350 GB/s.
    GpuPeaks("H100 SXM", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp8": 1979.0}, 3350.0,
             "NVIDIA H100 datasheet, " + _H100, r"H100"),
    # H200 NVL: FP32 60, TF32 835*, BF16 1,671*, FP8 3,341*, HBM3e 4,800 GB/s.
    GpuPeaks("H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp8": 1670.5}, 4800.0,
             "NVIDIA H200 datasheet, " + _H200, r"H200.*NVL"),
    # H200 SXM: FP32 67, TF32 989*, BF16 1,979*, FP8 3,958*, HBM3e 4,800 GB/s.
    GpuPeaks("H200 SXM", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp8": 1979.0}, 4800.0,
             "NVIDIA H200 datasheet, " + _H200, r"H200"),
    # GB200 NVL72 datasheet, whole rack of 72 GPUs: FP32 5,760 TFLOPS, TF32 180 PF*, BF16 360 PF*,
    # FP8 720 PF*, HBM3e 576 TB/s; per GPU (/72, dense /2): 80, 1,250, 2,500, 5,000 TFLOPS, 8 TB/s.
    GpuPeaks("GB200 (per GPU)", {"fp32": 80.0, "tf32": 1250.0, "bf16": 2500.0, "fp8": 5000.0}, 8000.0,
             "NVIDIA GB200 NVL72 datasheet, https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
             r"GB200"),
    # HGX B200 datasheet, 8 GPUs: FP32 600 TFLOPS, TF32 18 PF*, BF16 36 PF*, FP8 72 PF*, 64 TB/s;
    # per GPU (/8, dense /2): 75, 1,125, 2,250, 4,500 TFLOPS, 8 TB/s.
    GpuPeaks("B200", {"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp8": 4500.0}, 8000.0,
             "NVIDIA HGX B200 datasheet, https://www.nvidia.com/en-us/data-center/hgx/", r"\bB200\b"),
)
for _g in GPUS:
    assert set(_g.tflops) <= set(MATH_PATHS), _g.name


def lookup(gpu_name: str) -> GpuPeaks | None:
    """The table row for a TARGET_INFO_GPU name, or None for a GPU the table does not know.
    Rows are tried in order: variants (PCIe, NVL, 40GB) before the general name."""
    if not gpu_name:
        return None
    for g in GPUS:
        if re.search(g.match, gpu_name, re.IGNORECASE):
            return g
    return None


def custom(tflops: float | None, gbps: float | None, gpu_name: str = "") -> GpuPeaks:
    """Peaks the user gave (`--peak-tflops/--peak-gbps`): one compute roof for every math path."""
    paths = dict.fromkeys(MATH_PATHS, float(tflops)) if tflops else {}
    return GpuPeaks(f"{gpu_name or 'GPU'} (peaks given)", paths, float(gbps or 0.0),
                    f"given on the command line: {tflops or '–'} TFLOP/s, {gbps or '–'} GB/s")


@dataclass(frozen=True)
class PeakChoice:
    """The peaks in force for a trace, and the one line that says where they come from."""

    peaks: GpuPeaks | None
    gpu: str
    note: str


def choose(gpus: list[str], tflops: float | None = None, gbps: float | None = None,
           export_bandwidth: float | None = None) -> PeakChoice:
    """Table row for the export's (first) GPU, overridden by the user's figures where given.
    Unknown GPU and no figures: no peaks, and a line saying how to give them."""
    name = gpus[0] if gpus else ""
    row = lookup(name)
    if tflops or gbps:
        base = row
        paths = dict.fromkeys(MATH_PATHS, float(tflops)) if tflops else (dict(base.tflops) if base else {})
        bw = float(gbps) if gbps else (base.bandwidth_gbps if base else 0.0)
        given = GpuPeaks(f"{name or 'GPU'} (peaks given)", paths, bw,
                         f"given: {tflops or 'datasheet'} TFLOP/s, {gbps or 'datasheet'} GB/s"
                         + (f"; rest from {base.source}" if base else ""))
        return PeakChoice(given, name, f"peaks given on the command line for {name or 'this GPU'}")
    if row is None:
        hint = f" (the export reports {export_bandwidth / 1e9:,.0f} GB/s memory bandwidth)" if export_bandwidth else ""
        label = f"GPU {name!r}" if name else "no GPU named in this export"
        return PeakChoice(None, name, f"{label}: not in the peaks table; figures shown without peaks; "
                                      f"give them with --peak-tflops and --peak-gbps{hint}")
    return PeakChoice(row, name, f"peaks: {row.name} ({row.source})")
