"""bench/scale_trace.py: a replicated export must stay a valid nsys export with N x the work.

Every expectation is computed from the input file with plain SQL, never from the tool's output.
"""
from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "scale_trace.py"
SHARED = REPO.parent / "shared" / "traces"
TIMES = 3


def _has_kernels_and_api(path: Path) -> bool:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ok = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"} <= names
        return ok and conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def _inputs() -> list:
    """A committed sample (always there in a clone) plus the shared real traces when present:
    threads (NVTX on two threads), graphs (CUDA graph node events), and a 2-process capture,
    where correlation IDs repeat across processes."""
    found = []
    samples = sorted((REPO / "sample_traces").glob("*.sqlite"), key=lambda p: p.stat().st_size)
    found += [p for p in samples if _has_kernels_and_api(p)][:1]
    for name in ("small_ctx128_threads", "small_ctx128_graphs", "h100_2gpu_1s"):
        p = SHARED / f"{name}.sqlite"
        if p.is_file():
            found.append(p)
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no trace with kernels: sample_traces/ and ../shared absent"))]
    return [pytest.param(p, id=p.stem) for p in found]


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _scale(src: Path, dst: Path, times: int = TIMES, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(src), str(dst), "--times", str(times), *extra],
        capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="module", params=_inputs())
def scaled(request, tmp_path_factory):
    src = request.param
    dst = tmp_path_factory.mktemp("scaled") / f"{src.stem}_x{TIMES}.sqlite"
    before = src.stat().st_mtime_ns
    r = _scale(src, dst)
    assert r.returncode == 0, r.stderr
    assert src.stat().st_mtime_ns == before, "the input must never be written"
    return src, dst


def _tables(conn) -> dict[str, list[str]]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {n: [c[1] for c in conn.execute(f'PRAGMA table_info("{n}")')] for n in names}


def test_schema_is_identical(scaled):
    src, dst = scaled
    a, b = _ro(src), _ro(dst)
    q = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    assert a.execute(q).fetchall() == b.execute(q).fetchall()


def test_activity_tables_triple_and_definitions_copied_once(scaled):
    src, dst = scaled
    a, b = _ro(src), _ro(dst)
    tables = _tables(a)
    for t in tables:
        na = a.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
        nb = b.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
        if t.startswith("CUPTI_ACTIVITY_KIND_") or t == "CUDA_GRAPH_NODE_EVENTS":
            assert nb == TIMES * na, t
        elif t in ("StringIds", "ThreadNames", "PROCESSES") or t.startswith(("ENUM_", "TARGET_INFO_", "META_DATA_")):
            assert nb == na, t
    if "NVTX_EVENTS" in tables:
        count = "SELECT count(*) FROM NVTX_EVENTS WHERE eventType {}"
        ranges_in = a.execute(count.format("IN (59, 60)")).fetchone()[0]
        assert b.execute(count.format("IN (59, 60)")).fetchone()[0] == TIMES * ranges_in
        # A domain is created once per run, not once per copy.
        assert b.execute(count.format("= 75")).fetchone()[0] == a.execute(count.format("= 75")).fetchone()[0]


