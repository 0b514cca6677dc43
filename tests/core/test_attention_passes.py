"""Attention written out, found by kernel order (parsers/kernels/attention.py), against SQL over the
exports: the passes between each attention's two GEMMs, the finding that reads them without NVTX,
and the `attention` edit that drops them (docs/whatif.md, "Held out: attention")."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.xz_samples import plain

from nsight_tui.parsers.kernels.attention import WINDOW, attention_parts, attention_passes
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.replay import edits as edit_mod
from nsight_tui.parsers.replay.edits import EditError
from nsight_tui.parsers.replay.predict import graph_of, predict

MANUAL = SAMPLES / "small_ctx128.sqlite"
FUSED = SAMPLES / "small_ctx128_fused.sqlite.xz"
NO_NVTX = SAMPLES / "nonvtx" / "small_ctx512_b8_async_nonvtx.sqlite.xz"
THIRD = SAMPLES / "thirdparty"
HF_EAGER = THIRD / "hf_trainer_qwen2_l4_b8_eager.sqlite.xz"  # transformers' attn_implementation="eager", no NVTX

# The same rule written in SQL: kernels and device-to-device copies launched (same process, same
# correlation id) between the first step range's start and the last one's end, per stream in start
# order; a GEMM by its name's words (cuBLAS, CUTLASS's sgemm, nvjet, split-K's reduction), a softmax by
# its; for each softmax with a GEMM at most WINDOW kernels (copies not counted) before and after it,
# and whose name does so at least twice a step, the kernels and copies strictly between those GEMMs
# that are not GEMMs. Rows as (table, rowid).
ATTENTIONS_SQL = """
WITH launched AS (
      SELECT 'kernel' tb, k.rowid r, k.streamId st, k.deviceId d, k.globalPid >> 24 p, k.start, k.demangledName nid,
             lower(sn.value) LIKE '%gemm%' OR lower(sn.value) LIKE 'nvjet%' OR lower(sn.value) LIKE '%splitkreduce%' g,
             lower(sn.value) LIKE '%softmax%' sm, 1 isk, lower(sn.value) LIKE '%copy%' cp,
             lower(sn.value) LIKE '%backward%' bk
      FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds sn ON sn.id = k.demangledName
      JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = k.correlationId AND a.globalTid >> 24 = k.globalPid >> 24
      WHERE a.start BETWEEN :s AND :e
      UNION ALL
      SELECT 'memcpy', m.rowid, m.streamId, m.deviceId, m.globalPid >> 24, m.start, -1, 0, 0, 0, 1, 0
      FROM CUPTI_ACTIVITY_KIND_MEMCPY m
      JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = m.correlationId AND a.globalTid >> 24 = m.globalPid >> 24
      WHERE a.start BETWEEN :s AND :e AND m.copyKind IN (8, 13)),
o AS (SELECT *, row_number() OVER (PARTITION BY p, d, st ORDER BY start) i,
             sum(isk) OVER (PARTITION BY p, d, st ORDER BY start ROWS UNBOUNDED PRECEDING) ki FROM launched),
w AS (SELECT o.*, (SELECT max(x.i) FROM o x WHERE x.p = o.p AND x.d = o.d AND x.st = o.st AND x.i < o.i AND x.g) pg,
                  (SELECT min(x.i) FROM o x WHERE x.p = o.p AND x.d = o.d AND x.st = o.st AND x.i > o.i AND x.g) ng
      FROM o WHERE o.sm AND NOT o.g),
ok AS (SELECT w.* FROM w JOIN o a ON a.p = w.p AND a.d = w.d AND a.st = w.st AND a.i = w.pg
                         JOIN o b ON b.p = w.p AND b.d = w.d AND b.st = w.st AND b.i = w.ng
       WHERE w.ki - a.ki <= :window AND b.ki - w.ki <= :window),
