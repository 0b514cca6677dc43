"""Writing outputs (issues #10 and #16): never over an input, only ever over a regular file,
permissions from the umask, one line and nothing left behind when the output cannot be
written (bad -o, unwritable folder, full or closed stdout, SIGTERM/SIGHUP mid-write)."""
from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import SAMPLES
from helpers import cli_process

SAMPLE = SAMPLES / "small_ctx128.sqlite"


def cli(*args, umask: int | None = None, stdout=subprocess.PIPE, shell_suffix: str = "", timeout=300):
    """`python -m nsight_tui ARGS` (through a shell when the test needs one: umask, closed fds)."""
    if umask is None and not shell_suffix and stdout == subprocess.PIPE:
        return cli_process.run(args, text=True, timeout=timeout)
    argv = [sys.executable, "-m", "nsight_tui", *map(str, args)]
    if umask is None and not shell_suffix:
        return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    import shlex

    script = (f"umask {umask:03o}; " if umask is not None else "") + shlex.join(argv) + shell_suffix
    return subprocess.run(["bash", "-c", script], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)


def one_line_error(proc, *needles) -> str:
    assert proc.returncode not in (0, 70), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("attribution:", "note:"))]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture()
def trace(tmp_path) -> Path:
    path = tmp_path / "trace.sqlite"
    shutil.copy(SAMPLE, path)
    return path


# -- never over an input ----------------------------------------------------------------------
@pytest.mark.parametrize("how", ["same path", "hard link", "symlink", "relative path"])
def test_report_never_writes_over_its_input(trace, how):
    before = digest(trace)
    out = {"same path": trace, "relative path": Path(os.path.relpath(trace))}.get(how, trace.parent / "out.md")
    if how == "hard link":
        os.link(trace, out)
    elif how == "symlink":
        out.symlink_to(trace)
    proc = cli("report", trace, "-o", out, "--force")
    one_line_error(proc, "input")
    assert proc.returncode == 2
    assert digest(trace) == before and stat.S_ISREG(os.lstat(trace).st_mode)
    assert leftovers(trace.parent) == []


def test_stats_never_writes_over_its_input(trace):
    before = digest(trace)
    os.link(trace, trace.parent / "out_nvtx_sum.csv")  # the name stats -o out would write
    proc = cli("stats", trace, "-r", "nvtx_sum", "-f", "csv", "-o", trace.parent / "out", "--force")
    one_line_error(proc, "input")
    assert digest(trace) == before


def test_sweep_report_never_writes_over_a_member(tmp_path):
    member = tmp_path / "small_ctx128.sqlite"
    shutil.copy(SAMPLE, member)
    before = digest(member)
    proc = cli("report", tmp_path, "-o", member, "--force")
    one_line_error(proc, "input")
    assert digest(member) == before


