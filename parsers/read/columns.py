"""Whole columns of an export's tables as numpy arrays, read natively where possible.

Over ~600 lines on purpose: the readers (ADBC, sqlite3, Parquet/Arrow) implement one interface,
`Tables`, and are kept in one file so the three stay comparable line by line.

An nsys export reaches the model through one interface, `Tables`:

- `SqliteArrowTables`: an SQLite export read by Apache Arrow's ADBC SQLite driver
  (adbc-driver-sqlite), which fills Arrow arrays in C: 3-4x faster than Python's sqlite3,
  whose cost is almost all in turning rows into tuples. Opened through the same read-only,
  immutable URI as `source.connect_readonly`: the file is opened O_RDONLY, never locked,
  and nothing is created beside it (tests/core/test_columns.py checks all three).
- `SqliteTables`: Python's sqlite3, a chunk of rows at a time into int64 blocks. The
  fallback: used when the ADBC driver is not installed, and per table whenever it fails
  (it refuses a column whose declared type does not match its values, e.g. text in an
  integer column).
- `ParquetTables` / `ArrowDirTables`: nsys's own columnar exports
  (`nsys export --type parquetdir` / `arrowdir`), one file per table, read with pyarrow.

Every reader returns a `Fetched`: per column, int64 values with a NULL mask, or an object
array for text (and for an integer column that holds something else, so the loader's one
validation step can name the offending column). Nothing here interprets nsys's tables.
"""
from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nsight_tui.parsers.read.compressed import InUse, pin, plain_export
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.threads import background_priority, cores
from nsight_tui.parsers.read.source import (COLUMNAR_EXPORTS, Schema, columnar_kind, connect_readonly, probe_integrity,
                                             refuse_special,
                                             read_schema, readonly_uri)

CHUNK = 1 << 16
# The big tables (API calls, kernels) are read ahead in parts of rows, on at least two threads
# (the machines this runs on have two cores or more): one table's parts in parallel, so the
# biggest (50M API calls at 24M kernels) is not one thread's read while the other waits.
READ_AHEAD_THREADS = 2
MAX_READ_THREADS = 8
PART_ROWS = 4_000_000  # rows per part of a table read ahead
ROWID = "rowid"  # SQLite's row key; for the columnar exports, the row's position + 1


@dataclass
class Fetched:
    """Columns of one table: `values[c]` is int64 (NULL read as 0, see `nulls[c]`) for
    integer columns, an object array (None for NULL) for text or mixed columns."""

    table: str
    n: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    nulls: dict[str, np.ndarray] = field(default_factory=dict)  # only columns holding a NULL

    def has(self, name: str) -> bool:
        return name in self.values

    def is_integer(self, name: str) -> bool:
        return self.values[name].dtype == np.int64

    def int(self, name: str, default) -> np.ndarray:
        """int64 values; NULLs (and an absent column) become `default` (a scalar or an
        array of n values)."""
        if name not in self.values:
            return np.broadcast_to(np.asarray(default, dtype=np.int64), (self.n,)).copy()
        v = self.values[name]
        mask = self.nulls.get(name)
        if mask is None:
            return v
        return np.where(mask, default, v).astype(np.int64)

    def null(self, name: str) -> np.ndarray:
        """True where the value is NULL (everywhere for an absent column)."""
        if name not in self.values:
            return np.ones(self.n, dtype=bool)
        mask = self.nulls.get(name)
        return np.zeros(self.n, dtype=bool) if mask is None else mask

    def text(self, name: str) -> np.ndarray:
        """Object values, None for NULL (and for an absent column)."""
        if name not in self.values:
            return np.full(self.n, None, dtype=object)
        v = self.values[name]
        if v.dtype == object:
            return v
        out = v.astype(object)
        mask = self.nulls.get(name)
        if mask is not None:
            out[mask] = None
        return out