named AS (SELECT * FROM ok WHERE nid IN (SELECT nid FROM ok GROUP BY nid HAVING count(*) >= 2 * :n))"""
ORACLE_SQL = ATTENTIONS_SQL + """
SELECT DISTINCT o.tb, o.r FROM o JOIN named a ON o.p = a.p AND o.d = a.d AND o.st = a.st AND o.i > a.pg AND o.i < a.ng
WHERE NOT o.g ORDER BY o.tb, o.r"""
# The layout copies: the run of copies (a name with "copy", a device memcpy) right before each score
# GEMM; in the backward (the softmax's name says backward) before the GEMM ahead of it where that is a
# GEMM too, and the run right after its closing GEMM, or the GEMM after that one where it is a GEMM.
LAYOUT_SQL = ATTENTIONS_SQL + """,
bounds AS (SELECT a.p, a.d, a.st, a.bk,
             CASE WHEN a.bk AND EXISTS (SELECT 1 FROM o x WHERE x.p = a.p AND x.d = a.d AND x.st = a.st AND x.i = a.pg - 1
                                        AND x.g) THEN a.pg - 1 ELSE a.pg END lo,
             CASE WHEN a.bk AND EXISTS (SELECT 1 FROM o x WHERE x.p = a.p AND x.d = a.d AND x.st = a.st AND x.i = a.ng + 1
                                        AND x.g) THEN a.ng + 1 ELSE a.ng END hi
           FROM named a)
SELECT DISTINCT o.tb, o.r FROM o JOIN bounds b ON o.p = b.p AND o.d = b.d AND o.st = b.st
WHERE o.cp AND NOT o.g AND (
  (o.i < b.lo AND NOT EXISTS (SELECT 1 FROM o x WHERE x.p = o.p AND x.d = o.d AND x.st = o.st AND x.i > o.i
                              AND x.i < b.lo AND NOT (x.cp AND NOT x.g)))
  OR (b.bk AND o.i > b.hi AND NOT EXISTS (SELECT 1 FROM o x WHERE x.p = o.p AND x.d = o.d AND x.st = o.st
                                          AND x.i > b.hi AND x.i < o.i AND NOT (x.cp AND NOT x.g))))
ORDER BY o.tb, o.r"""
# The attention's GEMMs: the two around each softmax's window, and in the backward the GEMM ahead of the
# first and after the second where those are GEMMs too (dV, dP, dQ, dK)
GEMMS_SQL = ATTENTIONS_SQL + """
SELECT DISTINCT o.tb, o.r FROM o JOIN named a ON o.p = a.p AND o.d = a.d AND o.st = a.st
WHERE o.g AND (o.i IN (a.pg, a.ng) OR (a.bk AND o.i IN (a.pg - 1, a.ng + 1)))
ORDER BY o.tb, o.r"""
# Every call that launched GPU work, per thread in start order, with what it launched
LAUNCHING_CALLS_SQL = """
SELECT a.globalTid, a.correlationId, a.start, w.tb, w.r FROM CUPTI_ACTIVITY_KIND_RUNTIME a JOIN (
    SELECT 'kernel' tb, rowid r, correlationId c, globalPid >> 24 p FROM CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL SELECT 'memcpy', rowid, correlationId, globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT 'memset', rowid, correlationId, globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_MEMSET) w
  ON w.c = a.correlationId AND w.p = a.globalTid >> 24
