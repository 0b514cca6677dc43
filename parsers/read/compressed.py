"""Exports compressed whole (`x.sqlite.xz`, `.gz`, `.bz2`): people compress an export to copy it
off the GPU box, and the project's own samples are stored so. SQLite reads pages at random, so
the file is decompressed once into the user's cache folder and read there; the compressed file
is only read, and nothing is written beside it.

Where: `<cache>/plain/<key>/<name without .xz/.gz/.bz2>`, in the cache folder read.cache names
(`nsight-tui cache clear` removes them too); `<key>` hashes the compressed file's identity
(device, inode, size, mtime and ctime in ns), so a changed file is decompressed again. Written to
a temporary folder and renamed into place in one step: a reader sees a whole file or none. Where
the cache is off or cannot be written, into a temporary folder removed when the process ends. A
file of NOTE_BYTES or more says so on stderr first (one line; not with -q): decompressing
gigabytes takes a while.

Past KEEP copies, an open removes the least recently used, but never one in use:
- in this process: a copy is pinned to what reads it (the loader and each Trace made from it, a
  connection or table reader opened on the compressed file: `plain_export`'s `owner`, `pin`) and
  is evictable again once all of those are gone (garbage-collected: weakref.finalize). A trace
  reads its file again after it is loaded (a table on first use, the session start), so a folder
  of more than KEEP compressed rank files read as one run (`whatif DIR`) keeps every copy while
  its traces live: KEEP is exceeded for as long as more than KEEP are in use (they count towards
  it), and the first open after they are gone evicts back to KEEP;
- in another running process: each process marks the copies it opened (a `.held-by-PID` file in
  the copy's folder, there until the process ends); a copy marked by a live process is left (and
  not counted), the marks of ended processes go.
"""
from __future__ import annotations

import atexit
import bz2
import gzip
import hashlib
import lzma
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nsight_tui.parsers.read import cache
from nsight_tui.parsers.read.errors import TraceError

SQLITE_MAGIC = b"SQLite format 3\x00"  # an SQLite file's first bytes (read.source checks it too)
# The first bytes of each format, and the module that reads it (the standard library's).
FORMATS: dict[bytes, tuple[str, Callable[..., Any]]] = {
    b"\xfd7zXZ\x00": ("xz", lzma.open), b"\x1f\x8b": ("gzip", gzip.open), b"BZh": ("bzip2", bz2.open)}
SUFFIXES = (".xz", ".gz", ".bz2")
# Formats the standard library cannot read: named in the refusal, with what opens them.
UNREAD = {b"\x28\xb5\x2f\xfd": "zstd-compressed: decompress it first (`zstd -d FILE`)",
          b"PK\x03\x04": "a zip archive: unzip it first",
          b"\x04\x22\x4d\x18": "lz4-compressed: decompress it first (`lz4 -d FILE`)"}
KEEP = cache.PLAIN_KEEP
CHUNK = 1 << 20
NOTE_BYTES = 100 * 10**6

_scratch: Path | None = None
# This process's uses of its copies. `_lock` makes an open's look-up or rename, its pin and its
# eviction one step against the other threads' opens (whatif DIR reads a few rank files at once).
_lock = threading.Lock()
_pins: Counter[Path] = Counter()  # a copy's folder -> the live objects that read it
_released: deque[Path] = deque()  # pins whose owner is gone, settled under the lock (a finalizer
# runs wherever the garbage collector does, inside a locked section too: it only appends here)
_roots_used: set[Path] = set()  # the folders this process's copies are in (pin recognises them)


def _after_fork() -> None:
    """A worker forked while another thread held the lock (ranks DIR's pool) gets one of its own."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def unread_format(head: bytes) -> str | None:
    """What a file is, from its first bytes, where it is a container this tool does not open."""
    return next((why for magic, why in UNREAD.items() if head.startswith(magic)), None)


def compression(path: Path) -> str | None:
    """'xz', 'gzip' or 'bzip2' for a file that starts as one, else None (a plain export, a folder,
    a missing file: the open that follows says what is wrong with those)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError:
        return None
    return next((name for magic, (name, _) in FORMATS.items() if head.startswith(magic)), None)


