"""A per-user cache of what a load computes, so a second open of the same file costs
page-ins, not parsing.

Where: `$NSIGHT_TUI_CACHE_DIR`, else `$XDG_CACHE_HOME/nsight-tui`, else `~/.cache/nsight-tui`
(created 0700). Never beside the profile, never inside it: the profile is only read (its
first and last 64 KiB, to fingerprint it).

Layout: one *slot* folder per file (named by a hash of its device and inode), holding one
folder per *bundle* (the loaded trace, a range model, ...). A bundle is numpy `.npy` files
(opened memory-mapped, copy-on-write) and a `manifest.json` holding small values, the file
list with sizes and the identity of the profile it was made from. A bundle is written to a
temporary folder beside the slots, each file fsync'd, the manifest last, then renamed into
place in one step: a reader sees a whole bundle or none; two writers racing leave one.

A bundle is used only when its manifest's identity equals the profile's now: device, inode,
size, mtime and ctime in ns (ctime cannot be set back by a tool that rewrites the file and
restores its mtime), a hash of the file's first and last 64 KiB (SQLite's header, whose
change counter moves on every commit, is in the first) and a stamp of this code (the
modules that compute what is stored). Anything else -- a missing, truncated or unparsable
file -- is a miss: the caller computes again and writes a fresh bundle.

Bounded: after each write the least recently used slots are removed until the cache holds
at most `$NSIGHT_TUI_CACHE_MAX_GB` (default: 20% of the free space, at most 20 GB). What each
slot holds is kept in a ledger (`.ledger.json`: slot -> bytes), so a write measures only its
own slot, not the whole cache (a cache of thousands of slots is ~10^5 files: walking them on
every write cost seconds each, minutes for a folder of ranks); the ledger is checked against
the slots' names on every write (a slot another process or version added is measured, one
removed is dropped), and a missing or unreadable ledger is rebuilt by one walk. A cache
folder that cannot be written (read-only, full, not a folder) turns the cache off for the
process with one note on stderr; the load goes on without it. `$NSIGHT_TUI_NO_CACHE=1` (the
CLI's `--no-cache`) turns it off silently.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nsight_tui.parsers.read.threads import background_priority

FORMAT = 1
ENV_DIR = "NSIGHT_TUI_CACHE_DIR"
ENV_OFF = "NSIGHT_TUI_NO_CACHE"
ENV_QUIET = "NSIGHT_TUI_QUIET"  # the command line's -q: no notes on stderr
ENV_MAX = "NSIGHT_TUI_CACHE_MAX_GB"
EDGE_BYTES = 64 * 1024  # bytes hashed at each end of the profile
DEFAULT_MAX_BYTES = 20 * 10**9
DEFAULT_FREE_SHARE = 0.2
MANIFEST = "manifest.json"
TRACE_BUNDLE = "trace"  # the loaded trace's bundle (read.load)
PAIRS_BUNDLE = "process_device_pairs"  # the first op of each (process, GPU): analyses.ranks, written by read.load
PLAIN = "plain"  # exports compressed whole, decompressed (read.compressed): no slot
PLAIN_KEEP = 8  # decompressed exports kept, the last used (an export can be gigabytes)
HOLD_PREFIX = ".held-by-"  # beside a decompressed copy: a process that reads it (its pid)
TMP_PREFIX = ".tmp-"
LEDGER = ".ledger.json"  # {"format": 1, "slots": {slot: bytes}}: what eviction counts, without a walk
LEDGER_LOCK = ".ledger.lock"  # flock'd while the ledger is read, changed and replaced
TRASH_PREFIX = ".old-"
STALE_TMP_S = 3600  # a temporary folder this old was left by a process that died mid-write


def enabled() -> bool:
    return os.environ.get(ENV_OFF, "") in ("", "0")


def cache_root() -> Path:
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "nsight-tui"


# -- notes: one line on stderr per process, the first time the cache cannot be used -------
_noted = False
_off_for_process = False
_lock = threading.Lock()


def _give_up(why: str) -> None:
    """The cache folder cannot be used: say so once, then run without it."""
    global _noted, _off_for_process
    with _lock:
        _off_for_process = True
        if _noted or os.environ.get(ENV_QUIET) == "1":
            return
        _noted = True
    try:  # one write, the newline in it: a writer thread's note never splits around another line
        sys.stderr.write(f"nsight-tui: note: cache not used ({why}); opening reads the whole file each time "
                         f"(set {ENV_DIR} to a writable folder, or pass --no-cache)\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed
        pass


def usable() -> bool:
    return enabled() and not _off_for_process


WRITER_THREAD = "nsight-cache-write"
_writers: list[threading.Thread] = []


def wait_all() -> None:
    """Wait for every bundle this process is writing (the CLI before it exits; tests)."""
    while True:
        with _lock:
            if not _writers:
                return
            t = _writers.pop()
        t.join()


# -- identity ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Identity:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    edges: str  # blake2b of the first and last EDGE_BYTES
    code: str  # stamp of the modules whose results are stored

    @property
    def slot(self) -> str:
        return hashlib.blake2b(f"{self.dev}:{self.ino}".encode(), digest_size=16).hexdigest()


_code_stamp: str | None = None


def code_stamp() -> str:
    """A hash of the source of the read and model layers (and this format): what the cache
    stores is their output, so a changed module makes every bundle stale."""
    global _code_stamp
    if _code_stamp is None:
        here = Path(__file__).resolve().parent
        # this module's layout is FORMAT's
        _code_stamp = source_stamp((here, here.parent / "model"), skip=Path(__file__).resolve())
    return _code_stamp


def source_stamp(folders, skip: Path | None = None) -> str:
    """FORMAT and every module under `folders`, their subpackages too (model/inferred/), but `skip`."""
    h = hashlib.blake2b(f"format {FORMAT}".encode(), digest_size=16)
    for folder in folders:
        for src in sorted(folder.rglob("*.py")):
            if src == skip:
                continue
            h.update(src.relative_to(folder).as_posix().encode())
            h.update(src.read_bytes())
    return h.hexdigest()


def identity_of(path: str | os.PathLike) -> Identity | None:
    """The profile's identity, read through one read-only descriptor; None for what is not
    a regular file (a columnar export directory: not cached)."""
    try:  # status first: opening a FIFO for reading would wait for a writer
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        # non-blocking all the same: the path may be swapped for a FIFO between the two calls
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000):
            return None
        h = hashlib.blake2b(digest_size=16)
        h.update(os.pread(fd, EDGE_BYTES, 0))
        h.update(os.pread(fd, EDGE_BYTES, max(0, st.st_size - EDGE_BYTES)))
        return Identity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, h.hexdigest(),
                        code_stamp())
    except OSError:
        return None
    finally:
        os.close(fd)


# -- bundles -------------------------------------------------------------------------------
@dataclass
class Bundle:
    """What one bundle holds: small JSON values and named numpy arrays."""

    values: dict
    arrays: dict[str, np.ndarray]


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class Entry:
    """The cache's slot for one profile: read and write its bundles."""

    def __init__(self, root: Path, ident: Identity, path: Path):
        self.root, self.ident, self.path = root, ident, path
        self.slot = root / ident.slot
        self.writers: list[threading.Thread] = []

    # reading ------------------------------------------------------------------------------
    def read(self, name: str) -> Bundle | None:
        """The bundle `name` made from this very file, memory-mapped; None on any mismatch
        or damage (the caller then computes it again)."""
        bundle = _load(self.slot / _safe_name(name), name, self.ident)
        if bundle is not None:
            _touch(self.slot)
        return bundle

    def discard(self, name: str) -> None:
        """Remove the bundle `name` (moved aside in one step, then removed): stale or damaged,
        or whole and made from this file but what it holds did not fit (its reader said so; a
        writer would otherwise keep it as a racing writer's)."""
        dest = self.slot / _safe_name(name)
        if not dest.exists():
            return
        aside = self.root / f"{TRASH_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
        try:
            os.rename(dest, aside)
            shutil.rmtree(aside, ignore_errors=True)
        except OSError:
            pass

    # writing ------------------------------------------------------------------------------
    def write(self, name: str, bundle: "Bundle | Callable[[], Bundle]", background: bool = True,
              then: "tuple[str, Callable[[], Bundle]] | None" = None) -> None:
        """Store `bundle` as `name` (atomically), in a background thread by default: the
        caller's work goes on while the files are written (`bundle` may be a function that
        makes it, called in that thread; if it raises, nothing is stored). `wait()` joins it. `then`: a
        bundle computed and stored after it in that thread (its cost is not the caller's),
        only once `bundle` is kept (a bundle alone in a slot would be of no use)."""
        if not usable():
            return
        chain = [(name, bundle)] + ([then] if then is not None else [])
        if background:
            # A daemon: a signal or an error ends the process without waiting for the copy (its
            # temporary folder is removed by a later writer); a normal exit waits (wait_all).
            t = threading.Thread(target=self._write_chain, args=(chain, True), name=WRITER_THREAD, daemon=True)
            self.writers.append(t)
            with _lock:
                _writers.append(t)
            t.start()
        else:
            self._write_chain(chain)

    def _write_chain(self, chain: list, background: bool = False) -> None:
        if background:
            background_priority()  # the writer's own thread: behind the load and the first screen
        for name, bundle in chain:
            if callable(bundle):
                try:
                    bundle = bundle()
                except Exception:  # what it would keep is computed again by whoever needs it: no note
                    return
            if not self._write(name, bundle):
                return

    def wait(self) -> None:
        for t in self.writers:
            t.join()
        self.writers.clear()

    def _write(self, name: str, bundle: Bundle) -> bool:
        """Whether the slot holds the bundle now (this write's, or a racing writer's)."""
        need = sum(a.nbytes for a in bundle.arrays.values())
        if not within_bound(self.root, need):
            return False  # bigger than the whole cache may be: not kept
        tmp = None
        try:
            _make_root(self.root)
            tmp = self.root / f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
            tmp.mkdir(mode=0o700)
            files, shapes = {}, {}
            for i, (key, arr) in enumerate(bundle.arrays.items()):
                file = f"a{i}.npy"
                arr = np.ascontiguousarray(arr)
                with open(tmp / file, "wb") as fh:
                    np.save(fh, arr, allow_pickle=False)
                    fh.flush()
                    os.fsync(fh.fileno())
                files[key] = (file, (tmp / file).stat().st_size)
                shapes[key] = (str(arr.dtype), len(arr))
            manifest = {"format": FORMAT, "bundle": name, "identity": asdict(self.ident), "profile": str(self.path),
                        "written": time.time(), "files": files, "shapes": shapes, "values": bundle.values}
            with open(tmp / MANIFEST, "w") as fh:
                json.dump(manifest, fh)
                fh.flush()
                os.fsync(fh.fileno())
            self.slot.mkdir(mode=0o700, exist_ok=True)
            _drop_stale(self.slot, self.ident)
            dest = self.slot / _safe_name(name)
            if _load(dest, name, self.ident) is not None:  # a racing writer stored the same bundle first: keep it
                return True
            self.discard(name)  # a stale or damaged bundle
            try:
                os.rename(tmp, dest)
                tmp = None
            except OSError:  # another process renamed its own bundle in first: keep that one
                pass
            _fsync_dir(self.slot)
            _touch(self.slot)
            evict(self.root, keep=self.slot)
            return True
        except OSError as exc:
            _give_up(f"{self.root}: {exc.strerror or exc}")
            return False
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)