class Tables:
    """One export, table by table. `read(table, columns)` asks only for columns the schema
    has (the loader checks `schema.has` first); `rows` restricts to these row keys; `where`
    (SQLite exports only) is an SQL condition the rows must meet: `validate.Checks.where`,
    the same text for the ADBC and the sqlite3 reader, so both leave out the same rows."""

    kind = "?"
    reader = "?"  # which library read the big tables (for `TraceInfo.reader`)
    schema: Schema
    path: Path

    def read(self, table: str, columns: list[str], rows: np.ndarray | None = None,
             integer: tuple[str, ...] = (), where: str = "") -> Fetched:
        """`integer`: the columns meant to hold integers (a reader may re-read a table whose
        values it could not type as such)."""
        raise NotImplementedError

    def connection(self) -> sqlite3.Connection | None:
        """The sqlite3 connection of an SQLite export (for `validate.scan`), else None."""
        return None

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Within the block, the caller's own work (the NVTX ranges, the tree on screen) takes
        one of the read-ahead's cores: one part fewer is read meanwhile."""
        yield

    def prefetch(self, reads: list[tuple[str, list[str]]]) -> None:
        """A hint: these whole tables (these columns, no rows, no conditions) will be read
        next, in this order. A reader may start on them in the background; `read` then
        gives the result it read ahead. Readers that gain nothing ignore it."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- Python's sqlite3 ------------------------------------------------------------------------
def _select(table: str, columns: list[str], rows: np.ndarray | None, where: str = "") -> tuple[str, list]:
    cols = ", ".join(ROWID if c == ROWID else f'"{c}"' for c in columns)
    conds = [f"({where})"] if where else []
    params: list = []
    if rows is not None:
        conds.append(f'rowid IN ({",".join("?" * len(rows))})')
        params = [int(r) for r in rows]
    return f'SELECT {cols} FROM "{table}"' + (" WHERE " + " AND ".join(conds) if conds else ""), params


def _chunk_columns(rows: list[tuple], width: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """One chunk of rows as columns: (int64 values, NULL mask or None) or (object values, None)."""
    try:  # all integers, no NULL: one C-level pass over the flattened tuples
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * width)
        block = flat.reshape(len(rows), width)
        return [(block[:, i].copy(), None) for i in range(width)]
    except (TypeError, ValueError, OverflowError):
        pass
    out = []
    for i in range(width):
        col = [r[i] for r in rows]
        if all(v is None or (type(v) is int and -2**63 <= v < 2**63) for v in col):
            mask = np.fromiter((v is None for v in col), dtype=bool, count=len(col))
            vals = np.fromiter((0 if v is None else v for v in col), dtype=np.int64, count=len(col))
            out.append((vals, mask if mask.any() else None))
        else:
            out.append((np.array(col, dtype=object), None))
    return out


def fetch_sqlite(con: sqlite3.Connection, table: str, columns: list[str], rows: np.ndarray | None = None,
                 where: str = "") -> Fetched:
    """Python's sqlite3, chunk by chunk: tuples for 10^6 rows cost several times the file in
    memory; chunks keep that to a few MB."""
    parts: list[list] = [[] for _ in columns]
    n = 0
    batches = [None] if rows is None else [rows[i:i + 900] for i in range(0, len(rows), 900)]
    for batch in batches:
        cur = con.execute(*_select(table, columns, batch, where))
        while chunk := cur.fetchmany(CHUNK):
            n += len(chunk)
            for i, col in enumerate(_chunk_columns(chunk, len(columns))):
                parts[i].append(col)
    return _merged(table, n, columns, parts)


def _merged(table: str, n: int, columns: list[str], parts: list[list]) -> Fetched:
    """Per column, its chunks [(values, NULL mask or None)] joined into one array. Each
    column's chunks are dropped as soon as it is joined (the lists are emptied): the peak is
    the table plus one column, not twice the table."""
    out = Fetched(table, n)
    for name, chunks in zip(columns, parts):
        values, mask = _joined_chunks(chunks)
        out.values[name] = values
        if mask is not None:
            out.nulls[name] = mask
    return out


def _joined_chunks(chunks: list) -> tuple[np.ndarray, np.ndarray | None]:
    """One column's chunks as one array (and NULL mask); the list is emptied."""
    if not chunks:
        return np.zeros(0, dtype=np.int64), None
    mask = None
    if any(v.dtype == object for v, _ in chunks):  # text somewhere: all objects, None for NULL
        values = np.concatenate([_as_objects(v, m) for v, m in chunks])
    else:
        values = np.concatenate([v for v, _ in chunks]) if len(chunks) > 1 else chunks[0][0]
        if any(m is not None for _, m in chunks):
            mask = np.concatenate([np.zeros(len(v), bool) if m is None else m for v, m in chunks])
    chunks.clear()
    return values, mask


