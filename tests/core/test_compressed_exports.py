"""Exports compressed whole (`.sqlite.xz`, `.gz`, `.bz2`) open as they are (parsers/read/compressed.py):
the same answers as the plain export, the compressed file only read and nothing written beside it,
the decompressed copy in the user's cache folder and reused while the file is unchanged, bad input
in one line."""
from __future__ import annotations

import bz2
import gc
import gzip
import hashlib
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES
from helpers import cli_process
from helpers.xz_samples import plain

from nsight_tui.parsers.read import cache, compressed
from nsight_tui.parsers.read.errors import TraceError

PAIR = SAMPLES / "replay" / "pin_repeats" / "r2_small_ctx128_pageable-input.sqlite.xz"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NSIGHT_TUI_NO_CACHE"}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**env, "NSIGHT_TUI_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path / "tmp"), **extra}


def _state(folder: Path) -> dict[str, tuple[str, int]]:
    """Each file of the folder: its content hash and mtime (ns)."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _copy_compressed(tmp_path: Path, opener, suffix: str) -> Path:
    """The committed pair's base compressed another way, in a folder of its own (written here with the
    standard library from the plain export the tests' own helper decompresses)."""
    folder = tmp_path / f"in{suffix}"
    folder.mkdir()
    out = folder / f"base.sqlite{suffix}"
    with opener(out, "wb") as fh:
        fh.write(plain(PAIR).read_bytes())
    return out


@pytest.mark.parametrize("opener, suffix", [(lzma.open, ".xz"), (gzip.open, ".gz"), (bz2.open, ".bz2")],
                         ids=["xz", "gzip", "bzip2"])
def test_a_compressed_export_answers_as_the_plain_one(tmp_path, opener, suffix):
    src = _copy_compressed(tmp_path, opener, suffix)
    before = _state(src.parent)
    env = _env(tmp_path)
    args = ["whatif", "fix:pageable-memcpy", "-f", "json"]
    got = cli_process.run([args[0], src, *args[1:]], text=True, env=env, timeout=300)
    want = cli_process.run([args[0], plain(PAIR), *args[1:]], text=True, env=env, timeout=300)
    assert got.returncode == want.returncode == 0, got.stderr
    a, b = json.loads(got.stdout), json.loads(want.stdout)
    for key in ("baseline", "predicted", "saving_ns", "holds_step"):
        assert a[key] == b[key], key
    assert a["file"] == src.name  # the file given, not its decompressed copy
    # the compressed file only read, nothing written beside it
    assert _state(src.parent) == before
    # its decompressed copy in the cache folder, the file's name without the suffix
    copies = cache.plain_copies(tmp_path / "cache")
    assert [p.name for p in copies] == ["base.sqlite"]
    assert copies[0].read_bytes() == plain(PAIR).read_bytes()
    # `nsight-tui cache` lists it apart from the cached files, and `cache clear` removes it
    listed = cli_process.run(["cache"], text=True, env=env, timeout=60).stdout
    assert "in 1 decompressed copy of exports compressed whole" in listed, listed
    assert cli_process.run(["cache", "clear"], text=True, env=env, timeout=60).returncode == 0
    assert not (tmp_path / "cache" / cache.PLAIN).exists()


def test_the_copy_is_reused_while_the_file_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    src = _copy_compressed(tmp_path, lzma.open, ".xz")
    first = compressed.plain_export(src)
    assert first.parent.parent == tmp_path / "cache" / cache.PLAIN
    ino = first.stat().st_ino
    assert compressed.plain_export(src) == first and first.stat().st_ino == ino
    # the same file rewritten (new mtime): decompressed again, into another key
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    again = compressed.plain_export(src)
    assert again != first and again.read_bytes() == first.read_bytes()
    # a plain export, a folder and a missing path come back as given
    for p in (plain(PAIR), tmp_path, tmp_path / "absent.sqlite"):
        assert compressed.plain_export(p) == p