def _load(folder: Path, name: str, ident: Identity) -> Bundle | None:
    """The bundle in `folder` if it is whole, readable and made from `ident`."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        if (manifest.get("format") != FORMAT or manifest.get("identity") != asdict(ident)
                or manifest.get("bundle") != name):
            return None
        arrays = {}
        for key, (file, size) in manifest["files"].items():
            f = folder / file
            if f.stat().st_size != size:  # truncated, or a file of another write
                return None
            # copy-on-write: a caller that changes an array in place changes its own copy
            # (a plain ndarray view of the map: a memmap subclass would propagate to every result)
            arrays[key] = np.asarray(np.load(f, mmap_mode="c", allow_pickle=False))
        for key, (dtype, n) in manifest["shapes"].items():
            if str(arrays[key].dtype) != dtype or len(arrays[key]) != n:
                return None
        return Bundle(manifest["values"], arrays)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError):
        return None


def _current(folder: Path, ident: Identity) -> bool:
    """The bundle in `folder` is whole and made from this identity."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return manifest.get("identity") == asdict(ident) and all(
            (folder / file).stat().st_size == size for file, size in manifest["files"].values())
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return False


def _drop_stale(slot: Path, ident: Identity) -> None:
    """Bundles in the slot made from another version of the file (or other code) go."""
    for folder in slot.iterdir():
        if not _current(folder, ident):
            shutil.rmtree(folder, ignore_errors=True)


