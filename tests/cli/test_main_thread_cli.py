"""`--main-thread` on stats and report: the thread named is used, the report says which thread is
main and on what numbers (checked against SQL), a name that matches nothing is one line, exit 2."""
from __future__ import annotations

import json

from helpers import process_sql
from helpers.cli import run_main
from conftest import shared_trace
from helpers import cli_process


def run_cli(*args):
    return cli_process.run(args, text=True, timeout=120)


def test_report_json_names_the_main_thread_and_its_numbers():
    path = shared_trace("small_ctx128_threads")
    con = process_sql.connect(path)
    (main,) = process_sql.main_threads(con).values()
    framed = con.execute("""SELECT count(*) FROM launch l WHERE EXISTS (SELECT 1 FROM rng
                            WHERE rng.gtid = ? AND rng.s <= l.cs AND l.cs <= rng.e)""", (main,)).fetchone()[0]
    total = con.execute("SELECT count(*) FROM launch").fetchone()[0]
    own = con.execute("SELECT count(*) FROM launch WHERE gtid = ?", (main,)).fetchone()[0]
    done = run_main("report", path, "-f", "json")
    assert done.returncode == 0, done.stderr
    (m,) = json.loads(done.stdout)["main_threads"]
    assert (m["tid"], m["framed_ops"], m["process_ops"], m["own_ops"], m["picked_by"]) == (
        main & 0xFFFFFF, framed, total, own, "auto")
    assert own < total - own  # the autograd thread launched more, yet is not main


def test_stats_main_thread_option():
    path = shared_trace("small_ctx128_threads")
    con = process_sql.connect(path)
    (main,) = process_sql.main_threads(con).values()
    (other,) = [g for (g,) in con.execute("SELECT DISTINCT gtid FROM rng") if g != main]
    done = run_main("stats", path, "-r", "nvtx_sum", "--main-thread", other & 0xFFFFFF)
    assert done.returncode == 0
    assert f"note: main thread: python3 ({other & 0xFFFFFF}): named by --main-thread" in done.stderr
    bad = run_cli("stats", path, "--main-thread", "nosuchthread")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert next(ln for ln in bad.stderr.splitlines() if "nosuchthread" in ln).startswith("nsight-tui: --main-thread")
