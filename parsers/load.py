"""Read an export into column arrays: GPU ops, CUDA API calls, NVTX ranges and marks.

Everything is fetched with one SELECT per table and held as pandas frames of plain
integers; names stay as integer codes into small lists, so grouping 10^6 kernels is a
vectorised integer groupby, not string work.
"""
from __future__ import annotations

import itertools
import re
import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from nsight_tui.parsers.errors import TraceError
from nsight_tui.parsers import conventions
from nsight_tui.parsers.ids import (KERNEL, MEMCPY, MEMSET, NVTX_DOMAIN_CREATE, NVTX_MARK, NVTX_PUSHPOP,
                                    NVTXT_MARK, NVTXT_PUSHPOP, RANGE_TYPES,
                                    PID_MASK, pid_of, tid_of)
from nsight_tui.parsers import parallel_fetch, validate
from nsight_tui.parsers.source import (Schema, connect_readonly, probe_integrity, read_schema, readonly_uri,
                                       sidecar_notes)

# copyKind labels for exports older than the ENUM_CUDA_MEMCPY_OPER table (CUPTI's enum).
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


@dataclass
class Trace:
    """One export, loaded. Frames are indexed 0..n-1; cross references are positions."""

    path: Path
    schema: Schema
    info: TraceInfo
    op_names: list[str]  # ops.name -> text (demangled kernel name, or nsys's memcpy/memset label)
    api_names: list[str]  # api.name -> text
    ops: pd.DataFrame  # kind,start,end,device,stream,corr,gpid,name,rowid,api
    api: pd.DataFrame  # start,end,gtid,corr,name
    ranges: pd.DataFrame  # rowid,start,end,end_sum,gtid,cross,pushpop,name,domain,text,unended
    marks: pd.DataFrame  # start,gtid,text
    threads: dict[int, str]
    processes: dict[int, tuple[int, str]]  # globalPid -> (pid, name)
    memcpy_labels_from_export: bool = True
    # What modules above derive from this trace, cached here under keys they own (the range
    # model per attribution, the family of each op name): the loader knows nothing of them.
    derived: dict = field(default_factory=dict, repr=False)

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
        con = connect_readonly(self.path)
        try:
            return _kernel_short_names(con, self.schema, self.op_names)
        finally:
            con.close()

    def op_details(self, op_positions) -> pd.DataFrame:
        """grid, block, graph node and bytes of these ops, read from the file by rowid."""
        pos = np.atleast_1d(np.asarray(op_positions, dtype=np.int64))
        out = pd.DataFrame({"grid": [""] * len(pos), "block": [""] * len(pos), "graph_node": -1, "bytes": 0},
                           index=pos)
        kinds = self.ops["kind"].to_numpy()[pos]
        rowids = self.ops["rowid"].to_numpy()[pos]
        tables = {KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL", MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
                  MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET"}
        con = connect_readonly(self.path)
        try:
            for kind, table in tables.items():
                sel = kinds == kind
                if not sel.any():
                    continue
                c = lambda col, d="NULL", table=table: col if self.schema.has(table, col) else d  # noqa: E731
                if kind == KERNEL:
                    cols = (f"{c('gridX')}, {c('gridY')}, {c('gridZ')}, {c('blockX')}, {c('blockY')}, {c('blockZ')}, "
                            f"{c('graphNodeId')}, 0")
                else:
                    cols = f"NULL, NULL, NULL, NULL, NULL, NULL, {c('graphNodeId')}, {c('bytes', '0')}"
                want = rowids[sel]
                found = {}
                for chunk in range(0, len(want), 900):
                    part = want[chunk:chunk + 900].tolist()
                    q = f"SELECT rowid, {cols} FROM {table} WHERE rowid IN ({','.join('?' * len(part))})"
                    found.update({r[0]: r[1:] for r in con.execute(q, part)})
                got = [found.get(int(rid), (None,) * 8) for rid in want]
                # whole columns at once: per-cell .at assignment cost seconds per 64k rows
                out.loc[pos[sel], "grid"] = [f"{g[0]}x{g[1]}x{g[2]}" if g[0] is not None else "" for g in got]
                out.loc[pos[sel], "block"] = [f"{g[3]}x{g[4]}x{g[5]}" if g[3] is not None else "" for g in got]
                out.loc[pos[sel], "graph_node"] = [-1 if g[6] is None else int(g[6]) for g in got]
                out.loc[pos[sel], "bytes"] = [int(g[7] or 0) for g in got]
        finally:
            con.close()
        return out

    @property
    def kernels(self) -> pd.DataFrame:
        return self.ops[self.ops["kind"] == KERNEL]

    def meta(self) -> "RunMeta":
        return RunMeta.from_marks(self.marks)


@dataclass
class RunMeta:
    """What the capture recorded about the run, from `nsight-tui:` NVTX marks (may be empty)."""

    config: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)

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


