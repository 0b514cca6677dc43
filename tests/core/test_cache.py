"""The per-user cache (parsers/read/cache.py): a second open of an unchanged file is read from
memory-mapped columns, and gives what the file gives.

Truth: the file itself, read with Python's sqlite3 (hand-written SQL, and the loader's sqlite3
reader, which never uses the cache), and the reports of a run with `--no-cache`, compared
byte for byte. The cache always lives in this test's tmp folder (tests/conftest.py points
$NSIGHT_TUI_CACHE_DIR away from ~/.cache and turns the cache off for every other test).
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import SAMPLES, SHARED, sample_file, sample_traces
from nsight_tui.cli import main as cli_main
from nsight_tui.parsers.read import cache
from nsight_tui.parsers.read.load import load_trace
from helpers import cli_process

ROOT = Path(__file__).resolve().parents[2]
BASE = SAMPLES / "small_ctx128.sqlite"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """The cache on, in a folder of this test; the process-wide 'gave up' state reset."""
    folder = tmp_path / "user-cache"
    monkeypatch.setenv(cache.ENV_DIR, str(folder))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.delenv(cache.ENV_MAX, raising=False)
    monkeypatch.setattr(cache, "_off_for_process", False)
    monkeypatch.setattr(cache, "_noted", False)
    return folder


@pytest.fixture
def profile(tmp_path) -> Path:
    """A private copy of a real capture, in a folder of its own (so its listing is its own)."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    dst = folder / BASE.name
    shutil.copyfile(BASE, dst)
    return dst


def from_cache(trace) -> bool:
    """The trace's columns are the cache's memory-mapped files, not arrays the reader filled."""
    return mapped(trace.ops["start"].to_numpy())


def mapped(values) -> bool:
    while values is not None:
        if isinstance(values, mmap.mmap):
            return True
        values = getattr(values, "base", None)
    return False


def loaded(path: Path):
    trace = load_trace(path)
    cache.wait_all()  # the bundles are written in the background
    return trace


def sql_kernels(path: Path) -> tuple[int, int]:
    """Kernel count and summed duration, straight from the file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        n, total = con.execute('SELECT COUNT(*), SUM("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    finally:
        con.close()
    return int(n), int(total)


def kernel_figures(trace) -> tuple[int, int]:
    k = trace.kernels
    return len(k), int((k["end"] - k["start"]).sum())


def assert_same_trace(a, b) -> None:
    for name in ("ops", "api", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert a.op_names == b.op_names and a.api_names == b.api_names
    assert a.threads == b.threads and a.processes == b.processes
    assert a.facts == b.facts and list(a.facts) == list(b.facts)
    assert a.schema == b.schema
    assert {k: v for k, v in vars(a.info).items() if k != "reader"} == \
        {k: v for k, v in vars(b.info).items() if k != "reader"}


# -- a second open ---------------------------------------------------------------------------
def test_second_open_reads_the_cache_and_equals_the_file(cache_dir, profile):
    first = loaded(profile)
    assert not from_cache(first)
    second = loaded(profile)
    assert from_cache(second), "the second open of an unchanged file must come from the cache"
    truth = load_trace(profile, native=False)  # sqlite3 reader, no cache
    assert not from_cache(truth)
    assert_same_trace(second, truth)
    assert kernel_figures(second) == sql_kernels(profile)


MODEL_SAMPLES = [sample_file(n) for n in ("small_ctx128", "small_ctx128_agnvtx", "small_ctx128_emitnvtx",
                                          "small_ctx128_ddp2")]


@pytest.mark.parametrize("sample", MODEL_SAMPLES, ids=lambda p: p.stem)
def test_range_model_is_kept_and_restored_equal(cache_dir, tmp_path, sample):
    """Op ranges (agnvtx, emitnvtx), another thread's ranges under the main one, two ranks."""
    from nsight_tui.parsers.model.ranges import range_model

    profile = tmp_path / sample.name
    shutil.copyfile(sample, profile)
    first = loaded(profile)
    built = range_model(first, "process")
    cache.wait_all()
    second = loaded(profile)
    restored = range_model(second, "process")
    assert mapped(restored.pair_op), "the attribution must come from the cache"
    for name in restored.SAVED:
        np.testing.assert_array_equal(getattr(restored, name), getattr(built, name), err_msg=name)
    assert restored.main_info == built.main_info
    np.testing.assert_array_equal(restored.range_is_op, built.range_is_op)
    assert restored.range_key.tolist() == built.range_key.tolist()
    for a, b in zip(restored._foreign_tops(), built._foreign_tops()):
        np.testing.assert_array_equal(a, b)
    assert [(g.gtid, g.label, [r.name for r in g.roots]) for g in restored.aggregated_groups] == \
        [(g.gtid, g.label, [r.name for r in g.roots]) for g in built.aggregated_groups]
    # an independent figure: the kernels attributed to the top ranges of the main thread sum to
    # what SQL finds under them (one per step, so every kernel of a step counts once)
    plain = load_trace(profile, native=False)
    truth = range_model(plain, "process")
    np.testing.assert_array_equal(restored.kernel_ns, truth.kernel_ns)
    # the ranks (process, GPU pairs) of the header's badge, kept too: the same as from the file
    from nsight_tui.parsers.analyses.ranks import find_ranks

    assert find_ranks(second) == find_ranks(plain)
    cache.wait_all()
    third = loaded(profile)
    assert find_ranks(third) == find_ranks(plain)
    assert (cache_dir / cache.identity_of(profile).slot / "process_device_pairs").is_dir()
    assert len(find_ranks(plain)) == (2 if "ddp2" in sample.name else 1)


