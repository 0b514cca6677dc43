"""Commands interrupted by a signal exit 128 + its number and write nothing.

- `ranks` over several files, interrupted while its worker pool starts: SIGINT hung past 60 s
  (`'Finalize' object has no attribute '_key'`) or exited 0 with the output written, or 70 with
  `BrokenProcessPool`; SIGTERM was swallowed. Now the workers leave signals to the parent,
  which stops the pool and kills them.
- `stats -o PREFIX` given SIGHUP carried on and wrote every file. Now its files are written all
  or none, and a signal whose exception Python dropped still ends the command before it writes.

Real processes, real signals, at states the test waits for (the pool's first worker, all of
them, the trace loaded), each several times; never a sleep as the basis of an assertion."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLES

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
REPEATS = 2


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def until(what: str, check, proc: subprocess.Popen, timeout: float = 120.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the command ended first ({proc.returncode})")
        time.sleep(0.01)
    raise AssertionError(f"{what}: not reached")


def _signals_as_in_a_terminal() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory) -> list[Path]:
    """Four exports big enough that summarising them outlasts the signal."""
    folder = tmp_path_factory.mktemp("ranks")
    big = folder / "big.sqlite"
    subprocess.run([sys.executable, str(SAMPLES.parent / "bench" / "scale_trace.py"), str(SAMPLES / "small_ctx128.sqlite"),
                    str(big), "--times", "20"], check=True, capture_output=True, timeout=300)
    files = []
    for rank in range(4):
        path = folder / f"run_rank{rank}.sqlite"
        os.link(big, path)
        files.append(path)
    return files


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("point", ["pool", "workers"])
@pytest.mark.parametrize("repeat", range(REPEATS))
def test_ranks_interrupted_while_its_pool_starts(rank_files, tmp_path, sig, point, repeat):
    out = tmp_path / "ranks.md"
    # The command as a terminal runs it, whatever runs the tests: a suite started in the background of
    # a non-interactive shell (`pytest &`) has SIGINT ignored, which its children inherit, and a
    # command that began with SIGINT ignored rightly keeps ignoring it (it ran to the end, exit 0)
    proc = subprocess.Popen([sys.executable, "-m", "nsight_tui", "ranks", *map(str, rank_files), "--workers", "2",
                             "-o", str(out)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_signals_as_in_a_terminal)
    try:
        want = 1 if point == "pool" else 2
        workers = until(f"{want} worker(s) started", lambda: (lambda c: c if len(c) >= want else None)(children(proc.pid)),
                        proc)
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert not [w for w in workers if alive(w)], "a worker outlived the command"


@pytest.mark.parametrize("point", ["loading", "loaded"])
@pytest.mark.parametrize("repeat", range(REPEATS))
def test_stats_to_files_hung_up(rank_files, tmp_path, point, repeat):
    trace = rank_files[0]
    err_file = tmp_path / "stderr"
    with open(err_file, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "nsight_tui", "stats", str(trace), "-o", str(tmp_path / "p")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        if point == "loading":  # the trace is open: the command is reading it
            until("the trace open", lambda: any(os.path.realpath(f) == str(trace)
                                                for f in _fds(proc.pid)), proc)
        else:  # loaded: the first line it prints once the trace is read
            until("the trace loaded", lambda: "attribution:" in err_file.read_text(), proc)
        os.kill(proc.pid, signal.SIGHUP)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGHUP, err_file.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stderr"]  # no report file, no temp file


def _fds(pid: int) -> list[str]:
    try:
        return [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return []


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_stats_to_files_hung_up_while_importing(rank_files, tmp_path, repeat):
    """The issue's case: a process that began with SIGHUP ignored (a harness, nohup) lost a
    SIGHUP that came during its imports, carried on and wrote every file (exit 0). The state
    waited for: numpy mapped into the process (imported only once the command has started)."""
    def maps() -> str:
        try:
            return Path(f"/proc/{proc.pid}/maps").read_text()
        except OSError:
            return ""

    proc = subprocess.Popen([sys.executable, "-m", "nsight_tui", "stats", str(rank_files[0]), "-o", str(tmp_path / "p")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        until("numpy being imported", lambda: "numpy" in maps(), proc)
        os.kill(proc.pid, signal.SIGHUP)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