# ---------------------------------------------------------------------------------------
def _fetch(con: sqlite3.Connection, sql: str, columns: list[str]) -> pd.DataFrame:
    """Integer columns into one int64 block, a chunk of rows at a time: Python tuples for
    10^6 rows cost several times the file in memory; chunks keep that to a few MB.

    `sql` may hold `coalesce(col, default)` guards; they cost a function call per cell, so
    the first try runs without them and only a NULL in the data brings them back.
    """
    try:
        try:
            block = _fetch_block(con, _COALESCE.sub(r"\1", sql), len(columns))
        except TypeError:  # a NULL somewhere: let SQLite fill the defaults
            block = _fetch_block(con, sql, len(columns))
    except (TypeError, ValueError, OverflowError):  # NULL where no default applies, or text
        raise validate.BadValues from None
    return pd.DataFrame(block, columns=columns, copy=False)


def _fetch_block(con: sqlite3.Connection, sql: str, width: int, chunk: int = 1 << 16) -> np.ndarray:
    cur = con.execute(sql)
    parts = []
    while True:
        rows = cur.fetchmany(chunk)
        if not rows:
            break
        # fromiter over the flattened tuples: a quarter cheaper than np.array(rows)
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * width)
        parts.append(flat.reshape(len(rows), width))
    if not parts:
        return np.zeros((0, width), dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


_COALESCE = re.compile(r"coalesce\((\w+), -?\w+\)")


def _col(schema: Schema, table: str, column: str, default: str = "-1") -> str:
    return f"coalesce({column}, {default})" if schema.has(table, column) else default


def _strings(con: sqlite3.Connection, checks: validate.Checks) -> dict[int, str]:
    strings = dict(con.execute("SELECT id, value FROM StringIds" + checks.where("StringIds")))
    if not checks.scanned:
        if None in strings.values() or not all(type(k) is int for k in strings):
            raise validate.BadValues
        return strings
    return {k: f"<string {k}>" if v is None else str(v) for k, v in strings.items()}


def _codes(ids: pd.Series, strings: dict[int, str], names: list[str], index: dict[str, int]) -> np.ndarray:
    """Map StringIds ids to codes in `names` (deduplicated by text)."""
    uniq, inverse = np.unique(ids.to_numpy(dtype=np.int64), return_inverse=True)
    codes = np.empty(len(uniq), dtype=np.int32)
    for i, sid in enumerate(uniq):
        text = strings.get(int(sid), "" if sid < 0 else f"<string {sid}>")
        code = index.get(text)
        if code is None:
            code = index[text] = len(names)
            names.append(text)
        codes[i] = code
    return codes[inverse]


OP_COLUMNS = ["start", "end", "device", "stream", "corr", "gpid", "name", "rowid"]


def _ops_sql(schema: Schema, t: str, name_expr: str, checks: validate.Checks) -> str:
    return f"""SELECT start, end, {_col(schema, t, 'deviceId')}, {_col(schema, t, 'streamId')},
        {_col(schema, t, 'correlationId')}, {_col(schema, t, 'globalPid')}, {name_expr}, rowid FROM {t}""" + \
        checks.where(t)


def _kernel_name_expr(schema: Schema) -> str:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    return _col(schema, t, "demangledName" if schema.has(t, "demangledName") else "shortName")


def _load_ops(con, schema, strings, names, index, memcpy_labels, checks, kernel_block=None) -> pd.DataFrame:
    """Kernels, memcpys and memsets as one frame, with only the columns attribution and the
    first screen need. Per-launch details (grid, block, graph node, bytes) and nsys's short
    names stay in the file: `op_details` and `op_short` read them when asked.

    `kernel_block`: the kernel rows already fetched elsewhere (parallel_fetch), if any."""
    frames = []
    cols = OP_COLUMNS

    def fetch(table: str, name_expr: str) -> pd.DataFrame:
        return _fetch(con, _ops_sql(schema, table, name_expr, checks), cols)

    def code_of(label: str) -> int:
        if label not in index:
            index[label] = len(names)
            names.append(label)
        return index[label]

    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if schema.has(t):
        if kernel_block is not None:
            k = pd.DataFrame(kernel_block, columns=cols, copy=False)
        else:
            k = fetch(t, _kernel_name_expr(schema))
        k["name"] = _codes(k["name"], strings, names, index)
        frames.append((KERNEL, k))
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if schema.has(t):
        m = fetch(t, _col(schema, t, "copyKind", "0"))
        codes = {int(kind): code_of(f"[CUDA memcpy {memcpy_labels.get(int(kind), 'Unknown')}]")
                 for kind in np.unique(m["name"].to_numpy())}
        m["name"] = m["name"].map(codes)
        frames.append((MEMCPY, m))
    t = "CUPTI_ACTIVITY_KIND_MEMSET"
    if schema.has(t):
        s = fetch(t, "0")
        s["name"] = code_of("[CUDA memset]")
        frames.append((MEMSET, s))
    if not frames:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ["kind", *cols]})
    kinds = np.concatenate([np.full(len(f), kind, dtype=np.int8) for kind, f in frames])
    ops = pd.concat([f for _, f in frames], ignore_index=True) if len(frames) > 1 else frames[0][1]
    ops.insert(0, "kind", kinds)
    ops["name"] = ops["name"].astype(np.int32)
    return ops


