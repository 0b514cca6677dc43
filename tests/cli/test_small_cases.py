"""The smaller cases of bad input, each a command line or a mutated copy of a committed sample:
`stats -r ',,,'` exited 0 saying nothing; `stats -o ''` wrote `_nvtx_sum.txt` into the working
folder; `capture --out /dev/full --dry-run` exited 0; a 1 MB thread name was printed whole in the
`note: main thread:` line; `stats -f json` with several reports wrote a stream of documents; a
recursive view in place of a table hung `stats` and `report`."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess

import pytest

from conftest import REPORTS, SAMPLES, mutated_copy
from helpers.xz_samples import plain
from helpers import cli_process

SRC = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")


def run_cli(*args, cwd=None):
    # the timeout only stops a hang from stalling the suite; nothing here is timed
    return cli_process.run(args, text=True,
                           timeout=300, stdin=subprocess.DEVNULL, cwd=cwd)


def one_line(proc, code=2):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("reports", [",,,", " , ", ""])
def test_stats_no_report_named(reports):
    proc = run_cli("stats", SRC, "-r", reports)
    one_line(proc)
    assert "no report named" in proc.stderr


@pytest.mark.parametrize("prefix", ["", "out/"])
def test_stats_output_prefix_without_a_name(tmp_path, prefix):
    (tmp_path / "out").mkdir()
    proc = run_cli("stats", SRC, "-o", prefix, cwd=tmp_path)
    one_line(proc)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out"]  # nothing written anywhere


@pytest.mark.parametrize("out", ["/dev/full", "{file}/sub"])
def test_capture_dry_run_refuses_an_output_that_is_no_folder(tmp_path, out):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    proc = cli_process.run(["capture", "--out", out.format(file=blocker),
                           "--dry-run", "--nsys", "/bin/true"], text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a folder" in proc.stderr


def test_capture_dry_run_into_a_new_folder_still_works(tmp_path):
    proc = cli_process.run(["capture", "--out", str(tmp_path / "new" / "deeper"),
                           "--dry-run", "--nsys", "/bin/true"], text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "new").exists()  # a dry run makes nothing


def test_huge_thread_name_is_cut_in_the_note(tmp_path):
    name = "T" * 1_000_000
    path = mutated_copy(tmp_path, "huge_thread", (
        "UPDATE StringIds SET value = '" + name + "' WHERE id IN (SELECT nameId FROM ThreadNames)"))
    proc = run_cli("stats", path, "-r", "nvtx_sum")
    assert proc.returncode == 0, proc.stderr[:2000]
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("note: main thread:"))
    assert len(line) < 1000, len(line)
    assert line.startswith("note: main thread: " + "T" * 200 + "…(+")
    cut = re.search(r"…\(\+([\d,]+) characters\)", line)
    assert cut and 200 + int(cut.group(1).replace(",", "")) >= len(name)  # the label: the name and its tid


def test_stats_json_several_reports_is_one_document():
    proc = run_cli("stats", SRC, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # one document: json.loads refuses a stream
    assert [r["report"] for r in doc["reports"]] == list(REPORTS)


def test_recursive_view_in_place_of_a_table(tmp_path):
    con = sqlite3.connect(SRC)
    cols = [r[1] for r in con.execute("PRAGMA table_info(TARGET_INFO_GPU)")]
    con.close()
    select = ", ".join("'gpu' AS name" if c == "name" else f"x AS {c}" for c in cols)
    path = mutated_copy(tmp_path, "view", "DROP TABLE TARGET_INFO_GPU", (
        "CREATE VIEW TARGET_INFO_GPU AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        f"SELECT {select} FROM r"))
    for command in ("stats", "report"):
        proc = run_cli(command, path)
        assert proc.returncode == 0, proc.stderr
        assert "note: views are not read" in proc.stderr and "TARGET_INFO_GPU" in proc.stderr
