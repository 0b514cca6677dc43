"""The render layer on its own: numbers read one way (missing included), one table gives the
same cells in all four formats, and the report page is a list of section functions."""
from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from conftest import SAMPLES

from nsight_tui.render import numbers, safe, tables

MISSING_VALUES = [None, float("nan"), pd.NA, pd.NaT]


@pytest.mark.parametrize("fn", [numbers.ms, numbers.us, numbers.ns, numbers.duration, numbers.seconds,
                                numbers.percent, numbers.plain_percent, numbers.times, numbers.fixed,
                                numbers.count, numbers.mean_count, numbers.instances, numbers.bytes_,
                                numbers.flops, numbers.flop_rate, numbers.byte_rate])
def test_missing_reads_one_way(fn):
    for v in MISSING_VALUES:
        assert fn(v) == "–"


def test_numbers():
    assert numbers.ms(1_234_567_891) == "1,234.568" and numbers.ms(1_234_567, digits=2) == "1.23"
    assert numbers.us(1_234_567) == "1,234.6" and numbers.ns(1234567) == "1,234,567"
    assert [numbers.duration(v) for v in (850, 12_345, 3_180_000, 9_800_000_000)] == \
        ["850 ns", "12.3 µs", "3.18 ms", "9.80 s"]
    assert numbers.seconds(1_500_000_000) == "1.500000"
    assert numbers.percent(0.2371) == "23.7%" and numbers.percent(0.5, 0) == "50%"
    assert numbers.plain_percent(23.71) == "23.7%" and numbers.times(2.3149) == "2.31x"
    assert numbers.count(2170) == "2,170" and numbers.instances(5) == "×5"
    assert numbers.bytes_(512) == "512 B" and numbers.bytes_(1536) == "1.50 KiB" and numbers.bytes_(3 * 2**30) == "3.00 GiB"
    assert numbers.flops(4.29e9) == "4.29 GFLOP" and numbers.flop_rate(312e12) == "312.00 TFLOP/s"
    assert numbers.byte_rate(3.35e12) == "3.35 TB/s"
    assert numbers.quantity(0.25, "fraction") == "25.0%" and numbers.quantity(12_345, "ns") == "12.3 µs"
    assert numbers.exact(float("nan")) is None and numbers.exact(1.23456) == 1.235


ROWS = [["gemm|a <b>", 1500, 12.5, None], ["x\x1by", 7, 0.1, "[bold]z[/]"]]
HEADERS = ["name", "count", "ms", "note"]


def test_one_table_four_formats():
    # CSV: the same cells, text made visible, numbers untouched
    got = list(csv.reader(io.StringIO(tables.csv(HEADERS, ROWS))))
    assert got == [HEADERS, ["gemm|a <b>", "1500", "12.5", ""], ["x\\x1by", "7", "0.1", "[bold]z[/]"]]
    # JSON: values as they are
    doc = json.loads(tables.json_table(HEADERS, ROWS, title="t"))
    assert doc["columns"] == HEADERS and doc["rows"] == ROWS and doc["title"] == "t"
    # Markdown: escaped text, numeric columns right-aligned
    md = tables.markdown(HEADERS, ROWS, title="T", notes=["n"]).splitlines()
    assert md[0] == "### T" and md[2] == "| name | count | ms | note |" and md[3] == "|---|---:|---:|---|"
    assert md[4] == "| gemm\\|a \\<b\\> | 1500 | 12.5 |  |"
    assert md[5] == "| x\\\\x1by | 7 | 0.1 | \\[bold\\]z\\[/\\] |" and md[-1] == "_n_"
    # terminal: every cell literally, no markup parsed, no raw ESC
    term = tables.terminal(HEADERS, ROWS, title="T [x]")
    assert "\x1b" not in term and "x\\x1by" in term and "[bold]z[/]" in term and "T [x]" in term
    for fmt in tables.FORMATS:
        assert tables.render(tables.Table(HEADERS, ROWS, "T"), fmt)


def test_safe_is_linear_and_identity_on_plain_names():
    name = "void at::native::vectorized_elementwise_kernel<4, float>(int)"
    assert safe.visible(name) is name
    big = ("a\x1b" * 500_000)
    assert safe.visible(big) == "a\\x1b" * 500_000  # 1 MB: one regex pass


def test_report_is_a_list_of_sections():
    from nsight_tui.parsers import Profile
    from nsight_tui.render import report
    from nsight_tui.render.document import document

    built = Profile.open(SAMPLES / "small_ctx128.sqlite").report()
    answers = document(built)
    page = report.single_markdown(built)
    assert page == "\n".join(b for s in report.SECTIONS for b in s(answers))
    heads = [line for line in page.splitlines() if line.startswith("## ")]
    assert heads[:5] == ["## (a) Forward time: CPU (NVTX span) vs GPU (its work's span) vs Python",
                         "## (b) Most expensive kernels: forward and backward",
                         "## (c) Non-GEMM kernels that matter in forward",
                         "## (d) Kernel families: forward vs the whole training step",
                         "## (e) Softmax vs the attention matmuls"]

    def idle(a):  # a new section: one function, one line
        return ["## (f) Idle", f"{a['ranges']['step']['instances']} steps"]

    extended = report.single_markdown(built, [*report.SECTIONS, idle])
    assert extended.startswith(page) and extended.endswith(f"## (f) Idle\n{answers['ranges']['step']['instances']} steps")