def _kernel_short_names(con, schema, op_names: list[str]) -> list[str]:
    """nsys's shortName for each op name (memcpy/memset labels are their own short name)."""
    short = list(op_names)
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if schema.has(t, "shortName") and schema.has(t, "demangledName"):
        index = {name: i for i, name in enumerate(op_names)}
        q = f"""SELECT d.value, s.value FROM (SELECT demangledName AS did, min(shortName) AS sid FROM {t}
                GROUP BY demangledName) JOIN StringIds d ON d.id = did JOIN StringIds s ON s.id = sid"""
        for demangled, name in con.execute(q):
            if demangled in index:
                short[index[demangled]] = name
    return short


def _load_api(con, schema, strings, names, index, checks) -> pd.DataFrame:
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    cols = ["start", "end", "gtid", "corr", "name"]
    if not schema.has(t):
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})
    sql = f"""SELECT start, end, {_col(schema, t, 'globalTid')}, {_col(schema, t, 'correlationId')},
        {_col(schema, t, 'nameId')} FROM {t}""" + checks.where(t)
    api = _fetch(con, sql, cols).astype(np.int64)
    api["name"] = _codes(api["name"], strings, names, index)
    return api


_NVTX_INTEGERS = ("start", "type", "gtid")  # nsys always writes these
_NVTX_OPTIONAL = ("end", "end_gtid", "text_id", "domain_id")  # NULL allowed, never text


def _integers_or_null(values: pd.Series, required: bool) -> bool:
    """True if the column holds only integers (and NULLs where allowed), whatever dtype
    pandas picked for it (object for an all-NULL column, float for integers with NULLs)."""
    if values.dtype.kind in "iu":
        return True
    if required and values.isna().any():
        return False
    if values.dtype.kind == "f":
        return True
    return pd.api.types.infer_dtype(values, skipna=True) in ("integer", "empty")


