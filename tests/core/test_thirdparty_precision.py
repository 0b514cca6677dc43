"""What a GEMM multiplies on, read off the third-party captures' kernel names, against what the workload
ran (its STEM.steps.json config) and the names themselves (SQL over the export): a GEMM whose name says
`tensorop` runs on the tensor cores, and a run with bf16 autocast and TF32 allowed holds no fp32 GEMM on
CUDA cores, so `fp32-gemm-without-tensor-cores` (the advice to turn TF32 on) says nothing there."""
from __future__ import annotations

import json
import sqlite3

import pytest

from nsight_tui.parsers import Profile
from nsight_tui.parsers.analyses.roofline import kernel_math_path
from nsight_tui.parsers.kernels.families import classify

from conftest import SAMPLES

THIRD = SAMPLES / "thirdparty"
BF16_MANUAL = "vitattn_r1_vit_b64_bf16_manual"  # timm ViT, bf16 autocast, TF32 allowed, manual attention


def gemm_names(path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [n for (n,) in db.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                         "JOIN StringIds s ON s.id = k.demangledName")]


def test_a_bf16_run_with_tf32_allowed_gets_no_fp32_gemm_finding(thirdparty):
    config = json.loads((THIRD / f"{BF16_MANUAL}.steps.json").read_text())["config"]
    assert config["bf16"] is True and config["tf32"] is True  # what the workload ran: no GEMM left on fp32 FMA
    path = thirdparty(BF16_MANUAL)
    # the attention's batched matmuls, as cuBLAS names them under autocast: a Turing-generation CUTLASS
    # kernel with no `_KxS` in its name, tensor-core mma (`tensorop`) on bf16 data
    turing = [n for n in gemm_names(path) if "cutlass_75_tensorop_bf16_" in n]
    assert len(turing) >= 4
    assert {kernel_math_path(n) for n in turing} == {"bf16"}
    findings = Profile.open(path).report().findings
    said = [f.id for f in findings.findings] + [f.id for f in findings.present_no_saving]
    assert "fp32-gemm-without-tensor-cores" not in said


@pytest.mark.parametrize("stem", sorted(p.name[: -len(".sqlite.xz")] for p in THIRD.glob("*.sqlite.xz")))
def test_no_tensor_core_gemm_is_read_as_fp32(thirdparty, stem):
    """Every GEMM kernel whose name says it runs tensor-core mma (`tensorop`, not a split-K pass) is on
    the tensor cores' roof, in every third-party capture."""
    names = [n for n in gemm_names(thirdparty(stem))
             if "tensorop" in n and classify(n) == "gemm" and "splitK" not in n]
    assert [n for n in names if kernel_math_path(n) == "fp32"] == []
