"""Read an export into column arrays: GPU ops, CUDA API calls, NVTX ranges and marks.

Over ~600 lines on purpose: the two-stage loader (ranges first, the GPU work behind them) and the
`Trace` it fills share one set of column conventions (dtypes, row filters, masks) that a split would
have to restate; the lazy reads (short names, launch details, memory, syncs) are the next to leave.

Everything is fetched with one SELECT per table and held as pandas frames of plain
integers; names stay as integer codes into small lists, so grouping 10^6 kernels is a
vectorised integer groupby, not string work.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from nsight_tui.parsers.read import cache as store
from nsight_tui.parsers.read.columns import Fetched, Tables, open_tables
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.gpu_memory import GpuMemoryEvents, read_failed_calls, read_gpu_memory
from nsight_tui.parsers.read.gpu_metrics import GpuMetrics, read_gpu_metrics
from nsight_tui.parsers.read.memcpy import read_memcpy_calls
from nsight_tui.parsers.read.sync_events import SyncEvents, read_sync_events
from nsight_tui.parsers.read.groupstats import group_ids
from nsight_tui.parsers.read.heap import release_free_memory
from nsight_tui.parsers.read import conventions, validate
from nsight_tui.parsers.read.ids import (GRAPH, KERNEL, MEMCPY, MEMSET, NVTX_DOMAIN_CREATE, NVTX_MARK, NVTX_PUSHPOP,
                                    NVTXT_MARK, NVTXT_PUSHPOP, PID_MASK, RANGE_TYPES, index_dtype,
                                    pid_of, tid_of)
from nsight_tui.parsers.read.compressed import as_plain_name, pin, plain_export
from nsight_tui.parsers.read.source import Schema, refuse_special, sidecar_notes
from nsight_tui.parsers.read.text_codes import Coded, inferred_text_dtype, text_column

# copyKind labels for exports older than the ENUM_CUDA_MEMCPY_OPER table (CUPTI's enum).
NO_NVTX_NOTE = "no NVTX data: range views are empty; kernel and API summaries still work"
FALLBACK_MEMCPY_LABELS = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
    9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}

@dataclass
class TraceInfo:
    path: Path
    nsys_version: str
    schema_version: str
    gpus: list[str]
    span_ns: int
    kernels: int
    memcpys: int
    memsets: int
    api_calls: int
    ranges: int
    processes: int
    has_nvtx: bool
    has_cuda: bool
    notes: list[str] = field(default_factory=list)
    export_kind: str = "sqlite"  # or nsys's "parquetdir" / "arrowdir"
    reader: str = ""  # the library that read the big tables (columns.Tables.reader)
    gpu_pending: bool = False  # TraceLoader.ranges_only: GPU work not read yet
    graphs_whole: int = 0  # CUDA graph launches traced whole (ids.GRAPH ops)
    graphs_by_node: int = 0  # CUDA graph launches traced node by node (their nodes are kernels, copies, sets)


KERNEL_TABLE, GPU_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL", "TARGET_INFO_GPU"
# A kernel's launch configuration (Trace.launch_configs; kernels.occupancy needs every one of them)
LAUNCH_COLUMNS = ("registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "blockX", "blockY", "blockZ")


@dataclass
class Trace:
    """One export, loaded. Frames are indexed 0..n-1; cross references are positions."""

    path: Path
    schema: Schema
    info: TraceInfo
    op_names: list[str]  # ops.name -> text (demangled kernel name, or nsys's memcpy/memset label)
    api_names: list[str]  # api.name -> text
    # Times and globalTid/Pid are int64; kind int8; name codes and `api` positions int32;
    # device, stream, corr and rowid int32 when every value fits (else int64).
    ops: pd.DataFrame  # kind,start,end,device,stream,corr,gpid,name,rowid,api
    api: pd.DataFrame  # start,end,gtid,corr,name
    ranges: pd.DataFrame  # rowid,start,end,end_sum,gtid,cross,pushpop,name,domain,text,unended
    marks: pd.DataFrame  # start,gtid,text
    threads: dict[int, str]
    processes: dict[int, tuple[int, str]]  # globalPid -> (pid, name)
    memcpy_labels_from_export: bool = True
    facts: dict = field(default_factory=dict, repr=False)  # what TraceLoader read from the small tables
    # The rows left out (validate.scan's conditions): lazy reads (short names, launch details)
    # apply them too, so they see the rows the model holds.
    checks: validate.Checks = field(default_factory=validate.Checks, repr=False)
    # What modules above derive from this trace, cached here under keys they own (the range
    # model per attribution, the family of each op name): the loader knows nothing of them.
    derived: dict = field(default_factory=dict, repr=False)
    # The file's slot in the user's cache (read.cache), where modules above also keep what
    # they derive (the range model); None when the cache is off or this trace is not kept.
    stash: store.Entry | None = field(default=None, repr=False, compare=False)
    # The path given, where it is not `path`: an export compressed whole (read.compressed), whose
    # records beside it (STEM.steps.json, STEM.oom.json) are beside this name, not its copy.
    opened_as: Path | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # An export compressed whole: its decompressed copy is not evicted while this trace (or a
        # copy of it: dataclasses.replace) lives, for the reads it makes of it later (read.compressed).
        pin(self.path, self)

    @property
    def given(self) -> Path:
        """The path the export was opened by (a compressed file's own, not its decompressed copy's)."""
        return self.path if self.opened_as is None else self.opened_as

    @property
    def beside(self) -> Path:
        """The export's name where the user keeps it, for the records `capture` writes beside it."""
        return self.path if self.opened_as is None else as_plain_name(self.opened_as)

    # -- range names, factorized once -------------------------------------------------
    # Each a pass over every range's text, asked by dozens of analyses of one report; a copy of
    # the trace with other ranges (inferred ones added) computes its own on first use.
    @cached_property
    def range_texts(self) -> Coded:
        """ranges.text (the range's own text) as codes into its distinct values."""
        return Coded.of(self.ranges["text"])

    @cached_property
    def range_names(self) -> Coded:
        """ranges.name (`domain:text`) as codes into its distinct values."""
        return Coded.of(self.ranges["name"])

    @cached_property
    def range_domains(self) -> Coded:
        """ranges.domain as codes into its distinct values."""
        return Coded.of(self.ranges["domain"])

    def share_range_codes(self, other: Trace) -> None:
        """Take the range names' codes `other` worked out already, when both hold the same ranges."""
        if other.ranges is self.ranges:
            for name in ("range_texts", "range_names", "range_domains"):
                if name in other.__dict__:
                    self.__dict__.setdefault(name, other.__dict__[name])

    # -- convenience -------------------------------------------------------------------
    def thread_label(self, gtid: int) -> str:
        name = self.threads.get(int(gtid), "")
        return f"{name} ({tid_of(int(gtid))})" if name else f"tid {tid_of(int(gtid))}"

    def process_label(self, gpid: int) -> str:
        pid, name = self.processes.get(int(gpid), (pid_of(int(gpid)), ""))
        return f"{name} ({pid})" if name else f"pid {pid}"

    @cached_property
    def op_short(self) -> list[str]:
        """nsys's short kernel name per op name code (read from the file on first use)."""
        with open_tables(self.path, probe=False) as tables:
            return _kernel_short_names(tables, self.op_names, self.checks)

    def op_details(self, op_positions) -> pd.DataFrame:
        """grid, block, graph node and bytes of these ops, read from the file by row key."""
        pos = np.atleast_1d(np.asarray(op_positions, dtype=np.int64))
        out = pd.DataFrame({"grid": [""] * len(pos), "block": [""] * len(pos), "graph_node": -1, "bytes": 0},
                           index=pos)
        kinds = self.ops["kind"].to_numpy()[pos]
        rowids = self.ops["rowid"].to_numpy()[pos]
        tables = {KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL", MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
                  MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET"}
        dims = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
        with open_tables(self.path, probe=False) as source:
            for kind, table in tables.items():
                sel = kinds == kind
                if not sel.any():
                    continue
                wanted = ["rowid", "graphNodeId", *(dims if kind == KERNEL else ("bytes",))]
                try:
                    f = _read(source, table, wanted, integer=tuple(wanted), rows=np.unique(rowids[sel]),
                              checks=self.checks)
                except validate.BadValues:  # a value nsys never writes there: no details shown
                    continue
                # rows in the file's order: put them back in the order asked for
                at = pd.Series(np.arange(f.n), index=f.int("rowid", 0)).reindex(rowids[sel]).to_numpy()
                found = ~np.isnan(at)
                at = np.where(found, at, 0).astype(np.int64)

                def dim(names, _f=f, _at=at, _found=found):
                    if not all(_f.has(c) for c in names) or _f.n == 0:
                        return [""] * len(_at)
                    vals = [_f.int(c, 0)[_at] for c in names]
                    return [f"{x}x{y}x{z}" if ok else "" for x, y, z, ok in zip(*vals, _found)]

                idx = pos[sel]
                if kind == KERNEL:
                    out.loc[idx, "grid"] = dim(dims[:3])
                    out.loc[idx, "block"] = dim(dims[3:])
                node = f.int("graphNodeId", -1)[at] if f.n else np.full(len(at), -1)
                null = f.null("graphNodeId")[at] if f.n else np.ones(len(at), bool)
                out.loc[idx, "graph_node"] = np.where(found & ~null, node, -1)
                nbytes = f.int("bytes", 0)[at] if f.n else np.zeros(len(at), np.int64)
                out.loc[idx, "bytes"] = np.where(found, nbytes, 0)
        return out

    def launch_configs(self) -> pd.DataFrame:
        """Each kernel's launch configuration, read from the file on each call (kernels.occupancy
        keeps what it makes of it): index the kernel's position in `ops`; `regs` per thread,
        `smem_static` and `smem_dynamic` shared memory (bytes), `threads` per block, `smem_config` the
        shared-memory carve-out in force (CUPTI's sharedMemoryExecuted, 0 where not recorded), `grid_blocks`
        in the grid (1 where the export has no grid columns). A kernel whose row the file lacks is
        absent; the export must have LAUNCH_COLUMNS."""
        executed = [c for c in ("sharedMemoryExecuted",) if self.schema.has(KERNEL_TABLE, c)]
        grid = [c for c in ("gridX", "gridY", "gridZ") if self.schema.has(KERNEL_TABLE, c)]
        wanted = ["rowid", *LAUNCH_COLUMNS, *executed, *grid]
        with open_tables(self.path, probe=False) as tables:
            f = tables.read(KERNEL_TABLE, wanted, integer=tuple(wanted), where=self.checks.where(KERNEL_TABLE, prefix=""))
        kpos = np.flatnonzero(self.ops["kind"].to_numpy() == KERNEL)
        # the trace's kernels, by row key, to the file's rows
        at = pd.Series(np.arange(f.n), index=f.int("rowid", -1)).reindex(self.ops["rowid"].to_numpy()[kpos]).to_numpy()
        found = ~np.isnan(at)
        kpos, at = kpos[found], at[found].astype(np.int64)
        return pd.DataFrame({
            "regs": f.int("registersPerThread", 0)[at],
            "smem_static": f.int("staticSharedMemory", 0)[at],
            "smem_dynamic": f.int("dynamicSharedMemory", 0)[at],
            "threads": (f.int("blockX", 1) * f.int("blockY", 1) * f.int("blockZ", 1))[at],
            "smem_config": (np.where(f.null("sharedMemoryExecuted"), 0, f.int("sharedMemoryExecuted", 0))[at]
                            if executed else np.zeros(len(at), dtype=np.int64)),
            "grid_blocks": np.prod([f.int(c, 1)[at] for c in grid], axis=0) if grid else np.ones(len(at), dtype=np.int64),
        }, index=kpos)

    def target_gpus(self, columns: list[str]) -> list[dict]:
        """TARGET_INFO_GPU's rows (the GPUs the export describes), each the `columns` it has: `name`
        as text, the rest integers, None where NULL."""
        present = [c for c in columns if self.schema.has(GPU_TABLE, c)]
        if not present:
            return []
        with open_tables(self.path, probe=False) as tables:
            f = tables.read(GPU_TABLE, present, integer=tuple(c for c in present if c != "name"))
        values = {c: (list(f.text(c)) if c == "name" else [None if null else int(v) for v, null in
                                                            zip(f.int(c, 0), f.null(c))]) for c in present}
        return [{c: values[c][i] for c in present} for i in range(f.n)]

    @cached_property
    def gpu_memory(self) -> GpuMemoryEvents:
        """nsys's GPU memory events, failed CUDA calls and the GPUs' memory (read on first use)."""
        with open_tables(self.path, probe=False) as tables:
            return read_gpu_memory(tables)

    def failed_calls_from(self, position: int) -> pd.DataFrame:
        """The failed CUDA calls (`gpu_memory.failed_calls`) among the API table's rows from
        `position` of `api` on (its rows in rowid order), maybe with some before: a seek to the
        table's tail, not a scan of 10^7 calls, where the export is SQLite and no row was left
        out; else all of them."""
        if position <= 0 or "gpu_memory" in self.__dict__ or self.info.export_kind != "sqlite" \
                or self.checks.scanned or not self.schema.has("CUPTI_ACTIVITY_KIND_RUNTIME", "returnValue"):
            return self.gpu_memory.failed_calls
        with open_tables(self.path, probe=False) as tables:
            # rowids increase from 1 with the rows: the row at `position` has rowid > position
            return read_failed_calls(tables, after_rowid=position)

    def memcpy_calls(self, device: int) -> list[tuple] | None:
        """nsys's copies on `device` with their CUDA calls (read.memcpy: the row layout), read on
        first use; None where the export has no copies or lacks a column they need."""
        key = ("memcpy_calls", device)
        if key not in self.derived:
            self.derived[key] = read_memcpy_calls(self.path, self.info.export_kind, self.schema, device)
        return self.derived[key]

    @cached_property
    def gpu_metrics(self) -> GpuMetrics:
        """nsys's sampled GPU metrics (--gpu-metrics-devices), read on first use."""
        with open_tables(self.path, probe=False) as tables:
            return read_gpu_metrics(tables)

    @cached_property
    def sync_events(self) -> SyncEvents:
        """CUDA's synchronisation calls and event records (read on first use: the replay's)."""
        with open_tables(self.path, probe=False) as tables:
            return read_sync_events(tables)

    @property
    def kernels(self) -> pd.DataFrame:
        return self.ops[self.ops["kind"] == KERNEL]

    def meta(self) -> "RunMeta":
        meta = RunMeta.from_marks(self.marks)
        if not meta.config and not meta.steps:  # a `capture --no-nvtx` export: the record beside it
            meta = RunMeta.from_sidecar(self.beside)
        return meta


@dataclass
class RunMeta:
    """What the capture recorded about the run, from `nsight-tui:` NVTX marks (may be empty)."""

    config: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)
    source: str = "step marks"  # where they were read: the `nsight-tui:` marks, the sidecar file's name, "" for nowhere

    @classmethod
    def from_marks(cls, marks: pd.DataFrame) -> "RunMeta":
        meta = cls()
        # in time order: nsys 2025.6+ exports do not promise it
        for text in marks.sort_values(["start", "gtid"], kind="stable")["text"] if len(marks) else []:
            mark = conventions.parse_mark(text)
            if mark is None:
                continue
            kind, value = mark
            if kind == conventions.CONFIG and isinstance(value, dict):
                meta.config = value
            elif kind == conventions.STEP and isinstance(value, dict):
                meta.steps.append(value)
        return meta

    @classmethod
    def from_sidecar(cls, path: Path) -> "RunMeta":
        """The config and Python step times `capture --no-nvtx` keeps beside its export, which has no
        marks (STEM.steps.json; read only, and only when it is there and well formed)."""
        name = Path(path).name
        stem = name[: -len(".sqlite")] if name.endswith(".sqlite") else None
        side = Path(path).with_name(stem + conventions.STEPS_SIDECAR_SUFFIX) if stem else None
        nothing = cls(source="")  # no record read: a source names a file that was read, never one absent
        if side is None or not side.is_file():
            return nothing
        try:
            value = json.loads(side.read_text())
        except (OSError, ValueError):
            return nothing
        config = value.get("config") if isinstance(value, dict) else None
        steps = value.get("steps") if isinstance(value, dict) else None
        meta = cls(config if isinstance(config, dict) else {},
                   [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else [], side.name)
        return meta if meta.config or meta.steps else nothing


# ---------------------------------------------------------------------------------------
# Reading: every table goes through `columns.Tables` (ADBC, sqlite3, Parquet or Arrow) and
# then through `_validated`, the one place fetched columns are checked before use. A value
# nsys never writes raises validate.BadValues; the loader then counts the bad rows once with
# SQL (validate.scan) and reads again with `checks`, whose conditions leave those rows out.

def _validated(tables: Tables, fetched: Fetched, integer: tuple[str, ...] = (), required: tuple[str, ...] = ()) -> Fetched:
    """Check the columns of one fetched table: `integer` columns must hold integers (or
    NULL), `required` ones must not be NULL. Raises validate.BadValues, with one line that
    names the first offending value (the message when the rows cannot be left out)."""
    for name in integer:
        if fetched.has(name) and not fetched.is_integer(name):
            values = fetched.values[name]
            bad = next((v for v in values if v is not None and not (type(v) is int and -2**63 <= v < 2**63)), None)
            raise validate.BadValues(f"{tables.path}: {fetched.table}.{name} holds {_short_repr(bad)} where nsys writes integers")
    for name in required:
        if fetched.has(name) and fetched.null(name).any():
            row = int(np.flatnonzero(fetched.null(name))[0]) + 1
            raise validate.BadValues(f"{tables.path}: {fetched.table}.{name} is NULL (row {row}); nsys always writes it")
    return fetched


def _check_times(tables: Tables, table: str, start: np.ndarray, end: np.ndarray,
                 end_null: np.ndarray | None = None) -> None:
    """validate.BadValues when a row ends before it starts or a timestamp is past
    validate.TIME_LIMIT: `scan` then counts those rows and the read leaves them out (a good
    file costs two vector comparisons here, no SQL)."""
    lim = validate.TIME_LIMIT
    if not len(start):
        return
    bad_start = (start < -lim) | (start > lim)
    bad_end = (end < start) | (end < -lim) | (end > lim)
    if end_null is not None:
        bad_end &= ~end_null
    if bad_start.any() or bad_end.any():
        raise validate.BadValues(f"{tables.path}: {table} has rows that end before they start or lie "
                                 f"beyond ±2^61 ns, where nsys writes neither")


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _present(schema: Schema, table: str, wanted: list[str] | tuple[str, ...]) -> list[str]:
    """The columns of `wanted` this export's `table` has (older exports lack some)."""
    return [c for c in wanted if schema.has(table, c)]


def _read(tables: Tables, table: str, wanted: list[str], *, integer=(), required=(), rows=None,
          checks: validate.Checks | None = None) -> Fetched:
    """The columns of `wanted` that this export has (older ones lack some), validated;
    `rows`: only the rows with these row keys (rowid), in the file's order; `checks`: the
    rows validate.scan marked bad are left out."""
    present = _present(tables.schema, table, wanted)
    where = checks.where(table, prefix="") if checks is not None else ""
    return _validated(tables, tables.read(table, present, rows, integer, where), integer=integer, required=required)


class _Strings:
    """StringIds: id -> text, looked up for whole arrays at once. A NULL text is bad input:
    before the scan it raises BadValues, after it the name shows as `<string ID>`."""

    def __init__(self, tables: Tables, checks: validate.Checks):
        f = _read(tables, "StringIds", ["id", "value"], integer=("id",), required=("id",), checks=checks)
        ids = f.int("id", -1)
        values = f.text("value")
        if not checks.scanned and (f.null("value").any() or any(v is None for v in values)):
            raise validate.BadValues(f"{tables.path}: StringIds.value is NULL where nsys writes a name")
        self.map = {int(i): (f"<string {i}>" if v is None else v if type(v) is str else str(v))
                    for i, v in zip(ids.tolist(), values)}

    def get(self, sid, default=None):
        return self.map.get(sid, default)

    def texts(self, ids: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
        """Object array of texts for `ids` (None where `missing`, or the id is unknown)."""
        uniq, inverse = np.unique(ids, return_inverse=True)
        out = np.array([self.map.get(int(i)) for i in uniq] + [None], dtype=object)[inverse.reshape(-1)]
        if missing is not None:
            out[missing] = None
        return out


def _distinct_small(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(ids, return_inverse=True) for ids that are small integers (StringIds ids,
    correlation IDs): a presence table instead of a sort of 10^6 values."""
    lo, hi = (int(ids.min()), int(ids.max())) if len(ids) else (0, 0)
    if hi - lo > 4 * len(ids) + (1 << 20):  # sparse ids: the sort is cheaper than the table
        uniq, inverse = np.unique(ids, return_inverse=True)
        return uniq, inverse.reshape(-1)
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[ids - lo] = True
    uniq = np.flatnonzero(seen)
    rank = np.cumsum(seen, dtype=np.int64) - 1
    return uniq + lo, rank[ids - lo]


def _codes(ids: np.ndarray, strings: _Strings, names: list[str], index: dict[str, int]) -> np.ndarray:
    """Map StringIds ids to codes in `names` (deduplicated by text)."""
    uniq, inverse = _distinct_small(np.asarray(ids, dtype=np.int64))
    codes = np.empty(len(uniq), dtype=np.int32)
    for i, sid in enumerate(uniq.tolist()):
        text = strings.get(sid, "" if sid < 0 else f"<string {sid}>")
        code = index.get(text)
        if code is None:
            code = index[text] = len(names)
            names.append(text)
        codes[i] = code
    return codes[inverse]


OP_COLUMNS = ["start", "end", "device", "stream", "corr", "gpid", "name", "rowid"]
_OP_INTS = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "rowid")


def _kernel_name_column(schema: Schema) -> str:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    return "demangledName" if schema.has(t, "demangledName") else "shortName"


GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"  # graph launches traced whole (ids.GRAPH)


def _op_name_column(schema: Schema, table: str) -> str | None:
    """The column naming an op: the kernel's name id, the memcpy's kind; memsets have none."""
    if table == "CUPTI_ACTIVITY_KIND_KERNEL":
        name = _kernel_name_column(schema)
        return name if schema.has(table, name) else None
    if table == "CUPTI_ACTIVITY_KIND_MEMCPY" and schema.has(table, "copyKind"):
        return "copyKind"
    if table == GRAPH_TABLE and schema.has(table, "graphId"):
        return "graphId"
    return None


def _op_wanted(name_column: str | None) -> list[str]:
    return [*_OP_INTS, *([name_column] if name_column else [])]


_API_INTS = ("start", "end", "globalTid", "correlationId", "nameId")


def _gpu_reads(schema: Schema) -> list[tuple[str, list[str]]]:
    """What `TraceLoader._finish` reads in whole, in its order (for `Tables.prefetch`): the
    CUDA API calls, then the kernels, memcpys, memsets and graph launches traced whole."""
    reads = [("CUPTI_ACTIVITY_KIND_RUNTIME", _present(schema, "CUPTI_ACTIVITY_KIND_RUNTIME", _API_INTS))]
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", GRAPH_TABLE):
        reads.append((table, _present(schema, table, _op_wanted(_op_name_column(schema, table)))))
    return [(table, columns) for table, columns in reads if schema.has(table) and columns]


def _op_columns(tables: Tables, table: str, name_column: str | None, name_default: int,
                checks: validate.Checks) -> dict[str, np.ndarray]:
    wanted = _op_wanted(name_column)
    f = _read(tables, table, wanted, integer=tuple(wanted), required=("start", "end"), checks=checks)
    _check_times(tables, table, f.int("start", 0), f.int("end", 0))
    # the fetched arrays themselves (no copies where there is no NULL): `f` is let go here
    return {"start": f.int("start", 0), "end": f.int("end", 0), "device": f.int("deviceId", -1),
            "stream": f.int("streamId", -1), "corr": f.int("correlationId", -1), "gpid": f.int("globalPid", -1),
            "name": f.int(name_column, name_default) if name_column else np.full(f.n, name_default, dtype=np.int64),
            "rowid": f.int("rowid", 0)}


# Columns held as int32 when every value fits (ids, not times): 4 bytes a row each.
NARROW = ("device", "stream", "corr", "rowid")


def _joined(parts: list[dict[str, np.ndarray]], column: str, dtype=None) -> np.ndarray:
    """One column of all parts, each part's array dropped once it is copied (so the peak is
    the data plus one column); int32 for a NARROW column whose values fit."""
    arrays = [p.pop(column) for p in parts]
    if dtype is None:
        dtype = np.int64
        if column in NARROW and all(len(a) == 0 or (a.min() >= -2**31 and a.max() < 2**31) for a in arrays):
            dtype = np.int32
    if len(arrays) == 1:
        return arrays[0] if arrays[0].dtype == dtype else arrays[0].astype(dtype)
    return np.concatenate(arrays, dtype=dtype)


def _load_ops(tables: Tables, strings: _Strings, names: list[str], index: dict[str, int],
              memcpy_labels: dict[int, str], checks: validate.Checks, untimed: list[int] | None = None) -> pd.DataFrame:
    """Kernels, memcpys, memsets and graph launches traced whole as one frame, with only the columns
    attribution and the first screen need. Per-launch details (grid, block, graph node, bytes) and nsys's short
    names stay in the file: `op_details` and `op_short` read them when asked."""
    schema = tables.schema
    parts: list[dict[str, np.ndarray]] = []
    kinds: list[int] = []

    def code_of(label: str) -> int:
        if label not in index:
            index[label] = len(names)
            names.append(label)
        return index[label]

    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if schema.has(t):
        k = _op_columns(tables, t, _op_name_column(schema, t), -1, checks)
        k["name"] = _codes(k["name"], strings, names, index)
        parts.append(k)
        kinds.append(KERNEL)
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if schema.has(t):
        m = _op_columns(tables, t, _op_name_column(schema, t), 0, checks)
        copy_kinds, inverse = np.unique(m["name"], return_inverse=True)
        codes = np.array([code_of(f"[CUDA memcpy {memcpy_labels.get(int(kind), 'Unknown')}]")
                          for kind in copy_kinds.tolist()], dtype=np.int32)
        m["name"] = codes[inverse.reshape(-1)]
        parts.append(m)
        kinds.append(MEMCPY)
    t = "CUPTI_ACTIVITY_KIND_MEMSET"
    if schema.has(t):
        s = _op_columns(tables, t, None, 0, checks)
        s["name"] = np.full(len(s["start"]), code_of("[CUDA memset]"), dtype=np.int32)
        parts.append(s)
        kinds.append(MEMSET)
    if schema.has(GRAPH_TABLE):
        # a CUDA graph launch traced whole: one op for all its nodes, named by its graph
        g = _op_columns(tables, GRAPH_TABLE, _op_name_column(schema, GRAPH_TABLE), -1, checks)
        # CUPTI writes 0 for both timestamps of a graph it could not time: no op, a note (`untimed`)
        timed = (g["start"] != 0) | (g["end"] != 0)
        if not timed.all():
            g = {k: v[timed] for k, v in g.items()}
            if untimed is not None:
                untimed.append(int((~timed).sum()))
        graph_ids, inverse = np.unique(g["name"], return_inverse=True)
        codes = np.array([code_of(f"[CUDA graph {gid}]" if gid >= 0 else "[CUDA graph]") for gid in graph_ids.tolist()],
                         dtype=np.int32)
        g["name"] = codes[inverse.reshape(-1)]
        parts.append(g)
        kinds.append(GRAPH)
    if not parts:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ["kind", *OP_COLUMNS]})
    columns = {"kind": np.concatenate([np.full(len(p["start"]), kind, dtype=np.int8) for kind, p in zip(kinds, parts)])}
    for c in OP_COLUMNS:
        columns[c] = _joined(parts, c, np.int32 if c == "name" else None)
    return pd.DataFrame(columns, copy=False)


def _kernel_short_names(tables: Tables, op_names: list[str], checks: validate.Checks) -> list[str]:
    """nsys's shortName for each op name (memcpy/memset labels are their own short name):
    per demangled name, the smallest shortName id, as nsys's reports pick it."""
    short = list(op_names)
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if not (tables.schema.has(t, "shortName") and tables.schema.has(t, "demangledName")):
        return short
    try:
        f = _read(tables, t, ["demangledName", "shortName"], integer=("demangledName", "shortName"), checks=checks)
        strings = _Strings(tables, checks)
    except validate.BadValues:  # the load left such rows out; the names stay demangled
        return short
    # a NULL shortName never wins SQL's min()
    demangled, sname = f.int("demangledName", -1), f.int("shortName", np.iinfo(np.int64).max)
    if not len(demangled):
        return short
    order = np.lexsort((sname, demangled))
    d, s = demangled[order], sname[order]
    first = np.concatenate(([True], d[1:] != d[:-1]))
    index = {name: i for i, name in enumerate(op_names)}
    for did, sid in zip(d[first].tolist(), s[first].tolist()):
        text = strings.get(did)
        if text in index and strings.get(sid) is not None:
            short[index[text]] = strings.get(sid)
    return short


def _load_api(tables: Tables, strings: _Strings, names: list[str], index: dict[str, int],
              checks: validate.Checks) -> pd.DataFrame:
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    cols = ["start", "end", "gtid", "corr", "name"]
    if not tables.schema.has(t):
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})
    f = _read(tables, t, list(_API_INTS), integer=_API_INTS, required=("start", "end"), checks=checks)
    _check_times(tables, t, f.int("start", 0), f.int("end", 0))
    part = {"start": f.int("start", 0), "end": f.int("end", 0), "gtid": f.int("globalTid", -1),
            "corr": f.int("correlationId", -1), "name": _codes(f.int("nameId", -1), strings, names, index)}
    del f
    return pd.DataFrame({c: _joined([part], c, np.int32 if c == "name" else None) for c in cols}, copy=False)