class InUse:
    """A placeholder owner (`plain_export`'s), for a caller that pins the copy to what it opens on it
    (`pin`) once that exists: the copy is in use from the look-up on."""


def plain_export(path: str | os.PathLike, owner: object | None = None) -> Path:
    """The path to read: `path` itself, or for a compressed export its decompressed copy. `owner`:
    what reads the copy (a loader, a trace, a connection; weakly referenced): no open in this process
    evicts the copy while it lives (module docstring); None pins nothing."""
    path = Path(path)
    if not path.is_file():
        return path
    kind = compression(path)
    if kind is None:
        return path
    st = path.stat()
    key = hashlib.blake2b(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}".encode(),
                          digest_size=16).hexdigest()
    name = as_plain_name(path).name
    name = name if name.endswith(".sqlite") else name + ".sqlite"
    no_room = ""
    for root in _roots():
        done = root / key / name
        with _lock:
            _roots_used.add(root)
            if done.is_file():
                _pin(done.parent, owner)
                os.utime(done.parent)  # used now: the last to go
                _hold(done.parent)
                return done
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = Path(tempfile.mkdtemp(prefix=cache.TMP_PREFIX, dir=root))
        except OSError as exc:
            no_room = f"{root}: {exc.strerror or exc}"
            continue  # the cache folder cannot be written: the scratch folder instead
        try:
            if st.st_size >= NOTE_BYTES and os.environ.get(cache.ENV_QUIET) != "1":
                sys.stderr.write(f"nsight-tui: note: decompressing {path.name} ({st.st_size / 1e6:,.0f} MB, {kind}) "
                                 f"once, into {root}\n")
                sys.stderr.flush()
            _decompress(path, kind, tmp / name)
            with _lock:  # in place and pinned before another thread's open evicts anything
                try:
                    tmp.rename(root / key)
                except OSError:  # another process (or thread) put it there first: theirs is the same file
                    shutil.rmtree(tmp, ignore_errors=True)
                _pin(root / key, owner)
                _hold(root / key)
                _evict(root, keep=root / key)
        except _NoRoom as exc:  # full or read-only: the next folder may take it
            shutil.rmtree(tmp, ignore_errors=True)
            no_room = str(exc)
            continue
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return done
    raise TraceError(f"{path}: {kind}-compressed, and no folder could take its decompressed copy ({no_room}); "
                     f"decompress it yourself and open the .sqlite")


def pin(copy: str | os.PathLike, owner: object) -> None:
    """`copy`, a decompressed copy `plain_export` gave this process, stays while `owner` lives (weakly
    referenced: a Trace made from it, a connection opened on it); any other path: nothing."""
    folder = Path(copy).parent
    with _lock:
        if folder.parent in _roots_used:
            _pin(folder, owner)


def _pin(folder: Path, owner: object | None) -> None:
    """Under _lock."""
    if owner is not None:
        _pins[folder] += 1
        weakref.finalize(owner, _released.append, folder).atexit = False


def _settle() -> None:
    """The pins whose owners are gone, dropped (under _lock)."""
    while _released:
        folder = _released.popleft()
        _pins[folder] -= 1
        if _pins[folder] <= 0:
            del _pins[folder]


def is_compressed_export(path: Path) -> bool:
    """Named as an export compressed whole: `NAME.sqlite.xz`, `.gz` or `.bz2`."""
    return path.suffix in SUFFIXES and path.name[: -len(path.suffix)].endswith(".sqlite")


def exports_in(folder: Path) -> list[Path]:
    """A folder's SQLite exports, regular files: `*.sqlite`, and `*.sqlite.xz|gz|bz2` where the
    folder has no plain export of that name (one compressed file an export: the first by name);
    in the order of their exports' names."""
    files = sorted((p for p in folder.iterdir() if p.is_file() and (p.suffix == ".sqlite" or is_compressed_export(p))),
                   key=lambda p: (as_plain_name(p).name, p.suffix != ".sqlite", p.name))
    seen: set[str] = set()
    out = []
    for p in files:
        if as_plain_name(p).name not in seen:
            seen.add(as_plain_name(p).name)
            out.append(p)
    return out