def _load_nvtx(con, schema, strings, checks: validate.Checks) -> tuple[pd.DataFrame, pd.DataFrame]:
    t = "NVTX_EVENTS"
    range_cols = ["rowid", "start", "end", "end_sum", "gtid", "cross", "pushpop", "name", "domain", "text", "unended"]
    empty_ranges = pd.DataFrame({c: [] for c in range_cols})
    empty_marks = pd.DataFrame({"start": [], "gtid": [], "text": []})
    if not schema.has(t):
        return empty_ranges, empty_marks
    text_id = _col(schema, t, "textId", "NULL")
    domain_id = _col(schema, t, "domainId", "0")
    end_gtid = "endGlobalTid" if schema.has(t, "endGlobalTid") else "NULL"
    text = "text" if schema.has(t, "text") else "NULL"
    rows = con.execute(
        f"SELECT rowid, start, end, eventType, globalTid, {end_gtid}, {text}, {text_id}, {domain_id} FROM {t}"
        + checks.where(t)
    ).fetchall()
    ev = pd.DataFrame.from_records(
        rows, columns=["rowid", "start", "end", "type", "gtid", "end_gtid", "text", "text_id", "domain_id"]
    )
    if ev.empty:
        return empty_ranges, empty_marks
    if not (all(_integers_or_null(ev[c], True) for c in _NVTX_INTEGERS)
            and all(_integers_or_null(ev[c], False) for c in _NVTX_OPTIONAL)):
        raise validate.BadValues
    if pd.api.types.infer_dtype(ev["text"], skipna=True) not in ("string", "empty"):
        ev["text"] = [t if t is None or isinstance(t, str) else str(t) for t in ev["text"]]
    ev["text"] = [
        strings.get(int(tid), txt) if tid is not None and tid == tid else txt
        for tid, txt in zip(ev["text_id"], ev["text"])
    ]
    # Domain names, as nsys resolves them: the create event of that domain id in the same process.
    domains: dict[tuple[int, int], str] = {}
    created = ev[ev["type"] == NVTX_DOMAIN_CREATE].sort_values("start", kind="stable")
    for dom, gtid, name in zip(created["domain_id"], created["gtid"], created["text"]):
        domains.setdefault((int(dom), (int(gtid) >> 24) & 0xFFFFFF), name or "")

    # nvtx_sum closes unended ranges at the last NVTX timestamp of any kind; the GPU
    # projection reports at the last timestamp of range events only. Keep both.
    all_max = int(np.nanmax([ev["start"].max(), ev["end"].max()]))
    rng = ev[ev["type"].isin(RANGE_TYPES)].copy()
    if rng.empty:
        ranges = empty_ranges
    else:
        range_max = int(np.nanmax([rng["start"].max(), rng["end"].max()]))
        rng["unended"] = rng["end"].isna()
        rng["end_sum"] = rng["end"].fillna(all_max).astype(np.int64)
        rng["end"] = rng["end"].fillna(range_max).astype(np.int64)
        rng["cross"] = rng["end_gtid"].notna()
        rng["pushpop"] = rng["type"].isin((NVTX_PUSHPOP, NVTXT_PUSHPOP))
        rng["domain"] = [
            domains.get((int(d), (int(g) >> 24) & 0xFFFFFF), "") if d == d else ""
            for d, g in zip(rng["domain_id"].fillna(0), rng["gtid"])
        ]
        rng["text"] = rng["text"].fillna("")
        # One string object per distinct name: a long name repeated over many ranges is then
        # compared by identity when grouped, not character by character.
        joined: dict[tuple[str, str], str] = {}
        rng["name"] = [joined.get(k) or joined.setdefault(k, f"{k[0]}:{k[1]}")
                       for k in zip(rng["domain"].tolist(), rng["text"].tolist())]
        ranges = rng[range_cols].reset_index(drop=True)
        for c in ("rowid", "start", "end", "end_sum", "gtid"):
            ranges[c] = ranges[c].astype(np.int64)
    mk = ev[ev["type"].isin((NVTX_MARK, NVTXT_MARK))]
    marks = pd.DataFrame({"start": mk["start"].astype(np.int64), "gtid": mk["gtid"].astype(np.int64),
                          "text": mk["text"]}).reset_index(drop=True)
    return ranges, marks


