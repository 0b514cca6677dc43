"""TF32_SHARE_OF_PEAK (parsers/analyses/findings/replayed.py), the share of the tf32/fp32 peak ratio
the GEMMs reach on the tensor cores, recomputed from the committed TF32 twins in SQL: per pair the
GEMM kernels' total time (kernels named as GEMMs, cuBLAS's split-K reduction with them) in the fp32
capture over the TF32 one, per configuration (the same file name but for a repeat's `_rN`, on the same
GPU) the median of its pairs; the least and the median of the configurations over the peak ratio."""
from __future__ import annotations

import re
import statistics

from helpers.export_sql import sql_rows
from helpers.replay_twins import TWINS
from helpers.xz_samples import plain
from nsight_tui.parsers.analyses.findings.replayed import TF32_SHARE_OF_PEAK, tensor_factors
from nsight_tui.parsers.analyses.roofline import build as build_roofline
from nsight_tui.parsers.read.load import load_trace

GEMM_NS = """SELECT SUM(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
             WHERE s.value LIKE '%gemm%' OR s.value LIKE '%splitKreduce%'"""
GPU = "SELECT name FROM TARGET_INFO_GPU LIMIT 1"


def _one(path, sql):
    return sql_rows(plain(path), sql)[0][0]


def test_the_share_of_the_peak_ratio_is_the_committed_twins():
    pairs = [t for t in TWINS if t.edits == ("kernels-from:{twin}",) and t.rule == "fp32-gemm-without-tensor-cores"]
    assert len(pairs) >= 6
    by_config: dict[tuple[str, str], list[float]] = {}
    for t in pairs:
        key = (re.sub(r"_r\d+$", "", t.base.name.split(".sqlite")[0]), _one(t.base, GPU))
        by_config.setdefault(key, []).append(_one(t.base, GEMM_NS) / _one(t.twin, GEMM_NS))
    configs = sorted(statistics.median(v) for v in by_config.values())
    assert len(configs) >= 5
    peaks = {round(p.tflops["tf32"] / p.tflops["fp32"], 4) for p in
             (build_roofline(load_trace(t.base)).peaks.peaks for t in pairs)}
    assert len(peaks) == 1  # one peak ratio over the twins' GPUs (H100 and H200 share it)
    peak = peaks.pop()
    assert TF32_SHARE_OF_PEAK == (round(configs[0] / peak, 3), round(statistics.median(configs) / peak, 3))
    assert all(configs[0] <= k <= peak for k in tensor_factors(peak))


def test_whatif_fix_says_what_the_range_stands_on():
    from nsight_tui.parsers import Profile

    base = next(t.base for t in TWINS if t.rule == "fp32-gemm-without-tensor-cores")
    p = Profile.open(base).whatif(["fix:fp32-gemm-without-tensor-cores"])
    (edit,) = p.edits
    assert edit.edit.startswith("speed:gemm=") and "the least the committed TF32 twins' GEMMs reached" in edit.assumption
    assert p.low_ns <= p.step_ns <= p.high_ns