def _as_objects(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    out = values.astype(object)
    if mask is not None:
        out[mask] = None
    return out


class SqliteTables(Tables):
    kind = "sqlite"
    reader = "sqlite3"

    def __init__(self, path: Path, probe: bool = True, count_rows: bool = True):
        self.path = Path(path)
        self.con = connect_readonly(self.path)
        try:
            self.schema = read_schema(self.con, self.path)
            if probe:  # a truncated copy fails here, not half-way through the load
                probe_integrity(self.con, self.path, self.schema, count_rows)
            for table in self.schema.tables.values():  # every nsys table has SQLite's row key
                table.add(ROWID)
        except Exception:
            self.con.close()
            raise

    def read(self, table, columns, rows=None, integer=(), where="") -> Fetched:
        try:
            return fetch_sqlite(self.con, table, columns, rows, where)
        except sqlite3.DatabaseError as exc:
            raise TraceError(f"{self.path}: damaged or unexpected export, table {table} ({exc})") from None

    def connection(self) -> sqlite3.Connection:
        return self.con

    def close(self) -> None:
        self.con.close()


# -- Arrow: shared by the ADBC reader and nsys's columnar exports ------------------------------
def from_arrow(table_name: str, tbl, columns: list[str]) -> Fetched:
    """An Arrow table or record batch (any integer widths, strings, NULLs) as a `Fetched`."""
    out = Fetched(table_name, tbl.num_rows)
    for name, col in zip(columns, tbl.columns):
        values, mask = _arrow_column(col)
        out.values[name] = values
        if mask is not None:
            out.nulls[name] = mask
    return out


def _arrow_column(col) -> tuple[np.ndarray, np.ndarray | None]:
    """One Arrow column as (int64 values, NULL mask or None), or (objects, None) for text,
    numbers that are not integers and uint64 values above int64's range."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_null(t)):
        # text, or numbers that are not integers: objects, for the loader's validation
        return (np.array(col.to_pylist(), dtype=object) if len(col) else np.zeros(0, dtype=object)), None
    mask = None
    if col.null_count:
        mask = col.is_null().to_numpy(zero_copy_only=False)
        col = pc.fill_null(col, 0) if not pa.types.is_null(t) else pa.array(np.zeros(len(col), np.int64))
    if pa.types.is_uint64(t) and len(col) and pc.max(col).as_py() >= 2**63:
        return col.to_numpy(zero_copy_only=False).astype(object), None
    values = np.ascontiguousarray(col.to_numpy(zero_copy_only=False), dtype=np.int64) \
        if len(col) else np.zeros(0, dtype=np.int64)
    return values, mask


def from_arrow_batches(table_name: str, batches, columns: list[str], rows_bound: int | None = None) -> Fetched:
    """A stream of Arrow record batches as one `Fetched`, each batch copied out and let go
    as it arrives: the driver's buffers for the whole table never exist at once.
    `rows_bound`: how many rows to expect (at most: the arrays are cut to the rows read);
    integer columns are then written straight into arrays of that size, so no chunk of
    the table is held twice and nothing is left behind in pieces."""
    filling = [_Filling(rows_bound) for _ in columns]
    n = 0
    for batch in batches:
        n += batch.num_rows
        for column, col in zip(filling, batch.columns):
            column.add(*_arrow_column(col))
        del batch
    out = Fetched(table_name, n)
    for name, column in zip(columns, filling):
        values, mask = column.result()
        out.values[name] = values
        if mask is not None:
            out.nulls[name] = mask
    return out


class _Filling:
    """One column read batch by batch: int64 values (and a NULL mask from the first NULL)
    written into arrays of the expected size, grown if the bound was short; as chunks
    instead without a bound, or from the first batch that is not integers."""

    def __init__(self, bound: int | None):
        self.bound = bound
        self.n = 0
        self.values: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.chunks: list | None = None if bound else []

    def add(self, values: np.ndarray, mask: np.ndarray | None) -> None:
        k = len(values)
        if self.chunks is None and values.dtype == np.int64:
            if self.values is None:
                self.values = np.empty(max(self.bound or 0, k), dtype=np.int64)
            if self.n + k > len(self.values):  # more rows than the bound: grown in place where it can be
                self.values.resize(max(2 * len(self.values), self.n + k), refcheck=False)
                if self.mask is not None:
                    self.mask.resize(len(self.values), refcheck=False)  # new entries: False
            self.values[self.n:self.n + k] = values
            if mask is not None:
                if self.mask is None:
                    self.mask = np.zeros(len(self.values), dtype=bool)
                self.mask[self.n:self.n + k] = mask
            self.n += k
            return
        if self.chunks is None:  # text from here on: what was filled becomes the first chunk
            self.chunks = []
            if self.n:
                assert self.values is not None
                self.chunks.append((self.values[:self.n].copy(),
                                    None if self.mask is None else self.mask[:self.n].copy()))
            self.values = self.mask = None
        # a copy: a zero-copy view would keep the driver's whole batch alive
        self.chunks.append((values.copy() if values.base is not None else values, mask))
        self.n += k

    def result(self) -> tuple[np.ndarray, np.ndarray | None]:
        if self.chunks is not None:
            return _joined_chunks(self.chunks)
        if self.values is None:
            return np.zeros(0, dtype=np.int64), None
        values, mask = self.values, self.mask
        self.values = self.mask = None
        if len(values) != self.n:  # fewer rows than the bound: cut in place
            values.resize(self.n, refcheck=False)
            if mask is not None:
                mask.resize(self.n, refcheck=False)
        return values, mask


def _has_adbc() -> bool:
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


class _Adbc:
    """One ADBC connection to the SQLite driver, through the driver manager's own objects.
    ADBC's DB-API module imports pyarrow.dataset (and pandas, where nothing had yet) and wraps
    every statement in a cursor's bookkeeping; a read needs only a statement and its Arrow
    stream. Autocommit (the driver's default): a read-only, immutable file has nothing to
    commit."""

    def __init__(self, uri: str):
        import adbc_driver_manager as mgr
        import adbc_driver_sqlite

        self.db = adbc_driver_sqlite.connect(uri)
        try:
            self.con = mgr.AdbcConnection(self.db)
        except Exception:
            self.db.close()
            raise

    @contextmanager
    def query(self, sql: str, **options: str) -> Iterator[Any]:
        """The query's result as a pyarrow RecordBatchReader, its statement closed after."""
        import adbc_driver_manager as mgr
        import pyarrow as pa

        stmt = mgr.AdbcStatement(self.con)
        try:
            if options:
                stmt.set_options(**options)
            stmt.set_sql_query(sql)
            handle, _ = stmt.execute_query()
            reader = pa.RecordBatchReader._import_from_c(handle.address)
            try:
                yield reader
            finally:
                reader.close()
        finally:
            stmt.close()

    def one(self, sql: str) -> tuple | None:
        """The query's first row as Python values (None: no row)."""
        with self.query(sql) as reader:
            for batch in reader:
                if batch.num_rows:
                    return tuple(col[0].as_py() for col in batch.columns)
        return None

    def close(self) -> None:
        self.con.close()
        self.db.close()


class SqliteArrowTables(SqliteTables):
    """The SQLite export through ADBC; any table the driver cannot read goes through sqlite3."""

    reader = "adbc-driver-sqlite"

    def __init__(self, path: Path, probe: bool = True, count_rows: bool = True):
        super().__init__(path, probe, count_rows)
        self.adbc: _Adbc | None = None
        try:
            self.adbc = _Adbc(readonly_uri(self.path))
        except Exception:  # the driver could not open it: sqlite3 reads everything
            self.adbc = None
            self.reader = SqliteTables.reader
        self.fallbacks: list[str] = []  # tables the driver refused, read by sqlite3 instead
        self._ahead: dict[tuple[str, tuple[str, ...]], _PartedRead] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._prefetched = False
        self.slots = _Slots(read_threads())

    def foreground(self):
        return self.slots.foreground()

    def prefetch(self, reads: list[tuple[str, list[str]]]) -> None:
        """Read these tables in background threads while the caller works on something else:
        the driver fills Arrow arrays without holding the GIL, so the big tables' reads
        overlap each other and the NVTX tree's build. Each read opens a connection of its own
        (ADBC connections are not shared between threads) and closes it when done."""
        if self.adbc is None or self._prefetched or not reads:
            return
        self._prefetched = True  # once: a read again after a scan reads in the foreground
        # behind the caller's own work (the NVTX tree on screen first), on the cores it leaves
        self._pool = ThreadPoolExecutor(max_workers=read_threads(), thread_name_prefix="nsight-read-ahead",
                                        initializer=background_priority)
        # Parts in the order the load asks for the tables: the API calls' parts first, so that
        # table is whole (and its post-processing begins) while the kernels are still read.
        for table, columns in reads:
            self._ahead[(table, tuple(columns))] = _PartedRead(self.path, table, columns, self._pool, self.slots)

    def read(self, table, columns, rows=None, integer=(), where="") -> Fetched:
        if self.adbc is None or rows is not None:  # chosen rows (launch details): one IN query
            return super().read(table, columns, rows, where=where)
        ahead = self._ahead.pop((table, tuple(columns)), None)
        try:
            if ahead is not None and not where:  # read ahead, as asked (a scan's conditions: read again)
                try:
                    fetched = ahead.result()
                finally:
                    if not self._ahead:  # the last one: its thread and connection are let go now
                        self._stop_ahead()
            else:
                fetched = _fetch_arrow(self.adbc, _select(table, columns, None, where)[0], table, columns)
        except Exception:  # a type the driver refuses (text in an integer column), or a driver bug
            fetched = None
        if fetched is None or not all(fetched.is_integer(c) for c in integer if fetched.has(c)):
            # The driver typed a column from its first rows: text among integers comes back
            # as all-text. sqlite3 gives each value as stored, for the loader's validation.
            if table not in self.fallbacks:
                self.fallbacks.append(table)
            return super().read(table, columns, rows, where=where)
        if table in self.fallbacks:  # read again with bad rows left out: the driver took it this time
            self.fallbacks.remove(table)
        return fetched

    def _stop_ahead(self) -> None:
        """Drop reads not started, wait for those running (each closes its own connection),
        then end the threads: connections and threads hold memory (SQLite's page cache, the
        threads' malloc arenas) that the load's later steps can use."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._ahead.clear()
            self._pool = None

    def close(self) -> None:
        self._stop_ahead()
        if self.adbc is not None:
            self.adbc.close()
        super().close()


# Rows per Arrow batch from the ADBC driver (its default is 1024): fewer, larger batches
# cost less Python per table; each is a few MB at most (64k rows x the columns read).
BATCH_ROWS = 1 << 16


def read_threads() -> int:
    return max(READ_AHEAD_THREADS, min(cores(), MAX_READ_THREADS))


def _read_arrow(path: Path, table: str, columns: list[str]) -> Fetched:
    """A whole table's columns through an ADBC connection of its own (a read-ahead job)."""
    con = _Adbc(readonly_uri(path))
    try:
        return _fetch_arrow(con, _select(table, columns, None)[0], table, columns)
    finally:
        con.close()


class _Slots:
    """How many parts are read at once: one per read-ahead thread, one fewer while the caller's
    own work is in the foreground. The foreground never waits: parts under way finish, and no
    new one starts while that would take the caller's core (a semaphore would make the caller
    queue behind the parts, which take a released slot back at once)."""

    def __init__(self, n: int):
        self.n = n
        self.active = 0
        self.fg = 0
        self.cond = threading.Condition()

    @contextmanager
    def part(self) -> Iterator[None]:
        with self.cond:
            while self.active >= max(1, self.n - (1 if self.fg else 0)):
                self.cond.wait()
            self.active += 1
        try:
            yield
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    @contextmanager
    def foreground(self) -> Iterator[None]:
        with self.cond:
            self.fg += 1
        try:
            yield
        finally:
            with self.cond:
                self.fg -= 1
                self.cond.notify_all()


class _NotIntegers(Exception):
    """A part met a column that is not integers: the table is read whole instead."""


class _PartedRead:
    """One table read ahead in parts of rowids (`rowid > a AND rowid <= b`, each part on an
    ADBC connection of its own, on the pool's threads), every part writing its rows straight
    into the table's final arrays at the position of its first rowid: no part is copied
    again. nsys numbers a table's rows 1..n, so the parts fill the arrays end to end; where
    rowids skip (rows deleted), the parts are moved up over the gaps when all are read.
    `result()` is the whole table, as `_read_arrow` gives it; a table without integer rowids
    to cut, small enough for one part, or with a column that is not integers, is read whole."""

    def __init__(self, path: Path, table: str, columns: list[str], pool: ThreadPoolExecutor,
                 slots: _Slots):
        self.path, self.table, self.columns, self.slots = path, table, columns, slots
        self.lock = threading.Lock()
        self.nulls: dict[str, np.ndarray] = {}
        self.whole: Future | None = None
        span = _rowid_span(path, table)
        if span is None or span[1] - span[0] + 1 <= PART_ROWS:
            self.whole = pool.submit(self._in_slot, _read_arrow, path, table, columns)
            return
        self.first, last = span
        self.size = last - self.first + 1
        self.values = {c: np.empty(self.size, dtype=np.int64) for c in columns}
        cuts = list(range(self.first - 1, last, PART_ROWS)) + [last]
        self.parts = [pool.submit(self._in_slot, self._part, a, b) for a, b in zip(cuts[:-1], cuts[1:])]

    def _in_slot(self, read, *args):
        with self.slots.part():
            return read(*args)

    def _part(self, a: int, b: int) -> int:
        """Rows with rowid in (a, b], written from position a - first + 1; how many."""
        con = _Adbc(readonly_uri(self.path))
        try:
            at = a - self.first + 1
            n = 0
            for batch in _arrow(con, _select(self.table, self.columns, None, f"rowid > {a} AND rowid <= {b}")[0]):
                k = batch.num_rows
                if n + k > b - a:  # more rows than rowids: not a rowid table after all
                    raise _NotIntegers(self.table)
                for name, col in zip(self.columns, batch.columns):
                    values, mask = _arrow_column(col)
                    if values.dtype != np.int64:
                        raise _NotIntegers(f"{self.table}.{name}")
                    self.values[name][at + n:at + n + k] = values
                    if mask is not None:
                        self._mask(name)[at + n:at + n + k] = mask
                n += k
                del batch
            return n
        finally:
            con.close()

    def _mask(self, name: str) -> np.ndarray:
        with self.lock:
            if name not in self.nulls:
                self.nulls[name] = np.zeros(self.size, dtype=bool)
            return self.nulls[name]

    def result(self) -> Fetched:
        if self.whole is not None:
            return self.whole.result()
        try:
            counts = [part.result() for part in self.parts]
        except _NotIntegers:
            return _read_arrow(self.path, self.table, self.columns)
        arrays = [*self.values.values(), *self.nulls.values()]
        n = sum(counts)
        if n < self.size:  # rowids skip: each part's rows moved up to follow the one before
            at = dst = 0
            for k in counts:
                part_size = min(PART_ROWS, self.size - at)
                if dst != at:
                    for arr in arrays:
                        arr[dst:dst + k] = arr[at:at + k]
                at += part_size
                dst += k
            for arr in arrays:
                arr.resize(n, refcheck=False)
        out = Fetched(self.table, n, dict(self.values), dict(self.nulls))
        self.values, self.nulls = {}, {}
        return out


def rowid_span_sql(table: str) -> str:
    """(min, max) rowid as two subqueries: SQLite reads min() or max() from the B-tree's end
    only where it is the query's one aggregate; `SELECT min(rowid), max(rowid)` reads every row
    (a whole table's scan before its read could begin)."""
    return f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'


def _rowid_span(path: Path, table: str) -> tuple[int, int] | None:
    """(min, max) rowid, read from the B-tree at once; None where there is nothing to cut
    (an empty table, a WITHOUT ROWID table, a span too wide to be the rows' own)."""
    try:
        con = _Adbc(readonly_uri(path))
    except Exception:
        return None
    try:
        row = con.one(rowid_span_sql(table))
    except Exception:
        return None
    finally:
        con.close()
    if row is None:
        return None
    lo, hi = row
    if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 1 or hi >= 2**31:
        return None
    return lo, hi


def _fetch_arrow(con: _Adbc, sql: str, table: str, columns: list[str]) -> Fetched:
    return from_arrow_batches(table, _arrow(con, sql), columns, _rows_bound(con, table))


def _rows_bound(con: _Adbc, table: str) -> int | None:
    """max(rowid): at least the table's row count while row keys are positive (nsys numbers
    rows from 1), found in the B-tree at once; None when it says nothing useful."""
    try:
        (bound,) = con.one(f'SELECT max(rowid) FROM "{table}"') or (None,)
    except Exception:  # only a hint: the read itself says what is wrong
        return None
    return int(bound) if isinstance(bound, int) and 0 < bound < 2**31 else None


def _arrow(con: _Adbc, sql: str):
    """One query's result through an ADBC connection, as a stream of Arrow record batches."""
    with con.query(sql, **{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)}) as reader:
        yield from reader


# -- nsys's columnar exports ------------------------------------------------------------------
class _FileTables(Tables):
    """A directory with one file per table (nsys `parquetdir` / `arrowdir`)."""

    suffix = ""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.files = {p.stem: p for p in sorted(self.path.glob(f"*{self.suffix}")) if p.is_file()}
        self.schema = Schema()
        try:
            for name, file in self.files.items():
                self.schema.tables[name] = set(self._column_names(file))
        except Exception as exc:  # pyarrow's errors: a truncated or foreign file
            raise TraceError(f"{path}: unreadable {self.kind} export ({type(exc).__name__}: {exc})") from None
        for table in self.schema.tables.values():
            table.add(ROWID)

    def _column_names(self, file: Path) -> list[str]:
        raise NotImplementedError

    def _table(self, file: Path, columns: list[str]):
        raise NotImplementedError

    def read(self, table, columns, rows=None, integer=(), where="") -> Fetched:
        import pyarrow as pa

        if where:  # the loader never asks: bad rows in a columnar export refuse it (load.py)
            raise ValueError("row conditions are SQL: SQLite exports only")
        stored = [c for c in columns if c != ROWID]
        try:
            tbl = self._table(self.files[table], stored)
        except Exception as exc:
            raise TraceError(f"{self.path}: unreadable table {table} ({type(exc).__name__}: {exc})") from None
        n = tbl.num_rows
        if ROWID in columns:
            tbl = tbl.append_column(ROWID, pa.array(np.arange(1, n + 1, dtype=np.int64)))
        tbl = tbl.select(columns)
        if rows is not None:
            tbl = tbl.take(pa.array(np.asarray(rows, dtype=np.int64) - 1))
        return from_arrow(table, tbl, columns)


class ParquetTables(_FileTables):
    kind = "parquetdir"
    reader = "pyarrow (Parquet)"
    suffix = COLUMNAR_EXPORTS["parquetdir"]

    def _column_names(self, file):
        import pyarrow.parquet as pq

        return pq.read_schema(file).names

    def _table(self, file, columns):
        import pyarrow.parquet as pq

        return pq.read_table(file, columns=columns, use_threads=False)


class ArrowDirTables(_FileTables):
    kind = "arrowdir"
    reader = "pyarrow (Arrow IPC)"
    suffix = COLUMNAR_EXPORTS["arrowdir"]

    @staticmethod
    def _open(file):
        import pyarrow as pa
        import pyarrow.ipc as ipc

        source = pa.memory_map(str(file))
        try:  # nsys 2025.3 writes streams despite the .arrow name; files are accepted too
            return ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            return ipc.open_stream(source).read_all()

    def _column_names(self, file):
        import pyarrow as pa
        import pyarrow.ipc as ipc

        with pa.memory_map(str(file)) as source:
            try:
                return ipc.open_file(source).schema.names
            except pa.ArrowInvalid:
                source.seek(0)
                return ipc.open_stream(source).schema.names

    def _table(self, file, columns):
        return self._open(file).select(columns)


def open_tables(path: str | Path, native: bool = True, probe: bool = True, count_rows: bool = True) -> Tables:
    """The reader for `path`: an nsys columnar export directory, or an SQLite export (ADBC
    when installed and `native`, else Python's sqlite3). Raises TraceError on bad input.
    `probe`: check that the big tables read to their end (skipped for lazy reads later);
    `count_rows=False`: only their last pages (for a caller that reads them whole itself).
    An export compressed whole is read from its decompressed copy (read.compressed)."""
    refuse_special(path)
    looking = InUse()  # a compressed export's copy: in use from its look-up until the reader holds it
    path = plain_export(path, owner=looking)
    kind = columnar_kind(path)
    if kind is not None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise TraceError(f"{path}: reading an nsys {kind} export needs pyarrow (pip install pyarrow)") from None
        return ParquetTables(path) if kind == "parquetdir" else ArrowDirTables(path)
    tables = SqliteArrowTables(path, probe, count_rows) if native and _has_adbc() else SqliteTables(path, probe, count_rows)
    pin(path, tables)  # then kept while the reader lives
    return tables
