"""Open an Nsight Systems SQLite export read-only and find out what it holds.

Exports differ across nsys versions (2022.2 has EXPORT_META_DATA and no ENUM tables,
2024+ has META_DATA_EXPORT, cut-down exports lack whole tables and columns), so every
reader asks `Schema` instead of assuming.
"""
from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers.read.compressed import SQLITE_MAGIC, InUse, exports_in, pin, plain_export, unread_format
from nsight_tui.parsers.read.errors import TraceError


# Tables without which a file is not an nsys export at all.
NSYS_MARKER_TABLES = {"StringIds"}
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")


@dataclass
class Schema:
    tables: dict[str, set[str]] = field(default_factory=dict)
    # Views in the file: never read. nsys writes tables; a view in place of one (a recursive
    # one never ends) would make a read unbounded, so it counts as absent and a note says so.
    views: list[str] = field(default_factory=list)

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        if cols is None:
            return False
        return column is None or column in cols


def refuse_special(path: str | os.PathLike) -> None:
    """Refuse, from the path's status alone, what is neither a regular file nor a folder: a
    FIFO, device or socket. Nothing may open such a path first, not even to read its identity
    for the cache: opening a FIFO for reading waits for a writer, forever. A missing path and
    a folder are left to the callers, which say what they expected there."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise TraceError(f"{path}: not a regular file (a pipe, device or socket); give the .sqlite export itself")


def _check_file(path: Path) -> None:
    refuse_special(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, expected an nsys .sqlite export "
                         "(or the folder of `nsys export --type parquetdir` or `arrowdir`)")
    try:
        os.stat(path)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    journal = Path(f"{path}-journal")
    if journal.is_file() and journal.stat().st_size > 0:
        # A hot rollback journal: a write was cut off and the main file may hold half of it.
        # Rolling it back means writing to the profile, which this tool never does.
        raise TraceError(f"{path}: a write to it was interrupted ({journal.name} beside it); open it once with "
                         f"sqlite3 to roll that back, or re-export, then try again")
    if path.suffix == ".nsys-rep" or path.suffix == ".qdrep":
        raise TraceError(
            f"{path}: this is an Nsight Systems report, not its SQLite export; run "
            f"`nsys export --type sqlite -o {path.with_suffix('.sqlite')} {path}` and open the .sqlite"
        )
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    if len(head) == 0:
        raise TraceError(f"{path}: empty file, expected an nsys SQLite export")
    if head != SQLITE_MAGIC:
        why = unread_format(head)
        raise TraceError(f"{path}: {why}, then open the .sqlite" if why else
                         f"{path}: not an SQLite file (expected an `nsys export --type sqlite` output)")


# nsys's columnar exports (`nsys export --type parquetdir|arrowdir`): one file per table, named
# TABLE + suffix. Told apart by the StringIds table every export has; read by columns.py.
COLUMNAR_EXPORTS = {"parquetdir": ".parquet", "arrowdir": ".arrow"}


def columnar_kind(path: Path) -> str | None:
    """'parquetdir' / 'arrowdir' for a directory nsys exported that way, else None."""
    path = Path(path)
    if not path.is_dir():
        return None
    for kind, suffix in COLUMNAR_EXPORTS.items():
        if (path / f"StringIds{suffix}").is_file():
            return kind
    return None


def export_paths(raw: list[str]) -> list[Path]:
    """The profiles named on a command line: files as given, a folder's *.sqlite files (sorted; and
    those compressed whole, read.compressed.exports_in),
    unless the folder is itself one export (nsys's parquetdir / arrowdir: columnar_kind).
    A folder without any is an error here, and so is a FIFO, device or socket (refuse_special);
    a missing file is left to the open, which says so."""
    paths: list[Path] = []
    for item in raw:
        p = Path(item)
        refuse_special(p)
        if p.is_dir() and columnar_kind(p) is None:
            found = exports_in(p)  # an export compressed whole counts (read.compressed)
            if not found:
                raise TraceError(f"{p}: no .sqlite exports in this folder")
            paths += found
        else:
            paths.append(p)
    return paths


def readonly_uri(path: Path) -> str:
    """file: URI for a read-only, immutable open. The path is percent-encoded: SQLite would
    read `#`, `?` and `%XX` in it as URI syntax and open another name."""
    query = urllib.parse.urlencode({"mode": "ro", "immutable": "1"})
    return "file://" + urllib.parse.quote(str(Path(path).resolve()), safe="/") + "?" + query


def sidecar_notes(path: Path) -> list[str]:
    """What the immutable open leaves out. A `-wal` beside the profile holds commits made
    after its last checkpoint; SQLite reads them only with a shared-memory file and locks
    beside the profile, which this tool never creates, so they are ignored, and said so."""
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return [f"{wal.name} beside the profile is ignored: changes written after its last checkpoint are not "
                f"shown (checkpoint it with sqlite3 to include them)"]
    return []


class _Connection(sqlite3.Connection):
    """sqlite3's connection, weakly referable: a decompressed copy it reads is pinned to it
    (read.compressed.pin)."""


def connect_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only, immutable connection: the user's profile is never changed or locked (an
    export compressed whole is read from its decompressed copy: read.compressed)."""
    refuse_special(path)
    looking = InUse()  # a compressed export's copy: in use from its look-up until the connection holds it
    path = plain_export(path, owner=looking)
    _check_file(path)
    uri = readonly_uri(path)
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Connection)
        con.execute("PRAGMA query_only = 1")
        pin(path, con)  # then kept while the connection lives
        return con
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: cannot open as SQLite ({exc})") from None


def read_schema(con: sqlite3.Connection, path: Path) -> Schema:
    try:
        rows = con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        schema = Schema(views=sorted(name for name, kind in rows if kind == "view"))
        for name in (name for name, kind in rows if kind == "table"):
            # a bound parameter: a table name may hold any character, quotes included
            schema.tables[name] = {r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", (name,))}
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path}: damaged or truncated SQLite file ({exc})") from None
    if not NSYS_MARKER_TABLES <= schema.tables.keys():
        raise TraceError(f"{path}: an SQLite file, but not an Nsight Systems export (no StringIds table)")
    return schema


def probe_integrity(con: sqlite3.Connection, path: Path, schema: Schema, count: bool = True) -> None:
    """Touch the last page of every big table: a truncated copy fails here, not mid-render.
    `count`: and walk every page of them (count(*): ~14 s of a 4.4 GB export), for a caller
    that will not read them to their end itself."""
    for table in (*GPU_TABLES, "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds"):
        if schema.has(table):
            try:
                con.execute(f"SELECT * FROM {table} ORDER BY rowid DESC LIMIT 1").fetchall()
                if count:
                    con.execute(f"SELECT count(*) FROM {table}").fetchone()
            except sqlite3.DatabaseError as exc:
                raise TraceError(f"{path}: damaged or truncated export, table {table} unreadable ({exc})") from None