def test_copies_are_shifted_by_one_constant_and_do_not_overlap(scaled):
    src, dst = scaled
    a, b = _ro(src), _ro(dst)
    shifts = set()
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY"):
        if t not in _tables(a):
            continue
        orig = a.execute(f'SELECT start, "end" FROM "{t}" ORDER BY rowid').fetchall()
        out = b.execute(f'SELECT start, "end" FROM "{t}" ORDER BY rowid').fetchall()
        n = len(orig)
        for k in range(TIMES):
            deltas = {(s2 - s1, e2 - e1) for (s1, e1), (s2, e2) in zip(orig, out[k * n:(k + 1) * n])}
            assert len(deltas) == 1, f"{t} copy {k}: rows not shifted uniformly"
            d_start, d_end = deltas.pop()
            assert d_start == d_end, f"{t} copy {k}: durations changed"
            if k == 0:
                assert d_start == 0, f"{t}: the first copy must be the input itself"
            else:
                assert d_start % k == 0
                shifts.add(d_start // k)
    assert len(shifts) == 1, f"tables or copies shifted differently: {shifts}"
    shift = shifts.pop()
    lo, hi = a.execute(
        'SELECT min(s), max(e) FROM (SELECT min(start) s, max("end") e FROM CUPTI_ACTIVITY_KIND_KERNEL '
        'UNION ALL SELECT min(start), max("end") FROM CUPTI_ACTIVITY_KIND_RUNTIME)'
    ).fetchone()
    assert shift > hi - lo, "copy k+1 must start after copy k has ended"


def test_per_kernel_name_totals_are_exactly_times_the_input(scaled):
    src, dst = scaled
    q = (
        'SELECT s.value, count(*), sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k '
        "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
    )
    before = {name: (n, total) for name, n, total in _ro(src).execute(q)}
    after = {name: (n, total) for name, n, total in _ro(dst).execute(q)}
    assert before and after.keys() == before.keys()
    for name, (n, total) in before.items():
        assert after[name] == (TIMES * n, TIMES * total), name


def test_kernel_summary_is_times_nvidias(scaled):
    """NVIDIA's own cuda_gpu_kern_sum of the input, times N, is what the scaled file holds."""
    src, dst = scaled
    oracle = src.parent / "oracle" / f"{src.stem}_cuda_gpu_kern_sum.csv"
    if not oracle.is_file():
        pytest.skip(f"no NVIDIA CSV for {src.name}")
    with open(oracle, newline="") as fh:
        nvidia = {r["Name"]: (int(r["Instances"]), int(r["Total Time (ns)"])) for r in csv.DictReader(fh)}
    q = (
        'SELECT s.value, count(*), sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k '
        "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
    )
    scaled_sums = {name: (n, total) for name, n, total in _ro(dst).execute(q)}
    assert nvidia and scaled_sums == {name: (TIMES * n, TIMES * t) for name, (n, t) in nvidia.items()}


def test_correlation_ids_unique_per_process_and_kernels_join_their_launch(scaled):
    src, dst = scaled
    a, b = _ro(src), _ro(dst)
    dup = (
        "SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT globalTid >> 24, correlationId "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME)) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    )
    assert a.execute(dup).fetchone()[0] == 0, "input already breaks the invariant"
    assert b.execute(dup).fetchone()[0] == 0
    # A kernel joins its launching call on (correlationId, process), and that call comes first:
    # a copy's kernels must join their own copy's calls, not another copy's.
    joined = (
        "SELECT count(*), coalesce(sum(r.start <= k.start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "AND (r.globalTid >> 24) = (k.globalPid >> 24)"
    )
    n_in, ordered_in = a.execute(joined).fetchone()
    n_out, ordered_out = b.execute(joined).fetchone()
    assert n_in > 0
    assert (n_out, ordered_out) == (TIMES * n_in, TIMES * ordered_in)
    kernels_in = a.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if n_in == kernels_in:  # NVIDIA-captured files: every kernel has its runtime row
        assert n_out == b.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


def test_nvtx_range_ids_stay_unique(scaled):
    src, dst = scaled
    b = _ro(dst)
    if "NVTX_EVENTS" not in _tables(b):
        pytest.skip("no NVTX in this trace")
    n, distinct = b.execute(
        "SELECT count(rangeId), count(DISTINCT rangeId) FROM NVTX_EVENTS WHERE rangeId IS NOT NULL"
    ).fetchone()
    assert n == distinct


def test_refuses_to_overwrite_without_force(scaled, tmp_path):
    src, _ = scaled
    dst = tmp_path / "out.sqlite"
    dst.write_bytes(b"precious")
    r = _scale(src, dst, 2)
    assert r.returncode != 0 and "--force" in r.stderr and "Traceback" not in r.stderr
    assert dst.read_bytes() == b"precious"
    r = _scale(src, dst, 2, "--force")
    assert r.returncode == 0, r.stderr
    assert _ro(dst).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 2 * _ro(
        src
    ).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert [p.name for p in tmp_path.iterdir()] == ["out.sqlite"], "no temp file left behind"


@pytest.mark.parametrize("content", [b"", b"not a database at all", b"SQLite format 3\x00" + b"\x00" * 100])
def test_bad_input_is_one_line_and_nonzero(tmp_path, content):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(content)
    r = _scale(bad, tmp_path / "out.sqlite", 2)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.sqlite").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sqlite"]