ORDER BY a.globalTid, a.start"""
STEPS_SQL = ("SELECT min(n.start), max(n.end), count(*) FROM NVTX_EVENTS n JOIN StringIds t ON t.id = n.textId "
             "WHERE t.value LIKE 'step!_%' ESCAPE '!'")


def _sql_passes(path, s: int, e: int, n: int, sql: str = ORACLE_SQL) -> list[tuple[str, int]]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        return [(t, r) for t, r in con.execute(sql, {"s": s, "e": e, "n": n, "window": WINDOW})]


def _ops_of(trace, rows: list[tuple[str, int]]) -> np.ndarray:
    """Positions in trace.ops of the export rows `rows` ((table, rowid), as ORACLE_SQL gives them)."""
    kinds = np.asarray(["kernel", "memcpy", "memset", "graph"])[trace.ops["kind"].to_numpy()]
    want = set(rows)
    return np.flatnonzero([(k, r) in want for k, r in zip(kinds.tolist(), trace.ops["rowid"].to_numpy().tolist())])


def _rows(trace, found: np.ndarray) -> list[tuple[str, int]]:
    """Ops as (export table, rowid), sorted, as ORACLE_SQL gives them."""
    kinds = np.asarray(["kernel", "memcpy", "memset", "graph"])[trace.ops["kind"].to_numpy()[found]]
    return sorted(zip(kinds.tolist(), trace.ops["rowid"].to_numpy()[found].tolist()))


def _nvtx_steps(path) -> tuple[int, int, int]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        return con.execute(STEPS_SQL).fetchone()


def _step_window(trace) -> tuple[np.ndarray, int]:
    """Per op: launched between the first step range's start and the last one's end; the step count."""
    s, e, n = _nvtx_steps(trace.path)
    o_api = trace.ops["api"].to_numpy(np.int64)
    a_start = trace.api["start"].to_numpy(np.int64)
    launched = np.where(o_api >= 0, a_start[np.maximum(o_api, 0)], -1)
    return (o_api >= 0) & (launched >= s) & (launched <= e), int(n)


def test_the_passes_by_kernel_order_are_the_sql_rules():
    """On the manual-attention capture: the passes found are, op for op (export rows), those the same
    rule written in SQL finds, its device-to-device copies among them; per layer and step, some
    forward and some backward."""
    trace = load_trace(MANUAL)
    inside, n = _step_window(trace)
    want = _sql_passes(MANUAL, *_nvtx_steps(MANUAL))
    assert len(want) > 0 and _rows(trace, attention_passes(trace, inside, n)) == want
    assert {t for t, _ in want} == {"kernel", "memcpy"}


@pytest.mark.parametrize("which", ["ours", "transformers"])
def test_the_layout_copies_are_the_sql_rules(which):
    """The copies the attention's matmuls make of their operands and gradients, found by order, are
    those the rule written in SQL finds: before each score GEMM, and in the backward around its two
    GEMM pairs; forward and backward ones on both our GPT-2 and transformers' eager Qwen2."""
    if which == "ours":
        trace, path = load_trace(MANUAL), MANUAL
        inside, n = _step_window(trace)
        bounds = _nvtx_steps(MANUAL)[:2]
    else:
        path = plain(HF_EAGER)
        trace = load_trace(path)
        inside, n, bounds = np.ones(len(trace.ops), bool), len(_config(HF_EAGER)["steps"]), (-(2**62), 2**62)
    want = _sql_passes(path, *bounds, n, sql=LAYOUT_SQL)
    got = _rows(trace, attention_parts(trace, inside, n).layout)
    assert len(want) > 0 and got == want
    names = {trace.op_names[c] for c in trace.ops["name"].to_numpy()[attention_parts(trace, inside, n).layout]}
    assert any("direct_copy" in x for x in names)


def test_the_forward_passes_lie_inside_the_attention_range_between_its_gemms():
    """NVTX says where the attention is: every forward pass found by order was launched inside a
    `scaled_dot_product_attention` range, and every kernel or device copy launched in such a range after
    its first GEMM and before its last that is not a GEMM was found (the copies before the score GEMM
    are the attention's too, but not between its GEMMs: left out, a lower bound)."""
    trace = load_trace(MANUAL)
    inside, n = _step_window(trace)
    found = set(_rows(trace, attention_passes(trace, inside, n)))
    sql = """
    WITH r AS (SELECT n.start s, n.end e, n.globalTid >> 24 p FROM NVTX_EVENTS n JOIN StringIds t ON t.id = n.textId
               WHERE t.value = 'scaled_dot_product_attention'),
    steps AS (SELECT min(n.start) s, max(n.end) e FROM NVTX_EVENTS n JOIN StringIds t ON t.id = n.textId
              WHERE t.value LIKE 'step!_%' ESCAPE '!'),
    ops AS (SELECT 'kernel' tb, k.rowid id, k.correlationId c, k.globalPid gp, k.start, lower(sn.value) LIKE '%gemm%' g
            FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds sn ON sn.id = k.demangledName
            UNION ALL SELECT 'memcpy', rowid, correlationId, globalPid, start, 0
            FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (8, 13)),
    k AS (SELECT o.tb, o.id, r.s rs, o.start, o.g FROM ops o
          JOIN CUPTI_ACTIVITY_KIND_RUNTIME a ON a.correlationId = o.c AND a.globalTid >> 24 = o.gp >> 24
          JOIN r ON a.start BETWEEN r.s AND r.e AND a.globalTid >> 24 = r.p, steps WHERE a.start BETWEEN steps.s AND steps.e)
    SELECT k.tb, k.id, k.g, k.start > (SELECT min(x.start) FROM k x WHERE x.rs = k.rs AND x.g)
                  AND k.start < (SELECT max(x.start) FROM k x WHERE x.rs = k.rs AND x.g) FROM k"""
    with sqlite3.connect(f"{MANUAL.resolve().as_uri()}?mode=ro", uri=True) as con:
        in_range = con.execute(sql).fetchall()
    between = {(t, r) for t, r, g, mid in in_range if mid and not g}
    forward = found & {(t, r) for t, r, _, _ in in_range}
    assert between and between <= found
    assert forward == between
    assert len(found - forward) > 0  # the backward's passes, outside any forward range