def test_reports_with_and_without_cache_byte_identical(cache_dir, profile, capsys, monkeypatch):
    def run(*argv: str) -> str:
        capsys.readouterr()
        assert cli_main(list(argv)) == 0
        cache.wait_all()
        return capsys.readouterr().out

    monkeypatch.setenv(cache.ENV_OFF, "1")
    plain_stats = run("stats", str(profile), "-f", "json", "--no-cache")
    plain_report = run("report", str(profile), "-f", "json", "--no-cache")
    monkeypatch.delenv(cache.ENV_OFF)
    assert not cache_dir.exists() or not any(cache_dir.iterdir()), "--no-cache must write nothing"
    outputs = [run("stats", str(profile), "-f", "json") for _ in range(2)]  # cold, then from the cache
    assert outputs == [plain_stats, plain_stats]
    assert run("report", str(profile), "-f", "json") == plain_report
    assert len(cache.slots(cache_dir)) == 1


def _real_traces() -> list[Path]:
    return sample_traces() + (sorted(SHARED.glob("*.sqlite")) if SHARED.is_dir() else [])


@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_stats_byte_identical_on_every_real_trace(cache_dir, path, capsys, monkeypatch):
    """`stats -f json` of every sample (and ../shared/traces when present): --no-cache, the
    run that fills the cache, and the run that reads it print the same bytes (the command's
    main(), in this process: what is compared is the output, not the process)."""

    def stats(*extra: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli_main(["stats", str(path), "-f", "json", *extra])
        cache.wait_all()
        out = capsys.readouterr()
        return code, out.out, out.err

    plain = stats("--no-cache")
    monkeypatch.delenv(cache.ENV_OFF, raising=False)  # --no-cache set it for the processes it starts
    assert not cache_dir.exists() or not any(cache_dir.iterdir()), "--no-cache must write nothing"
    cold = stats()
    slots = cache.slots(cache_dir)
    assert plain[0] != 0 or len(slots) == 1, "the first run with the cache on fills it"
    warm = stats()
    assert cold == plain and warm == plain


# -- a changed file is read again ------------------------------------------------------------
def test_same_size_new_mtime_is_read_again(cache_dir, profile):
    loaded(profile)
    st = profile.stat()
    os.utime(profile, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = loaded(profile)
    assert not from_cache(again)
    assert kernel_figures(again) == sql_kernels(profile)
    third = loaded(profile)
    assert from_cache(third), "the bundle is rebuilt for the file as it is now"
    manifest = json.loads((cache_dir / cache.identity_of(profile).slot / "trace" / cache.MANIFEST).read_text())
    assert manifest["identity"]["mtime_ns"] == st.st_mtime_ns + 10**9


def _rewrite_keeping_size_and_mtime(profile: Path, update: str) -> None:
    """`update` run on the file, then its mtime set back (its size does not change)."""
    st = profile.stat()
    con = sqlite3.connect(profile)
    con.execute(update)
    con.commit()
    con.close()
    os.utime(profile, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert profile.stat().st_size == st.st_size and profile.stat().st_mtime_ns == st.st_mtime_ns


def test_same_mtime_new_bytes_is_read_again(cache_dir, profile):
    before = loaded(profile)
    _rewrite_keeping_size_and_mtime(profile, 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1000 '
                                    'WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)')
    after = loaded(profile)
    assert not from_cache(after)
    assert kernel_figures(after) == sql_kernels(profile)
    assert kernel_figures(after)[1] == kernel_figures(before)[1] + 1000


def _bundle_files(cache_dir: Path, profile: Path) -> list[Path]:
    folder = cache_dir / cache.identity_of(profile).slot / "trace"
    return sorted(folder.glob("*.npy"), key=lambda p: -p.stat().st_size)


@pytest.mark.parametrize("damage", ["truncated", "bad header", "bad manifest", "manifest gone"])
def test_damaged_bundle_is_ignored_and_rebuilt(cache_dir, profile, damage):
    loaded(profile)
    biggest = _bundle_files(cache_dir, profile)[0]
    manifest = biggest.parent / cache.MANIFEST
    if damage == "truncated":
        os.truncate(biggest, biggest.stat().st_size // 2)
    elif damage == "bad header":
        with open(biggest, "r+b") as fh:
            fh.write(b"\0" * 16)  # the .npy magic and version: same size, unreadable
    elif damage == "bad manifest":
        manifest.write_text(manifest.read_text()[:-20])
    else:
        manifest.unlink()
    again = loaded(profile)
    assert not from_cache(again)
    assert kernel_figures(again) == sql_kernels(profile)
    third = loaded(profile)
    assert from_cache(third)
    assert_same_trace(third, load_trace(profile, native=False))


# -- two opens at once -----------------------------------------------------------------------
PROBE = """
import mmap
import sys
from nsight_tui.parsers.read import cache
from nsight_tui.parsers.read.load import load_trace
t = load_trace(sys.argv[1])
cache.wait_all()  # as the CLI does before a normal exit
col = t.ops["start"].to_numpy()
while col is not None and not isinstance(col, mmap.mmap):
    col = getattr(col, "base", None)
print(col is not None, len(t.kernels),
      int((t.kernels["end"] - t.kernels["start"]).sum()))
"""


def test_two_opens_racing_leave_one_good_bundle(cache_dir, profile):
    env = dict(os.environ)
    env.pop(cache.ENV_OFF, None)
    procs = [subprocess.Popen([sys.executable, "-c", PROBE, str(profile)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    truth = sql_kernels(profile)
    for (out, err), p in zip(results, procs):
        assert p.returncode == 0, err
        assert err == ""
        hit, n, total = out.split()
        assert (int(n), int(total)) == truth
    slot = cache_dir / cache.identity_of(profile).slot
    # one of each bundle a load writes: the trace and its (process, GPU) pairs
    assert sorted(p.name for p in slot.iterdir()) == sorted([cache.PAIRS_BUNDLE, "trace"])
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".")
                and p.name not in (cache.LEDGER, cache.LEDGER_LOCK)], "no temporary folder left"
    out = subprocess.run([sys.executable, "-c", PROBE, str(profile)], env=env, capture_output=True, text=True,
                         timeout=300).stdout.split()
    assert out == ["True", str(truth[0]), str(truth[1])]


# -- the profile is only read ----------------------------------------------------------------
def test_nothing_written_beside_or_into_the_profile(cache_dir, profile):
    def state():
        return (sorted(os.listdir(profile.parent)), hashlib.sha256(profile.read_bytes()).hexdigest(),
                profile.stat().st_mtime_ns)

    before = state()
    loaded(profile)
    assert from_cache(loaded(profile))
    assert state() == before
    assert cache_dir.exists() and profile.parent not in cache_dir.parents


# -- a cache folder that cannot be used ------------------------------------------------------
def _stats_env(cache_path: Path) -> dict:
    env = dict(os.environ)
    env.pop(cache.ENV_OFF, None)
    env[cache.ENV_DIR] = str(cache_path)
    return env


def _stats(profile: Path, env: dict, preexec=None) -> subprocess.CompletedProcess:
    return cli_process.run(["stats", profile, "-f", "json"], env=env, text=True, timeout=300, preexec_fn=preexec)


def test_cache_folder_under_a_file_degrades_with_one_note(tmp_path, profile):
    """Not a folder (ENOTDIR): works as root too, where a chmod'ed folder would not stop a write."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    plain = cli_process.run(["stats", str(profile), "-f", "json", "--no-cache"], text=True, timeout=300)
    run = _stats(profile, _stats_env(blocker / "cache"))
    assert run.returncode == 0 and run.stdout == plain.stdout
    notes = [line for line in run.stderr.splitlines() if "cache" in line]
    assert len(notes) == 1 and "cache not used" in notes[0], run.stderr
    assert run.stderr.replace(notes[0] + "\n", "") == plain.stderr


def _fsize_limit():
    # A full disk, simulated: files may not grow past 4 KiB (SIGXFSZ ignored, so a write
    # fails with EFBIG as it would with ENOSPC). stdout and stderr are pipes: not limited.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_full_cache_folder_degrades_with_one_note(tmp_path, profile):
    plain = cli_process.run(["stats", str(profile), "-f", "json", "--no-cache"], text=True, timeout=300)
    folder = tmp_path / "full-cache"
    run = _stats(profile, _stats_env(folder), preexec=_fsize_limit)
    assert run.returncode == 0 and run.stdout == plain.stdout
    notes = [line for line in run.stderr.splitlines() if "cache not used" in line]
    assert len(notes) == 1, run.stderr
    assert not [p for p in folder.rglob("*.npy")], "no partial bundle left behind"
    again = _stats(profile, _stats_env(folder))  # the limit lifted: the cache fills
    assert again.returncode == 0 and again.stdout == plain.stdout and "cache not used" not in again.stderr
    assert len(cache.slots(folder)) == 1


# -- bounded, listed, cleared ----------------------------------------------------------------
def test_least_recently_used_file_is_evicted(cache_dir, tmp_path, monkeypatch):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    shutil.copyfile(BASE, a)
    shutil.copyfile(BASE, b)  # another inode: another slot of the same size
    loaded(a)
    one = sum(f.stat().st_size for f in cache_dir.rglob("*") if f.is_file())
    monkeypatch.setenv(cache.ENV_MAX, str(one * 1.5 / 1e9))  # room for a, not for a and b
    loaded(b)
    kept = cache.slots(cache_dir)
    assert [s.profile for s in kept] == [str(b)]
    assert sum(s.bytes for s in kept) <= one * 1.5


def test_bundle_bigger_than_the_bound_is_not_kept(cache_dir, profile, monkeypatch):
    monkeypatch.setenv(cache.ENV_MAX, "0.000001")  # 1 kB
    loaded(profile)
    assert not from_cache(loaded(profile))
    assert cache.slots(cache_dir) == []


def test_cache_command_lists_and_clears(cache_dir, profile, capsys):
    loaded(profile)
    on_disk = sum(f.stat().st_size for f in cache_dir.rglob("*") if f.is_file())
    capsys.readouterr()
    assert cli_main(["cache"]) == 0
    out = capsys.readouterr().out
    assert str(profile) in out and str(cache_dir) in out
    assert f"{on_disk / 1e6:,.1f} MB" in out
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 cached file" in capsys.readouterr().out
    assert cache.slots(cache_dir) == [] and not from_cache(loaded(profile))


def test_cache_off_by_environment_reads_and_writes_nothing(cache_dir, profile, monkeypatch):
    monkeypatch.setenv(cache.ENV_OFF, "1")
    loaded(profile)
    loaded(profile)
    assert not cache_dir.exists()


def test_cache_without_pyarrow(cache_dir, profile):
    """pyarrow is optional: without it (tests/without_arrow hides it) the cache is written and
    read all the same, and the reports do not change."""
    hide = str(ROOT / "tests" / "without_arrow")
    env = _stats_env(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([hide, *filter(None, [env.get("PYTHONPATH")])])
    plain = cli_process.run(["stats", str(profile), "-f", "json", "--no-cache"],
                            env=env, text=True, timeout=300)
    runs = [_stats(profile, env) for _ in range(2)]
    assert plain.returncode == 0 and plain.stdout
    assert [r.stdout for r in runs] == [plain.stdout, plain.stdout]
    assert [r.stderr for r in runs] == [plain.stderr, plain.stderr]
    probe = subprocess.run([sys.executable, "-c", PROBE, str(profile)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert probe.stdout.split()[0] == "True", probe.stderr
    assert "hidden by tests/without_arrow" in subprocess.run(
        [sys.executable, "-c", "import pyarrow"], env=env, capture_output=True, text=True).stderr


def test_leftovers_of_a_writer_that_died_are_removed(cache_dir, profile):
    """A process killed mid-write leaves its temporary folder (never a bundle: the rename is
    the last step); the next write removes it, and not a live writer's."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    cache_dir.mkdir(parents=True)
    left = cache_dir / f"{cache.TMP_PREFIX}{dead}-1-1"
    live = cache_dir / f"{cache.TMP_PREFIX}{os.getpid()}-1-1"
    for folder in (left, live):
        folder.mkdir()
        (folder / "a0.npy").write_bytes(b"half a file")
    loaded(profile)
    assert not left.exists() and live.exists()
    assert from_cache(loaded(profile))


def test_first_open_keeps_the_ranks_pairs_for_the_next(cache_dir, profile, monkeypatch):
    """Every first open (here load_trace, as `stats` does) keeps the first op of each (process,
    GPU), computed in the writer's thread, so a TUI's later open finds its ranks without a sort
    of every op; those ranks equal the file's (no cache), whose pairs are SQL's; a changed file's
    pairs are not used (its slot is rewritten)."""
    from nsight_tui.parsers.analyses import ranks
    from nsight_tui.parsers.read import process_ranks  # where the ranks are read (analyses.ranks names them)

    loaded(profile)
    slot = cache_dir / cache.identity_of(profile).slot
    assert (slot / cache.PAIRS_BUNDLE).is_dir()  # nobody asked for the ranks yet
    plain = load_trace(profile, native=False)
    want = ranks.find_ranks(plain)
    con = sqlite3.connect(f"file:{profile}?mode=ro", uri=True)
    try:
        pairs = set(con.execute("SELECT DISTINCT globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
    finally:
        con.close()
    assert pairs <= {(r.gpid, r.device) for r in want} and pairs
    second = load_trace(profile)
    saved = second.stash.read(cache.PAIRS_BUNDLE)
    assert saved is not None and mapped(saved.arrays["first"])

    def computed_again(ops):
        raise AssertionError("the pairs were computed again")

    with monkeypatch.context() as m:
        m.setattr(process_ranks, "pairs_bundle", computed_again)
        assert ranks.find_ranks(second) == want
    # the file changes (same size, new mtime): its entry is read again, the pairs with it
    os.utime(profile, ns=(profile.stat().st_atime_ns, profile.stat().st_mtime_ns + 10**9))
    third = load_trace(profile)
    assert third.stash is not None and third.stash.read(cache.PAIRS_BUNDLE) is None
    assert ranks.find_ranks(third) == want


def test_the_code_stamp_covers_the_model_subpackages(tmp_path):
    """A change to any module the cached model comes from makes the bundles stale, those of a
    subpackage too (model/inferred/: the inferred ranges the cached range model holds)."""
    model = tmp_path / "model"
    shutil.copytree(ROOT / "parsers" / "model", model, ignore=shutil.ignore_patterns("__pycache__"))
    deep = sorted(p for p in model.rglob("*.py") if p.parent != model)
    assert deep  # the test needs a module below model/ (model/inferred/)
    before = cache.source_stamp([model])
    (model / "__pycache__").mkdir(exist_ok=True)
    (model / "__pycache__" / "x.pyc").write_bytes(b"\0")  # not source: no change
    assert cache.source_stamp([model]) == before
    deep[0].write_text(deep[0].read_text() + "\n# changed\n")
    assert cache.source_stamp([model]) != before


# -- the aggregated tree (0.5 s of a second open at 3M ranges was building it) ---------------
def _tree(model) -> list[tuple]:
    """Every node of the aggregated tree, depth first: its thread group, name, depth, flags,
    instances, its parent's place in this list and its figures."""
    out: list[tuple] = []
    for g in model.aggregated_groups:
        stack = [(root, None) for root in reversed(g.roots)]
        while stack:
            node, above = stack.pop()
            out.append((g.gpid, g.gtid, g.label, g.is_main, node.name, node.label, node.depth, node.is_ops,
                        node.foreign, np.asarray(node.ids).tolist(), above, node.kernels, node.kernel_ns, node.cpu_ns,
                        node.busy_ns, node.ops))
            at = len(out) - 1
            stack.extend((child, at) for child in reversed(node.children))
    return out


def _fresh_tree(profile: Path, mode: str) -> list[tuple]:
    """The tree built from the file read by the sqlite3 reader (never the cache's)."""
    from nsight_tui.parsers.model.ranges import range_model

    return _tree(range_model(load_trace(profile, native=False), mode))


def _tree_bundle(cache_dir: Path, profile: Path) -> Path:
    slot = cache_dir / cache.identity_of(profile).slot
    found = sorted(slot.glob("aggregated_tree-*"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("mode", ["process", "nsys"])
@pytest.mark.parametrize("sample", MODEL_SAMPLES, ids=lambda p: p.stem)
def test_aggregated_tree_is_kept_and_restored_node_by_node(cache_dir, tmp_path, sample, mode):
    """Op ranges gathered under `ops` (agnvtx, emitnvtx), another thread's ranges copied under
    the main thread's (emitnvtx, process view), two ranks (ddp2): the second open's tree is
    the cache's and equals, node by node, one built fresh from the file."""
    from nsight_tui.parsers.model.ranges import range_model

    profile = tmp_path / sample.name
    shutil.copyfile(sample, profile)
    first = range_model(loaded(profile), mode)
    built = _tree(first)
    cache.wait_all()
    second = range_model(loaded(profile), mode)
    restored = _tree(second)
    assert second.tree_from_cache
    assert mapped(second.aggregated_groups[0].roots[0].ids), "the instances are the cache's mapped array"
    fresh = _fresh_tree(profile, mode)
    assert restored == fresh == built
    assert len(fresh) > 1


def test_the_tuis_staged_first_open_keeps_the_tree(cache_dir, profile):
    """The TUI's first open builds the tree in its first stage (no GPU work) and the full model
    takes it over: that tree is kept, and the next open reads it."""
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.tui.session import StagedLoad

    staged = StagedLoad(profile, "process")
    assert staged.tree() is not None
    trace, _ = staged.finish()
    cache.wait_all()
    assert _tree_bundle(cache_dir, profile).is_dir()
    again = range_model(loaded(profile), "process")
    assert _tree(again) == _fresh_tree(profile, "process")
    assert again.tree_from_cache


def _change_mtime(profile: Path) -> None:
    st = profile.stat()
    os.utime(profile, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def _change_bytes(profile: Path) -> None:
    """A range's end moves by 1 us, the size and mtime stay."""
    _rewrite_keeping_size_and_mtime(profile, 'UPDATE NVTX_EVENTS SET "end" = "end" + 1000 WHERE rowid = (SELECT '
                                    'MIN(rowid) FROM NVTX_EVENTS WHERE "end" IS NOT NULL AND eventType IN (59, 60, 70, 71))')


@pytest.mark.parametrize("change", [_change_mtime, _change_bytes], ids=["same size new mtime", "same mtime new bytes"])
def test_aggregated_tree_of_a_changed_file_is_built_again(cache_dir, profile, change, monkeypatch):
    from nsight_tui.parsers.model.ranges import range_model

    _tree(range_model(loaded(profile), "process"))
    cache.wait_all()
    assert _tree_bundle(cache_dir, profile).is_dir()
    change(profile)
    # the open after the change writes no tree of its own: the only tree in the cache is the
    # old file's, which it must not take
    write = cache.Entry.write

    def no_tree(entry, name, bundle, background=True, then=None):
        if name.startswith("aggregated_tree-"):
            return None
        return write(entry, name, bundle, background, None if then and then[0].startswith("aggregated_tree-") else then)

    monkeypatch.setattr(cache.Entry, "write", no_tree)
    again = range_model(loaded(profile), "process")
    assert _tree(again) == _fresh_tree(profile, "process")
    assert not again.tree_from_cache
    monkeypatch.setattr(cache.Entry, "write", write)
    _tree(range_model(loaded(profile), "process"))  # (another model of the file as it is now: keeps its tree)
    cache.wait_all()
    third = range_model(loaded(profile), "process")
    assert _tree(third) == _fresh_tree(profile, "process")
    assert third.tree_from_cache, "the tree is kept again for the file as it is now"


@pytest.mark.parametrize("damage", ["truncated", "bad header", "bad manifest", "instances out of range"])
def test_damaged_tree_bundle_is_ignored_and_rebuilt(cache_dir, profile, damage):
    from nsight_tui.parsers.model.ranges import range_model

    want = _tree(range_model(loaded(profile), "process"))
    cache.wait_all()
    folder = _tree_bundle(cache_dir, profile)
    manifest = folder / cache.MANIFEST
    ids_file = folder / json.loads(manifest.read_text())["files"]["ids"][0]
    if damage == "truncated":
        os.truncate(ids_file, ids_file.stat().st_size // 2)
    elif damage == "bad header":
        with open(ids_file, "r+b") as fh:
            fh.write(b"\0" * 16)
    elif damage == "bad manifest":
        manifest.write_text(manifest.read_text()[:-20])
    else:  # whole and well-formed, but a range position past the file's ranges (same size)
        ids = np.load(ids_file)
        ids[-1] = 10**9
        with open(ids_file, "r+b") as fh:
            np.save(fh, ids)
    again = range_model(loaded(profile), "process")
    assert not again.tree_from_cache
    assert _tree(again) == want == _fresh_tree(profile, "process")
    cache.wait_all()
    third = range_model(loaded(profile), "process")
    assert _tree(third) == want and third.tree_from_cache


def test_a_first_open_that_never_draws_the_tree_keeps_it(cache_dir, profile, capsys):
    """`stats` never asks for the aggregated tree; the TUI's next open finds it anyway."""
    from nsight_tui.parsers.model.ranges import range_model

    assert cli_main(["stats", str(profile), "-r", "nvtx_sum", "-f", "json"]) == 0
    capsys.readouterr()
    cache.wait_all()
    assert _tree_bundle(cache_dir, profile).is_dir()
    again = range_model(loaded(profile), "process")
    assert _tree(again) == _fresh_tree(profile, "process")
    assert again.tree_from_cache


# -- a first open, once its columns are written -----------------------------------------------
def test_first_open_serves_its_columns_from_the_cache_once_written(cache_dir, profile):
    """`map_columns`: once the trace's bundle is written, the GPU ops' and API calls' columns are
    the cache's mapped files (file-backed pages: a first open then holds no more private memory
    than a second), with the file's values; nothing to map before that, or with the cache off."""
    from nsight_tui.parsers.read.load import map_columns

    trace = load_trace(profile)
    cache.wait_all()
    assert not from_cache(trace)
    assert map_columns(trace)
    assert from_cache(trace) and mapped(trace.api["start"].to_numpy())
    assert not map_columns(trace)  # once
    assert_same_trace(trace, load_trace(profile, native=False))
    assert kernel_figures(trace) == sql_kernels(profile)


def test_columns_not_mapped_without_their_bundle(cache_dir, profile, monkeypatch):
    from nsight_tui.parsers.read.load import map_columns

    monkeypatch.setenv(cache.ENV_OFF, "1")
    trace = load_trace(profile)
    assert not map_columns(trace) and not from_cache(trace)
    monkeypatch.delenv(cache.ENV_OFF)
    trace = load_trace(profile)
    cache.wait_all()
    shutil.rmtree(cache_dir)  # the bundle gone (evicted, cleared) before the columns were mapped
    assert not map_columns(trace) and not from_cache(trace)


def test_the_copy_with_inferred_ranges_is_mapped_with_its_trace(cache_dir, tmp_path):
    """A trace without NVTX iterations: the model is built over a copy of it holding the inferred
    ranges; that copy's columns are switched too (else it would keep the private ones alive)."""
    from helpers.xz_samples import plain

    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.read.load import map_columns

    src = plain(SAMPLES / "nonvtx" / "small_ctx512_b8_async_nonvtx.sqlite.xz")
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    trace = load_trace(path)
    model = range_model(trace, "process")
    assert model.trace is not trace and model.trace.ops is trace.ops  # the copy, sharing the frames
    kernels_before = model.kernel_summary(model.scope_op_positions())
    cache.wait_all()
    assert map_columns(trace)
    assert from_cache(model.trace) and model.trace.api is trace.api
    pd.testing.assert_frame_equal(model.kernel_summary(model.scope_op_positions()), kernels_before)


def test_a_compressed_export_read_from_the_cache_finds_its_record_in_the_first_stage(cache_dir, tmp_path):
    """The TUI builds its first screen's model on the loader's first stage. A compressed export read
    from the cache came without the name it was given there, so the record `capture` keeps beside it
    (STEM.steps.json) was looked for beside the decompressed copy and not found: the inferred
    iterations took one warm-up for the recorded three, and the TUI's findings and what-if said 8
    steady-state steps where `report` and `whatif` said 6 (and another step time, another saving)."""
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.model.steps import steps_of
    from nsight_tui.parsers.read.load import TraceLoader

    folder = tmp_path / "profiles"
    folder.mkdir()
    for name in ("hf_trainer_qwen2_l4_b8.sqlite.xz", "hf_trainer_qwen2_l4_b8.steps.json"):
        shutil.copyfile(SAMPLES / "thirdparty" / name, folder / name)
    path = folder / "hf_trainer_qwen2_l4_b8.sqlite.xz"
    recorded = [s["name"] for s in json.loads((folder / "hf_trainer_qwen2_l4_b8.steps.json").read_text())["steps"]]
    warm = sum(n.startswith("warmup_") for n in recorded)
    assert warm == 3 and len(recorded) == 9
    loaded(path)
    loader = TraceLoader(path)
    early = loader.ranges_only()
    assert from_cache(early)
    steps = steps_of(range_model(early, "process"))  # what StagedLoad.tree() builds, before finish()
    assert (len(steps.warmup), len(steps.steady)) == (warm, len(recorded) - warm)
    assert loader.finish() is early


# -- the ledger: a write measures its own slot, not the whole cache --------------------------
def _filler_slots(root: Path, n: int, files: int = 6, size: int = 1000) -> list[Path]:
    """n slots of another profile each, one bundle of `files` files (their contents never read)."""
    out = []
    for i in range(n):
        bundle = root / f"{i:032x}" / cache.TRACE_BUNDLE
        bundle.mkdir(parents=True)
        for k in range(files):
            (bundle / f"a{k}.npy").write_bytes(b"\0" * size)
        (bundle / cache.MANIFEST).write_text(json.dumps({"format": cache.FORMAT, "profile": f"/elsewhere/{i}",
                                                          "files": {}, "values": {}}))
        out.append(root / f"{i:032x}")
    return out


def _fake_entry(root: Path, ino: int) -> cache.Entry:
    ident = cache.Identity(1, ino, 1, 1, 1, "edges", cache.code_stamp())
    return cache.Entry(root, ident, Path(f"/elsewhere/profile-{ino}"))


def _store(root: Path, ino: int, n: int = 1000) -> Path:
    entry = _fake_entry(root, ino)
    entry.write(cache.TRACE_BUNDLE, cache.Bundle({}, {"x": np.arange(n, dtype=np.int64)}), background=False)
    return entry.slot


def _truth(root: Path) -> dict[str, int]:
    return {p.name: cache._folder_bytes(p) for p in root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name != cache.PLAIN}


def _ledger(root: Path) -> dict[str, int]:
    return json.loads((root / cache.LEDGER).read_text())["slots"]


@pytest.fixture
def listed(monkeypatch):
    """Every folder listed (os.scandir, os.walk's too, and os.listdir, Path.iterdir's), in order."""
    seen: list[Path] = []
    scandir, listdir = os.scandir, os.listdir

    def note(path):
        if not isinstance(path, int):  # shutil.rmtree lists by descriptor: what is removed, not read
            seen.append(Path(os.fsdecode(path)))

    def counting_scandir(path="."):
        note(path)
        return scandir(path)

    def counting_listdir(path="."):
        note(path)
        return listdir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    return seen


def test_first_open_of_a_new_file_reads_no_other_slot(cache_dir, profile, listed):
    """A big cache (here 40 slots of other files) is not walked when a new file's bundles are
    written: before the ledger every write listed and measured every slot (~10^5 files in a real
    cache: a minute for a folder of eight new ranks)."""
    cache_dir.mkdir(parents=True)
    others = _filler_slots(cache_dir, 40)
    _store(cache_dir, 1)  # the first write with no ledger: one walk makes it
    listed.clear()
    trace = loaded(profile)
    read = [p for p in listed if any(p == o or o in p.parents for o in others)]
    slot = cache_dir / cache.identity_of(profile).slot
    assert (slot / cache.TRACE_BUNDLE).is_dir()
    assert read == [], f"{len(read)} listings of other files' slots, e.g. {read[:3]}"
    assert _ledger(cache_dir) == _truth(cache_dir)
    assert from_cache(loaded(profile)) and len(trace.ops)


@pytest.mark.parametrize("damage", ["missing", "not json", "truncated", "sizes not numbers", "other format"])
def test_missing_or_damaged_ledger_is_rebuilt_by_one_walk(cache_dir, listed, damage):
    cache_dir.mkdir(parents=True)
    others = _filler_slots(cache_dir, 5)
    _store(cache_dir, 1)
    good = (cache_dir / cache.LEDGER).read_text()
    ledger = cache_dir / cache.LEDGER
    if damage == "missing":
        ledger.unlink()
    elif damage == "not json":
        ledger.write_text("{not json")
    elif damage == "truncated":
        ledger.write_text(good[: len(good) // 2])
    elif damage == "sizes not numbers":
        ledger.write_text(json.dumps({"format": cache.FORMAT, "slots": {o.name: "big" for o in others}}))
    else:
        ledger.write_text(json.dumps({"format": cache.FORMAT + 1, "slots": {}}))
    listed.clear()
    _store(cache_dir, 2)
    walked = list(listed)
    assert _ledger(cache_dir) == _truth(cache_dir)
    for o in others:  # each slot measured once, not once per write
        assert sum(1 for p in walked if p == o) == 1
    listed.clear()
    _store(cache_dir, 3)  # rebuilt: the next write reads no other slot again
    assert not [p for p in listed if any(p == o or o in p.parents for o in others)]
    assert _ledger(cache_dir) == _truth(cache_dir)


def test_ledger_follows_slots_added_or_removed_behind_its_back(cache_dir, listed):
    """Another process (an older version, `cache clear`, a person with rm) changes the slots
    without the ledger: the next write drops what is gone and measures what is new, alone."""
    cache_dir.mkdir(parents=True)
    first = _filler_slots(cache_dir, 4)
    _store(cache_dir, 1)
    shutil.rmtree(first[0])
    new = cache_dir / ("f" * 32)
    (new / "trace").mkdir(parents=True)
    (new / "trace" / "a0.npy").write_bytes(b"\0" * 12345)
    listed.clear()
    _store(cache_dir, 2)
    assert not [p for p in listed if any(p == o or o in p.parents for o in first[1:])]
    assert _ledger(cache_dir) == _truth(cache_dir)
    assert first[0].name not in _ledger(cache_dir) and _ledger(cache_dir)[new.name] == 12345


def test_bound_is_honoured_from_the_ledger_least_recent_first(cache_dir, monkeypatch):
    cache_dir.mkdir(parents=True)
    others = _filler_slots(cache_dir, 10, files=4, size=25_000)  # 100 kB each and a manifest
    for age, o in enumerate(others):  # others[0] the most recently used
        os.utime(o, (time.time() - 100 - age, time.time() - 100 - age))
    _store(cache_dir, 1)
    assert len(_ledger(cache_dir)) == 11
    one = cache._folder_bytes(others[0])
    limit = 6 * one  # room for the new slot and about five others
    monkeypatch.setenv(cache.ENV_MAX, str(limit / 1e9))
    written = _store(cache_dir, 2, n=20_000)  # 160 kB: over the bound
    on_disk = _truth(cache_dir)
    assert sum(on_disk.values()) <= limit
    assert written.name in on_disk
    kept = [o for o in others if o.name in on_disk]
    assert kept == others[: len(kept)] and len(kept) >= 3, "the least recently used went, the rest stayed"
    assert _ledger(cache_dir) == on_disk


def test_bound_counts_a_slot_the_ledger_did_not_know(cache_dir, monkeypatch):
    """A big slot written without the ledger (another version) is counted at the next write."""
    cache_dir.mkdir(parents=True)
    _store(cache_dir, 1)
    monkeypatch.setenv(cache.ENV_MAX, str(100_000 / 1e9))
    stranger = _filler_slots(cache_dir, 1, files=1, size=90_000)[0]
    os.utime(stranger, (time.time() - 100, time.time() - 100))
    _store(cache_dir, 2)
    assert not stranger.exists() and sum(_truth(cache_dir).values()) <= 100_000
    assert _ledger(cache_dir) == _truth(cache_dir)


def test_writers_racing_keep_the_ledger_whole(cache_dir):
    """Writer threads of several files at once (each takes the ledger's lock through its own
    descriptor, as another process would): no update is lost."""
    cache_dir.mkdir(parents=True)
    _filler_slots(cache_dir, 3)
    errors = []

    def write(base):
        try:
            for k in range(5):
                _store(cache_dir, base + k)
        except Exception as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(100 * t,)) for t in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(_truth(cache_dir)) == 23 and _ledger(cache_dir) == _truth(cache_dir)
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(cache.TMP_PREFIX)]
