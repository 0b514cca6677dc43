"""The fixes whose size is a ceiling, replayed as a range (parsers/analyses/findings/replayed.py):
occupancy-limited (ncu's estimated speedup, capped by its Speed Of Light), tensor-cores-idle (the
tensor path's peak ratio) and memory-bound-decode (the decode's GEMMs at the weights' HBM floor),
each a `speed:PATTERN=K1..[KC..]K2` edit from no change to the ceiling. On committed captures where
each rule fires, the edit's kernels and factors against an independent computation (NVIDIA's reading
of the ncu report, SQL over the export, the workload's own clock, hand formulas), the range ordered,
and `whatif TRACE fix:RULE -f json` through the front door."""
from __future__ import annotations

import fnmatch
import json
import re
import shutil
import sqlite3

import numpy as np
import pytest

from conftest import ROOT, SAMPLES
from helpers import cli_process
from helpers.export_sql import sql_rows
from helpers.ncu_pair import oracle_kernels, unpacked
from nsight_tui.parsers.analyses.findings import findings
from nsight_tui.parsers.kernels.families import classify_names
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay.edits import EditError, parse
from nsight_tui.parsers.replay.predict import saving


def _range_ordered(f) -> None:
    """low <= central <= high saving, the low end the edit's no change (K = 1: nothing saved)."""
    assert f.replayed and f.replay_low_ms_per_step <= f.saving_ms_per_step <= f.replay_high_ms_per_step, f.basis
    assert f.replay_low_ms_per_step == pytest.approx(0.0, abs=1e-9)
    assert "the range: no change" in f.basis


