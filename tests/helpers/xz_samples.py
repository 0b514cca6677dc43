"""The one way tests read a committed `.sqlite.xz` sample (sample_traces/async, findings, memory):
as the plain SQLite file every reader needs, decompressed once into a per-user cache in the temp
folder, never beside the sample (the committed tree stays xz'd: it travels to the GPU machine
under a size limit).

The cache is keyed by the xz file's content hash, so a re-captured sample gets a fresh copy and an
unchanged one is decompressed once across sessions and test processes. The decompressed file keeps
the sample's own name (`NAME.sqlite` in a hash-named folder): screens, reports and snapshots show
that name, as they did when the exports were committed plain. Plain module, not a fixture: the
parametrised tests and the session fixture `async_trace` (tests/conftest.py) share it."""
from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tempfile
from pathlib import Path

XZ_TRACE = ".sqlite.xz"


def cache_dir() -> Path:
    """Per user: another user's folder of the same name is not ours to read or write."""
    return Path(tempfile.gettempdir()) / f"nsight-tui-samples-{os.getuid()}"


def plain(path: str | Path) -> Path:
    """`NAME.sqlite.xz` -> the path of its decompressed `NAME.sqlite` in the cache (any `NAME.xz`
    too: the Nsight Compute reports, `.ncu-rep.xz`); a path that is not xz'd comes back as it is.
    FileNotFoundError when the xz file is absent."""
    path = Path(path)
    if not path.name.endswith(".xz"):
        return path
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    folder = cache_dir() / digest
    target = folder / path.name[: -len(".xz")]
    if target.is_file():
        return target
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    # a name of its own per writer, then one atomic rename: two test processes that race here both
    # write whole copies of the same bytes and the last rename wins; no reader sees half a file
    fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as dst, lzma.open(path) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
        # read-only: a test that wrote into the shared copy would corrupt every later session's
        os.chmod(partial, 0o444)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return target
