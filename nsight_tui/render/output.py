"""Writing outputs: atomically, never over an input, never over anything but a regular file,
with the permissions the user's umask gives, and one clear line when it cannot be done.

- `check_target(path, overwrite, inputs)`: every check that can be made before the work (the
  CLI calls it first, so a refusal costs nothing and leaves nothing half-written).
- `write_atomic(path, text, overwrite, inputs)`: a temp file beside `path`, then a link (no
  clobber) or os.replace (with overwrite); on any failure or signal the temp file is removed.
- Both pass the text through `safe.document` first: no control or bidi character from a
  profile reaches a terminal or a file raw, whichever renderer made the text.
- `write_stdout(text)`: stdout closed, full (/dev/full) or unwritable -> one line (TraceError).
- `exit_on_signals()`: SIGTERM/SIGHUP end a CLI command through Python's unwinding, so the
  clean-up above runs (the default action would kill it mid-write and leave `.NAME.tmp`);
  `check_signals()` ends it too where that exception was lost, before anything is written.
- `write_all(files)`: several outputs of one command, all or none: a failure or signal
  part-way removes the ones this call placed.

Missing parent folders are not created: `-o results/x.md` with no `results/` is refused with
a line saying so (a typo in a path should not quietly make a folder tree).
"""
from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.render import safe

PathLike = str | os.PathLike