def test_no_passes_where_attention_runs_fused():
    trace = load_trace(plain(FUSED))
    inside, n = _step_window(trace)
    assert len(attention_passes(trace, inside, n)) == 0


def test_the_finding_reads_them_without_nvtx():
    """A capture without NVTX (the step clock from the workload's marks): unfused-attention fires, its
    evidence two softmax kernels a layer and step (forward and backward) for the model's layers, and
    its fix is the `attention` edit."""
    from nsight_tui.parsers.analyses.findings import findings

    config = json.loads(NO_NVTX.with_name(NO_NVTX.name.replace(".sqlite.xz", ".steps.json")).read_text())["config"]
    assert config["nvtx"] is False and config["attention"] == "manual"
    f = next(f for f in findings(load_trace(plain(NO_NVTX))) if f.id == "unfused-attention")
    assert f.evidence["softmax_kernels_per_step"] == 2 * config["n_layers"]
    assert f.edits == ["attention"] and f.replayed


@pytest.fixture(scope="module")
def edited():
    trace = load_trace(MANUAL)
    g, sr = graph_of(trace)
    return trace, g, sr, edit_mod.apply(g, sr, [edit_mod.parse("attention")])


def test_the_edit_drops_the_passes_and_their_launches(edited):
    """What `attention` drops, against SQL: the passes' and the layout copies' count and GPU time; each
    launch call that launched only those takes no time; the GEMMs keep theirs."""
    trace, g, sr, ed = edited
    dropped = (ed.mid.op_launch_pt < 0) & (g.op_launch_pt >= 0)
    want = sorted(_sql_passes(MANUAL, *_nvtx_steps(MANUAL)) + _sql_passes(MANUAL, *_nvtx_steps(MANUAL), sql=LAYOUT_SQL))
    with sqlite3.connect(f"{MANUAL.resolve().as_uri()}?mode=ro", uri=True) as con:
        ns = sum(con.execute(f"SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_{t.upper()} WHERE rowid IN "
                             f"({','.join(str(r) for tb, r in want if tb == t)})").fetchone()[0] for t in ("kernel", "memcpy"))
    assert _rows(trace, np.flatnonzero(dropped)) == want
    assert int(g.op_dur[dropped].sum()) == ns and int(ed.mid.op_dur[dropped].sum()) == 0


def _inner_calls_by_sql(path) -> set[tuple[int, int]]:
    """(globalTid, correlationId) of the calls whose host time the fused attention does not spend, by SQL
    and a walk written here: on each thread, the calls that launched GPU work in start order; a run,
    calls in a row that launched the attention's work alone (its passes, layout copies, GEMMs), a call
    that launched a memset alone not ending it; the calls after a run's first up to its last GEMM."""
    s, e, n = _nvtx_steps(path)
    attention = set(_sql_passes(path, s, e, n) + _sql_passes(path, s, e, n, sql=LAYOUT_SQL))
    gemms = set(_sql_passes(path, s, e, n, sql=GEMMS_SQL))
    attention |= gemms
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        rows = con.execute(LAUNCHING_CALLS_SQL).fetchall()
    calls: dict[tuple[int, int], dict] = {}
    for tid, corr, start, tb, r in rows:
        c = calls.setdefault((tid, corr), {"start": start, "work": set()})
        c["work"].add((tb, r))
    inner: set[tuple[int, int]] = set()
    ordered = sorted(calls.items(), key=lambda kv: (kv[0][0], kv[1]["start"]))
    run: list[tuple[tuple[int, int], bool]] = []  # (call, launched a GEMM of the attention) since the run's first
    tid_of_run = None

    def close():
        ends = [i for i, (_, is_gemm) in enumerate(run) if is_gemm]
        if ends:
            inner.update(key for key, _ in run[1:ends[-1] + 1])
        run.clear()

    for key, c in ordered:
        mine = c["work"] <= attention
        memset_only = all(tb == "memset" for tb, _ in c["work"]) and not c["work"] & attention
        if key[0] != tid_of_run or not (mine or (memset_only and run)):
            close()
            tid_of_run = key[0]
        if mine or (memset_only and run):
            run.append((key, bool(c["work"] & gemms)))
    close()
    return inner


