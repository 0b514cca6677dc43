"""Shapes that used to hang `stats` and `report`: ranges nested 3,000 deep,
100k distinct range names, a 10 MB kernel name and a 10 MB range name. Each must finish
(the test has no timing assertion: a quadratic path would not end) and say the same as
SQL over the same copy."""
from __future__ import annotations

import csv
import io
import sqlite3
import sys

from conftest import mutated_copy
from helpers.cli import run_main

MAIN = ("(SELECT globalTid g, min(start) s, max(end) e FROM NVTX_EVENTS WHERE eventType = 59 "
        "GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1)")


def csv_rows(text):
    csv.field_size_limit(sys.maxsize)  # a 10 MB name is one field
    return list(csv.reader(io.StringIO(text)))


def test_ranges_nested_3000_deep(tmp_path):
    depth = 3000
    # around one attention block: every level holds that block's kernels
    path = mutated_copy(tmp_path, "deep", f"""INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text)
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < {depth - 1}),
        a AS (SELECT e.start s, e.end e, e.globalTid g FROM NVTX_EVENTS e JOIN StringIds n ON n.id = e.textId
              WHERE n.value = 'scaled_dot_product_attention' ORDER BY e.start LIMIT 1 OFFSET 30)
        SELECT a.s - {depth} + i, a.e + {depth} - i, 59, a.g, printf('level_%04d', i) FROM k, a""")
    table = run_main("stats", path, "--attribution", "nsys", "-r", "nvtx_gpu_proj_sum,nvtx_kern_sum")
    assert table.returncode == 0, table.stderr
    proc = run_main("stats", path, "--attribution", "nsys", "-f", "csv", "-r", "nvtx_gpu_proj_sum")
    assert proc.returncode == 0, proc.stderr
    rows = {r[0]: r for r in csv_rows(proc.stdout)[1:]}
    # by construction: step_N (0) > forward (1) > level_0000 (2) > ... > level_2999 > the attention block
    assert float(rows[":forward"][12]) == 1.0
    for i in (0, 1, depth // 2, depth - 1):
        assert float(rows[f":level_{i:04d}"][12]) == 2 + i
        assert float(rows[f":level_{i:04d}"][13]) == 1.0  # one child with GPU work each
    assert "level_2999" in table.stdout
    report = run_main("report", path)
    assert report.returncode == 0, report.stderr


def test_100k_distinct_range_names(tmp_path):
    n = 100_000
    path = mutated_copy(tmp_path, "names", f"""INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text)
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < {n - 1})
        SELECT t.e + 10 + i * 10, t.e + 15 + i * 10, 59, t.g, 'name_' || i FROM k, {MAIN} t""")
    proc = run_main("stats", path, "-r", "nvtx_sum")
    assert proc.returncode == 0, proc.stderr
    assert sum(1 for line in proc.stdout.splitlines() if " :name_" in line) == n
    assert run_main("report", path).returncode == 0


def test_10mb_kernel_and_range_names(tmp_path):
    size = 10_000_000
    filler = f"substr(replace(hex(zeroblob({size // 2})), '0', 'b'), 1, {size})"
    path = mutated_copy(
        tmp_path, "long",
        f"UPDATE StringIds SET value = value || {filler} WHERE id = "
        "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1)",
        f"UPDATE StringIds SET value = value || {filler} WHERE id = "
        "(SELECT textId FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY start DESC LIMIT 1)")
    con = sqlite3.connect(path)
    # grouped by the name's id, its text joined to the one row left: grouping the joined texts
    # copies the 10 MB name into SQLite's sorter once per launch of that kernel (50 s)
    kernel, calls, total = con.execute(
        "SELECT s.value, g.calls, g.total FROM (SELECT demangledName id, count(*) calls, sum(end - start) total "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY demangledName ORDER BY count(*) DESC LIMIT 1) g "
        "JOIN StringIds s ON s.id = g.id").fetchone()
    con.close()
    proc = run_main("stats", path, "-f", "csv", "-r", "cuda_gpu_kern_sum")
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in csv_rows(proc.stdout)[1:] if r[-1] == kernel)  # whole in CSV
    assert (int(row[1]), int(row[2])) == (total, calls)
    table = run_main("stats", path, "-r", "cuda_gpu_kern_sum,nvtx_sum")
    assert table.returncode == 0, table.stderr
    marker = f"(+{len(kernel) - 4096:,} characters; -f csv prints it whole)"  # shortened, folded over lines
    assert "".join(marker.split()) in "".join(table.stdout.split())
    assert len(table.stdout) < 200_000
    report = run_main("report", path)
    assert report.returncode == 0, report.stderr