def _touch(slot: Path) -> None:
    try:
        os.utime(slot)  # the slot's mtime is its last use, for eviction
    except OSError:
        pass


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _make_root(root: Path) -> None:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(13, "not writable", str(root))


def open_entry(path: str | os.PathLike) -> Entry | None:
    """The cache's slot for the profile at `path`, or None when the cache is off or the
    path is not a regular file."""
    if not usable():
        return None
    ident = identity_of(path)
    if ident is None:
        return None
    root = cache_root()
    try:  # here, on the caller's thread: a folder that cannot be made is said before any output,
        _make_root(root)  # not by a writer thread in the middle of the caller's lines
    except OSError as exc:
        _give_up(f"{root}: {exc.strerror or exc}")
        return None
    return Entry(root, ident, Path(os.path.abspath(path)))


def holds(path: str | os.PathLike, name: str) -> bool:
    """The cache holds a whole bundle `name` made from this very file (its manifest and file
    sizes checked, nothing mapped): the file was read to its end before, unchanged since."""
    entry = open_entry(path)
    return entry is not None and _current(entry.slot / _safe_name(name), entry.ident)


# -- size and eviction ----------------------------------------------------------------------
def max_bytes(root: Path, used: int | None = None) -> int:
    """The bound; `used`: what the cache holds, where the caller knows it (else one walk)."""
    explicit = _explicit_max()
    if explicit is not None:
        return explicit
    return min(DEFAULT_MAX_BYTES, _free_share(root) + (usage(root) if used is None else used))