RANGE_COLUMNS = ["rowid", "start", "end", "end_sum", "gtid", "cross", "pushpop", "name", "domain", "text", "unended",
                 "copies"]


def _load_nvtx(tables: Tables, strings: _Strings,
               checks: validate.Checks) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Coded]]:
    """The ranges and marks, and the ranges' text columns as codes (Trace.range_texts, ...)."""
    t = "NVTX_EVENTS"
    empty_ranges = pd.DataFrame({c: [] for c in RANGE_COLUMNS})
    empty_marks = pd.DataFrame({"start": [], "gtid": [], "text": []})
    if not tables.schema.has(t):
        return empty_ranges, empty_marks, {}
    ints = ("rowid", "start", "end", "eventType", "globalTid", "endGlobalTid", "textId", "domainId")
    f = _read(tables, t, [*ints, "text"], integer=ints, required=("start", "eventType", "globalTid"), checks=checks)
    if f.n == 0:
        return empty_ranges, empty_marks, {}
    start, etype, gtid = f.int("start", 0), f.int("eventType", -1), f.int("globalTid", -1)
    end_null = f.null("end")
    end = f.int("end", 0)
    _check_times(tables, t, start, end, end_null)
    # Registered strings (textId) win over the inline text, as nsys resolves them.
    text = f.text("text")
    if pd.api.types.infer_dtype(text, skipna=True) not in ("string", "empty"):  # a number stored as text
        text = np.array([x if x is None or isinstance(x, str) else str(x) for x in text], dtype=object)
    has_id = ~f.null("textId")
    if has_id.any():
        resolved = strings.texts(f.int("textId", -1)[has_id])
        keep = text[has_id]
        text[has_id] = np.where(pd.isna(resolved), keep, resolved)
    domain_id = f.int("domainId", 0)
    pid = (gtid >> 24) & 0xFFFFFF
    # Domain names, as nsys resolves them: the create event of that domain id in the same process.
    domains: dict[tuple[int, int], str] = {}
    created = np.flatnonzero(etype == NVTX_DOMAIN_CREATE)
    # nsys's NVTX reports join each range to its domain's create events one per creating thread
    # of the process (their domains table is grouped by domain and thread): a domain created on
    # k threads has each of its ranges counted k times there. `copies` keeps k, for the reports
    # that reproduce nsys (--attribution nsys); every view counts a range once.
    creators: dict[tuple[int, int], set[int]] = {}
    for i in created[np.argsort(start[created], kind="stable")].tolist():
        domains.setdefault((int(domain_id[i]), int(pid[i])), text[i] or "")
        creators.setdefault((int(domain_id[i]), int(pid[i])), set()).add(int(gtid[i]))

    # nvtx_sum closes unended ranges at the last NVTX timestamp of any kind; the GPU
    # projection reports at the last timestamp of range events only. Keep both.
    all_max = int(max(start.max(), end[~end_null].max(initial=np.iinfo(np.int64).min)))
    is_range = np.isin(etype, RANGE_TYPES)
    coded: dict[str, Coded] = {}
    if not is_range.any():
        ranges = empty_ranges
    else:
        r = np.flatnonzero(is_range)
        r_end_null = end_null[r]
        range_max = int(max(start[r].max(), end[r][~r_end_null].max(initial=np.iinfo(np.int64).min)))
        # The text columns are built from codes into their distinct values: a long name repeated
        # over many ranges is then encoded once, not once per range (the dict hashes each string
        # object once and compares equal objects by identity).
        distinct: dict[str, int] = {}
        text_code = np.fromiter((distinct.setdefault("" if x is None else x, len(distinct)) for x in text[r].tolist()),
                                dtype=np.int64, count=len(r))
        texts = list(distinct)
        domain_code, domain_texts = np.zeros(len(r), dtype=np.int64), [""]
        r_copies = np.ones(len(r), dtype=np.int64)
        if domains:  # per distinct (domain, process), not per range
            groups = group_ids(domain_id[r], pid[r])
            keys = list(zip(domain_id[r][groups.first].tolist(), pid[r][groups.first].tolist()))
            domain_code, domain_texts = groups.gid.astype(np.int64), [domains.get(k, "") for k in keys]
            r_copies = np.array([max(1, len(creators.get(k, ()))) for k in keys], dtype=np.int64)[groups.gid]
        # name = `domain:text`, one per distinct (domain, text) pair
        name_code, pairs = pd.factorize(domain_code * max(len(texts), 1) + text_code)
        pairs = np.asarray(pairs, dtype=np.int64)
        names = [f"{domain_texts[d]}:{texts[t]}" for d, t in zip((pairs // max(len(texts), 1)).tolist(),
                                                                   (pairs % max(len(texts), 1)).tolist())]
        dtype = inferred_text_dtype()
        ranges = pd.DataFrame({
            "rowid": f.int("rowid", 0)[r], "start": start[r],
            "end": np.where(r_end_null, range_max, end[r]), "end_sum": np.where(r_end_null, all_max, end[r]),
            "gtid": gtid[r], "cross": ~f.null("endGlobalTid")[r],
            "pushpop": np.isin(etype[r], (NVTX_PUSHPOP, NVTXT_PUSHPOP)),
            "name": text_column(np.asarray(name_code), names, dtype),
            "domain": text_column(domain_code, domain_texts, dtype), "text": text_column(text_code, texts, dtype),
            "unended": r_end_null, "copies": r_copies,
        })
        coded = {"range_texts": Coded(text_code, np.array(texts + [""], dtype=object)[:-1]),
                 "range_names": Coded.from_codes(np.asarray(name_code), names),
                 "range_domains": Coded.from_codes(domain_code, domain_texts)}
    mk = np.flatnonzero(np.isin(etype, (NVTX_MARK, NVTXT_MARK)))
    marks = pd.DataFrame({"start": start[mk], "gtid": gtid[mk], "text": text[mk]})
    return ranges, marks, coded


def _link_ops_to_api(ops: pd.DataFrame, api: pd.DataFrame) -> None:
    ops["api"] = _launching_calls(ops, api)


def _launching_calls(ops: pd.DataFrame, api: pd.DataFrame) -> np.ndarray:
    """Per op, the position of the launching API call (int32 while the calls number under
    2^31; -1: none): same correlation ID *and* process (correlation IDs repeat across
    processes). One int64 key, (pid << 32) | corr, sorted once and searched: no hash tables
    over 10^6 rows. The ops are looked up in blocks, so the search's temporaries stay small."""
    pos = np.full(len(ops), -1, dtype=index_dtype(len(api) + 1))
    if ops.empty or api.empty:
        return pos
    a_corr, o_corr = api["corr"].to_numpy(), ops["corr"].to_numpy()
    a_gtid, o_gpid = api["gtid"].to_numpy(), ops["gpid"].to_numpy()
    if a_corr.max(initial=0) >= 2**32:
        raise TraceError(f"CUDA API correlation IDs up to {int(a_corr.max()):,}, above 2^32: "
                         "not an export nsys writes; cannot link kernels to their launches")
    # A call without a correlation ID (NULL: -1 here) launched nothing this export can show.
    has_id = a_corr >= 0
    with_id = None if has_id.all() else np.flatnonzero(has_id)  # None: every call (no copy)
    del has_id
    if with_id is not None and len(with_id) == 0:
        return pos
    w_corr = a_corr if with_id is None else a_corr[with_id]
    w_gtid = a_gtid if with_id is None else a_gtid[with_id]
    # gtid & PID_MASK is monotonic in gtid: one process exactly when the extremes share it
    one_process = (int(w_gtid.min()) & PID_MASK) == (int(w_gtid.max()) & PID_MASK)
    pid0 = pid_of(int(w_gtid[0]))
    n_with = len(w_corr)

    def call_of(i):  # rank among the calls with an ID -> position in api
        return i if with_id is None else with_id[i]

    if one_process and w_corr.max() < 4 * n_with + (1 << 20):
        # The usual case: one process, dense correlation IDs. A table indexed by ID; filled
        # backwards because repeated indices keep the last value, and the first call wins.
        table = np.full(int(w_corr.max()) + 1, -1, dtype=pos.dtype)
        table[w_corr[::-1]] = call_of(np.arange(n_with, dtype=pos.dtype))[::-1]

        def find(o_pid, corr):
            ok = (o_pid == pid0) & (corr < len(table))
            return np.where(ok, table[np.where(ok, corr, 0)], -1)
    else:
        # one process: the ID alone is the key (the op's process is checked apart)
        w_key = w_corr if one_process else (pid_of(w_gtid) << 32) | w_corr
        order = np.argsort(w_key, kind="stable")  # stable: the first call wins on a duplicate key
        sorted_keys = w_key[order]
        del w_key
        order = call_of(order).astype(pos.dtype)

        def find(o_pid, corr):
            keys = corr if one_process else (o_pid << 32) | corr
            at = np.searchsorted(sorted_keys, keys)
            np.minimum(at, len(sorted_keys) - 1, out=at)
            hit = sorted_keys[at] == keys
            if one_process:
                hit &= o_pid == pid0
            return np.where(hit, order[at], -1)

    del w_gtid, w_corr
    has_pid = (o_gpid >= 0) & (o_corr >= 0)
    for a in range(0, len(ops), LINK_BLOCK):
        b = a + LINK_BLOCK
        sel = np.flatnonzero(has_pid[a:b]) + a
        pos[sel] = find(pid_of(o_gpid[sel]), o_corr[sel])
    if not has_pid.all():
        # Cut-down exports drop the kernel's globalPid: the correlation ID alone decides, which
        # is unique while the export holds one process.
        ids = np.arange(len(api)) if with_id is None else with_id
        by_corr = ids[np.argsort(a_corr[ids], kind="stable")]
        c_sorted = a_corr[by_corr]
        want = np.where(o_corr[~has_pid] >= 0, o_corr[~has_pid], -2)  # -2: matches no call
        at = np.minimum(np.searchsorted(c_sorted, want), len(c_sorted) - 1)
        found = np.where(c_sorted[at] == want, by_corr[at], -1)
        pos[~has_pid] = found
        ok = found >= 0
        fill = np.flatnonzero(~has_pid)[ok]
        ops.loc[fill, "gpid"] = a_gtid[found[ok]] & PID_MASK
    return pos


LINK_BLOCK = 1 << 20  # ops per block of the launch lookup


def _small(tables: Tables, table: str, wanted: list[str], integer=(), required=(),
           checks: validate.Checks | None = None) -> Fetched | None:
    """A small table (threads, processes, GPUs, metadata), or None if the export lacks it."""
    if not tables.schema.has(table):
        return None
    return _read(tables, table, wanted, integer=integer, required=required, checks=checks)


def _meta_value(tables: Tables, names: list[str]) -> str:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        f = _small(tables, table, ["name", "value"])
        if f is None:
            continue
        by_name = dict(zip(f.text("name"), f.text("value")))
        for name in names:
            if by_name.get(name) is not None:
                return str(by_name[name])
    return ""


def _trace_facts(tables: Tables, strings: _Strings, checks: validate.Checks) -> dict:
    """Threads, processes, GPUs, span and versions: the small tables."""
    threads: dict[int, str] = {}
    ints = ("globalTid", "nameId")
    f = _small(tables, "ThreadNames", list(ints), integer=ints, required=ints, checks=checks)
    if f is not None:
        for gtid, name in zip(f.int("globalTid", -1).tolist(), f.int("nameId", -1).tolist()):
            threads[gtid] = strings.get(name, str(name))
    processes: dict[int, tuple[int, str]] = {}
    f = _small(tables, "PROCESSES", ["globalPid", "pid", "name"], integer=("globalPid",), required=("globalPid",),
               checks=checks)
    if f is not None:
        gpids = f.int("globalPid", -1)
        if f.has("pid") and f.is_integer("pid") and not f.null("pid").any():
            pids = f.int("pid", -1).tolist()
        elif not f.has("pid"):
            pids = [-1] * f.n
        elif not checks.scanned:
            raise validate.BadValues(f"{tables.path}: PROCESSES.pid is not an integer where nsys writes one")
        else:  # what nsys encodes in the globalPid anyway
            raw = f.values["pid"]
            ok = ~f.null("pid") & np.array([type(v) in (int, np.int64) for v in raw.tolist()], dtype=bool)
            pids = np.where(ok, np.where(ok, raw, 0).astype(np.int64), pid_of(gpids)).tolist()
        for gpid, pid, name in zip(gpids.tolist(), pids, f.text("name")):
            processes[gpid] = (pid, name if isinstance(name, str) else "")
    gpus: list[str] = []
    f = _small(tables, "TARGET_INFO_GPU", ["id", "name"])
    if f is not None:
        names = f.text("name")
        order = np.argsort(f.int("id", 0), kind="stable") if f.has("id") and f.is_integer("id") else range(f.n)
        gpus = [str(names[i]) for i in order]
    span = 0
    if tables.schema.has("ANALYSIS_DETAILS", "duration"):
        f = _read(tables, "ANALYSIS_DETAILS", ["duration"], integer=("duration",), checks=checks)
        durations = f.int("duration", 0)[~f.null("duration")]
        span = int(durations.max(initial=0))
    return {"threads": threads, "processes": processes, "gpus": gpus, "span": span,
            "nsys_version": _meta_value(tables, ["EXPORT_PRODUCT_VERSION"]),
            "schema_version": _meta_value(tables, ["EXPORT_SCHEMA_VERSION"])}


def _memcpy_labels(tables: Tables, checks: validate.Checks) -> tuple[dict[int, str], bool]:
    labels = dict(FALLBACK_MEMCPY_LABELS)
    f = _small(tables, "ENUM_CUDA_MEMCPY_OPER", ["id", "label"], integer=("id",), required=("id",), checks=checks)
    if f is not None:
        labels.update({int(i): str(v) for i, v in zip(f.int("id", -1).tolist(), f.text("label"))})
    return labels, f is not None


class TraceLoader:
    """Loads one export in two stages, so a screen can show the NVTX tree (CPU times) while
    the GPU work is still being read and attributed:

        loader = TraceLoader(path)
        early = loader.ranges_only()   # NVTX ranges and marks; no GPU ops yet (info.gpu_pending)
        trace = loader.finish()        # everything; the same ranges frame

    `load_trace(path)` is both in one call. The file is opened read-only (source.py) and
    closed when `finish` returns or fails.

    Bad rows: both stages read without row conditions first (fast on good files). When a
    value cannot be what nsys writes (validate.BadValues), `validate.scan` counts the bad rows
    of every table once, with SQL, and the stage reads again leaving them out; the same
    conditions go to both SQLite readers (ADBC and sqlite3), so they leave out the same rows.
    A stage that succeeded before the scan saw no bad value in its tables, so the scan leaves
    its rows as they were. nsys's columnar exports have no SQL to scan with: a bad value there
    refuses the file in one line.
    """

    def __init__(self, path: str | Path, progress=None, native: bool = True, cache: bool = True):
        refuse_special(path)  # before the cache reads the file's identity: a FIFO would block it
        # an export compressed whole: its decompressed copy, kept while this loader and its traces live
        self.path = plain_export(path, owner=self)  # (read.compressed)
        self.opened_as = None if self.path == Path(path) else Path(path)
        self.say = progress or (lambda f, t: None)
        self.checks = validate.Checks()
        self._early: Trace | None = None
        # A second open of an unchanged file: the trace from the user's cache, memory-mapped
        # (read.cache); the file itself is still opened once, to refuse what is not a profile.
        self.entry = store.open_entry(self.path) if cache else None
        self.cached = _from_cache(self.entry, self.path) if self.entry is not None else None
        # (from the cache: sqlite3 opens it, no probe; the native reader's import is not needed).
        # The probe touches the big tables' last pages but counts no rows: the load reads every
        # one of them to its end, where a missing page fails with one line too (count(*) of
        # each was ~14 s of a 4.4 GB export's first open, before its first row was read).
        self.tables = open_tables(self.path, native=native and self.cached is None, probe=self.cached is None,
                                  count_rows=False)
        if self.cached is not None:
            self.has_cuda, self.has_nvtx = self.cached.info.has_cuda, self.cached.info.has_nvtx
            # the name given before any stage reads it: the records beside it (STEM.steps.json's
            # warm-ups, which the inferred iterations keep once computed) are found by that name
            self.cached.opened_as = self.opened_as
            self._early = self.cached
            self.tables.close()
            return
        try:
            schema = self.tables.schema
            self.schema_notes = _without_incomplete_tables(schema)
            self.has_cuda = any(schema.has(t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"))
            self.has_nvtx = schema.has("NVTX_EVENTS")
            if not self.has_cuda and not self.has_nvtx:
                raise TraceError(f"{path}: export has neither CUDA nor NVTX data (profile with --trace=cuda,nvtx)")
        except BaseException:
            self.tables.close()
            raise

    def _guarded(self, step):
        try:
            try:
                return step()
            except validate.BadValues as exc:
                con = self.tables.connection()
                if con is None or self.checks.scanned:  # nothing to scan with, or scanned already
                    raise TraceError(str(exc) or f"{self.path}: a value nsys never writes") from None
                # Count what is wrong, once, with SQL, and read again leaving those rows out
                # (or refuse the file: validate.scan raises TraceError for a mostly bad table).
                self.checks = validate.scan(con, self.tables.schema, self.path)
                try:
                    return step()
                except validate.BadValues as again:
                    raise TraceError(str(again)) from None
        except sqlite3.DatabaseError as exc:
            self.tables.close()
            raise TraceError(f"{self.path}: damaged or unexpected export ({exc})") from None
        except BaseException:
            self.tables.close()
            raise

    def ranges_only(self) -> "Trace":
        """The NVTX ranges and marks, thread and process names; no GPU ops or API calls."""
        if self._early is None:
            with self.foreground():
                self._early = self._guarded(self._ranges_only)
            self._early.opened_as = self.opened_as
        return self._early

    def foreground(self):
        """A block of the caller's work that goes before the GPU tables' read ahead (read.columns)."""
        return self.tables.foreground()

    def read_ahead(self) -> None:
        """Start reading the CUDA API and GPU tables in the background (a reader that gains
        nothing from it ignores this; asking twice is asking once): the ranges, or the
        caller's own start-up, proceed meanwhile."""
        if self.has_cuda and self.cached is None:
            self.tables.prefetch(_gpu_reads(self.tables.schema))

    def _ranges_only(self) -> "Trace":
        self.read_ahead()  # the GPU tables are read in the background while the ranges are
        self.say(0.05, "NVTX ranges")
        self.strings = _Strings(self.tables, self.checks)
        ranges, marks, coded = _load_nvtx(self.tables, self.strings, self.checks)
        facts = _trace_facts(self.tables, self.strings, self.checks)
        empty_ops = pd.DataFrame({c: np.zeros(0, dtype=np.int8 if c == "kind" else np.int64)
                                  for c in ["kind", *OP_COLUMNS, "api"]})
        empty_api = pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ["start", "end", "gtid", "corr", "name"]})
        info = self._info(facts, empty_ops, empty_api, ranges, from_export=True)
        info.gpu_pending = self.has_cuda
        trace = Trace(path=self.path, schema=self.tables.schema, info=info, op_names=[], api_names=[],
                      ops=empty_ops, api=empty_api, ranges=ranges, marks=marks, threads=facts["threads"],
                      processes=facts["processes"], facts=facts, checks=self.checks)
        trace.__dict__.update(coded)  # the codes the load worked out: Trace.range_texts, ...
        return trace

    def finish(self) -> "Trace":
        if self.cached is not None:
            self.cached.opened_as = self.opened_as
            return self.cached
        try:
            early = self.ranges_only()
            trace = self._guarded(lambda: self._finish(early))
            trace.opened_as = self.opened_as
        finally:
            self.tables.close()
        release_free_memory()  # the readers' and the columns' temporaries, before the model's
        if self.entry is not None and self.tables.kind == "sqlite" and not self.checks.scanned:
            # Kept for the next open (written in the background while the caller goes on).
            # A file with rows left out is not: its lazy reads depend on the scan's conditions.
            trace.stash = self.entry
            # and then the first op of each (process, GPU), which every TUI open asks (the header's
            # rank badge: a sort of every op, 0.6-1.7 s at 24M), computed in the writer's thread
            ops = trace.ops
            self.entry.write(TRACE_BUNDLE, _to_bundle(trace), then=(store.PAIRS_BUNDLE, lambda: pairs_bundle(ops)))
        return trace

    def _finish(self, early: "Trace") -> "Trace":
        tables, checks = self.tables, self.checks
        self.say(0.2, "CUDA API calls")
        api_names: list[str] = []
        api = _load_api(tables, self.strings, api_names, {}, checks)
        self.say(0.55, "GPU operations")
        memcpy_labels, from_export = _memcpy_labels(tables, checks)
        op_names: list[str] = []
        untimed: list[int] = []
        ops = _load_ops(tables, self.strings, op_names, {}, memcpy_labels, checks, untimed)
        _link_ops_to_api(ops, api)
        info = self._info(early.facts, ops, api, early.ranges, from_export, api_names)
        if untimed:
            info.notes.append(f"left out {untimed[0]:,} CUDA graph launches traced whole without timestamps "
                              "(CUPTI writes 0 for a graph it could not time)")
        info.reader = tables.reader
        fallbacks = getattr(tables, "fallbacks", [])  # tables the native reader left to sqlite3
        if fallbacks:
            info.reader += f" (sqlite3 for {', '.join(fallbacks)})"
        self.say(1.0, "done")
        trace = Trace(path=self.path, schema=tables.schema, info=info, op_names=op_names, api_names=api_names,
                      ops=ops, api=api, ranges=early.ranges, marks=early.marks, threads=early.threads,
                      processes=early.processes, memcpy_labels_from_export=from_export, facts=early.facts,
                      checks=checks)
        trace.share_range_codes(early)
        return trace

    def _info(self, facts: dict, ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
              from_export: bool, api_names: list[str] | None = None) -> "TraceInfo":
        kinds = ops["kind"].to_numpy()
        notes = ((sidecar_notes(self.path) if self.tables.kind == "sqlite" else []) + self.schema_notes
                 + self.checks.notes())
        no_corr = int((api["corr"].to_numpy() < 0).sum()) if len(api) and self.tables.schema.has(
            "CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId") else 0
        if no_corr:
            notes.append(f"{no_corr:,} CUDA API calls have no correlation ID: they count in cuda_api_sum "
                         "but are linked to no GPU work")
        if not self.has_nvtx:
            notes.append(NO_NVTX_NOTE)
        if len(ranges) and "copies" in ranges and (ranges["copies"].to_numpy() > 1).any():
            twice = ranges[ranges["copies"].to_numpy() > 1]
            names = ", ".join(sorted(set(twice["domain"].tolist())))
            notes.append(f"NVTX domain {names} is created on {int(twice['copies'].max())} threads of one process: "
                         f"nsys's nvtx_sum counts each of its {len(twice):,} ranges once per creating thread, and so "
                         "does `stats --attribution nsys`; every other figure counts a range once")
        if not from_export and (kinds == MEMCPY).any():
            notes.append("no ENUM_CUDA_MEMCPY_OPER table: memcpy kinds labelled from CUPTI's enum")
        graph_notes, by_node = _graph_tracing_notes(kinds, ops["api"].to_numpy(), api, api_names or [])
        notes += graph_notes
        return TraceInfo(
            path=self.path, nsys_version=facts["nsys_version"], schema_version=facts["schema_version"],
            gpus=facts["gpus"], span_ns=facts["span"],
            kernels=int((kinds == KERNEL).sum()), memcpys=int((kinds == MEMCPY).sum()),
            memsets=int((kinds == MEMSET).sum()), graphs_whole=int((kinds == GRAPH).sum()), graphs_by_node=by_node,
            api_calls=len(api), ranges=len(ranges),
            processes=len({int(g) & PID_MASK for g in api["gtid"].unique()}) if len(api) else 0,
            has_nvtx=self.has_nvtx and len(ranges) > 0, has_cuda=self.has_cuda, notes=notes,
            export_kind=self.tables.kind,
        )


# The columns without which a table's rows mean nothing, and what goes with the table. A
# table that lacks one (renamed, or an export nsys did not write) is read as absent, with a
# note naming the column and the figures it takes away: every analysis then sees the same
# schema, and none meets a missing column in SQL of its own.
TABLE_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": (("start", "end", "correlationId", "globalTid", "nameId"),
                                    "CUDA API calls left out: no cuda_api_sum, launch overhead, queue delay, "
                                    "launching calls or API lanes"),
    "CUPTI_ACTIVITY_KIND_KERNEL": (("start", "end"), "kernels left out: no kernel figures"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (("start", "end"), "memcpys left out: no memcpy figures"),
    "CUPTI_ACTIVITY_KIND_MEMSET": (("start", "end"), "memsets left out: no memset figures"),
    "NVTX_EVENTS": (("start", "eventType", "globalTid"), "NVTX events left out: no range figures"),
}


