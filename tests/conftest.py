"""Where the real traces live. ../shared/traces is there in CI and on the team's machines,
not in a user's clone: tests that need it skip cleanly."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from helpers.xz_samples import XZ_TRACE, plain

# The user's cache (parsers/read/cache.py) is never touched by a test: it points at a folder
# of this run, and it is off unless a test turns it on (tests/core/test_cache.py), so every
# other test reads its trace from the file as it always did (subprocesses inherit both).
_CACHE_DIR = tempfile.mkdtemp(prefix="nsight-tui-test-cache-")
atexit.register(shutil.rmtree, _CACHE_DIR, True)
os.environ["NSIGHT_TUI_CACHE_DIR"] = _CACHE_DIR
os.environ["NSIGHT_TUI_NO_CACHE"] = "1"



@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The suite, or a folder of it, runs on every core and one worker more (pytest-xdist, the `test`
    extra: a file's tests on one worker, so module fixtures are built once; the extra worker fills
    the time the others wait on a subprocess, a terminal or Textual's timers: with one per core,
    2 cores ran 1.45 of them busy, 510 s; one more, 422 s) unless the command line says
    otherwise: `-n N`, `-n0` or `-p no:xdist` run it as given, and test files named on the command
    line run in this process (workers cost more than they save there). Set here, not in addopts, so
    `-p no:xdist` still parses."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    _byte_compiled()
    if getattr(config.option, "numprocesses", 0) is not None:
        return  # xdist absent or turned off, or -n given
    if config.getoption("usepdb", False) or any(Path(a.split("::")[0]).is_file() for a in config.args):
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    config.option.numprocesses = cores + 1
    if config.option.dist == "no":
        config.option.dist = "loadfile"


def _byte_compiled() -> None:
    """Where bytecode is not written (PYTHONDONTWRITEBYTECODE, as on the team's machines), every
    process the run starts (the workers, the app under tmux, each capture child) compiled each of
    the package's modules it imported from source again, ~0.2-1 s of CPU a process: compile them
    once, before any starts (into the sources' __pycache__, which git ignores; reading them is not
    turned off by that variable). Nothing to do where Python writes them itself."""
    if not sys.dont_write_bytecode:
        return
    import compileall

    for folder in ("nsight_tui", "parsers", "tui", "capture", "tests/helpers"):
        compileall.compile_dir(str(ROOT / folder), quiet=1)


ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
SHARED = ROOT.parent / "shared" / "traces"
# Captures without phase syncs, committed xz'd: tests read them through `async_trace`.
ASYNC = SAMPLES / "async"
# The planted/fixed twins of the findings rules, committed xz'd too: read them through
# tests/helpers/xz_samples.py's `plain`.
FINDINGS = SAMPLES / "findings"

REPORTS = ("nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
           "cuda_gpu_mem_time_sum")


def shared_trace(name: str) -> Path:
    path = SHARED / f"{name}.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is only beside the team's checkouts)")
    return path


def sample_traces() -> list[Path]:
    """The exports at sample_traces/'s root as plain SQLite files, in the order of their names: each
    `NAME.sqlite`, and each `NAME.sqlite.xz` decompressed through `plain` (its cached `NAME.sqlite`)."""
    found = [*SAMPLES.glob("*.sqlite"), *(plain(p) for p in SAMPLES.glob(f"*{XZ_TRACE}"))]
    return sorted(found, key=lambda p: p.name)


def sample_file(stem: str) -> Path:
    """sample_traces/STEM as a plain SQLite file: the committed `STEM.sqlite`, else the committed
    `STEM.sqlite.xz` decompressed through `plain` (for a list of samples some of which are xz'd)."""
    path = SAMPLES / f"{stem}.sqlite"
    return path if path.exists() else plain(SAMPLES / f"{stem}{XZ_TRACE}")


def trace_stem(path: Path) -> str:
    """`NAME` of `NAME.sqlite` or `NAME.sqlite.xz`."""
    return path.name[: -len(XZ_TRACE)] if path.name.endswith(XZ_TRACE) else path.stem


def async_names() -> list[str]:
    """The stems of sample_traces/async/*.sqlite.xz (devruns/gpu_async.sh)."""
    return sorted(trace_stem(p) for p in ASYNC.glob(f"*{XZ_TRACE}"))


@pytest.fixture(scope="session")
def async_trace():
    """`async_trace(NAME or path)` -> Path of sample_traces/async/NAME.sqlite.xz (or of the
    `.sqlite.xz` path given) decompressed by tests/helpers/xz_samples.py's `plain`, once, into its per-user
    cache (never beside the sample: the committed tree stays xz'd); a plain `.sqlite` path comes
    back as it is."""

    def get(name: str | Path) -> Path:
        source = name if isinstance(name, Path) else ASYNC / f"{name}{XZ_TRACE}"
        if source.name.endswith(XZ_TRACE) and not source.exists():
            pytest.fail(f"{source} is not committed")
        return plain(source)

    return get


@pytest.fixture(scope="session")
def thirdparty(async_trace, tmp_path_factory):
    """`thirdparty(STEM)` -> sample_traces/thirdparty/STEM.sqlite.xz decompressed into tmp once, with
    the records the capture left beside it (`STEM.steps.json`, `.run.json`, `.oom.json`), as a user has it."""
    folder = tmp_path_factory.mktemp("thirdparty")
    source = SAMPLES / "thirdparty"

    def get(stem: str) -> Path:
        target = folder / f"{stem}.sqlite"
        if not target.exists():
            shutil.copyfile(async_trace(source / f"{stem}.sqlite.xz"), target)
            for side in source.glob(f"{stem.removesuffix('.oom')}.*.json"):
                shutil.copyfile(side, folder / side.name)
        return target
    return get


def oracle_csv(folder: Path, stem: str, report: str) -> Path | None:
    """NVIDIA's CSV for one report: `oracle/STEM_REPORT.csv`, or `.csv.xz` (the op-range
    samples' NVTX reports hold a row per op instance: megabytes that xz makes tens of KB)."""
    for suffix in (".csv", ".csv.xz"):
        path = folder / "oracle" / f"{stem}_{report}{suffix}"
        if path.exists():
            return path
    return None


def read_oracle(path: Path) -> str:
    if path.suffix == ".xz":
        import lzma

        return lzma.decompress(path.read_bytes()).decode()
    return path.read_text()


def oracle_cases() -> list[tuple[Path, Path, str]]:
    """(trace, NVIDIA's CSV, report) for every trace that has NVIDIA's CSVs beside it. A trace may be
    a `.sqlite.xz` (sample_traces/async): open it through the `async_trace` fixture."""
    cases = []
    rank_folders = sorted(p for p in SAMPLES.iterdir() if p.is_dir() and (p / "oracle").is_dir())
    for folder in (SAMPLES, *rank_folders, SHARED):
        traces = sorted([*folder.glob("*.sqlite"), *folder.glob(f"*{XZ_TRACE}")]) if folder.exists() else []
        for trace in traces:
            for report in REPORTS:
                csv_path = oracle_csv(folder, trace_stem(trace), report)
                if csv_path is not None:
                    cases.append((trace, csv_path, report))
    return cases


def mutated_copy(tmp_path: Path, name: str, *sql: str, src: Path | None = None, drop_not_null: bool = False) -> Path:
    """A copy of a committed sample (small_ctx128_fwd by default) with `sql` applied: the bad
    bad inputs are made this way, never committed. `drop_not_null` first removes
    nsys's NOT NULL constraints (they do not change how rows are stored) so NULLs can go in."""
    import shutil
    import sqlite3

    path = tmp_path / f"{name}.sqlite"
    shutil.copyfile(src or sample_file("small_ctx128_fwd"), path)
    if drop_not_null:
        con = sqlite3.connect(path)
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'")
        con.commit()
        con.close()
    con = sqlite3.connect(path)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return path