def test_the_framework_work_of_the_attention_goes_centrally(edited):
    """The host time since the thread's previous launching call before each of the attention's launches
    but the first of a run, up to its last GEMM (the attention one op, forward and backward: the first
    launch's stays for the fused op's dispatch; _inner_calls_by_sql), is gone in the central and
    favourable plans and kept at the other end; no other host time moves; the three replayed steps are
    ordered."""
    trace, g, sr, ed = edited
    host = g.owner < 0
    gone_mid = host & (ed.mid.delta_ns < g.delta_ns)
    assert gone_mid.any() and (ed.low.delta_ns[host] <= ed.mid.delta_ns[host]).all()
    assert not (host & (ed.high.delta_ns != g.delta_ns)).any()
    # walked back point by point from each such call's start, on its thread, to the end of the call
    # before it that launched an op (or blocked): the host intervals met are those gone
    launched_calls = set(trace.ops["api"].to_numpy()[trace.ops["api"].to_numpy() >= 0].tolist())
    boundary_ends = {int(g.call_end_pt[c]) for c in launched_calls if g.call_end_pt[c] >= 0} | set(g.blocks)
    firsts = {a for a, _ in g.thread_slices}
    index = {(int(t), int(c)): i for i, (t, c) in enumerate(zip(trace.api["gtid"].to_numpy(), trace.api["corr"].to_numpy()))}
    inner = _inner_calls_by_sql(MANUAL)
    assert len(inner) > 0
    want = set()
    for key in inner:
        k = int(g.call_start_pt[index[key]])
        while True:
            if g.owner[k] < 0 and k not in firsts and k not in g.handoffs:
                want.add(k)
            if k in firsts or k - 1 in boundary_ends:
                break
            k -= 1
    assert set(np.flatnonzero(gone_mid).tolist()) == {k for k in want if g.delta_ns[k] > 0}
    p = predict(trace, ["attention"])
    assert p.low_ns <= p.step_ns <= p.high_ns < p.replayed_step_ns


def test_an_edit_with_nothing_to_fuse_says_so():
    trace = load_trace(plain(FUSED))
    g, sr = graph_of(trace)
    with pytest.raises(EditError, match="runs fused already"):
        edit_mod.apply(g, sr, [edit_mod.parse("attention")])


def test_the_framework_work_the_edit_takes_is_gone_in_the_fused_twin(edited):
    """The host time the edit takes off the forward's attention ranges (per step) against what the fused
    capture of the same program shows gone there, by SQL over both exports (each range's time less the
    CUDA calls inside it), the twin's at this capture's CPU pace: scaled by the host time of the
    forward outside the attention ranges, which both programs run alike (the fused capture's CPU ran
    it 1.34x slower). Within 10%: what is left of the two captures' pace (docs/whatif.md, "Twins")."""
    trace, g, sr, ed = edited
    sql = """
    WITH r AS (SELECT x.value v, n.start s, n.end e, n.globalTid t FROM NVTX_EVENTS n JOIN StringIds x ON x.id = n.textId
               WHERE x.value IN ('scaled_dot_product_attention', 'forward')
                 AND n.start >= (SELECT min(m.start) FROM NVTX_EVENTS m JOIN StringIds y ON y.id = m.textId
                                 WHERE y.value LIKE 'step!_%' ESCAPE '!')),
    host AS (SELECT r.v, (r.e - r.s) - coalesce(sum(a.end - a.start), 0) ns FROM r LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME a
             ON a.globalTid = r.t AND a.start >= r.s AND a.end <= r.e GROUP BY r.v, r.s, r.e)
    SELECT (SELECT sum(ns) FROM host WHERE v = 'scaled_dot_product_attention'), (SELECT sum(ns) FROM host WHERE v = 'forward'),
           (SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds y ON y.id = n.textId WHERE y.value LIKE 'step!_%' ESCAPE '!')"""

    def host_per_step(path) -> tuple[float, float]:
        """(the attention ranges' host time, the rest of the forward's) per step"""
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
            attention, forward, n = con.execute(sql).fetchone()
        return attention / n, (forward - attention) / n

    manual_attention, manual_rest = host_per_step(MANUAL)
    fused_attention, fused_rest = host_per_step(plain(FUSED))
    gone_in_twin = manual_attention - fused_attention * manual_rest / fused_rest
    spans = edit_mod.range_spans(g, sr, "scaled_dot_product_attention")
    pids = edit_mod._pt_pids(g)
    inside = edit_mod._inside(g.pt_time, pids, spans) & edit_mod.in_steps(g, sr) & (g.owner < 0)
    taken = int((g.delta_ns - ed.mid.delta_ns)[inside].sum()) / sr.n_steps
    assert taken == pytest.approx(gone_in_twin, rel=0.10)