def within_bound(root: Path, size: int, used: int | None = None) -> bool:
    """`size <= max_bytes(root)`, without walking the cache where the answer is plain: the bound is
    at least min(20 GB, 20% of the free space) whatever the cache holds, and a walk of a big cache
    (every file's size) for each bundle written cost more than the write."""
    explicit = _explicit_max()
    if explicit is not None:
        return size <= explicit
    if size <= min(DEFAULT_MAX_BYTES, _free_share(root)):
        return True
    return size <= max_bytes(root, used)


def _explicit_max() -> int | None:
    explicit = os.environ.get(ENV_MAX)
    if explicit:
        try:
            return int(float(explicit) * 1e9)
        except ValueError:
            pass
    return None


def _free_share(root: Path) -> int:
    probe = root if root.exists() else next((p for p in root.parents if p.exists()), Path("/"))
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = 0
    return int(free * DEFAULT_FREE_SHARE)


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


@dataclass
class SlotInfo:
    slot: str
    profile: str
    bytes: int
    last_used: float
    bundles: list[str]


def slots(root: Path | None = None) -> list[SlotInfo]:
    """Every slot in the cache, most recently used first."""
    root = cache_root() if root is None else root
    out = []
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != PLAIN]
    except OSError:
        return []
    for folder in folders:
        profile, bundles = "?", []
        for b in sorted(folder.iterdir()) if folder.is_dir() else []:
            try:
                manifest = json.loads((b / MANIFEST).read_text())
                profile = manifest.get("profile", profile)
                bundles.append(b.name)
            except (OSError, ValueError):
                bundles.append(f"{b.name} (incomplete)")
        try:
            used = folder.stat().st_mtime
        except OSError:
            continue
        out.append(SlotInfo(folder.name, profile, _folder_bytes(folder), used, bundles))
    return sorted(out, key=lambda s: -s.last_used)


