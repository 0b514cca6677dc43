"""The core's front door (parsers.api): a real sample opened through `Profile`, its figures against
SQL written here over the export; `Options` checked once; one error root the front ends catch."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from conftest import SAMPLES
from nsight_tui.parsers import NsightError, Options, OptionsError, Profile, TraceError
from nsight_tui.render.document import document
from nsight_tui.render.report import single_json
from helpers import cli_process

SMALL = SAMPLES / "small_ctx128.sqlite"

# every NVTX push/pop range with its text (inline or registered), on the CPU's clock
RANGES = """
SELECT e.start, e.end, COALESCE(e.text, s.value) AS text
FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id
WHERE e.eventType = 59 AND e.end IS NOT NULL
"""


def _sql(query: str, *args):
    con = sqlite3.connect(f"file:{SMALL}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def profile() -> Profile:
    return Profile.open(SMALL)


def test_the_step_through_the_front_door_is_the_exports_step_ranges(profile):
    steps = _sql(f"SELECT count(*), sum(end - start) FROM ({RANGES}) WHERE text GLOB 'step_[0-9]*'")
    warmups = _sql(f"SELECT count(*) FROM ({RANGES}) WHERE text GLOB 'warmup_[0-9]*'")
    report = profile.report()
    step = report.ranges["step"]
    assert (step.instances, step.range_ns) == steps[0]  # CPU clock: the NVTX spans, summed
    assert report.warmup["step"].instances == warmups[0][0]
    assert report.file == str(SMALL) and report.attribution == "process"


def test_the_kernel_summary_through_the_front_door_is_the_kernel_tables(profile):
    count, total = _sql("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    (kern,) = profile.nsys_reports(["cuda_gpu_kern_sum"])
    column = {h: i for i, h in enumerate(kern.headers)}
    assert sum(int(r[column["Instances"]]) for r in kern.rows) == count
    assert sum(int(r[column["Total Time (ns)"]]) for r in kern.rows) == total


def test_the_ranges_follow_the_options_attribution(profile):
    nsys = profile.with_options(Options(attribution="nsys"))
    assert nsys.trace is profile.trace  # the same load, read another way
    # NVIDIA's rule credits a range only with its own thread's launches: backward (autograd's thread) holds less
    own = nsys.report().ranges["backward"].kernel_ns
    assert own < profile.report().ranges["backward"].kernel_ns


def test_the_json_document_is_the_clis(profile):
    proc = cli_process.run(["report", str(SMALL), "-f", "json"], text=True, check=True)
    assert proc.stdout == single_json(profile.report())
    doc = json.loads(proc.stdout)
    assert list(doc) == list(document(profile.report()))
    assert not any(k.startswith("_") for k in doc)  # nothing private travels with the document


@pytest.mark.parametrize(("values", "option"), [({"attribution": "thread"}, "attribution"),
                                                ({"peak_tflops": 0}, "peak_tflops"),
                                                ({"peak_gbps": -5.0}, "peak_gbps")])
def test_options_out_of_range_are_one_error_naming_the_option(values, option):
    with pytest.raises(OptionsError) as err:
        Options(**values)
    assert err.value.option == option and str(err.value).startswith(option + " ")
    assert isinstance(err.value, NsightError) and "\n" not in str(err.value)
    assert err.value.said_as("--flag").startswith("--flag must be")


def test_a_bad_flops_file_fails_when_the_options_are_made(tmp_path):
    bad = tmp_path / "flops.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="not JSON"):
        Options(flops_file=str(bad))


def test_every_error_meant_for_the_user_has_one_root(tmp_path):
    from nsight_tui.capture.errors import CaptureError
    from nsight_tui.mcp.answers import BadRequest
    from nsight_tui.mcp.served import NotServed

    for cls in (TraceError, OptionsError, CaptureError, BadRequest, NotServed):
        assert issubclass(cls, NsightError), cls
    with pytest.raises(NsightError):
        Profile.open(tmp_path / "missing.sqlite")


def test_the_front_door_names_are_light_to_import():
    """The error root and the options come without the readers (pandas, numpy): the command line's
    first lines import them before any work."""
    code = ("import sys; from nsight_tui.parsers import NsightError, TraceError; "
            "print('pandas' in sys.modules or 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