def _config(xz_path) -> dict:
    return json.loads(xz_path.with_name(xz_path.name.replace(".sqlite.xz", ".steps.json")).read_text())


def test_the_passes_of_a_trainer_nobody_here_wrote_are_the_sql_rules():
    """transformers' Trainer with eager attention, no NVTX: over the whole capture (every iteration the
    workload's clock recorded), the passes found are those the SQL rule finds, kernel for kernel; the
    finding fires with one softmax forward and one backward a layer and step (the config's layers),
    its fix the `attention` edit, replayed."""
    from nsight_tui.parsers.analyses.findings import findings

    d = _config(HF_EAGER)
    assert d["config"]["attention"] == "eager"
    path = plain(HF_EAGER)
    trace = load_trace(path)
    found = attention_passes(trace, np.ones(len(trace.ops), bool), len(d["steps"]))
    want = _sql_passes(path, -(2**62), 2**62, len(d["steps"]))
    assert len(want) > 0 and _rows(trace, found) == want
    f = next(f for f in findings(trace) if f.id == "unfused-attention")
    assert f.evidence["softmax_kernels_per_step"] == 2 * d["config"]["layers"]
    assert f.edits == ["attention"] and f.replayed and f.saving_ms_per_step > 0


@pytest.mark.parametrize("path", [HF_EAGER, MANUAL], ids=["hf-trainer", "ours-fp32"])
def test_16_bit_scores_are_read_off_the_passes(path):
    """Whether the scores were 16-bit (the flash factor's condition), against SQL: a kernel among the
    passes the SQL rule finds names c10::BFloat16 or c10::Half. On transformers' Trainer (bf16, no
    NVTX, a model nobody here wrote) they were; on our fp32 sample they were not."""
    from nsight_tui.parsers.kernels.attention import scores_in_half

    plain_path = plain(path)
    trace = load_trace(plain_path)
    if path == HF_EAGER:
        n = len(_config(HF_EAGER)["steps"])
        s, e = -(2**62), 2**62
        inside = np.ones(len(trace.ops), bool)
    else:
        s, e, n = _nvtx_steps(plain_path)
        inside, n = _step_window(trace)
    rows = [r for tb, r in _sql_passes(plain_path, s, e, n) if tb == "kernel"]
    with sqlite3.connect(f"{plain_path.resolve().as_uri()}?mode=ro", uri=True) as con:
        half = con.execute(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds x ON x.id = k.demangledName "
                           f"WHERE k.rowid IN ({','.join(map(str, rows))}) AND (x.value LIKE '%c10::BFloat16%' "
                           "OR x.value LIKE '%c10::Half%')").fetchone()[0] > 0
    assert rows and half is (path == HF_EAGER)
    assert scores_in_half(trace, attention_parts(trace, inside, n)) is half


@pytest.mark.parametrize("name", ["hf_trainer_qwen2_l4_b8", "hf_generate_llama_eager", "timm_vit_small_b64",
                                  "timm_convnext_tiny_b32", "lightning_resnet50_b32"])
def test_no_attention_written_out_where_there_is_none(name):
    """Third-party captures whose attention runs fused (transformers' sdpa, timm's fused attention) or
    that have none (conv nets, whose loss still runs a softmax once a step): no passes, no finding."""
    from nsight_tui.parsers.analyses.findings import findings

    path = plain(THIRD / f"{name}.sqlite.xz")
    trace = load_trace(path)
    assert len(attention_passes(trace, np.ones(len(trace.ops), bool), len(_config(THIRD / f"{name}.sqlite.xz")["steps"]))) == 0
    assert "unfused-attention" not in {f.id for f in findings(trace)}


TF32_GEMM_SQL = ("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
                 "WHERE s.value LIKE '%tf32%' OR s.value LIKE '%tensorop_s1688gemm%'")


@pytest.mark.parametrize("path", [SAMPLES / "async" / "small_ctx512_tf32_b8_async.sqlite.xz",
                                  SAMPLES / "async" / "small_ctx512_b8_async.sqlite.xz"], ids=["tf32", "fp32"])
def test_the_edit_says_fp32_sdpa_does_not_use_tf32_where_the_gemms_did(path):
    """Where the capture's GEMMs ran as TF32 (their names, by SQL) the edit's assumption says that the
    fp32 fused attention does not use TF32 (and takes longer than them); where they did not, nothing of it."""
    plain_path = plain(path)
    with sqlite3.connect(f"{plain_path.resolve().as_uri()}?mode=ro", uri=True) as con:
        tf32 = con.execute(TF32_GEMM_SQL).fetchone()[0] > 0
    trace = load_trace(plain_path)
    g, sr = graph_of(trace)
    ed = edit_mod.apply(g, sr, [edit_mod.parse("attention")])
    assert ("does not use TF32" in ed.applied[0].assumption) is tf32
    assert tf32 is (path.name == "small_ctx512_tf32_b8_async.sqlite.xz")