def plain_copies(root: Path) -> list[Path]:
    """The decompressed copies of exports compressed whole (read.compressed)."""
    return [p for p in (root / PLAIN).glob("*/*") if p.is_file() and not p.name.startswith(HOLD_PREFIX)]


def usage(root: Path) -> int:
    return _folder_bytes(root) if root.exists() else 0


def evict(root: Path, keep: Path | None = None) -> None:
    """Remove the least recently used slots until the cache fits its bound (never `keep`, the
    slot just written), and temporary folders left by writers that died. Counts what the slots
    hold from the ledger: this reads the cache folder's names and measures `keep` alone, unless
    the ledger is missing or unreadable (then every slot, once) or the cache is over its bound
    (then each slot's last use, and each slot removed)."""
    with _ledger_locked(root):
        names = _slot_names(root)
        sizes = _read_ledger(root)
        if sizes is None:
            sizes = {}
        else:  # slots removed since (another process's eviction, `cache clear`, by hand) go
            sizes = {n: b for n, b in sizes.items() if n in names}
        if keep is not None and keep.name in names:
            sizes[keep.name] = _folder_bytes(keep)  # its bundle just written, a stale one dropped
        for name in names - sizes.keys():  # the whole cache when the ledger is new or unreadable;
            sizes[name] = _folder_bytes(root / name)  # else slots written without it (another version)
        total = sum(sizes.values())
        used = total + _plain_bytes(root)
        if not within_bound(root, total, used=used):
            _remove_least_recent(root, sizes, keep, max_bytes(root, used=used))
        _write_ledger(root, sizes)


def _slot_names(root: Path) -> set[str]:
    """The slots' names (no slot is read), removing on the way the temporary folders and files of
    writers that died and the folders moved aside to be removed."""
    now = time.time()
    names = set()
    with os.scandir(root) as it:
        for e in it:
            if e.name.startswith((TMP_PREFIX, TRASH_PREFIX)):
                try:
                    if (e.name.startswith(TRASH_PREFIX) or now - e.stat(follow_symlinks=False).st_mtime > STALE_TMP_S
                            or not alive(e.name[len(TMP_PREFIX):].split("-")[0])):
                        if e.is_dir(follow_symlinks=False):
                            shutil.rmtree(e.path, ignore_errors=True)
                        else:  # a ledger's temporary file
                            os.unlink(e.path)
                except OSError:
                    pass
            elif not e.name.startswith(".") and e.name != PLAIN and e.is_dir(follow_symlinks=False):
                names.add(e.name)
    return names


def _remove_least_recent(root: Path, sizes: dict[str, int], keep: Path | None, limit: int) -> None:
    """Over the bound: the least recently used slots go (their folder's mtime is their last use)
    until the rest fit; `sizes` follows."""
    used = []
    for name in sizes:
        try:
            used.append((os.stat(root / name).st_mtime, name))
        except OSError:  # gone meanwhile
            used.append((0.0, name))
    total = sum(sizes.values())
    for _, name in sorted(used):
        if total <= limit:
            break
        if keep is not None and name == keep.name:
            continue
        total -= sizes.pop(name)
        shutil.rmtree(root / name, ignore_errors=True)


def _plain_bytes(root: Path) -> int:
    """The decompressed exports (a few files: read.compressed keeps PLAIN_KEEP)."""
    return _folder_bytes(root / PLAIN) if (root / PLAIN).is_dir() else 0


