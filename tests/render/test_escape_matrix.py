"""Every command x every format x every hostile payload: a name from the profile may
carry terminal escapes (CSI, OSC 52 clipboard writes, OSC 8 links), CR/LF/NUL, a C1 CSI
(U+009B), a bidi override (U+202E) or Markdown/HTML, and none of it may reach stdout or a
file raw. JSON may carry them, escaped as JSON escapes them (\\uXXXX), and keeps the name whole.

Each payload is planted in a copy of the committed forward-only sample, in a kernel's name, an
NVTX range's name and the GPU's name at once, each name ending in a sentinel that must show up,
so a name that never reached the output cannot pass. Expectations are written here from the
characters themselves, never from the code's escaper.
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import SAMPLES, mutated_copy
from helpers.xz_samples import plain

from nsight_tui.cli import main

SAMPLE = plain(SAMPLES / "small_ctx128_fwd.sqlite.xz")
PAYLOADS = {
    "csi": "\x1b[2J\x1b[31m",
    "osc52": "\x1b]52;c;SGVsbG8=\x07",
    "osc8": "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",
    "cr": "over\rwrite",
    "lf": "line\nINJECTED",
    "nul": "a\x00b",
    "c1_csi": "\x9b2J",
    "bidi": "\u202eevil",
    "markdown": "<script>alert(1)</script>|[x](http://evil.example/)",
}
SENTINEL = "ZQX"
# C0 (but newline and tab, the documents' own layout), DEL, C1, bidi embeddings/overrides/isolates, U+2028/9
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
TOP_KERNEL = """SELECT k.demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL k GROUP BY k.demangledName
                ORDER BY sum(k.end - k.start) DESC LIMIT 1"""


def _plant(tmp_path: Path, key: str) -> Path:
    payload = PAYLOADS[key]
    kid = sqlite3.connect(SAMPLE).execute(TOP_KERNEL).fetchone()[0]
    path = mutated_copy(
        tmp_path, f"hostile_{key}",
        # the top kernel keeps its name in front (still a GEMM), the softmax range and the GPU get the payload
        f"UPDATE StringIds SET value = value || '{_sql(payload)}{SENTINEL}k' WHERE id = {kid}",
        f"UPDATE StringIds SET value = 'computing_softmax{_sql(payload)}{SENTINEL}r' WHERE value = 'computing_softmax'",
        f"UPDATE TARGET_INFO_GPU SET name = name || '{_sql(payload)}{SENTINEL}g'",
        src=SAMPLE)
    check = sqlite3.connect(path)  # planted whole (NUL included), or the test would prove nothing
    assert check.execute("SELECT count(*) FROM StringIds WHERE instr(value, ?) > 0", (payload + SENTINEL,)).fetchone()[0] == 2
    check.close()
    return path


def _sql(text: str) -> str:
    """`text` as a SQL expression inside a '...' literal: every character by its code point."""
    return "' || " + " || ".join(f"char({ord(c)})" for c in text) + " || '"


@pytest.fixture(scope="module", autouse=True)
def _loads_through_the_cache(tmp_path_factory):
    """What is tested here is what the commands print, not how they read the file: each hostile copy
    is read from its file once and from the per-user cache after (a folder of this module; reports
    are byte-identical either way, tests/core/test_cache.py), the planted names with it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        mp.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
        yield


@pytest.fixture(scope="module", params=sorted(PAYLOADS))
def hostile(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, _plant(tmp_path_factory.mktemp(request.param), request.param)


def _run(capsys, *args) -> str:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    for text, where in ((out, "stdout"), (err, "stderr")):
        raw = RAW.search(text)
        assert raw is None, f"raw {raw.group()!r} on {where} of {args}"
    return out


def _check_text(text: str, key: str, fmt: str, where: str) -> None:
    raw = RAW.search(text)
    assert raw is None, f"raw {raw.group()!r} in {where}"
    assert not any(line.startswith("INJECTED") for line in text.splitlines()), f"a name broke a line in {where}"
    if fmt == "json":
        names = [s for s in _strings(json.loads(text)) if SENTINEL in s]
        assert names, f"no planted name in {where}"
        assert any(PAYLOADS[key] + SENTINEL in s for s in names), f"JSON did not keep the name whole in {where}"
        return
    assert SENTINEL in text, f"no planted name in {where}"
    if fmt == "markdown":
        assert "<script>" not in text and "[x](http" not in text, f"Markdown/HTML live in {where}"
        assert not re.search(r"(?<!\\)\|" + SENTINEL, text), f"a bare | before a name in {where}"
        if key == "markdown":
            assert "\\<script\\>" in text and "\\[x\\](http://evil.example/)" in text


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "json"])
def test_stats(hostile, tmp_path, capsys, fmt):
    key, path = hostile
    out = _run(capsys, "stats", path, "-f", fmt, "-r", "cuda_gpu_kern_sum,nvtx_sum,nvtx_kern_sum")
    _check_text(out, key, fmt, f"stats -f {fmt} (stdout)")
    _run(capsys, "stats", path, "-f", fmt, "-r", "cuda_gpu_kern_sum", "-o", tmp_path / "out")
    written = next(tmp_path.glob("out_cuda_gpu_kern_sum.*"))
    _check_text(written.read_text(encoding="utf-8"), key, fmt, f"stats -f {fmt} -o")


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_report(hostile, tmp_path, capsys, fmt):
    key, path = hostile
    out = _run(capsys, "report", path, "-f", fmt)
    _check_text(out, key, fmt, f"report -f {fmt}")
    gpu = PAYLOADS[key] + SENTINEL + "g"
    if fmt == "json":
        assert any(gpu in s for s in _strings(json.loads(out))), "the GPU's name is not in the report"
    else:
        assert SENTINEL + "g" in out, "the GPU's name is not in the report"
    _run(capsys, "report", path, "-f", fmt, "-o", tmp_path / f"r.{fmt}")
    _check_text((tmp_path / f"r.{fmt}").read_text(encoding="utf-8"), key, fmt, f"report -f {fmt} -o")


@pytest.mark.parametrize("fmt", ["markdown", "csv", "json"])
def test_diff(hostile, tmp_path, capsys, fmt):
    key, path = hostile
    for a, b in ((path, SAMPLE), (SAMPLE, path)):
        out = _run(capsys, "diff", a, b, "-f", fmt)
        _check_text(out, key, fmt, f"diff -f {fmt}")
    _run(capsys, "diff", path, SAMPLE, "-f", fmt, "-o", tmp_path / f"d.{fmt}")
    _check_text((tmp_path / f"d.{fmt}").read_text(encoding="utf-8"), key, fmt, f"diff -f {fmt} -o")


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_ranks(hostile, capsys, fmt):
    key, path = hostile
    out = _run(capsys, "ranks", path, "-f", fmt)
    raw = RAW.search(out)
    assert raw is None, f"raw {raw.group()!r} in ranks -f {fmt}"
    if fmt == "json":
        json.loads(out)
    else:
        assert "<script>" not in out and "[x](http" not in out
