"""tests/helpers/xz_samples.py's `plain`, the one way tests read a committed `.sqlite.xz` sample: the bytes
it hands back are what xz's own decoder (lzma) makes of the sample, under the sample's name, never
beside it; the cache follows the xz file's content, not its name; an interrupted or concurrent
decompression never leaves a half file where a reader looks."""
from __future__ import annotations

import hashlib
import lzma
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import xz_samples
from conftest import FINDINGS, SAMPLES
from helpers.xz_samples import plain

SAMPLE = FINDINGS / "small_ctx128_host-sleep.sqlite.xz"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own (tempfile.gettempdir() answers tmp_path), so each test starts cold."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return xz_samples.cache_dir()


def test_plain_is_the_decompressed_sample_under_its_own_name_outside_the_tree(cache):
    got = plain(SAMPLE)
    assert got.name == "small_ctx128_host-sleep.sqlite" and got.parent.parent == cache
    assert SAMPLES not in got.parents
    assert hashlib.sha256(got.read_bytes()).digest() == hashlib.sha256(lzma.decompress(SAMPLE.read_bytes())).digest()
    assert plain(SAMPLE) == got  # cached: the second call finds it
    assert sorted(p.name for p in got.parent.iterdir()) == [got.name]  # no partial left


def test_a_plain_sqlite_path_comes_back_as_it_is(cache):
    path = SAMPLES / "small_ctx128.sqlite"
    assert plain(path) == path and plain(str(path)) == path
    assert not cache.exists()


def test_the_cache_follows_the_content_not_the_name(cache, tmp_path):
    same = tmp_path / "elsewhere" / SAMPLE.name
    same.parent.mkdir()
    same.write_bytes(SAMPLE.read_bytes())
    assert plain(same) == plain(SAMPLE)
    other = tmp_path / "recaptured" / SAMPLE.name  # same name, other bytes: a fresh copy
    other.parent.mkdir()
    other.write_bytes(lzma.compress(b"not the same export"))
    assert plain(other) != plain(SAMPLE) and plain(other).read_bytes() == b"not the same export"


def test_an_interrupted_decompression_leaves_nothing_a_reader_would_open(cache, monkeypatch):
    def torn(src, dst, length):
        dst.write(src.read(4096))
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(xz_samples.shutil, "copyfileobj", torn)
        plain(SAMPLE)
    (folder,) = cache.iterdir()
    assert list(folder.iterdir()) == []
    assert plain(SAMPLE).read_bytes() == lzma.decompress(SAMPLE.read_bytes())


def test_processes_racing_on_a_cold_cache_all_get_the_whole_file(tmp_path):
    tests = Path(__file__).resolve().parents[1]
    code = f"import sys; sys.path.insert(0, {str(tests)!r}); from helpers.xz_samples import plain; print(plain({str(SAMPLE)!r}))"
    env = {"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outs = {p.communicate()[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    (path,) = outs
    assert Path(path).read_bytes() == lzma.decompress(SAMPLE.read_bytes())
    assert [p.name for p in Path(path).parent.iterdir()] == [Path(path).name]