def _graph_tracing_notes(kinds: np.ndarray, op_api: np.ndarray, api: pd.DataFrame,
                         api_names: list[str]) -> tuple[list[str], int]:
    """How the capture traced its CUDA graphs, where it launches any: whole (one op a launch, its kernels
    unseen) or node by node (each launch call carrying nsys's cost per node, docs/whatif.md); and how
    many launches it traced node by node."""
    notes, launches = [], 0
    whole = int((kinds == GRAPH).sum())
    if whole:
        notes.append(f"{whole:,} CUDA graph launches traced whole (nsys --cuda-graph-trace=graph, its default): each "
                     "is one GPU op here, its kernels unseen (kernel tables and families leave them out; capture with "
                     "--cuda-graph-trace=node to see them); `stats` leaves them out of its NVTX projection, as nsys "
                     "stats does")
    launch_codes = [i for i, n in enumerate(api_names) if n.startswith("cudaGraphLaunch")]
    if launch_codes and len(api):
        is_launch = np.isin(api["name"].to_numpy(), launch_codes)
        linked = op_api[(op_api >= 0) & (kinds != GRAPH)]
        nodes = int(is_launch[linked].sum())
        if nodes:
            launches = len(np.unique(linked[is_launch[linked]]))
            notes.append(f"CUDA graphs traced node by node ({nodes:,} nodes of {launches:,} launches; "
                         "--cuda-graph-trace=node, as `nsight-tui capture` traces them): each graph launch call here "
                         "carries nsys's cost per node, 0.7-1.0 us a node measured on an H200, so a graphed step runs "
                         "slower here than without it (a 326-node decode token 1.12-1.28 ms against 0.84-0.91 traced "
                         "whole: docs/whatif.md)")
    return notes, launches