H200 = SAMPLES / "async" / "h200_twins"
# Per iteration (the NVTX warmup_N and step_N ranges, counted): the GEMM kernels' time and the fused
# attention kernels' time, by their names
PER_ITERATION_GEMM_SQL = """
SELECT (SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
        WHERE lower(s.value) LIKE '%gemm%' OR lower(s.value) LIKE 'nvjet%' OR lower(s.value) LIKE '%splitkreduce%'),
       (SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
        WHERE lower(s.value) LIKE '%fmha%' OR lower(s.value) LIKE '%flash%'),
       (SELECT count(*) FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId
        WHERE coalesce(n.text, t.value) LIKE 'step!_%' ESCAPE '!' OR coalesce(n.text, t.value) LIKE 'warmup!_%' ESCAPE '!')"""


def test_fp32_sdpa_over_tf32_gemms_is_the_committed_twins():
    """FP32_SDPA_OVER_TF32, recomputed in SQL: the fused capture's attention kernels an iteration over the
    GEMM time an iteration the manual capture runs and the fused one does not (the six TF32 GEMMs a
    layer the fused kernels replace; the two captures' other GEMMs are the same)."""
    manual = plain(H200 / "small_ctx1024_tf32_b8_async.sqlite.xz")
    fused = plain(SAMPLES / "replay" / "attention" / "small_ctx1024_tf32_fused_b8_async.sqlite.xz")
    with sqlite3.connect(f"{manual.resolve().as_uri()}?mode=ro", uri=True) as con:
        gemm_m, attn_m, n_m = con.execute(PER_ITERATION_GEMM_SQL).fetchone()
    with sqlite3.connect(f"{fused.resolve().as_uri()}?mode=ro", uri=True) as con:
        gemm_f, attn_f, n_f = con.execute(PER_ITERATION_GEMM_SQL).fetchone()
    assert attn_m is None and attn_f > 0
    ratio = (attn_f / n_f) / (gemm_m / n_m - gemm_f / n_f)
    assert ratio == pytest.approx(edit_mod.FP32_SDPA_OVER_TF32, abs=0.05)


ATTENTION = SAMPLES / "replay" / "attention"


def _per_iteration(path) -> tuple[float, float]:
    """The GEMM kernels' and the fused attention kernels' time an iteration (ns; PER_ITERATION_GEMM_SQL)."""
    with sqlite3.connect(f"{plain(path).resolve().as_uri()}?mode=ro", uri=True) as con:
        gemm, attn, n = con.execute(PER_ITERATION_GEMM_SQL).fetchone()
    return gemm / n, (attn or 0) / n


def test_half_sdpa_over_bf16_gemms_is_the_committed_twins():
    """HALF_SDPA_OVER_GEMMS, recomputed in SQL as above on the bf16 autocast pair: the flash kernels an
    iteration over the GEMM time the manual capture runs and the fused one does not."""
    gemm_m, attn_m = _per_iteration(ATTENTION / "small_ctx1024_bf16_tf32_b8_async.sqlite.xz")
    gemm_f, attn_f = _per_iteration(ATTENTION / "small_ctx1024_bf16_tf32_fused_b8_async.sqlite.xz")
    assert attn_m == 0 and attn_f > 0
    assert attn_f / (gemm_m - gemm_f) == pytest.approx(edit_mod.HALF_SDPA_OVER_GEMMS, abs=0.01)


# The passes' kernels whose names carry a 16-bit element type, by SQL over the export
HALF_PASS_SQL = "SELECT count(*) FROM StringIds WHERE value LIKE '%c10::BFloat16%' OR value LIKE '%c10::Half%'"


@pytest.mark.parametrize("path", [ATTENTION / "small_ctx1024_bf16_tf32_b8_async.sqlite.xz",
                                  H200 / "small_ctx1024_tf32_b8_async.sqlite.xz"], ids=["bf16", "tf32"])
