"""Bad input: one clear line on stderr, non-zero exit, never a traceback; the file untouched."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest

from conftest import SHARED, sample_traces
from helpers import cli_process


def run_cli(*args):
    return cli_process.run(args, text=True, timeout=120)


def assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_file(tmp_path):
    assert_one_line_error(run_cli("stats", tmp_path / "nope.sqlite"), "no such file")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    assert_one_line_error(run_cli("stats", path), "empty")


def test_not_sqlite(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("hello, this is text\n")
    assert_one_line_error(run_cli("stats", path), "not an SQLite file")


def test_sqlite_but_not_nsys(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    assert_one_line_error(run_cli("stats", path), "not an Nsight Systems export")


def test_nsys_rep_gets_the_export_command(tmp_path):
    path = tmp_path / "run.nsys-rep"
    path.write_bytes(b"\x00binary")
    assert_one_line_error(run_cli("stats", path), "nsys export --type sqlite")


def _any_trace():
    traces = sample_traces() or sorted(SHARED.glob("*.sqlite")) if SHARED.exists() else sample_traces()
    traces = [t for t in traces if t.stat().st_size > 400_000]
    if not traces:
        pytest.skip("no real trace available")
    return traces[0]


def test_truncated_export(tmp_path):
    src = _any_trace()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(src.read_bytes()[: src.stat().st_size // 3])
    assert_one_line_error(run_cli("stats", path), "truncated")


@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"])
def test_a_damaged_page_inside_a_big_table(tmp_path, table):
    # The load touches only the big tables' last pages before reading (counting every row took
    # 14 s of a 4.4 GB export's first open): a page damaged in the middle is met by the read,
    # which must say so in one line too. SQLite's own page map (dbstat) picks a leaf of `table`.
    src = _any_trace()
    with sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True) as con:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        leaves = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                                            "ORDER BY pageno", (table,))]
    if len(leaves) < 3:
        pytest.skip(f"{table}: too few pages")
    data = bytearray(src.read_bytes())
    page = leaves[len(leaves) // 2]  # neither the first nor the last
    data[(page - 1) * size] = 0xFF  # the page's type byte: no page type SQLite knows
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(data))
    assert_one_line_error(run_cli("stats", path), "damaged")


def test_export_without_cuda_or_nvtx():
    path = SHARED / "older" / "nsys2024.6_benchmark.sqlite"
    if not path.exists():
        pytest.skip("shared traces absent")
    assert_one_line_error(run_cli("stats", path), "neither CUDA nor NVTX")


def test_export_without_nvtx_still_gives_kernel_and_api_reports():
    path = SHARED / "mock.sqlite"
    if not path.exists():
        pytest.skip("shared traces absent")
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_gpu_kern_sum,nvtx_sum")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (SHARED / "oracle" / "mock_cuda_gpu_kern_sum.csv").read_text() in proc.stdout  # NVIDIA's own
    assert "no NVTX data" in proc.stderr  # says why nvtx_sum is empty


def test_old_schema_2022_loads():
    path = SHARED / "older" / "nsys2022.2_vectoradd.sqlite"
    if not path.exists():
        pytest.skip("shared traces absent")
    proc = run_cli("stats", path, "-f", "csv", "-r", "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum")
    assert proc.returncode == 0, proc.stderr
    # 2022.2 has no ENUM tables: copy kinds still get CUPTI's names (11, 12 are the unified-memory
    # migrations), with totals straight from the table, and the output says how.
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    totals = dict(con.execute("SELECT copyKind, sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
    cupti = {11: "Unified Host-to-Device", 12: "Unified Device-to-Host"}
    for kind, total in totals.items():
        assert f",{total}," in proc.stdout and f"[CUDA memcpy {cupti[kind]}]" in proc.stdout
    assert "ENUM_CUDA_MEMCPY_OPER" in proc.stderr


def test_profile_is_opened_read_only_and_nothing_written_beside_it(tmp_path):
    src = _any_trace()
    path = tmp_path / src.name
    path.write_bytes(src.read_bytes())
    path.chmod(0o444)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = run_cli("stats", path, "-f", "csv")
    assert proc.returncode == 0, proc.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_output_files_never_clobbered(tmp_path):
    src = _any_trace()
    prefix = tmp_path / "out"
    first = run_cli("stats", src, "-r", "cuda_api_sum", "-f", "csv", "-o", prefix)
    assert first.returncode == 0, first.stderr
    target = tmp_path / "out_cuda_api_sum.csv"
    assert target.read_text().startswith("Time (%),Total Time (ns),Num Calls")
    target.write_text("precious\n")
    second = run_cli("stats", src, "-r", "cuda_api_sum", "-f", "csv", "-o", prefix)
    assert_one_line_error(second, "exists")
    assert target.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