def test_tui_export_never_writes_over_an_open_profile(tmp_path):
    """`e`, then `o` (overwrite) in the conflict dialog: the profile open in the app is the
    file the export would replace (a profile named like the export). Refused; profile intact."""
    from nsight_tui.tui.app import NsightApp

    profile = tmp_path / "nsight-tui_ranges.md"
    shutil.copy(SAMPLE, profile)
    before = digest(profile)

    async def body():
        app = NsightApp([str(profile)], export_dir=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(3000):
                if app.loaded and not any(w.state.name in ("PENDING", "RUNNING") for w in app.workers):
                    break
                await pilot.pause(0.02)
            assert app.loaded
            await pilot.press("e")
            for _ in range(500):  # the export text is built in a worker, then the dialog opens
                if type(app.screen).__name__ == "ExportConflict":
                    break
                await pilot.pause(0.02)
            assert type(app.screen).__name__ == "ExportConflict"
            await pilot.press("o")
            for _ in range(200):
                await pilot.pause(0.01)
                if type(app.screen).__name__ != "ExportConflict":
                    break
            await pilot.pause()

    asyncio.run(body())
    assert digest(profile) == before
    assert leftovers(tmp_path) == []


# -- where the output goes ----------------------------------------------------------------------
def test_output_whose_parent_is_a_file(trace):
    (trace.parent / "file.txt").write_text("x")
    proc = cli("report", trace, "-o", trace.parent / "file.txt" / "out.md")
    one_line_error(proc, "not a directory")


def test_output_naming_a_directory_with_force(trace):
    folder = trace.parent / "folder"
    folder.mkdir()
    proc = cli("report", trace, "-o", folder, "--force")
    one_line_error(proc, "is a directory")
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_missing_parent_folders_are_not_created(trace):
    proc = cli("report", trace, "-o", trace.parent / "no" / "such" / "out.md")
    one_line_error(proc, "does not exist")
    assert not (trace.parent / "no").exists()


def test_only_regular_files_are_replaced_fifo(trace):
    fifo = trace.parent / "pipe.md"
    os.mkfifo(fifo)
    proc = cli("report", trace, "-o", fifo, "--force")
    one_line_error(proc, "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_only_regular_files_are_replaced_device(trace):
    dev = trace.parent / "null.md"
    st = os.stat("/dev/null")
    os.mknod(dev, stat.S_IFCHR | 0o666, st.st_rdev)
    proc = cli("stats", trace, "-r", "nvtx_sum", "-o", trace.parent / "null", "-f", "markdown", "--force")
    assert proc.returncode == 0  # the prefix makes another name: null_nvtx_sum.md
    proc = cli("report", trace, "-o", dev, "--force")
    one_line_error(proc, "character device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_unwritable_folder(trace, monkeypatch, capsys):
    """A read-only folder (as root, which may write anywhere, the refusal is simulated)."""
    from nsight_tui.cli import main
    from nsight_tui.render import output

    folder = trace.parent / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        def refuse(path, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(path))
        monkeypatch.setattr(output.os, "open", refuse)
    code = main(["report", str(trace), "-o", str(folder / "out.md")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot write in" in err and "Permission denied" in err, err
    assert list(folder.iterdir()) == []


# -- permissions ------------------------------------------------------------------------------
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_output_mode_follows_umask(trace, umask, mode):
    out = trace.parent / "out.md"
    proc = cli("report", trace, "-o", out, umask=umask)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == mode


def test_force_keeps_the_replaced_files_mode(trace):
    out = trace.parent / "out.md"
    out.write_text("old\n")
    out.chmod(0o644)
    proc = cli("report", trace, "-o", out, "--force", umask=0o077)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("# nsight-tui report") and stat.S_IMODE(os.stat(out).st_mode) == 0o644


# -- standard output --------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["stats", "-r", "nvtx_sum"], ["report"]])
def test_stdout_full(trace, command):
    with open("/dev/full", "w") as full:
        proc = cli(command[0], trace, *command[1:], stdout=full)
    one_line_error(proc, "standard output", "No space left")


@pytest.mark.parametrize("command", [["stats", "-r", "nvtx_sum"], ["report"]])
def test_stdout_closed(trace, command):
    proc = cli(command[0], trace, *command[1:], stdout=None, shell_suffix=" >&-")
    one_line_error(proc, "standard output is closed")


def test_stdout_pipe_closed_early_is_not_an_error(trace):
    proc = subprocess.run(f"{sys.executable} -m nsight_tui stats {trace} -f csv | head -c 10 >/dev/null",
                          shell=True, capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


# -- signals mid-write ------------------------------------------------------------------------
# The command's file object for the temp file sends the signal to its own process halfway
# through writing, as a `kill` from outside would land at the worst moment.
SIGNAL_MID_WRITE = textwrap.dedent("""
    import os, signal, sys, time
    real = os.fdopen
    class Slow:
        def __init__(self, f): self.f = f
        def write(self, data):
            self.f.write(data[:10]); self.f.flush()
            os.kill(os.getpid(), signal.{sig}); time.sleep(30)
        def __getattr__(self, name): return getattr(self.f, name)
        def __enter__(self): return self
        def __exit__(self, *exc): self.f.close()
    def fdopen(fd, *a, **k):
        f = real(fd, *a, **k)
        return Slow(f) if os.readlink(f"/proc/self/fd/{{fd}}").endswith(".tmp") else f
    os.fdopen = fdopen
    from nsight_tui.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("command", ["stats", "report"])
def test_signal_mid_write_leaves_no_temp_file(trace, sig, command):
    out = trace.parent / "out"
    args = ["stats", str(trace), "-r", "nvtx_sum", "-o", str(out)] if command == "stats" else \
        ["report", str(trace), "-o", str(out) + ".md"]
    proc = subprocess.run([sys.executable, "-c", SIGNAL_MID_WRITE.format(sig=sig), *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 128 + getattr(signal, sig), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert leftovers(trace.parent) == [] and sorted(p.name for p in trace.parent.iterdir()) == ["trace.sqlite"]