def as_plain_name(path: Path) -> Path:
    """`DIR/x.sqlite.xz` -> `DIR/x.sqlite`: the name of the export it holds, where it is kept."""
    return path.with_name(path.name[: -len(path.suffix)]) if path.suffix in SUFFIXES else path


def _roots() -> Iterator[Path]:
    """The cache folder's, then (made only when asked) a temporary one."""
    if cache.usable():
        yield cache.cache_root() / cache.PLAIN
    yield _scratch_folder()


def _scratch_folder() -> Path:
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="nsight-tui-plain-"))
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


class _NoRoom(Exception):
    """The folder could not take the copy (full, read-only, gone): the next folder may."""


def _open_copy(out: Path):
    """The copy's file, opened for writing (tests make its writes fail as a full disk does)."""
    return open(out, "wb")


def _decompress(path: Path, kind: str, out: Path) -> None:
    opener = next(op for name, op in FORMATS.values() if name == kind)

    def read(src) -> bytes:
        try:
            return src.read(CHUNK)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise TraceError(f"{path}: {kind}-compressed, but it does not decompress ({exc})") from None

    try:
        src = opener(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc})") from None
    with src:
        chunk = read(src)
        if not chunk.startswith(SQLITE_MAGIC):
            # said of the user's file, before a gigabyte of something else is written
            raise TraceError(f"{path}: {kind}-compressed, but what it holds is not an SQLite file (expected an "
                             f"`nsys export --type sqlite` output)")
        try:
            with _open_copy(out) as dst:
                while chunk:
                    dst.write(chunk)
                    chunk = read(src)
                dst.flush()
                os.fsync(dst.fileno())
        except OSError as exc:  # the copy's side: writing it
            raise _NoRoom(f"{out.parent.parent}: {exc.strerror or exc}") from None


def _hold(folder: Path) -> None:
    """Mark a decompressed copy as read by this process: another process's eviction leaves it while
    this one runs (it reads the file again later, e.g. a table an analysis asks for first). This
    process's own opens go by its pins instead (`pin`)."""
    try:
        (folder / f"{cache.HOLD_PREFIX}{os.getpid()}").touch()
    except OSError:
        pass


def _held_elsewhere(folder: Path) -> bool:
    """Another running process reads this copy (its hold mark names a live process not this one);
    the marks of processes that have ended go."""
    mine = f"{cache.HOLD_PREFIX}{os.getpid()}"
    held = False
    try:
        used = folder.stat()
        ended = False
        for m in folder.glob(f"{cache.HOLD_PREFIX}*"):
            if m.name == mine:
                continue
            if cache.alive(m.name[len(cache.HOLD_PREFIX):]):
                held = True
            else:
                m.unlink(missing_ok=True)
                ended = True
        if ended:  # the folder's time is its last use, not this removal's (else it looks just used
            os.utime(folder, ns=(used.st_atime_ns, used.st_mtime_ns))  # and this process's copies go first)
    except OSError:
        return held
    return held


def _evict(root: Path, keep: Path) -> None:
    """Past KEEP decompressed exports, the least recently used go (under _lock), but `keep` (just
    opened), those a live object of this process reads (pinned: they count towards KEEP, which is
    exceeded while more than KEEP are in use) and those another running process reads (marked: not
    counted); temporary folders left by a process that died mid-write go too."""
    _settle()
    now = time.time()
    counted = 0
    free = []
    for d in root.iterdir():
        try:
            if d.name.startswith(cache.TMP_PREFIX):
                if now - d.stat().st_mtime > cache.STALE_TMP_S:
                    shutil.rmtree(d, ignore_errors=True)
            elif d == keep:
                counted += 1
            elif not _held_elsewhere(d):
                used = d.stat().st_mtime
                counted += 1
                if not _pins[d]:
                    free.append((used, d))
        except OSError:
            continue
    for _, d in sorted(free)[: max(0, counted - KEEP)]:
        shutil.rmtree(d, ignore_errors=True)