def _without_incomplete_tables(schema: Schema) -> list[str]:
    """Drop from `schema` each table of TABLE_NEEDS that lacks a column it needs; the notes."""
    notes = []
    for table, (columns, what) in TABLE_NEEDS.items():
        gone = [c for c in columns if schema.has(table) and not schema.has(table, c)]
        if gone:
            del schema.tables[table]
            notes.append(f"{table} has no {', '.join(gone)} column: {what}")
    if schema.views:
        shown = ", ".join(schema.views[:5]) + (f" and {len(schema.views) - 5:,} more" if len(schema.views) > 5 else "")
        notes.append(f"views are not read (nsys writes tables; a view's query could run without end): {shown}")
    if schema.has("StringIds") and not (schema.has("StringIds", "id") and schema.has("StringIds", "value")):
        gone = [c for c in ("id", "value") if not schema.has("StringIds", c)]
        notes.append(f"StringIds has no {', '.join(gone)} column: names show as <string ID>")
    return notes


TRACE_BUNDLE = store.TRACE_BUNDLE


def pairs_bundle(ops: pd.DataFrame) -> store.Bundle:
    """The position of the first op of each distinct (process, GPU), in (process, GPU) order."""
    first = group_ids(ops["gpid"].to_numpy(np.int64), ops["device"].to_numpy(np.int64)).first
    return store.Bundle(values={}, arrays={"first": np.asarray(first, dtype=np.int64)})


