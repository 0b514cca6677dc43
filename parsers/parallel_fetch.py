"""Fetch one big integer table in a child process while this one reads the others.

Turning SQLite rows into Python objects holds the GIL, so threads do not overlap it; a
second process does, on the second core. The child writes raw int64 rows to a pipe; a
thread here drains the pipe as it fills. Any failure (a NULL in the data, no interpreter,
a killed child) returns None, and the caller fetches the table itself as before.

Every child still running is listed, so a program ending early (a signal, `q` during a load)
can stop them all with `cancel_all()` instead of leaving one behind.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import weakref

import numpy as np

# Below this many rows the child's start-up (~0.15 s) costs more than it saves.
MIN_ROWS = 200_000

_CHILD = r"""
import itertools, sqlite3, sys
import numpy as np
uri, sql, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
cur = sqlite3.connect(uri, uri=True).execute(sql)
out = sys.stdout.buffer
while True:
    rows = cur.fetchmany(1 << 16)
    if not rows:
        break
    try:
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * width)
    except TypeError:  # a NULL: the parent falls back to its own guarded query
        sys.exit(3)
    out.write(flat.tobytes())
"""


_RUNNING: weakref.WeakSet[ChildFetch] = weakref.WeakSet()


class ChildFetch:
    def __init__(self, uri: str, sql: str, width: int):
        self.width = width
        self._chunks: list[bytes] = []
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, uri, sql, str(width)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        _RUNNING.add(self)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        while True:
            chunk = stdout.read(1 << 22)
            if not chunk:
                break
            self._chunks.append(chunk)

    def result(self) -> np.ndarray | None:
        """The rows as an (n, width) int64 array, or None if the child failed."""
        self._reader.join()
        code = self.proc.wait()
        _RUNNING.discard(self)
        if code != 0:
            return None
        data = b"".join(self._chunks)
        self._chunks = []
        if len(data) % (8 * self.width):
            return None
        return np.frombuffer(data, dtype=np.int64).reshape(-1, self.width)

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        _RUNNING.discard(self)


def cancel_all() -> None:
    """Stop every child still running (the program is ending)."""
    for fetch in list(_RUNNING):
        fetch.cancel()


def start(uri: str, sql: str, width: int, rows: int, min_rows: int = MIN_ROWS) -> ChildFetch | None:
    if rows < min_rows:
        return None
    try:
        return ChildFetch(uri, sql, width)
    except OSError:
        return None