def _tiny_export(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    con.commit()
    con.close()
    return path


def test_at_most_keep_copies_stay(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()
    made = []
    for i in range(compressed.KEEP + 3):
        src = tmp_path / f"t{i}.sqlite.gz"
        src.write_bytes(gzip.compress(raw))
        made.append(compressed.plain_export(src))
        os.utime(made[-1].parent, ns=(i * 10**9, i * 10**9))  # used in this order
    left = sorted(cache.plain_copies(tmp_path / "cache"))
    assert len(left) == compressed.KEEP
    assert made[-1] in left and made[0] not in left
    # `nsight-tui cache clear` takes them too
    n, size = cache.clear(tmp_path / "cache")
    assert size >= compressed.KEEP * len(raw) and not (tmp_path / "cache" / cache.PLAIN).exists()


def test_an_ended_processs_mark_does_not_make_its_copy_look_just_used(tmp_path, monkeypatch):
    """KEEP copies left by a process that has ended (its hold marks still in them), then KEEP new
    exports opened by this one (a folder of rank files): the old copies go, not this process's. The
    eviction that removed an ended process's mark read the folder's time after it, the removal's:
    the old copy looked just used, and this process's first copy went ("no such file" when read
    again; `whatif FOLDER` of 8 .xz ranks failed one time in two with a used cache)."""
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True).stdout.strip()
    old = []
    for i in range(compressed.KEEP):
        src = tmp_path / f"old{i}.sqlite.gz"
        src.write_bytes(gzip.compress(raw))
        old.append(compressed.plain_export(src))
    for i, copy in enumerate(old):
        (copy.parent / f"{cache.HOLD_PREFIX}{os.getpid()}").unlink()
        (copy.parent / f"{cache.HOLD_PREFIX}{ended}").touch()
        os.utime(copy.parent, ns=(i, i))  # used long ago
    mine = []
    for i in range(compressed.KEEP):
        src = tmp_path / f"rank{i}.sqlite.gz"
        src.write_bytes(gzip.compress(raw))
        mine.append(compressed.plain_export(src))
    left = cache.plain_copies(tmp_path / "cache")
    assert sorted(p.name for p in left) == sorted(p.name for p in mine)


def test_a_copy_another_running_process_reads_stays(tmp_path, monkeypatch):
    """Two processes on many compressed exports: one's eviction must not take a copy the other still
    reads (it opens the file again for a table read on first use: "no such file" mid-analysis). A copy
    marked by a live process other than this one stays past KEEP; one marked by a process that has
    ended goes as before."""
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True).stdout.strip()
    # alive until its stdin closes: no clock decides when it ends
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as other:
        try:
            made = []
            for i in range(2):
                src = tmp_path / f"held{i}.sqlite.gz"
                src.write_bytes(gzip.compress(raw))
                made.append(compressed.plain_export(src))
                os.utime(made[-1].parent, ns=(i, i))  # the least recently used
            (made[0].parent / f"{cache.HOLD_PREFIX}{other.pid}").touch()
            (made[1].parent / f"{cache.HOLD_PREFIX}{ended}").touch()
            (made[0].parent / f"{cache.HOLD_PREFIX}{ended}").touch()  # ended: goes, the live mark keeps it
            for i in range(compressed.KEEP + 3):
                src = tmp_path / f"t{i}.sqlite.gz"
                src.write_bytes(gzip.compress(raw))
                compressed.plain_export(src)
            left = cache.plain_copies(tmp_path / "cache")
            assert made[0] in left and made[1] not in left
            assert len(left) == compressed.KEEP + 1
            # an ended process's mark goes from the copies that stay
            marks = {m.name for m in (tmp_path / "cache" / cache.PLAIN).glob(f"*/{cache.HOLD_PREFIX}*")}
            assert f"{cache.HOLD_PREFIX}{other.pid}" in marks and f"{cache.HOLD_PREFIX}{ended}" not in marks
        finally:
            assert other.stdin is not None
            other.stdin.close()