class _ledger_locked:
    """Holds the ledger's lock (an flock: across processes, and across this process's writer
    threads, each with its own descriptor). Without it (a file system that refuses flock) the
    ledger is still replaced whole; a lost update is mended by the next write, which measures
    any slot the ledger does not name."""

    def __init__(self, root: Path):
        self.root = root
        self.fd: int | None = None

    def __enter__(self):
        try:
            self.fd = fd = os.open(self.root / LEDGER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # releases the lock


def _read_ledger(root: Path) -> dict[str, int] | None:
    """slot -> bytes, or None where the ledger is missing or not one this code wrote."""
    try:
        data = json.loads((root / LEDGER).read_text())
        slots_ = data["slots"]
        if data.get("format") != FORMAT or not all(
                isinstance(k, str) and type(v) is int and v >= 0 for k, v in slots_.items()):
            return None
        return dict(slots_)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_ledger(root: Path, sizes: dict[str, int]) -> None:
    """Replaced in one step (a reader sees the old ledger or the new one). Not fsync'd: one left
    damaged by a crash is rebuilt by the next write."""
    tmp = root / f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}{LEDGER}"
    try:
        with open(tmp, "w") as fh:
            json.dump({"format": FORMAT, "slots": sizes}, fh)
        os.replace(tmp, root / LEDGER)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def alive(pid: str) -> bool:
    """The process that named a temporary folder is still running (it may be writing)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except OSError:  # another user's: alive
        return True
    return True


def clear(root: Path | None = None) -> tuple[int, int]:
    """Remove every slot; (slots, bytes) removed."""
    root = cache_root() if root is None else root
    entries = slots(root)
    for s in entries:
        shutil.rmtree(root / s.slot, ignore_errors=True)
    plain = _folder_bytes(root / PLAIN) if (root / PLAIN).is_dir() else 0
    if root.exists():
        for p in root.iterdir():
            if p.name.startswith((TMP_PREFIX, TRASH_PREFIX)) or p.name == PLAIN:
                shutil.rmtree(p, ignore_errors=True)
        try:
            (root / LEDGER).unlink()
        except OSError:
            pass
    return len(entries), sum(s.bytes for s in entries) + plain


# -- frames ----------------------------------------------------------------------------------
def put_frame(bundle: Bundle, name: str, frame) -> None:
    """Add a pandas frame's columns to `bundle`: numeric and bool columns as they are, text
    columns as int32 codes into a list of their distinct values (None for a missing one)."""
    import pandas as pd

    columns = []
    for col in frame.columns:
        s = frame[col]
        key = f"{name}.{col}"
        if s.dtype.kind in "biuf":
            bundle.arrays[key] = s.to_numpy()
            columns.append([col, "array", str(s.dtype)])
        else:
            codes, uniques = pd.factorize(s, use_na_sentinel=True)
            bundle.arrays[key] = codes.astype(np.int32)
            texts = [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)
                     for v in uniques]
            columns.append([col, "text", str(s.dtype), texts])
    bundle.values[name] = {"columns": columns, "rows": len(frame)}


def get_frame(bundle: Bundle, name: str):
    """The frame `put_frame` stored (the same columns, dtypes and 0..n-1 index)."""
    import pandas as pd

    from nsight_tui.parsers.read.text_codes import text_column

    spec = bundle.values[name]
    data = {}
    for entry in spec["columns"]:
        col, how, dtype = entry[0], entry[1], entry[2]
        values = bundle.arrays[f"{name}.{col}"]
        if how == "array":
            if str(values.dtype) != dtype:
                raise ValueError(f"{name}.{col}: {values.dtype}, stored as {dtype}")
            data[col] = values
        else:
            data[col] = text_column(values, entry[3], pd.api.types.pandas_dtype(dtype))
    frame = pd.DataFrame(data, copy=False)
    if len(frame) != spec["rows"]:
        raise ValueError(f"{name}: {len(frame)} rows, stored {spec['rows']}")
    return frame