def _link_ops_to_api(ops: pd.DataFrame, api: pd.DataFrame) -> None:
    """ops['api'] = position of the launching API call: same correlation ID *and* process
    (correlation IDs repeat across processes). One int64 key, (pid << 32) | corr, sorted
    once and searched: no hash tables over 10^6 rows."""
    ops["api"] = np.int64(-1)
    if ops.empty or api.empty:
        return
    a_corr, o_corr = api["corr"].to_numpy(), ops["corr"].to_numpy()
    a_pid = pid_of(api["gtid"].to_numpy())
    o_gpid = ops["gpid"].to_numpy()
    if a_corr.max(initial=0) >= 2**32:
        raise TraceError(f"CUDA API correlation IDs up to {int(a_corr.max()):,}, above 2^32: "
                         "not an export nsys writes; cannot link kernels to their launches")
    # A call without a correlation ID (NULL: -1 here) launched nothing this export can show.
    with_id = np.flatnonzero(a_corr >= 0)
    a_key = (a_pid[with_id] << 32) | a_corr[with_id]
    order = with_id[np.argsort(a_key, kind="stable")]  # stable: the first call wins on a duplicate key
    sorted_keys = (a_pid[order] << 32) | a_corr[order]
    if len(order) == 0:
        return

    def find(keys):
        at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
        return np.where(sorted_keys[at] == keys, order[at], -1)

    has_pid = (o_gpid >= 0) & (o_corr >= 0)
    pos = np.full(len(ops), -1, dtype=np.int64)
    pos[has_pid] = find((pid_of(o_gpid[has_pid]) << 32) | o_corr[has_pid])
    if not has_pid.all():
        # Cut-down exports drop the kernel's globalPid: the correlation ID alone decides, which
        # is unique while the export holds one process.
        by_corr = with_id[np.argsort(a_corr[with_id], kind="stable")]
        c_sorted = a_corr[by_corr]
        want = np.where(o_corr[~has_pid] >= 0, o_corr[~has_pid], -2)  # -2: matches no call
        at = np.minimum(np.searchsorted(c_sorted, want), len(c_sorted) - 1)
        found = np.where(c_sorted[at] == want, by_corr[at], -1)
        pos[~has_pid] = found
        ok = found >= 0
        fill = np.flatnonzero(~has_pid)[ok]
        ops.loc[fill, "gpid"] = api["gtid"].to_numpy()[found[ok]] & PID_MASK
    ops["api"] = pos


def _start_kernel_fetch(con, schema: Schema, path: Path, min_rows: int):
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if not schema.has(t):
        return None
    rows = con.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0  # an index lookup, not a count
    sql = _COALESCE.sub(r"\1", _ops_sql(schema, t, _kernel_name_expr(schema), validate.Checks()))
    return parallel_fetch.start(readonly_uri(path), sql, len(OP_COLUMNS), rows, min_rows)


def _meta_value(con, schema, names: list[str]) -> str:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if schema.has(table):
            for name in names:
                row = con.execute(f"SELECT value FROM {table} WHERE name = ?", (name,)).fetchone()
                if row:
                    return str(row[0])
    return ""


def _read(con, schema: Schema, checks: validate.Checks, say, kernels_elsewhere) -> dict:
    """Every table the model needs, rows `checks` marks bad left out. Raises
    validate.BadValues when, with no checks yet, a value cannot be read as an integer."""
    say(0.05, "strings")
    strings = _strings(con, checks)
    memcpy_labels = dict(FALLBACK_MEMCPY_LABELS)
    from_export = schema.has("ENUM_CUDA_MEMCPY_OPER")
    if from_export:
        for i, v in con.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER" + checks.where("ENUM_CUDA_MEMCPY_OPER")):
            if type(i) is not int:
                raise validate.BadValues
            memcpy_labels[i] = str(v)
    # API calls and NVTX first: the kernel table may be on its way from a child process.
    say(0.1, "CUDA API calls")
    api_names: list[str] = []
    api = _load_api(con, schema, strings, api_names, {}, checks)
    say(0.4, "NVTX ranges")
    ranges, marks = _load_nvtx(con, schema, strings, checks)
    say(0.5, "GPU operations")
    kernel_block = kernels_elsewhere.result() if kernels_elsewhere else None
    op_names: list[str] = []
    ops = _load_ops(con, schema, strings, op_names, {}, memcpy_labels, checks, kernel_block)
    del kernel_block
    _link_ops_to_api(ops, api)
    threads = {}
    if schema.has("ThreadNames"):
        for gtid, name in con.execute("SELECT globalTid, nameId FROM ThreadNames" + checks.where("ThreadNames")):
            if type(gtid) is not int or type(name) is not int:
                raise validate.BadValues
            threads[gtid] = strings.get(name, str(name))
    processes = {}
    if schema.has("PROCESSES"):
        for gpid, pid, name in con.execute("SELECT globalPid, pid, name FROM PROCESSES" + checks.where("PROCESSES")):
            if type(gpid) is not int:
                raise validate.BadValues
            if type(pid) is not int:
                if not checks.scanned:
                    raise validate.BadValues
                pid = pid_of(gpid)  # what nsys encodes in the globalPid anyway
            processes[gpid] = (pid, name if isinstance(name, str) else "")
    gpus = []
    if schema.has("TARGET_INFO_GPU"):
        gpus = [str(r[0]) for r in con.execute("SELECT name FROM TARGET_INFO_GPU ORDER BY id")]
    span = 0
    if schema.has("ANALYSIS_DETAILS", "duration"):
        row = con.execute("SELECT max(duration) FROM ANALYSIS_DETAILS" + checks.where("ANALYSIS_DETAILS")).fetchone()
        if row[0] is not None and type(row[0]) is not int:
            raise validate.BadValues
        span = int(row[0] or 0)
    return {"ops": ops, "api": api, "ranges": ranges, "marks": marks, "threads": threads, "processes": processes,
            "gpus": gpus, "span": span, "from_export": from_export, "op_names": op_names, "api_names": api_names,
            "nsys_version": _meta_value(con, schema, ["EXPORT_PRODUCT_VERSION"]),
            "schema_version": _meta_value(con, schema, ["EXPORT_SCHEMA_VERSION"])}


