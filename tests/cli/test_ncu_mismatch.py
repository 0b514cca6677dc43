"""`nsight-tui ncu REPORT --trace OTHER.sqlite`: a report of another workload or GPU joined to an
export (its kernel names recur, so many pair up) is said, on stderr, in JSON and in the TUI's ncu
view; each own pair is not. The truth is read here independently: the device from NVIDIA's own
reader (ncu_report) against the export's TARGET_INFO_GPU (SQL), and whether the report's mangled
kernel names are the first kernels the export launched between cudaProfilerStart and
cudaProfilerStop (SQL, launch order) — a report of the same workload's window is exactly that
(ncu -c may stop it early), another model's is not."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers.ncu_pair import BF16_EXPORT_XZ, BF16_STEM, EXPORT_XZ, STEM, report_xz, reports_read_once, unpack
from nsight_tui.cli import main

WINDOW_NAMES = """
WITH w AS (SELECT min(r.start) AS s, (SELECT min(q.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME q JOIN StringIds n
                                       ON n.id = q.nameId WHERE n.value LIKE 'cudaProfilerStop%'
                                       AND q.start > min(r.start)) AS e
           FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId
           WHERE n.value LIKE 'cudaProfilerStart%')
SELECT m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
JOIN StringIds m ON m.id = k.mangledName, w
WHERE r.start >= w.s AND r.start <= w.e ORDER BY r.start, k.start
"""


@pytest.fixture(scope="module", autouse=True)
def _each_report_read_once():
    yield from reports_read_once()


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ncu_mismatch")
    return {stem: (unpack(report_xz(stem), folder / f"{stem}.ncu-rep"), unpack(xz, folder / f"{stem}.sqlite"))
            for stem, xz in ((STEM, EXPORT_XZ), (BF16_STEM, BF16_EXPORT_XZ))}


def _truth(report: Path, export: Path) -> tuple[str, list[str], bool, bool]:
    """(the report's device, the export's GPUs, devices differ, names not the window's first ones)."""
    import ncu_report

    ctx = ncu_report.load_report(str(report))
    actions = [ctx.range_by_idx(i).action_by_idx(j) for i in range(ctx.num_ranges())
               for j in range(ctx.range_by_idx(i).num_actions())]
    device = actions[0].metric_by_name("device__attribute_display_name").as_string()
    names = [a.name(ncu_report.IAction.NameBase_MANGLED) for a in actions]
    con = sqlite3.connect(f"{export.resolve().as_uri()}?mode=ro", uri=True)
    gpus = [n for (n,) in con.execute("SELECT name FROM TARGET_INFO_GPU")]
    window = [n for (n,) in con.execute(WINDOW_NAMES)]
    con.close()
    return device, gpus, device not in gpus, window[: len(names)] != names


@pytest.mark.parametrize("report_stem, export_stem", [(STEM, STEM), (BF16_STEM, BF16_STEM), (STEM, BF16_STEM),
                                                      (BF16_STEM, STEM)])
def test_a_report_of_another_workload_or_gpu_is_said_and_its_own_export_is_not(pairs, capsys, report_stem,
                                                                                export_stem):
    report, export = pairs[report_stem][0], pairs[export_stem][1]
    device, gpus, other_device, other_names = _truth(report, export)
    assert (report_stem != export_stem) == other_device == other_names  # the committed pairs are so
    code = main(["ncu", str(report), "--trace", str(export), "-f", "json"])
    out = capsys.readouterr()
    assert code == 0  # nothing refused: the join stands, said to be doubtful
    doc = json.loads(out.out)
    assert doc["mismatch"]["device"] == other_device
    assert doc["mismatch"]["report_device"] == device and doc["mismatch"]["export_gpus"] == gpus
    assert doc["mismatch"]["sequence"] == other_names
    warned = [line for line in out.err.splitlines() if line.startswith("warning:")]
    if other_device or other_names:
        assert len(warned) == 1 and len(out.err.splitlines()) == 1  # one line
        assert f"profiled on {device}" in warned[0] and "launch sequence" in warned[0]
        assert len(doc["warnings"]) == 2
    else:
        assert not warned and doc["warnings"] == [] and doc["mismatch"]["agreement"] == 1.0

