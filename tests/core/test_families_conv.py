"""The convolution and layout families on real conv captures (sample_traces/hw/conv_*: cuDNN's
implicit-GEMM, direct and split-K kernels, its NCHW<->NHWC transposes), against SQL over each export
that names the kernels by what cuDNN calls them, sharing no pattern with parsers.kernels.families."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from nsight_tui.parsers.kernels.families import family_codes
from nsight_tui.parsers.read.ids import KERNEL
from nsight_tui.parsers.read.load import load_trace

from conftest import SAMPLES

CONV = ["conv_agshapes", "conv_emitshapes"]
# By SQL: cuDNN's convolution kernels (its fprop/dgrad/wgrad engines and CUTLASS convolution, the
# split-K reduction of its CUTLASS), its layout transposes, and cuBLAS's GEMMs (the linear layer)
_SQL = {
    "convolution": "(s.value LIKE '%cudnn%' AND (s.value LIKE '%fprop%' OR s.value LIKE '%dgrad%' "
                   "OR s.value LIKE '%wgrad%' OR s.value LIKE '%Convolution%' OR s.value LIKE '%ReduceSplitK%' "
                   "OR s.value LIKE '%implicit_gemm%')) "
                   "OR s.value LIKE 'void implicit_convolve_sgemm%' OR s.value LIKE 'void precomputed_convolve_sgemm%' "
                   "OR s.value LIKE '%cudnn::cnn::%' "
                   # cuDNN's depthwise kernels under bare names (timm ConvNeXt's 7x7, channels-last, bf16)
                   "OR s.value LIKE 'conv2d\\_c%' ESCAPE '\\' OR s.value LIKE 'dgrad2d\\_c%' ESCAPE '\\' "
                   "OR s.value LIKE 'wgrad2d\\_c%' ESCAPE '\\'",
    "layout": "s.value LIKE '%cudnn::engines_precompiled::nchwToNhwc%' "
              "OR s.value LIKE '%cudnn::engines_precompiled::nhwcToNchw%'",
    "gemm": "s.value LIKE '%\\_cublas' ESCAPE '\\' OR s.value LIKE '%cutlass::Kernel2<cutlass_80_simt_sgemm%' "
            "OR s.value LIKE '%cublasLt::splitKreduce%'",
}


# a Lightning ResNet-50 in bf16 (sample_traces/thirdparty): cuDNN's sm90 kernels, 1x1 convs as nvJet GEMMs
RESNET = ["lightning_resnet50_b32", "lightning_resnet50_b32_channels_last"]
# timm ConvNeXt-tiny, bf16: its depthwise 7x7's backward (dgrad2d_/wgrad2d_c1_k1_nhwc*) read as "other"
CONVNEXT = "timm_convnext_tiny_b32"
FOLDER = {**{s: "hw" for s in CONV}, **{s: "thirdparty" for s in (*RESNET, CONVNEXT)}}


@pytest.fixture(scope="module")
def conv(async_trace):
    return lambda stem: async_trace(SAMPLES / FOLDER[stem] / f"{stem}.sqlite.xz")


def _sql_time(path, where: str) -> tuple[int, int]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        return con.execute(f"""SELECT count(*), coalesce(sum(k.end - k.start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN StringIds s ON s.id = k.demangledName WHERE {where}""").fetchone()


@pytest.mark.parametrize("stem,family", [(s, f) for s in CONV for f in sorted(_SQL)]
                         + [(s, "convolution") for s in (*RESNET, CONVNEXT)] + [(RESNET[0], "layout")])
def test_conv_capture_families_match_sql(conv, stem, family):
    path = conv(stem)
    count, ns = _sql_time(path, _SQL[family])
    assert count > 0  # the capture has such kernels: the test can fail
    trace = load_trace(path)
    ops = trace.ops
    kernels = ops["kind"].to_numpy() == KERNEL
    names = np.array(trace.op_names, dtype=object)[ops["name"].to_numpy()[kernels]]
    fam = family_codes(names).to_numpy()
    dur = (ops["end"].to_numpy() - ops["start"].to_numpy())[kernels]
    assert int((fam == family).sum()) == count
    assert int(dur[fam == family].sum()) == ns


@pytest.mark.parametrize("stem", CONV + RESNET)
def test_no_conv_kernel_is_other(conv, stem):
    """Every cuDNN kernel of a conv capture has a family (none left in 'other')."""
    with sqlite3.connect(f"{conv(stem).resolve().as_uri()}?mode=ro", uri=True) as con:
        names = [r[0] for r in con.execute("""SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%cudnn%'""")]
    assert names
    other = [n for n, f in zip(names, family_codes(np.array(names, dtype=object))) if f == "other"]
    assert other == [n for n in names if "scalePackedTensor" in n]  # cuDNN's scaling helper: no family names it