def _to_bundle(trace: Trace) -> store.Bundle:
    """The trace as cache arrays and JSON values (read.cache)."""
    info = {k: v for k, v in vars(trace.info).items() if k != "path"}
    sidecar = len(sidecar_notes(trace.path))
    info["notes"] = info["notes"][sidecar:]  # said again on each open from what lies beside it then
    bundle = store.Bundle(values={
        "op_names": trace.op_names, "api_names": trace.api_names, "info": info,
        "schema": {"tables": {t: sorted(c) for t, c in trace.schema.tables.items()}, "views": trace.schema.views},
        "threads": [[int(k), v] for k, v in trace.threads.items()],
        "processes": [[int(k), int(p), n] for k, (p, n) in trace.processes.items()],
        "facts": {k: v for k, v in trace.facts.items() if k not in ("threads", "processes")},
        "memcpy_labels_from_export": trace.memcpy_labels_from_export,
    }, arrays={})
    for name in ("ops", "api", "ranges", "marks"):
        store.put_frame(bundle, name, getattr(trace, name))
    return bundle


def _from_cache(entry: store.Entry, path: Path) -> Trace | None:
    """The trace `_to_bundle` stored for this very file, or None (not there, stale, damaged)."""
    bundle = entry.read(TRACE_BUNDLE)
    if bundle is None:
        return None
    try:
        v = bundle.values
        threads = {int(k): str(name) for k, name in v["threads"]}
        processes = {int(k): (int(p), str(name)) for k, p, name in v["processes"]}
        facts = {"threads": threads, "processes": processes, **v["facts"]}  # the loader's order
        info = TraceInfo(path=path, **v["info"])
        info.notes = sidecar_notes(path) + list(info.notes)
        schema = Schema(tables={t: set(c) for t, c in v["schema"]["tables"].items()}, views=list(v["schema"]["views"]))
        frames = {name: store.get_frame(bundle, name) for name in ("ops", "api", "ranges", "marks")}
        return Trace(path=path, schema=schema, info=info, op_names=list(v["op_names"]), api_names=list(v["api_names"]),
                     threads=threads, processes=processes, memcpy_labels_from_export=v["memcpy_labels_from_export"],
                     facts=facts, stash=entry, **frames)
    except (KeyError, TypeError, ValueError):
        return None