def _shown(path: PathLike) -> str:
    return safe.visible(os.fspath(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def same_file(a: PathLike, b: PathLike) -> bool:
    """`a` and `b` name one file: the same path, a hard link, or a symlink to it (either way)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be reached): not the same file
        return False


# An existing output kept (no --force) exits apart from a usage error (2), so a script can tell "rerun
# with --force" from "fix the command": sysexits' EX_CANTCREAT.
EXISTS_EXIT = 73


def refuse_inputs(outputs: Iterable[PathLike], inputs: Iterable[PathLike]) -> None:
    """TraceError (exit 2) if any output would write over an input file, --force or not."""
    inputs = [Path(p) for p in inputs]
    for out in outputs:
        for src in inputs:
            if same_file(out, src) or os.path.abspath(out) == os.path.abspath(src):
                what = "is" if os.path.abspath(out) == os.path.abspath(src) else "is the same file as"
                raise TraceError(f"{_shown(out)}: {what} the input {_shown(src)}; "
                                 "never writing over an input (choose another output name)")


def check_target(path: PathLike, overwrite: bool = False, inputs: Iterable[PathLike] = ()) -> Path:
    """Every refusal that does not need the text: raises TraceError with one line."""
    path = Path(path)
    refuse_inputs([path], inputs)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # ENOTDIR (a parent is a file), EACCES, ENAMETOOLONG, ELOOP ...
        raise _error(path, exc) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(f"{_shown(path)}: is a directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(f"{_shown(path)}: is {_kind(st.st_mode)}; only regular files are ever replaced")
        if not overwrite:
            raise TraceError(f"{_shown(path)}: exists; not overwriting (use --force or another name)", EXISTS_EXIT)
    _check_folder(path)
    return path


def _check_folder(path: Path) -> None:
    folder = path.parent
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        blocker = _first_non_dir(folder)
        if os.path.lexists(blocker) and blocker != folder:
            raise TraceError(f"{_shown(path)}: {_shown(blocker)} is not a directory") from None
        raise TraceError(f"{_shown(path)}: folder {_shown(folder)} does not exist; create it first") from None
    except OSError as exc:
        raise _error(path, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{_shown(path)}: {_shown(folder)} is not a directory")


def _first_non_dir(folder: Path) -> Path:
    """The first component of `folder` that exists but is not a directory (else `folder`)."""
    for part in reversed((folder, *folder.parents)):
        if os.path.lexists(part) and not part.is_dir():
            return part
    return folder


def _error(path: Path, exc: OSError) -> TraceError:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        where = path.parent if str(path.parent) else Path(".")
        return TraceError(f"{_shown(path)}: cannot write in {_shown(where)} ({reason})")
    if exc.errno == errno.ENOTDIR:
        return TraceError(f"{_shown(path)}: {_shown(_first_non_dir(path.parent))} is not a directory")
    return TraceError(f"{_shown(path)}: cannot write ({reason})")


def _open_temp(folder: Path, name: str, mode: int | None) -> tuple[int, Path]:
    """A new file `.NAME.XXXXXXXX.tmp` in `folder`, created 0666 & ~umask like any tool's output
    (mkstemp's 0600 would not be), or with the mode of the file it will replace."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                pass  # the umask's mode is a fine fallback
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def write_atomic(path: PathLike, text: str, overwrite: bool = False, inputs: Iterable[PathLike] = ()) -> Path:
    """Write `text` (UTF-8) to `path` via a temp file in the same folder.

    Refused (TraceError, one line, nothing left behind): `path` is an input, exists and
    `overwrite` is false, is not a regular file, its folder is missing or unwritable, or the
    disk fills up. `overwrite` keeps the replaced file's permissions.
    """
    path = check_target(path, overwrite, inputs)
    folder = path.parent
    try:
        old = os.stat(path)
        keep_mode = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else None
    except OSError:
        keep_mode = None
    tmp: Path | None = None
    try:
        fd, tmp = _open_temp(folder, path.name, keep_mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(safe.document(text).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        check_target(path, overwrite, inputs)  # again: the name may have changed meanwhile
        check_signals()  # a signal whose exception was lost: the file is not placed
        if overwrite:
            os.replace(tmp, path)
        else:
            _place_new(tmp, path)
        tmp = None
    except OSError as exc:
        raise _error(path, exc) from None
    finally:  # also on KeyboardInterrupt and the SystemExit of exit_on_signals
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path


def _place_new(tmp: Path, path: Path) -> None:
    """Give `tmp` the name `path` only if nobody took it meanwhile."""
    try:
        os.link(tmp, path)  # unlike rename, fails if the name was taken meanwhile
    except FileExistsError:
        raise TraceError(f"{_shown(path)}: appeared while writing; not overwriting") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(path):  # no hard links on this file system: check, then rename
            raise TraceError(f"{_shown(path)}: appeared while writing; not overwriting") from None
        os.rename(tmp, path)
        return
    os.unlink(tmp)


def write_all(files: Sequence[tuple[PathLike, str]], overwrite: bool = False,
              inputs: Iterable[PathLike] = ()) -> list[Path]:
    """`write_atomic` for each (path, text), all or none: if one fails, or a signal comes
    part-way, the files placed so far by this call are removed (a file it replaced with
    `overwrite` is gone either way: its old text is not kept)."""
    for path, _ in files:  # every refusal before the first write
        check_target(path, overwrite, inputs)
    placed: list[Path] = []
    try:
        for path, text in files:
            placed.append(write_atomic(path, text, overwrite, inputs))
        check_signals()
    except BaseException:
        for done in placed:
            with contextlib.suppress(OSError):
                os.unlink(done)
        raise
    return placed


def unique_path(path: PathLike) -> Path:
    """`path`, or `stem-2.ext`, `stem-3.ext`, ... : the first name not taken."""
    path = Path(path)
    if not os.path.lexists(path):
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not os.path.lexists(candidate):
            return candidate
        n += 1


# -- standard output ---------------------------------------------------------------------
def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's last flush at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def write_stdout(text: str) -> None:
    """Write and flush `text` to stdout; a closed or failing stdout is one TraceError line.

    A closed pipe (`| head`) is not an error: BrokenPipeError goes up and the CLI exits 0.
    """
    check_signals()
    out = sys.stdout
    if out is None:
        raise TraceError("standard output is closed; nowhere to write (use -o FILE)")
    try:
        out.write(safe.document(text))
        out.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise
    except (OSError, ValueError) as exc:  # ENOSPC on /dev/full, EBADF, "I/O operation on closed file"
        _silence_stdout()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise TraceError(f"cannot write to standard output ({reason})") from None


def stdout_width(default: int = 200) -> int:
    """Terminal width for tables: the terminal's (100..240) on a TTY, else `default`."""
    out = sys.stdout
    try:
        if out is not None and out.isatty():
            return max(100, min(240, os.get_terminal_size(out.fileno()).columns))
    except (OSError, ValueError):
        pass
    return default


# -- signals -------------------------------------------------------------------------------
_received: list[int] = []  # the signals exit_on_signals has seen, in this process


def signalled() -> int | None:
    """The signal that ended the command (exit_on_signals saw it), if one did."""
    return _received[0] if _received else None


def check_signals() -> None:
    """SystemExit(128 + signal) if a signal ended the command already. The handler raised it
    once, but Python drops an exception raised while a `__del__` or a weakref callback runs
    (it only prints "Exception ignored"): so the command checks again before it writes."""
    if _received:
        raise SystemExit(128 + _received[0])


@contextlib.contextmanager
def exit_on_signals(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Within the block, SIGTERM/SIGHUP raise SystemExit(128 + signal): `finally` clauses run
    (temp files go) and the exit status says which signal ended the command. Writes check
    `check_signals` first, and so does the block's end: a signal whose exception was lost
    still ends the command, with nothing (more) written."""
    def _raise(signum, _frame):
        _received.append(signum)
        raise SystemExit(128 + signum)

    previous = {}
    try:
        for s in signums:
            previous[s] = signal.signal(s, _raise)
    except ValueError:  # not the main thread: leave the handlers alone
        pass
    try:
        yield
        check_signals()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