def test_without_the_cache_the_copy_goes_with_the_process(tmp_path):
    src = _copy_compressed(tmp_path, gzip.open, ".gz")
    env = _env(tmp_path, NSIGHT_TUI_NO_CACHE="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    code = "import sys; from nsight_tui.parsers.read.compressed import plain_export; print(plain_export(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    copy = Path(done.stdout.strip())
    assert copy.name == "base.sqlite" and (tmp_path / "tmp") in copy.parents  # in the temporary folder
    assert not copy.exists() and list((tmp_path / "tmp").iterdir()) == []  # gone with the process
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("make, says", [
    (lambda raw: lzma.compress(raw)[: len(lzma.compress(raw)) // 2], "does not decompress"),
    (lambda raw: lzma.compress(b"not a database, " * 100), "not an SQLite file"),
    (lambda raw: gzip.compress(raw)[:-12], "does not decompress"),
], ids=["truncated-xz", "xz-of-text", "truncated-gzip"])
def test_a_bad_compressed_file_is_one_line(tmp_path, make, says):
    src = tmp_path / "bad.sqlite.xz"
    src.write_bytes(make(plain(PAIR).read_bytes()[:300_000]))
    done = cli_process.run(["stats", src], text=True, env=_env(tmp_path), timeout=120)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(src) in lines[0] and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    # nothing half-written left in the cache folder
    assert not any((tmp_path / "cache" / cache.PLAIN).glob("*"))


def test_plain_export_raises_trace_error_on_a_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "x.sqlite.bz2"
    src.write_bytes(bz2.compress(b"SQLite format 3\x00")[:-4])
    with pytest.raises(TraceError, match="bzip2-compressed, but it does not decompress"):
        compressed.plain_export(src)


def test_the_records_beside_a_compressed_export_are_read(tmp_path, monkeypatch):
    """`capture --no-nvtx` keeps the Python clock beside its export (STEM.steps.json): beside the
    compressed file, under the export's own name, not beside its decompressed copy."""
    from nsight_tui.parsers.read.load import load_trace

    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    src = SAMPLES / "nonvtx" / "small_ctx512_b8_async_nonvtx.sqlite.xz"
    record = json.loads(src.with_name("small_ctx512_b8_async_nonvtx.steps.json").read_text())
    trace = load_trace(src)
    assert trace.path != src and trace.beside == src.with_name("small_ctx512_b8_async_nonvtx.sqlite")
    meta = trace.meta()
    assert meta.source == "small_ctx512_b8_async_nonvtx.steps.json"
    assert [s["seconds"] for s in meta.steps] == [s["seconds"] for s in record["steps"]]
    # the same file opened again comes from the cache, and knows where it was opened from too
    assert load_trace(src).meta().steps == meta.steps


def test_a_folder_counts_its_compressed_exports(tmp_path):
    """A folder's exports (the command line's, the ranks' and the MCP server's): `*.sqlite`, and
    `*.sqlite.xz|gz|bz2` but where a plain export of that name is there too; the sweep's runs."""
    from nsight_tui.mcp.served import _members
    from nsight_tui.parsers.analyses.rank_files import rank_files_in
    from nsight_tui.parsers.analyses.ranks import rank_from_name
    from nsight_tui.parsers.analyses.sweep import discover
    from nsight_tui.parsers.read.source import export_paths

    ranks = SAMPLES / "ranks_small_ctx128_ddp2"
    for p in sorted(ranks.glob("*.sqlite.xz")):
        (tmp_path / p.name).write_bytes(lzma.compress(plain(p).read_bytes()[:4096]))
    (tmp_path / "notes.txt").write_text("not an export")
    (tmp_path / "x.xz").write_bytes(lzma.compress(b"not named as an export"))
    names = ["small_ctx128_ddp2_rank0.sqlite.xz", "small_ctx128_ddp2_rank1.sqlite.xz"]
    assert [p.name for p in export_paths([str(tmp_path)])] == names
    assert [p.name for p in _members(tmp_path)] == names
    group = rank_files_in(tmp_path)
    assert group is not None and group.stem == "small_ctx128_ddp2" and [p.name for p in group.files] == names
    assert [rank_from_name(tmp_path / n) for n in names] == [0, 1]
    # a plain export of the same name wins over its compressed copy
    (tmp_path / "small_ctx128_ddp2_rank1.sqlite").write_bytes(b"")
    assert [p.name for p in export_paths([str(tmp_path)])] == [names[0], "small_ctx128_ddp2_rank1.sqlite"]
    # the committed sweep folder, compressed: its runs as from its plain copy
    sweep = SAMPLES / "memsweep"
    got = [(r.path.name, r.model, r.ctx, r.variant, r.status) for r in discover(sweep)]
    want = sorted((p.name, *conventions_of(p.name)) for p in sweep.iterdir()
                  if p.name.endswith(".sqlite.xz") and ".oom." not in p.name) + \
        [(p.name, *conventions_of(p.name)[:3], "oom") for p in sweep.glob("*.oom.json")]
    assert sorted(got) == sorted(want)


def conventions_of(name: str) -> tuple:
    """`{model}_ctx{N}_b8...` read here: (model, ctx, variant, status)."""
    stem = name.split(".")[0]
    model, rest = stem.split("_ctx")
    ctx, _, variant = rest.partition("_")
    return model, int(ctx), f"_{variant}" if variant else "", "ok"


def test_a_big_file_says_it_is_decompressed_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_QUIET", raising=False)
    monkeypatch.setattr(compressed, "NOTE_BYTES", 1)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()
    (tmp_path / "a.sqlite.gz").write_bytes(gzip.compress(raw))
    compressed.plain_export(tmp_path / "a.sqlite.gz")
    compressed.plain_export(tmp_path / "a.sqlite.gz")  # the copy is there: nothing to say
    assert capsys.readouterr().err.count("nsight-tui: note: decompressing a.sqlite.gz") == 1
    monkeypatch.setenv("NSIGHT_TUI_QUIET", "1")  # the command line's -q
    (tmp_path / "b.sqlite.gz").write_bytes(gzip.compress(raw))
    compressed.plain_export(tmp_path / "b.sqlite.gz")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("head, says", [(b"\x28\xb5\x2f\xfd" + b"\0" * 64, "zstd-compressed: decompress it first"),
                                        (b"PK\x03\x04" + b"\0" * 64, "a zip archive: unzip it first")],
                         ids=["zstd", "zip"])
def test_a_container_it_does_not_open_is_named(tmp_path, head, says):
    src = tmp_path / "run.sqlite.zst"
    src.write_bytes(head)
    done = cli_process.run(["stats", src], text=True, env=_env(tmp_path), timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and str(src) in lines[0], done.stderr


def test_a_full_cache_folder_leaves_the_copy_to_a_temporary_one(tmp_path, monkeypatch):
    """Writing the copy into the cache folder fails (its disk full): the temporary folder takes it;
    where none can, one line says so."""
    import errno

    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    monkeypatch.setattr(compressed, "_scratch", None)
    monkeypatch.setattr(compressed.tempfile, "tempdir", str(tmp_path))
    real = compressed._open_copy
    full = [tmp_path / "cache"]

    class Full:
        def __init__(self, out):
            self.f = real(out)

        def write(self, chunk):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(compressed, "_open_copy", lambda out: Full(out) if any(d in out.parents for d in full)
                        else real(out))
    src = tmp_path / "in" / "a.sqlite.gz"
    src.parent.mkdir()
    src.write_bytes(gzip.compress(_tiny_export(tmp_path / "tiny.sqlite").read_bytes()))
    copy = compressed.plain_export(src)
    assert (tmp_path / "cache") not in copy.parents and copy.read_bytes() == (tmp_path / "tiny.sqlite").read_bytes()
    assert not any((tmp_path / "cache" / cache.PLAIN).glob("*/*"))  # no half-written copy left there
    full.append(copy.parent.parent)  # the temporary folder full too
    os.utime(src, ns=(1, 1))  # another identity: a fresh copy is needed
    with pytest.raises(TraceError, match="no folder could take its decompressed copy .*No space left on device"):
        compressed.plain_export(src)


def test_a_diff_names_the_files_given_not_their_copies():
    """`diff A B.sqlite.xz`: both sides named as typed (the decompressed copy lives in the cache folder,
    which is no name a user gave)."""
    a, b = SAMPLES / "small_ctx128.sqlite", SAMPLES / "small_ctx128_fused.sqlite.xz"
    done = cli_process.run(["diff", str(a), str(b), "-f", "json"], text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert (d["a"], d["b"]) == (str(a), str(b))
    text = cli_process.run(["diff", str(a), str(b)], text=True, timeout=300).stdout
    assert f"B: {b}" in text and "/plain/" not in text


EDGE = SAMPLES / "edge_overlap.sqlite.xz"  # a small synthetic export (sample_traces/make_edge_cases.py)


def _xz_copies(folder: Path, n: int, name: str = "run_rank{i}.sqlite.xz") -> list[Path]:
    """`n` compressed exports of the committed sample, each a file of its own: their copies' keys differ
    (a key hashes the compressed file's device, inode, size and times)."""
    folder.mkdir(exist_ok=True)
    out = []
    for i in range(n):
        out.append(folder / name.format(i=i))
        shutil.copyfile(EDGE, out[-1])
    return out


def test_a_copy_a_live_trace_of_this_process_reads_stays(tmp_path, monkeypatch):
    """A folder of more than KEEP compressed exports read by one process, every trace kept (`whatif DIR`
    merges the ranks of a run): no open evicts a copy a trace still reads (it reads its file again for
    what it loads on first use: "no session start", "no such file" mid-run). KEEP is exceeded while
    more than KEEP are in use; once the traces are gone, the next open evicts back to KEEP."""
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.read.source import connect_readonly
    from nsight_tui.parsers.read.target_info import session_start_utc_ns

    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    sources = _xz_copies(tmp_path / "run", compressed.KEEP + 3)
    traces = [load_trace(src) for src in sources]
    assert len({t.path for t in traces}) == len(sources)
    want = session_start_utc_ns(plain(EDGE))
    want_configs = len(load_trace(plain(EDGE)).launch_configs())
    assert want is not None and want_configs > 0
    for t in traces:  # each trace's own copy, read again by path after every other was opened
        assert t.path.is_file(), t.given.name
        assert session_start_utc_ns(t.path) == want
        con = connect_readonly(t.path)
        try:
            assert con.execute("SELECT count(*) FROM StringIds").fetchone()[0] > 0
        finally:
            con.close()
        assert len(t.launch_configs()) == want_configs  # a lazy read: the trace opens its file again
    assert len(cache.plain_copies(tmp_path / "cache")) == len(sources)  # past KEEP: every one in use
    # the traces dropped: their copies are evictable again, the least recently used first
    copies = [t.path for t in traces]
    for i, copy in enumerate(copies):
        os.utime(copy.parent, ns=(i, i))  # used in this order
    cache.wait_all()  # the cache's writer threads done with them too
    del traces, t
    gc.collect()
    later = load_trace(_xz_copies(tmp_path / "more", 1, "later.sqlite.xz")[0])
    assert sorted(cache.plain_copies(tmp_path / "cache")) == sorted([*copies[-(compressed.KEEP - 1):], later.path])
    cache.wait_all()


def test_a_copy_an_open_connection_reads_stays(tmp_path, monkeypatch):
    """`connect_readonly(x.sqlite.xz)`: its copy stays while the connection lives, whatever is opened
    after it; then it is evictable again."""
    from nsight_tui.parsers.read.source import connect_readonly

    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()
    cons = []
    for i in range(compressed.KEEP + 2):
        src = tmp_path / f"c{i}.sqlite.gz"
        src.write_bytes(gzip.compress(raw))
        cons.append(connect_readonly(src))
    files = [Path(con.execute("PRAGMA database_list").fetchone()[2]) for con in cons]
    assert all(f.is_file() for f in files)  # the file each connection names, there to open again
    for con in cons:
        assert con.execute("SELECT count(*) FROM StringIds").fetchone() == (0,)
        con.close()
    del cons, con
    gc.collect()
    src = tmp_path / "after.sqlite.gz"
    src.write_bytes(gzip.compress(raw))
    compressed.plain_export(src)
    assert len(cache.plain_copies(tmp_path / "cache")) == compressed.KEEP


def test_copies_read_by_threads_of_one_process_stay(tmp_path, monkeypatch):
    """`whatif DIR` of more than KEEP compressed rank files reads them on a few threads, then each
    file's session start by its copy's path: every copy is still there for it."""
    from nsight_tui.parsers.read import rank_merge

    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    folder = tmp_path / "run"
    folder.mkdir()
    ranks = sorted((SAMPLES / "ranks_small_ctx128_ddp2").glob("*.sqlite.xz"))
    for i in range(compressed.KEEP + 2):  # the two committed ranks, copied as ranks 0..9 of one run
        shutil.copyfile(ranks[i % 2], folder / f"small_ctx128_ddp2_rank{i}.sqlite.xz")
    merged = rank_merge.load_export(folder)
    assert [m.rank for m in merged.members] == list(range(compressed.KEEP + 2))
    assert all(m.trace.path.is_file() for m in merged.members)
    assert len(cache.plain_copies(tmp_path / "cache")) == compressed.KEEP + 2
    cache.wait_all()


def test_a_pinned_copy_stays_until_its_owner_goes(tmp_path, monkeypatch):
    """`plain_export(path, owner)`: the copy stays past KEEP while `owner` lives, the least recently used
    of them all, and counts towards KEEP (the others go to make room); `pin` adds an owner; once the
    owners are gone it is evictable as any other."""
    monkeypatch.setenv("NSIGHT_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NSIGHT_TUI_NO_CACHE", raising=False)
    raw = _tiny_export(tmp_path / "tiny.sqlite").read_bytes()

    class Reader:
        pass

    owner, second = Reader(), Reader()
    made = []
    for i in range(compressed.KEEP + 3):
        src = tmp_path / f"t{i}.sqlite.gz"
        src.write_bytes(gzip.compress(raw))
        made.append(compressed.plain_export(src, owner=owner if i < 2 else None))
        os.utime(made[-1].parent, ns=(i, i))  # used in this order: the pinned two the least recently
    compressed.pin(made[0], second)
    compressed.pin(plain(PAIR), second)  # not a copy: nothing
    left = sorted(cache.plain_copies(tmp_path / "cache"))
    assert left == sorted([*made[:2], *made[-(compressed.KEEP - 2):]])  # KEEP in all, the pinned two in them
    del owner
    gc.collect()
    src = tmp_path / "after.sqlite.gz"
    src.write_bytes(gzip.compress(raw))
    after = compressed.plain_export(src)
    left = sorted(cache.plain_copies(tmp_path / "cache"))
    assert left == sorted([made[0], *made[-(compressed.KEEP - 2):], after])  # made[0]: `second` still reads it
    del second
    gc.collect()
    src = tmp_path / "last.sqlite.gz"
    src.write_bytes(gzip.compress(raw))
    last = compressed.plain_export(src)
    assert sorted(cache.plain_copies(tmp_path / "cache")) == sorted([*made[-(compressed.KEEP - 2):], after, last])