def _whatif_json(*args) -> dict:
    run = cli_process.run(["whatif", *map(str, args), "-f", "json"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# -- the speed: edit's range --------------------------------------------------------------------------
def test_a_speed_range_parses_to_its_ends_and_central():
    e = parse("speed:gemm=1..2")
    assert e.factors == (1.0, 2.0) and e.factor == pytest.approx(2 / (1 + 1 / 2))  # the duration halfway between
    e = parse("speed:*foo*@forward=1..1.5..4")
    assert e.factors == (1.0, 4.0) and e.factor == 1.5 and e.pattern == "*foo*@forward"
    assert parse("speed:gemm=2").factors is None and parse("speed:gemm=2..2").factors is None
    for bad in ("speed:gemm=2..1", "speed:gemm=0..1", "speed:gemm=1..2..3..4", "speed:gemm=a..b", "speed:gemm=1..3..2",
                "speed:gemm=1..inf"):
        with pytest.raises(EditError):
            parse(bad)


def test_a_speed_range_replays_each_end_as_its_own_factor(async_trace):
    """The range's ends replay as the plain factors: the favourable end as speed:gemm=K2, the central as
    KC, the other as K1 (here 1: nothing saved); on a GPU-bound capture, so each factor shows."""
    trace = load_trace(async_trace("small_ctx512_b8_async"))
    got = saving(trace, ["speed:gemm=1..1.5..3"])
    fast, mid = saving(trace, ["speed:gemm=3"]), saving(trace, ["speed:gemm=1.5"])
    assert got.low_ns == fast.step_ns and got.step_ns == mid.step_ns and got.high_ns == got.baseline_step_ns
    assert fast.saving_ns > mid.saving_ns > 0
    assert "between 1x and 3x" in got.applied[0].assumption


# -- occupancy-limited: ncu's estimate, capped by its Speed Of Light ------------------------------------
@pytest.fixture(scope="module")
def ncu_pair(tmp_path_factory):
    export, report, trace, _, joined = unpacked(tmp_path_factory.mktemp("ceil_ncu"))
    return export, report, trace, joined


def test_occupancy_fix_is_each_kernel_at_most_ncus_speedup_capped_by_its_speed_of_light(ncu_pair):
    """Per kernel the rule names: `speed:GLOB=1..K`, GLOB matching that kernel's name alone among the
    export's kernel names (SQL), K = min(1 / (1 − p), 100 / busiest) with p ncu's TheoreticalOccupancy
    speedup and busiest the larger of its SM and memory throughput (% of peak), both from NVIDIA's
    reader, averaged over the profiled instances weighted by their nsys duration (SQL)."""
    export, _, trace, a = ncu_pair
    names = [n for (n,) in sql_rows(export, """SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                                             JOIN StringIds s ON s.id = k.demangledName""")]
    mangled_of = dict(sql_rows(export, """SELECT d.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds d ON d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName"""))
    dur = dict(sql_rows(export, "SELECT rowid, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    rowid = trace.ops["rowid"].to_numpy()
    prof: dict[str, list] = {}
    for k, o in zip(a.kernels, oracle_kernels()):  # the report's kernels in NVIDIA's reading order
        if k.op >= 0:
            prof.setdefault(o["mangled"], []).append((o, dur[int(rowid[k.op])]))
    found = [f for f in findings(trace, ncu=a) if f.id == "occupancy-limited"]
    assert len(found) >= 5
    capped = 0
    for f in found:
        (edit,) = f.edits
        m = re.fullmatch(r"speed:(.+)=1\.\.([0-9.]+)", edit)
        assert m, edit
        assert [n for n in names if fnmatch.fnmatchcase(n, m.group(1))] == [f.evidence["kernel"]]
        members = prof[mangled_of[f.evidence["kernel"]]]
        w = [d for _, d in members]
        pct = np.average([next(((r.get("speedup_estimation") or {}).get("speedup", 0) for r in o["rules"]
                                if r["rule_identifier"] == "TheoreticalOccupancy"), 0) for o, _ in members], weights=w)
        busiest = np.average([max(o["metrics"]["sm__throughput.avg.pct_of_peak_sustained_elapsed"][0],
                                  o["metrics"]["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"][0])
                              for o, _ in members], weights=w)
        want = min(1 / (1 - pct / 100), 100 / busiest)
        capped += want < 1 / (1 - pct / 100)
        assert float(m.group(2)) == pytest.approx(want, rel=1e-3)
        _range_ordered(f)
        assert f.estimate_ms_per_step == pytest.approx(pct / 100 * f.evidence["nsys_ns_per_step"] / 1e6, rel=1e-9)
    assert capped  # the cap acts on this capture: its GEMMs' busiest units run at 50-80% of peak


def test_whatif_fix_occupancy_limited_needs_the_report_and_fixes_every_kernel(ncu_pair):
    export, report, trace, a = ncu_pair
    doc = _whatif_json(export, "fix:occupancy-limited", "--ncu", report)
    found = [f for f in findings(trace, ncu=a, replay=False) if f.id == "occupancy-limited"]
    wanted = [e for f in found for e in f.edits]
    assert [e["edit"] for e in doc["edits"]] == [f"{x} (fix:occupancy-limited)" for x in wanted]
    # each kernel's range in its own words: its ncu estimate (NVIDIA's reader, through the finding's evidence)
    assert len({f.evidence["ncu_estimated_speedup_pct"] for f in found}) > 1
    for f, e in zip(found, doc["edits"]):
        assert f"({f.evidence['ncu_estimated_speedup_pct']:.1f}% of the kernel's time saved" in e["assumption"], e
    p = doc["predicted"]
    assert p["low_ns"] <= p["step_ns"] <= p["high_ns"] == doc["baseline"]["replayed_step_ns"]
    # each edit's assumption says its range and what the range stands on (the finding's words)
    assert all("between 1x and" in e["assumption"] and "ncu's estimate" in e["assumption"] for e in doc["edits"])
    run = cli_process.run(["whatif", export, "fix:occupancy-limited"], text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 2 and run.stdout == "" and len(run.stderr.strip().splitlines()) == 1
    assert "--ncu" in run.stderr


# -- tensor-cores-idle: the tensor path's peak ratio ----------------------------------------------------
@pytest.fixture(scope="module")
def tensor_idle(async_trace, tmp_path_factory):
    """A COPY of the TF32 capture with its Tensor Active samples set to 0: GEMMs named TF32, tensor
    cores idle (as tests/core/test_findings_hw.py makes it)."""
    copy = tmp_path_factory.mktemp("ceil_tensor") / "tf32_idle.sqlite"
    shutil.copyfile(async_trace(SAMPLES / "hw" / "small_ctx512_tf32_b8_gpumetrics.sqlite.xz"), copy)
    db = sqlite3.connect(copy)
    db.execute("""UPDATE GPU_METRICS SET value = 0 WHERE metricId IN
                  (SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName LIKE 'Tensor Active%')""")
    db.commit()
    db.close()
    return copy


def test_tensor_cores_idle_fix_is_every_gemm_at_the_tensor_paths_peak_ratio(tensor_idle):
    """`speed:gemm=1..C..R`, R the tf32/fp32 peak ratio (the roofline's published peaks, as the rule
    and the fp32 rule's fix use them), C the share of it the committed TF32 twins' GEMMs reached
    (TF32_SHARE_OF_PEAK's central, as the fp32 rule's fix); the GEMMs it speeds are the export's
    GEMM-family kernels (SQL, classified by name)."""
    from nsight_tui.parsers.analyses.findings.replayed import TF32_SHARE_OF_PEAK

    from nsight_tui.parsers.analyses.roofline import build as build_roofline

    trace = load_trace(tensor_idle)
    f = {x.id: x for x in findings(trace)}["tensor-cores-idle"]
    pk = build_roofline(trace).peaks.peaks
    ratio = pk.tflops["tf32"] / pk.tflops["fp32"]
    (edit,) = f.edits
    m = re.fullmatch(r"speed:gemm=1\.\.([0-9.]+)\.\.([0-9.]+)", edit)
    assert m and float(m.group(2)) == pytest.approx(ratio, rel=1e-3), edit
    assert float(m.group(1)) == pytest.approx(ratio * TF32_SHARE_OF_PEAK[1], rel=1e-3), edit
    _range_ordered(f)
    names = [n for (n,) in sql_rows(tensor_idle, """SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                                                 JOIN StringIds s ON s.id = k.demangledName""")]
    gemms = sum(fam == "gemm" for fam in classify_names(names))
    s = saving(trace, f.edits)
    assert s.applied[0].changed.startswith(f"{gemms:,} ops (family gemm)")
    doc = _whatif_json(tensor_idle, "fix:tensor-cores-idle")
    assert doc["saving_ns"] / 1e6 == pytest.approx(f.saving_ms_per_step, abs=1e-6)
    assert "tf32/fp32 peak ratio" in doc["edits"][0]["assumption"]
    assert doc["predicted"]["low_ns"] <= doc["predicted"]["step_ns"] <= doc["predicted"]["high_ns"]


# -- memory-bound-decode: the decode's GEMMs at the weights' HBM floor -----------------------------------
THIRD = SAMPLES / "thirdparty"
GENERATE = ("hf_generate_llama_eager", "hf_generate_llama_static")


def _decode_spans(trace) -> list[tuple[int, int, int]]:
    """(launching thread, start, end) of each `decode` range the kernel sequence's inference found,
    and whether it lies inside a steady call (step_N)."""
    from nsight_tui.parsers.model.inferred import inference

    r = inference(trace).ranges
    steps = r[r["text"].str.startswith("step_")]
    out = []
    for gtid, s, e in zip(r["gtid"][r["text"] == "decode"], r["start"][r["text"] == "decode"],
                          r["end"][r["text"] == "decode"]):
        steady = bool(((steps["start"] <= s) & (steps["end"] >= e)).any())
        out.append((int(gtid), int(s), int(e), steady))
    return out


@pytest.mark.parametrize("stem", GENERATE)
def test_decode_fix_takes_the_decode_gemms_to_the_weights_floor(thirdparty, stem):
    """`speed:gemm@decode=1..KC..KH`: KH the decode's GEMM time per call (SQL: GEMM-family kernels by
    name whose launch call starts inside a steady call's decode range) over the floor per call (the
    host-to-device bytes before the first call over the export's memoryBandwidth, SQL, times the tokens
    a call decodes on the workload's own clock); KC = KH x the rate of the decode's longest GEMM (by
    median) read as the largest of those copies, over the peak."""
    path = thirdparty(stem)
    trace = load_trace(path)
    # its edits as the rule names them; their replay alone below (what findings' replay computes for
    # it, without replaying every other finding of a 400 ms generate() call)
    f = {x.id: x for x in findings(trace, replay=False)}["memory-bound-decode"]
    (edit,) = f.edits
    m = re.fullmatch(r"speed:gemm@decode=1\.\.([0-9.]+)\.\.([0-9.]+)", edit)
    assert m, edit
    (peak,) = sql_rows(path, "SELECT memoryBandwidth FROM TARGET_INFO_GPU ORDER BY id LIMIT 1")[0]
    rows = sql_rows(path, """SELECT k.start, k.end, s.value, r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k
                         JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                         JOIN StringIds s ON s.id = k.demangledName""")
    spans = _decode_spans(trace)
    steady = [(g, s, e) for g, s, e, ok in spans if ok]
    fam = classify_names([r[2] for r in rows])
    gemm = [(r, f_) for r, f_ in zip(rows, fam) if f_ == "gemm"]
    in_decode = [r for r, _ in gemm if any(g == r[4] and s <= r[3] <= e for g, s, e in steady)]
    calls = [s for s in json.loads((THIRD / f"{stem}.steps.json").read_text())["steps"] if s["name"].startswith("step_")]
    assert len(steady) == len(calls)
    tokens = np.median([len(s["decode_token_s"]) for s in calls])
    first_call = min(s for _, s, _, _ in spans)  # after the first call's prefill: every weight copied before it
    copies = [b for (b,) in sql_rows(path, "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND start < ?",
                                 first_call)]
    weights = sum(copies)
    assert weights == pytest.approx(f.evidence["weights_bytes"])
    floor_per_call = weights / peak * 1e9 * tokens
    gemm_per_call = sum(r[1] - r[0] for r in in_decode) / len(steady)
    high = gemm_per_call / floor_per_call
    by_name: dict[str, list[int]] = {}
    for r in in_decode:
        by_name.setdefault(r[2], []).append(r[1] - r[0])
    longest = max(np.median(v) for v in by_name.values())
    rate = min(max(copies) / (longest / 1e9), peak)
    assert float(m.group(2)) == pytest.approx(high, rel=1e-3)
    assert float(m.group(1)) == pytest.approx(high * rate / peak, rel=1e-3)
    assert 1 < float(m.group(1)) < float(m.group(2))
    replayed = saving(trace, f.edits)
    # the range: the floor's end saves the most, no change (K = 1) nothing
    assert replayed.low_ns <= replayed.step_ns <= replayed.high_ns == replayed.baseline_step_ns
    # the edit speeds exactly the GEMMs launched inside a decode range (every call's, warm-up's too)
    every = [r for r, _ in gemm if any(g == r[4] and s <= r[3] <= e for g, s, e, _ in spans)]
    assert replayed.applied[0].changed.startswith(f"{len(every):,} ops (family gemm launched inside 'decode')")
    doc = _whatif_json(path, "fix:memory-bound-decode")
    assert doc["saving_ns"] == replayed.saving_ns
    assert "the weights' floor" in doc["edits"][0]["assumption"]
    assert doc["predicted"]["low_ns"] <= doc["predicted"]["step_ns"] <= doc["predicted"]["high_ns"]