MAPPED_FRAMES = ("ops", "api")  # the biggest frames, numbers only: 2.9 GB of 5.2 at 24M kernels


def map_columns(trace: Trace) -> bool:
    """Once the trace's cache bundle is written (in the background, while the model is built),
    serve the GPU ops' and API calls' columns from the cache's memory-mapped files instead of
    the private copies the load made: the same values, in file-backed pages that the kernel
    shares and may drop and read again, so a first open holds no more private memory than a
    second. Never waits for the writer: False when the bundle is not there (yet), or does not
    match. The trace's copy with inferred ranges shares the frames and is switched with it."""
    entry = trace.stash
    if entry is None or trace.derived.get("columns_mapped"):
        return False
    bundle = entry.read(TRACE_BUNDLE)
    if bundle is None:
        return False
    try:
        frames = {name: store.get_frame(bundle, name) for name in MAPPED_FRAMES}
    except (KeyError, TypeError, ValueError):
        return False
    for name, mapped in frames.items():
        own = getattr(trace, name)
        if list(mapped.columns) != list(own.columns) or len(mapped) != len(own) \
                or list(mapped.dtypes) != list(own.dtypes):
            return False
    sharing = [t for t in trace.derived.values() if isinstance(t, Trace) and t is not trace]
    for name, mapped in frames.items():
        own = getattr(trace, name)
        for t in [trace, *sharing]:
            if getattr(t, name) is own:
                setattr(t, name, mapped)
    del own
    trace.derived["columns_mapped"] = True
    release_free_memory()
    return True


def load_trace(path: str | Path, progress=None, native: bool = True) -> Trace:
    """Open `path` (an nsys SQLite export, or nsys's parquetdir/arrowdir export directory)
    read-only and load it. Raises TraceError with a one-line message on bad input.

    `progress(fraction, text)` is called between stages (for the TUI's loading bar).
    `native=False` reads an SQLite export with Python's sqlite3 instead of ADBC (and neither
    reads nor writes the user's cache: what it returns was read from the file by sqlite3).
    """
    return TraceLoader(path, progress, native, cache=native).finish()