def load_trace(path: str | Path, progress=None, parallel_min_rows: int = parallel_fetch.MIN_ROWS) -> Trace:
    """Open `path` read-only and load it. Raises TraceError with a one-line message on bad input.

    `progress(fraction, text)` is called between stages (for the TUI's loading bar). Kernel
    tables of `parallel_min_rows` rows or more are read by a child process meanwhile.
    """
    path = Path(path)
    say = progress or (lambda f, t: None)
    con = connect_readonly(path)
    kernels_elsewhere = None
    try:
        schema = read_schema(con, path)
        probe_integrity(con, path, schema)
        has_cuda = any(schema.has(t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"))
        has_nvtx = schema.has("NVTX_EVENTS")
        if not has_cuda and not has_nvtx:
            raise TraceError(f"{path}: export has neither CUDA nor NVTX data (profile with --trace=cuda,nvtx)")
        kernels_elsewhere = _start_kernel_fetch(con, schema, path, parallel_min_rows)
        checks = validate.Checks()
        try:
            try:
                data = _read(con, schema, checks, say, kernels_elsewhere)
            except validate.BadValues:
                # A value no reader can take as an integer: count what is wrong, once, with SQL,
                # and read again leaving those rows out (or refuse the file).
                if kernels_elsewhere is not None:
                    kernels_elsewhere.cancel()
                kernels_elsewhere = None
                checks = validate.scan(con, schema, path)
                data = _read(con, schema, checks, say, None)
            kernels_elsewhere = None
        except sqlite3.DatabaseError as exc:
            raise TraceError(f"{path}: damaged or unexpected export ({exc})") from None
    finally:
        if kernels_elsewhere is not None:  # an error above: do not leave the child running
            kernels_elsewhere.cancel()
        con.close()
    ops, api, ranges, from_export = data["ops"], data["api"], data["ranges"], data["from_export"]
    kinds = ops["kind"].to_numpy()
    notes = sidecar_notes(path) + checks.notes()
    no_corr = int((api["corr"].to_numpy() < 0).sum()) if len(api) and schema.has(
        "CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId") else 0
    if no_corr:
        notes.append(f"{no_corr:,} CUDA API calls have no correlation ID: they count in cuda_api_sum "
                     "but are linked to no GPU work")
    if not has_nvtx:
        notes.append("no NVTX data: range views are empty; kernel and API summaries still work")
    if not from_export and (kinds == MEMCPY).any():
        notes.append("no ENUM_CUDA_MEMCPY_OPER table: memcpy kinds labelled from CUPTI's enum")
    info = TraceInfo(
        path=path, nsys_version=data["nsys_version"], schema_version=data["schema_version"], gpus=data["gpus"],
        span_ns=data["span"],
        kernels=int((kinds == KERNEL).sum()), memcpys=int((kinds == MEMCPY).sum()),
        memsets=int((kinds == MEMSET).sum()), api_calls=len(api), ranges=len(ranges),
        processes=len({int(g) & PID_MASK for g in api["gtid"].unique()}) if len(api) else 0,
        has_nvtx=has_nvtx and len(ranges) > 0, has_cuda=has_cuda, notes=notes,
    )
    say(1.0, "done")
    return Trace(path=path, schema=schema, info=info, op_names=data["op_names"], api_names=data["api_names"],
                 ops=ops, api=api, ranges=ranges, marks=data["marks"], threads=data["threads"],
                 processes=data["processes"],
                 memcpy_labels_from_export=from_export)