def test_the_edit_times_16_bit_attention_as_flash(path):
    """Where the scores were bf16 (the passes' kernel names, by SQL) the six GEMMs a layer and step take
    HALF_SDPA_OVER_GEMMS their time in the central and low plans and their own in the high one, and the
    assumption says so; the TF32 capture's scale the other way (FP32_SDPA_OVER_TF32, high and central)."""
    trace = load_trace(plain(path))
    with sqlite3.connect(f"{trace.path.resolve().as_uri()}?mode=ro", uri=True) as con:
        half = con.execute(HALF_PASS_SQL).fetchone()[0] > 0
    assert half is ("bf16" in path.name)
    g, sr = graph_of(trace)
    ed = edit_mod.apply(g, sr, [edit_mod.parse("attention")])
    gemm = np.asarray(name_families(trace))[trace.ops["name"].to_numpy()] == "gemm"
    scaled = gemm & (ed.mid.op_dur != g.op_dur)
    assert scaled.sum() == 6 * 12 * sr.n_steps  # GPT-2 small's 12 layers
    factor, moved, kept = ((edit_mod.HALF_SDPA_OVER_GEMMS, ed.low, ed.high) if half else
                           (edit_mod.FP32_SDPA_OVER_TF32, ed.high, ed.low))
    assert (ed.mid.op_dur[scaled] == np.round(g.op_dur[scaled] * factor)).all()
    assert (moved.op_dur[scaled] == ed.mid.op_dur[scaled]).all() and (kept.op_dur[scaled] == g.op_dur[scaled]).all()
    assert ("flash on tensor cores" in ed.applied[0].assumption) is half
    assert ("does not use TF32" in ed.applied[0].assumption) is not half


def test_the_edit_times_tf32_gemms_as_fp32_sdpa():
    """On the TF32 manual capture: the attention's GEMMs (six a layer and step: Q·Kᵀ, P·V, dV, dP, dQ,
    dK, for the config's layers) take FP32_SDPA_OVER_TF32 their time in the central and far plans and
    their own in the near one; on the fp32 capture without TF32 they keep theirs everywhere."""
    for name, tf32 in (("small_ctx1024_tf32_b8_async", True), ("small_ctx1024_b8_async", False)):
        trace = load_trace(plain(H200 / f"{name}.sqlite.xz"))
        g, sr = graph_of(trace)
        ed = edit_mod.apply(g, sr, [edit_mod.parse("attention")])
        gemm = (np.asarray(name_families(trace))[trace.ops["name"].to_numpy()] == "gemm")
        scaled = gemm & (ed.mid.op_dur != g.op_dur)
        if not tf32:
            assert not scaled.any()
            continue
        with sqlite3.connect(f"{trace.path.resolve().as_uri()}?mode=ro", uri=True) as con:
            text = con.execute("SELECT coalesce(n.text, t.value) v FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId "
                               "WHERE v LIKE 'nsight-tui:config %'").fetchone()[0]
        config = json.loads(text.split(" ", 1)[1])
        assert scaled.sum() == 6 * config["n_layers"] * sr.n_steps
        assert (ed.mid.op_dur[scaled] == np.round(g.op_dur[scaled] * edit_mod.FP32_SDPA_OVER_TF32)).all()
        assert (ed.high.op_dur[scaled] == ed.mid.op_dur[scaled]).all() and (ed.low.op_dur[scaled] == g.op_dur[scaled]).all()


# cuDNN's fused attention, forward and backward with the backward's two helper kernels, by name in SQL
CUDNN_SDPA_SQL = """SELECT coalesce(sum(k.end - k.start), 0), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN StringIds s ON s.id = k.demangledName
WHERE s.value LIKE '%sdpa%' OR s.value LIKE '%cudnn::fusion::compute_dot_do_o%'
   OR s.value LIKE '%cudnn::fusion::convert_dq_to%'"""


def test_cudnn_attentions_backward_helpers_are_attention():
    """cuDNN's SDPA backward runs a dO·O kernel before it and a dQ cast after (cudnn::fusion::): they were
    family "other" (2% of a bf16 ViT's SDPA runs). The attention family's kernels and time are those SQL
    names cuDNN's attention by."""
    path = plain(ATTENTION / "small_ctx1024_bf16_tf32_fused_b8_async.sqlite.xz")
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        ns, n = con.execute(CUDNN_SDPA_SQL).fetchone()
    trace = load_trace(path)
    ops = trace.ops
    attention = np.asarray(name_families(trace))[ops["name"].to_numpy()] == "attention"
    assert n == 4 * 108 and int(attention.sum()) == n  # forward, backward and its two helpers, 108 of each
    assert int((ops["end"] - ops["start"]).to_numpy()[attention].sum()) == ns
